// @ts-check
// Comparing a parked message with its edit, for the operator's review: the
// body's lines (a longest-common-subsequence diff), runs of unchanged lines
// folded, the headers changed, added and left out; and whether a text is JSON.
// Nothing here touches the page.

/** A line of a diff: kept, added or removed. @typedef {{ op: 'same' | 'add' | 'del', text: string }} DiffLine */

/** A line of a folded diff: a {@link DiffLine}, or a run of unchanged lines left out. @typedef {DiffLine | { op: 'fold', count: number }} ShownLine */

/**
 * A header the edit changes: `changed` (from, to), `added` (to) or `removed` (from).
 * @typedef {{ name: string, op: 'changed' | 'added' | 'removed', from?: unknown, to?: unknown }} HeaderChange
 */

/** The most cells of the table the lines between the common start and end are compared with; beyond, they show as removed, then added. */
var MAX_CELLS = 4000000;

/**
 * The lines of `after` against those of `before`: the lines both share, in
 * order, as many as can be, kept; the others removed or added.
 * @param {string} before
 * @param {string} after
 * @returns {DiffLine[]}
 */
export function diffLines(before, after) {
  var a = before.split('\n');
  var b = after.split('\n');
  var start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  var endA = a.length;
  var endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  /** @type {DiffLine[]} */
  var out = [];
  for (var i = 0; i < start; i++) out.push({ op: 'same', text: a[i] });
  middle(a.slice(start, endA), b.slice(start, endB), out);
  for (var j = endA; j < a.length; j++) out.push({ op: 'same', text: a[j] });
  return out;
}

/**
 * Appends the diff of `a` and `b`, which share neither their first nor their last line, to `out`.
 * @param {string[]} a
 * @param {string[]} b
 * @param {DiffLine[]} out
 */
function middle(a, b, out) {
  var n = a.length;
  var m = b.length;
  if ((n + 1) * (m + 1) > MAX_CELLS) {
    a.forEach(function (t) {
      out.push({ op: 'del', text: t });
    });
    b.forEach(function (t) {
      out.push({ op: 'add', text: t });
    });
    return;
  }
  // lcs[i * (m + 1) + j]: the longest common subsequence of a[i..] and b[j..].
  var w = m + 1;
  var lcs = new Uint32Array((n + 1) * w);
  for (var i = n - 1; i >= 0; i--) {
    for (var j = m - 1; j >= 0; j--) {
      lcs[i * w + j] = a[i] === b[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  var x = 0;
  var y = 0;
  while (x < n && y < m) {
    if (a[x] === b[y]) {
      out.push({ op: 'same', text: a[x] });
      x++;
      y++;
    } else if (lcs[(x + 1) * w + y] >= lcs[x * w + y + 1]) {
      out.push({ op: 'del', text: a[x++] });
    } else {
      out.push({ op: 'add', text: b[y++] });
    }
  }
  while (x < n) out.push({ op: 'del', text: a[x++] });
  while (y < m) out.push({ op: 'add', text: b[y++] });
}

/**
 * `lines` with each run of unchanged lines longer than twice `context` cut
 * to its first and last `context` lines (at the start and end of the
 * diff, to the ones next to a change), the rest counted in a fold.
 * @param {DiffLine[]} lines
 * @param {number} context
 * @returns {ShownLine[]}
 */
export function folded(lines, context) {
  /** @type {ShownLine[]} */
  var out = [];
  var i = 0;
  while (i < lines.length) {
    if (lines[i].op !== 'same') {
      out.push(lines[i++]);
      continue;
    }
    var end = i;
    while (end < lines.length && lines[end].op === 'same') end++;
    var keepBefore = i === 0 ? 0 : context;
    var keepAfter = end === lines.length ? 0 : context;
    if (end - i > keepBefore + keepAfter) {
      for (var k = i; k < i + keepBefore; k++) out.push(lines[k]);
      out.push({ op: 'fold', count: end - i - keepBefore - keepAfter });
      for (var l = end - keepAfter; l < end; l++) out.push(lines[l]);
    } else {
      for (var q = i; q < end; q++) out.push(lines[q]);
    }
    i = end;
  }
  return out;
}

/**
 * The headers `after` changes, adds and leaves out of `before`, values compared as JSON.
 * @param {Record<string, unknown>} before
 * @param {Record<string, unknown>} after
 * @returns {HeaderChange[]}
 */
export function headerChanges(before, after) {
  /** @type {HeaderChange[]} */
  var out = [];
  Object.keys(before).forEach(function (name) {
    if (!Object.prototype.hasOwnProperty.call(after, name)) out.push({ name: name, op: 'removed', from: before[name] });
    else if (JSON.stringify(before[name]) !== JSON.stringify(after[name])) out.push({ name: name, op: 'changed', from: before[name], to: after[name] });
  });
  Object.keys(after).forEach(function (name) {
    if (!Object.prototype.hasOwnProperty.call(before, name)) out.push({ name: name, op: 'added', to: after[name] });
  });
  return out;
}

/**
 * Whether `text` is JSON, and when it is not, why.
 * @param {string} text
 * @returns {{ ok: true, value: unknown } | { ok: false, error: string }}
 */
export function checkJson(text) {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}
