// The structure checks that dependency-cruiser does not make (`npm run check:structure`, in `npm test`'s lint stage):
// - no file in src/ or lib/ over 500 lines (Rust, TypeScript and the console's page alike);
// - every lib/ module stands in a layer of scripts/lib-layers.cjs, so that .dependency-cruiser.cjs checks its imports;
// - no upward import in the Rust core: retry <- amqp <- table <- consumer <- binding, a lower module never names a
//   higher one through `crate::`;
// - no circle among the Rust modules that share a parent: two siblings (files or folders) never name each other, however
//   indirectly (a child naming its parent's items is how a Rust module reads its face, and is not counted).
// It prints every finding, then exits 1 if there was one.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const { LAYERS, pathOf } = createRequire(import.meta.url)('./lib-layers.cjs');
const MAX_LINES = 500;
const RUST_ORDER = ['retry', 'amqp', 'table', 'outbox', 'consumer', 'binding'];

/** Every file under `dir` (none if there is no such folder), as paths relative to the repository's root. */
function filesUnder(dir) {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .sort();
}

/** Lines as `wc -l` counts them. */
const lineCount = (text) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

/** Rust source without its comments and with its string and char literals emptied. */
function rustCode(text) {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += '""';
      i = j;
    } else if (c === "'" && (text[i + 1] === '\\' || text[i + 2] === "'")) {
      // A char literal ('"', '\''); a lifetime ('a) has no closing quote and stays as code.
      const close = text[i + 1] === '\\' ? text.indexOf("'", i + 3) : i + 2;
      if (close === -1) break;
      out += "' '";
      i = close;
    } else if (c === '/' && text[i + 1] === '/') {
      const nl = text.indexOf('\n', i);
      i = (nl === -1 ? text.length : nl) - 1;
    } else if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      i = (close === -1 ? text.length : close + 2) - 1;
    } else {
      out += c;
    }
  }
  return out;
}

/** The top modules of the crate that this Rust code names: `crate::amqp::…` and `use crate::{amqp::…, table}`. */
function crateModulesNamed(code) {
  const named = new Set();
  for (const m of code.matchAll(/\bcrate::([a-z_][a-z0-9_]*)/g)) named.add(m[1]);
  for (const m of code.matchAll(/\bcrate::\{/g)) {
    // The group's top-level entries, up to its closing brace: `error::E`, `table::{a, b}`.
    let depth = 0;
    let token = '';
    for (const c of code.slice(m.index + m[0].length)) {
      if (c === '{') depth++;
      if (c === '}') depth--;
      if ((c === ',' && depth === 0) || depth < 0) {
        const head = /^\s*([a-z_][a-z0-9_]*)/.exec(token);
        if (head && head[1] !== 'self') named.add(head[1]);
        token = '';
        if (depth < 0) break;
        continue;
      }
      token += c;
    }
  }
  return named;
}

const findings = [];

for (const file of [...filesUnder('src'), ...filesUnder('lib')]) {
  const n = lineCount(readFileSync(join(root, file), 'utf8'));
  if (n > MAX_LINES) findings.push(`${file}: ${n} lines, over ${MAX_LINES}: split it by concern`);
}

const layered = new RegExp(pathOf(LAYERS.flatMap(([, modules]) => modules)));
for (const file of filesUnder('lib')) {
  if (file.endsWith('.ts') && !layered.test(file)) {
    findings.push(`${file}: in no layer of scripts/lib-layers.cjs: add its module to the layer it belongs to`);
  }
}

for (const [rank, module] of RUST_ORDER.entries()) {
  const higher = RUST_ORDER.slice(rank + 1);
  const files = [...filesUnder(`src/${module}`), `src/${module}.rs`].filter((f) => f.endsWith('.rs') && existsSync(join(root, f)));
  for (const file of files) {
    for (const named of crateModulesNamed(rustCode(readFileSync(join(root, file), 'utf8')))) {
      if (higher.includes(named)) findings.push(`${file}: names crate::${named}, above ${module} (${RUST_ORDER.join(' <- ')})`);
    }
  }
}

/** The module path of a Rust file: src/lib.rs is [], src/a.rs and src/a/mod.rs are [a], src/a/b.rs is [a, b]. */
function rustModuleOf(file) {
  const parts = file
    .replace(/^src\//, '')
    .replace(/\.rs$/, '')
    .split('/');
  if (parts.at(-1) === 'mod' || parts.at(-1) === 'lib') parts.pop();
  return parts;
}

/** The module paths this Rust code names through `crate::`, `super::` and `self::` paths (`use` lines and inline paths alike). */
function rustPathsNamed(code, self) {
  const out = [];
  const expand = (prefix, rest) => {
    // `a::b::{c, d::e}` gives a::b::c and a::b::d::e; one level of braces is enough for a module path.
    const brace = rest.indexOf('{');
    if (brace === -1) return [[...prefix, ...rest.split('::').filter(Boolean)]];
    const head = rest.slice(0, brace).split('::').filter(Boolean);
    const inner = rest.slice(brace + 1, rest.lastIndexOf('}'));
    return inner.split(',').map((t) => [...prefix, ...head, ...t.trim().split('::')[0].split(' ')[0].split('::').filter(Boolean)]);
  };
  for (const m of code.matchAll(/\b((?:super::)+|self::|crate::)([A-Za-z0-9_:]*(?:\{[^}]*\})?)/g)) {
    let base;
    if (m[1] === 'crate::') base = [];
    else if (m[1] === 'self::') base = self;
    else base = self.slice(0, self.length - m[1].split('super::').length + 1);
    out.push(...expand(base, m[2]));
  }
  return out;
}

const rustFiles = filesUnder('src').filter((f) => f.endsWith('.rs') && !/(^|\/)tests(\.rs$|\/)/.test(f) && !f.includes('/fake'));
const modules = new Map(rustFiles.map((f) => [rustModuleOf(f).join('::'), f]));
/** The file of the longest prefix of `path` that is a module of the crate. */
const fileOf = (path) => {
  for (let n = path.length; n > 0; n--) {
    const key = path.slice(0, n).join('::');
    if (modules.has(key)) return key;
  }
  return undefined;
};
const siblingEdges = new Map();
for (const file of rustFiles) {
  const from = rustModuleOf(file);
  for (const path of rustPathsNamed(rustCode(readFileSync(join(root, file), 'utf8')), from)) {
    const key = fileOf(path);
    if (key === undefined) continue;
    const to = key.split('::');
    let common = 0;
    while (common < from.length && common < to.length && from[common] === to[common]) common++;
    // An ancestor's items, or the module itself: not an edge between siblings.
    if (common === from.length || common === to.length) continue;
    const a = from.slice(0, common + 1).join('::');
    const b = to.slice(0, common + 1).join('::');
    if (!siblingEdges.has(a)) siblingEdges.set(a, new Map());
    if (!siblingEdges.get(a).has(b)) siblingEdges.get(a).set(b, `${file} names ${path.join('::')}`);
  }
}
// A circle is a strongly connected group of two or more siblings (Tarjan).
{
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of siblingEdges.get(v)?.keys() ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const group = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) {
        const ties = group.flatMap((x) => group.filter((y) => siblingEdges.get(x)?.has(y)).map((y) => siblingEdges.get(x).get(y)));
        findings.push(`Rust modules ${group.sort().join(', ')} name each other in a circle: ${ties.join('; ')}`);
      }
    }
  };
  for (const v of siblingEdges.keys()) if (!idx.has(v)) visit(v);
}

for (const f of findings) console.log(f);
if (findings.length > 0) {
  console.log(`check-structure: ${findings.length} finding(s)`);
  process.exit(1);
}
