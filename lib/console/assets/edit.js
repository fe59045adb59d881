// @ts-check
// Editing one parked message: its body, pretty-printed, and its headers, as a
// JSON object, each checked as the operator types; then the diff against the
// original; and only once the operator confirms the diff, the edit sent to
// the console, which sends the copy back to the work queue.

import { ApiError, editMessage, messageOf } from './api.js';
import { checkJson, diffLines, folded, headerChanges } from './diff.js';
import { $, h, replace, toast } from './dom.js';
import { poll, readGroups } from './reading.js';

/** @typedef {import('./store.js').MessageDetail} MessageDetail */
/** @typedef {import('./diff.js').HeaderChange} HeaderChange */

/** Where the browser keeps the editor's name, for the next edit. */
var BY_KEY = 'rabbit-retry-console-editor';

/** The console's refusals of an edit, after which the message is still parked, unchanged, and nothing was sent. @type {Record<string, boolean>} */
var REFUSALS = {
  NOT_PARKED: true,
  AMBIGUOUS_MESSAGE_ID: true,
  MESSAGE_CHANGED: true,
  BODY_NOT_JSON: true,
  INVALID_OPTIONS: true,
  BAD_REQUEST: true,
  BUSY: true,
  PUBLISH_NACKED: true,
  UNAUTHORIZED: true,
  FORBIDDEN_HOST: true,
  FORBIDDEN_ORIGIN: true,
};

/** Unchanged lines kept around each change of the body's diff. */
var CONTEXT = 3;

/**
 * The edit under way.
 * @typedef {object} Editing
 * @property {string} queue The work queue.
 * @property {MessageDetail} m The message as it was opened.
 * @property {string} start The body's text the editor started from.
 * @property {boolean} json Whether the original body is JSON.
 * @property {Record<string, unknown>} headers The headers the operator may change, as they were.
 * @property {string} body The body as typed.
 * @property {string} headersText The headers as typed.
 * @property {boolean} asText Whether the operator chose to send a body that is not JSON as text.
 * @property {string} by Who edits.
 * @property {'edit' | 'review'} phase Editing, or reviewing the diff.
 * @property {boolean} sending Whether the edit was sent and not yet answered.
 * @property {string} error What the console refused, when it did.
 */

/** @type {Editing | null} */
var E = null;

/**
 * What the typed edit is: whether it can be reviewed, and what it changes.
 * @param {Editing} e
 */
function evaluate(e) {
  var bodyChanged = e.body !== e.start;
  var body = checkJson(e.body);
  var bodyNote;
  var bodyBad = false;
  var offerText = false;
  if (!bodyChanged) bodyNote = 'The body is unchanged.';
  else if (body.ok) bodyNote = 'Valid JSON.';
  else if (e.json) {
    bodyNote = 'Not valid JSON (' + body.error + '). The original body is JSON: fix it to send it.';
    bodyBad = true;
  } else {
    bodyNote = 'Not JSON (' + body.error + '). The original body is not JSON either: tick the box below to send it as text.';
    offerText = true;
    bodyBad = !e.asText;
  }
  var parsed = checkJson(e.headersText);
  var headersOk = parsed.ok && parsed.value !== null && typeof parsed.value === 'object' && !Array.isArray(parsed.value);
  var headersNote = headersOk ? '' : 'The headers must be a JSON object of names to values' + (parsed.ok ? '.' : ' (' + parsed.error + ').');
  /** @type {HeaderChange[]} */
  var changes = headersOk ? headerChanges(e.headers, /** @type {Record<string, unknown>} */ (parsed.ok && parsed.value)) : [];
  var why = '';
  if (bodyBad || !headersOk) why = 'Fix what is flagged above.';
  else if (!bodyChanged && !changes.length) why = 'Nothing is changed yet.';
  else if (!e.by.trim()) why = 'Give your name: the copy records who edited it.';
  return { bodyChanged, bodyNote, bodyBad, offerText, headersNote, changes, ready: why === '', why };
}

/**
 * Opens the editor on message `m` of `queue`.
 * @param {string} queue
 * @param {MessageDetail} m
 */
export function openEditor(queue, m) {
  if (!m.edit.editable) return;
  var start = m.edit.text ?? m.body.text;
  E = {
    queue: queue,
    m: m,
    start: start,
    json: m.edit.json,
    headers: m.edit.headers,
    body: start,
    headersText: JSON.stringify(m.edit.headers, null, 2),
    asText: false,
    by: localStorage.getItem(BY_KEY) || '',
    phase: 'edit',
    sending: false,
    error: '',
  };
  $('editor').hidden = false;
  draw();
  $('edit-body').focus();
}

/** Closes the editor; nothing is sent. */
export function closeEditor() {
  E = null;
  $('editor').hidden = true;
  replace($('editor'));
}

/** Whether the editor is open. */
export function editing() {
  return E !== null;
}

/** Draws the editor's phase. */
function draw() {
  var e = E;
  if (!e) return;
  var id = e.m.messageId || '';
  var dialog = e.phase === 'edit' ? editPhase(e, id) : reviewPhase(e, id);
  replace($('editor'), h('div', { class: 'dialog wide', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'edit-title' }, dialog));
  if (e.phase === 'edit') refresh();
}

/**
 * The editing phase: the name, the body and the headers, each checked as typed.
 * @param {Editing} e
 * @param {string} id
 */
function editPhase(e, id) {
  return [
    h('h3', { id: 'edit-title', text: 'Edit ' + id }),
    h('p', {
      class: 'note',
      text:
        'The edited copy goes to ' +
        e.queue +
        ' once you confirm the changes. It keeps the message id and properties, and records who edited it, when and what changed.',
    }),
    h(
      'label',
      { class: 'field' },
      'Your name ',
      h('input', {
        type: 'text',
        id: 'edit-by',
        value: e.by,
        autocomplete: 'off',
        spellcheck: 'false',
        oninput: function (/** @type {Event} */ ev) {
          if (E) E.by = /** @type {HTMLInputElement} */ (ev.target).value;
          refresh();
        },
      }),
    ),
    h('h4', { text: 'Body' + (e.json ? ' (JSON)' : '') }),
    h('textarea', {
      id: 'edit-body',
      class: 'mono',
      rows: 14,
      spellcheck: 'false',
      text: e.body,
      oninput: function (/** @type {Event} */ ev) {
        if (E) E.body = /** @type {HTMLTextAreaElement} */ (ev.target).value;
        refresh();
      },
    }),
    h('p', { id: 'edit-body-check', class: 'check' }),
    h(
      'label',
      { id: 'edit-as-text-label', class: 'field', hidden: true },
      h('input', {
        type: 'checkbox',
        id: 'edit-as-text',
        onchange: function (/** @type {Event} */ ev) {
          if (E) E.asText = /** @type {HTMLInputElement} */ (ev.target).checked;
          refresh();
        },
      }),
      ' Send it as text: it is not JSON, on purpose',
    ),
    h('h4', { text: 'Headers (the retry-* headers and the broker’s are not editable)' }),
    h('textarea', {
      id: 'edit-headers',
      class: 'mono',
      rows: 5,
      spellcheck: 'false',
      text: e.headersText,
      oninput: function (/** @type {Event} */ ev) {
        if (E) E.headersText = /** @type {HTMLTextAreaElement} */ (ev.target).value;
        refresh();
      },
    }),
    h('p', { id: 'edit-headers-check', class: 'check error' }),
    h(
      'div',
      { class: 'buttons' },
      h('span', { id: 'edit-why', class: 'note' }),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'edit-cancel', onclick: closeEditor }, 'Cancel'),
      h(
        'button',
        {
          type: 'button',
          id: 'edit-review',
          onclick: function () {
            if (!E || !evaluate(E).ready) return;
            E.phase = 'review';
            E.error = '';
            draw();
          },
        },
        'Review changes',
      ),
    ),
  ];
}

/** Shows what the typed edit is: the checks' notes, and whether it can be reviewed. */
function refresh() {
  if (E?.phase !== 'edit') return;
  var r = evaluate(E);
  var check = $('edit-body-check');
  check.textContent = r.bodyNote;
  check.className = 'check' + (r.bodyBad ? ' error' : r.offerText ? ' warn' : r.bodyChanged ? ' ok' : '');
  $('edit-as-text-label').hidden = !r.offerText;
  $('edit-headers-check').textContent = r.headersNote;
  $('edit-why').textContent = r.why;
  /** @type {HTMLButtonElement} */ ($('edit-review')).disabled = !r.ready;
}

/**
 * A header's value as the review shows it.
 * @param {unknown} v
 */
function shown(v) {
  return JSON.stringify(v);
}

/**
 * The review: the body's diff and the headers' changes, confirmed by the operator.
 * @param {Editing} e
 * @param {string} id
 */
function reviewPhase(e, id) {
  var r = evaluate(e);
  var bodyPart = r.bodyChanged
    ? h(
        'pre',
        { id: 'edit-diff', class: 'diff' },
        folded(diffLines(e.start, e.body), CONTEXT).map(function (l) {
          if (l.op === 'fold') return h('span', { class: 'fold', text: '  ⋯ ' + l.count + ' unchanged line' + (l.count === 1 ? '' : 's') });
          return h('span', { class: l.op, text: (l.op === 'add' ? '+ ' : l.op === 'del' ? '- ' : '  ') + l.text });
        }),
      )
    : h('p', { class: 'note', text: 'The body is unchanged.' });
  var headersPart = r.changes.length
    ? h(
        'ul',
        { id: 'edit-header-changes', class: 'changes mono' },
        r.changes.map(function (c) {
          var text =
            c.op === 'changed'
              ? c.name + ': ' + shown(c.from) + ' → ' + shown(c.to)
              : c.op === 'added'
                ? c.name + ': ' + shown(c.to) + ' (added)'
                : c.name + ' (left out, was ' + shown(c.from) + ')';
          return h('li', { class: c.op, text: text });
        }),
      )
    : h('p', { class: 'note', text: 'The headers are unchanged.' });
  return [
    h('h3', { id: 'edit-title', text: 'Send ' + id + ' back to ' + e.queue + ', edited?' }),
    h('p', {
      text:
        'The broker confirms the edited copy before the original leaves ' +
        e.queue +
        '.parked; the other parked messages stay, in their order. The copy records ' +
        e.by.trim() +
        ' as its editor.' +
        (r.bodyChanged && e.json ? ' The JSON is sent without the spaces between its values.' : ''),
    }),
    h('h4', { text: 'Body' }),
    bodyPart,
    h('h4', { text: 'Headers' }),
    headersPart,
    h('p', { id: 'edit-error', class: 'error', text: e.error }),
    h(
      'div',
      { class: 'buttons' },
      h(
        'button',
        {
          type: 'button',
          class: 'secondary',
          'data-action': 'edit-back',
          disabled: e.sending,
          onclick: function () {
            if (!E) return;
            E.phase = 'edit';
            draw();
          },
        },
        'Back to editing',
      ),
      h('button', { type: 'button', id: 'edit-send', disabled: e.sending, onclick: send }, 'Send the edited message'),
    ),
  ];
}

/** Sends the reviewed edit; shows what the console refused, and then nothing moved. */
function send() {
  const e = E;
  if (!e || e.sending) return;
  var r = evaluate(e);
  if (!r.ready) return;
  /** @type {Record<string, unknown>} */
  var set = {};
  /** @type {string[]} */
  var removed = [];
  r.changes.forEach(function (c) {
    if (c.op === 'removed') removed.push(c.name);
    else set[c.name] = c.to;
  });
  /** @type {import('./api.js').EditBody} */
  var body = { messageId: e.m.messageId || '', key: e.m.key, by: e.by.trim(), headers: set, removeHeaders: removed };
  if (r.bodyChanged) {
    body.body = e.body;
    if (r.offerText) body.asText = e.asText;
  }
  e.sending = true;
  e.error = '';
  draw();
  var queue = e.queue;
  editMessage(queue, body)
    .then(function (a) {
      localStorage.setItem(BY_KEY, a.by);
      closeEditor();
      toast('Edited ' + a.messageId + ' (changed: ' + (a.changed.join(', ') || 'nothing') + ') and sent it to ' + a.queue);
      void readGroups(queue, true);
      poll();
    })
    .catch(function (/** @type {unknown} */ err) {
      if (E !== e) return;
      e.sending = false;
      e.error =
        (err instanceof ApiError ? err.code + ': ' : '') + messageOf(err) + (err instanceof ApiError && REFUSALS[err.code] ? ' Nothing was moved.' : '');
      draw();
    });
}
