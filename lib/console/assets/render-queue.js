// @ts-check
// The selected queue's panel: its depths, the replay controls, and its
// parked messages grouped by failure, a group opened to its messages.

import { purgeGroup, purgeMessage, rate, replayGroup, replayMessage, replayQueue, toggleGroup } from './actions.js';
import { $, h, ms, n, replace, tile, when } from './dom.js';
import { openEditor } from './edit.js';
import { readGroups } from './reading.js';
import { S, activeJobs, liveCount, queueView } from './store.js';
import { colorOf, timelineSection } from './timeline.js';

/** @typedef {import('./store.js').ConsoleState} ConsoleState */
/** @typedef {import('./store.js').JobView} JobView */
/** @typedef {import('./store.js').MessageDetail} MessageDetail */
/** @typedef {import('./store.js').ParkedGroup} ParkedGroup */
/** @typedef {import('../views').Grouping} Grouping */

/** Draws the selected queue's panel. */
export function renderQueue() {
  var panel = $('queue');
  var queue = S.selected;
  var view = queue && queueView(queue);
  if (!queue || !view) {
    replace(panel);
    return;
  }
  var answer = S.groups[queue];
  var grouping = answer?.grouping;
  var active = activeJobs(queue);
  var tiles = [
    tile(
      'work',
      view.work ? n(view.work.messages) : 'missing',
      '',
      view.work ? view.work.consumers + ' consumer' + (view.work.consumers === 1 ? '' : 's') : '',
    ),
  ];
  view.retry.forEach(function (r) {
    tiles.push(tile('retry ' + r.delay, n(r.messages)));
  });
  // The broker's delayed retry: no retry queue; the broker holds the failed messages in the work queue.
  if (view.brokerDelay) {
    tiles.push(
      view.delayed === null
        ? tile('delayed', 'unavailable', '', 'counted by the management API only')
        : tile('delayed', n(view.delayed), '', 'held by the broker'),
    );
  }
  tiles.push(tile('parked', view.parked === null ? 'missing' : n(view.parked), view.parked ? 'parked' : ''));
  if (view.tableRows !== null) tiles.push(tile('retry table', n(view.tableRows), '', 'rows'));

  // Made once and kept, so that a redraw neither loses what is being typed nor the focus.
  S.rateInput ??= /** @type {HTMLInputElement} */ (
    h('input', {
      type: 'number',
      min: '0.1',
      step: 'any',
      id: 'rate',
      value: String(rate()),
      'aria-label': 'replay rate',
      /** @param {Event} e */
      oninput: function (e) {
        S.rate = /** @type {HTMLInputElement} */ (e.target).value;
      },
    })
  );
  var rateInput = S.rateInput;
  var focused = document.activeElement === rateInput;
  var parkedCount = view.parked ?? 0;
  var shown = queue;
  var controls = h(
    'div',
    { class: 'controls' },
    h('label', null, 'Replay rate ', rateInput, ' messages/s'),
    h(
      'button',
      {
        'data-action': 'replay-queue',
        disabled: !parkedCount || active.length > 0,
        onclick: function () {
          replayQueue(shown, parkedCount);
        },
      },
      'Replay all ' + n(parkedCount) + ' parked',
    ),
    h(
      'button',
      {
        class: 'secondary',
        'data-action': 'regroup',
        disabled: active.length > 0,
        onclick: function () {
          S.settled[shown] = {};
          void readGroups(shown, true);
        },
      },
      'Read again',
    ),
  );

  /** @type {HTMLElement} */
  var scan;
  if (grouping) {
    var text = grouping.truncated
      ? 'Grouped the first ' +
        n(grouping.scanned) +
        ' of ' +
        n(grouping.depth) +
        ' parked messages (the rest were not read) in ' +
        ms(grouping.tookMs) +
        ', at ' +
        when(grouping.at) +
        '.'
      : 'Grouped all ' + n(grouping.scanned) + ' parked messages in ' + ms(grouping.tookMs) + ', at ' + when(grouping.at) + '.';
    if (answer.busy) text += ' A replay or purge is running: counts follow its progress.';
    scan = h('p', { class: 'scan' + (grouping.truncated ? ' truncated' : ''), id: 'scan', text: text });
  } else {
    scan = h('p', {
      class: 'scan',
      id: 'scan',
      text: S.reading[queue] ? 'Reading the parked messages…' : answer?.busy ? 'A replay or purge is running; the messages are read when it ends.' : '',
    });
  }

  replace(
    panel,
    h(
      'div',
      { class: 'queue-head' },
      h('h2', { text: queue }),
      view.sources.map(function (s) {
        return h('span', { class: 'badge source', text: s });
      }),
    ),
    h('div', { class: 'tiles' }, tiles),
    controls,
    scan,
    grouping?.groups.length ? timelineSection(grouping) : null,
    grouping ? groupsTable(queue, grouping, active) : null,
  );
  if (focused) rateInput.focus();
}

/**
 * The groups of `queue`, and those a finished job emptied.
 * @param {string} queue
 * @param {Grouping} grouping
 * @param {JobView[]} active
 */
function groupsTable(queue, grouping, active) {
  var settled = S.settled[queue] || {};
  /** @type {HTMLElement[]} */
  var rows = [];
  /** @type {Record<string, boolean>} */
  var shown = {};
  grouping.groups.forEach(function (g) {
    shown[g.key] = true;
    rows.push(groupRow(queue, g, liveCount(queue, g), active, null, colorOf(grouping, g.key)));
    if (S.open === g.key) rows.push(openRow(queue, g));
  });
  Object.keys(settled).forEach(function (key) {
    if (shown[key]) return;
    rows.push(groupRow(queue, settled[key].group, 0, active, settled[key].note, null));
  });
  if (!rows.length) return h('p', { class: 'empty', text: 'No parked messages.' });
  return h(
    'table',
    { class: 'groups' },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', { class: 'num', text: 'Count' }),
        h('th', { text: 'Error' }),
        h('th', { class: 'hide-narrow', text: 'Reason' }),
        h('th', { text: 'First failure' }),
        h('th', { text: 'Last failure' }),
        h('th', { class: 'hide-narrow', text: 'Example' }),
        h('th'),
      ),
    ),
    h('tbody', null, rows),
  );
}

/**
 * A group's row, with its progress while a job acts on it.
 * @param {string} queue
 * @param {ParkedGroup} g
 * @param {number} count
 * @param {JobView[]} active
 * @param {string | null} settledNote what a finished job did, when it emptied the group
 * @param {string | null} color the group's color in the failure timeline
 */
function groupRow(queue, g, count, active, settledNote, color) {
  var job = active.find(function (j) {
    return j.scope === 'group' && j.key === g.key;
  });
  var busy = active.length > 0;
  var reasons = Object.keys(g.reasons).map(function (r) {
    return h('span', { class: 'badge zero', text: r + ' ' + g.reasons[r] });
  });
  var progress = job
    ? h(
        'div',
        null,
        h(
          'div',
          { class: 'progress' + (job.kind === 'purge' ? ' purge' : '') },
          h('div', { style: { width: Math.round((100 * job.done) / Math.max(1, job.total)) + '%' } }),
        ),
        h('span', {
          class: 'progress-text',
          text:
            (job.state === 'queued' ? 'waiting to ' : job.kind === 'replay' ? 'replaying ' : 'purging ') +
            job.done +
            ' of ' +
            job.total +
            (job.ratePerSec ? ' at ' + job.ratePerSec + '/s' : ''),
        }),
      )
    : null;
  var swatch = color ? h('span', { class: 'swatch', 'aria-hidden': 'true' }) : null;
  if (swatch && color) swatch.style.background = color;
  return h(
    'tr',
    { class: 'group' + (settledNote ? ' settled' : '') + (S.open === g.key ? ' opened' : ''), 'data-key': g.key },
    h('td', { class: 'count', text: n(count) }),
    h(
      'td',
      null,
      h('div', { class: 'ename' }, swatch, g.errorName),
      h('div', { class: 'emsg mono', text: g.message || '(no message)' }),
      g.frame ? h('div', { class: 'frame mono', text: 'at ' + g.frame }) : null,
      settledNote ? h('div', { class: 'settled-note', text: settledNote }) : null,
      progress,
    ),
    h('td', { class: 'hide-narrow' }, reasons),
    h('td', { class: 'when', text: when(g.firstFailedAt) }),
    h('td', { class: 'when', text: when(g.lastFailedAt) }),
    h('td', { class: 'hide-narrow mono example', text: g.example.messageId || g.example.correlationId || '–', title: g.example.error || '' }),
    h(
      'td',
      null,
      settledNote
        ? null
        : h(
            'div',
            { class: 'actions' },
            h(
              'button',
              {
                class: 'secondary',
                'data-action': 'open',
                disabled: busy && S.open !== g.key,
                onclick: function () {
                  toggleGroup(queue, g.key);
                },
              },
              S.open === g.key ? 'Close' : 'Open',
            ),
            h(
              'button',
              {
                'data-action': 'replay',
                disabled: busy || count === 0,
                onclick: function () {
                  replayGroup(queue, g);
                },
              },
              'Replay',
            ),
            h(
              'button',
              {
                class: 'danger',
                'data-action': 'purge',
                disabled: busy || count === 0,
                onclick: function () {
                  purgeGroup(queue, g);
                },
              },
              'Purge',
            ),
          ),
    ),
  );
}

/**
 * The opened group's messages, under its row.
 * @param {string} queue
 * @param {ParkedGroup} g
 */
function openRow(queue, g) {
  var o = S.openMessages;
  var content;
  if (o?.key !== g.key) content = h('p', { class: 'empty', text: 'Reading the messages…' });
  else if (o.error) content = h('p', { class: 'error', text: o.error });
  else if (o.messages) {
    var more = g.count > o.messages.length ? 'The first ' + o.messages.length + ' of ' + n(g.count) + ' messages of this group.' : '';
    content = h(
      'div',
      { class: 'messages' },
      more ? h('p', { class: 'note', text: more }) : null,
      o.messages.map(function (m, i) {
        return messageCard(queue, m, i === 0);
      }),
    );
  }
  return h('tr', { class: 'group-open' }, h('td', { colspan: '7' }, content));
}

/** @param {string} text */
function pre(text) {
  return h('pre', { text: text });
}

/**
 * The headers, with the stack (shown on its own above) left out.
 * @param {Record<string, unknown>} headers
 */
function headersShown(headers) {
  /** @type {Record<string, unknown>} */
  var out = {};
  Object.keys(headers || {}).forEach(function (k) {
    out[k] = k === 'retry-error-stack' ? '(the stack above)' : headers[k];
  });
  return out;
}

/**
 * A message in full: its error, body, stack, headers and properties.
 * @param {string} queue
 * @param {MessageDetail} m
 * @param {boolean} open whether its details are open until the operator toggles them
 */
function messageCard(queue, m, open) {
  var busy = activeJobs(queue).length > 0;
  var body = m.body;
  var bodyTitle = 'Body (' + body.kind + ', ' + n(body.bytes) + ' bytes' + (body.truncated ? ', the start only' : '') + ')';
  return h(
    'div',
    { class: 'message', 'data-message': m.key },
    h(
      'div',
      { class: 'message-head' },
      h('span', { class: 'id', text: m.messageId || '(no message id)' }),
      m.correlationId ? h('span', { class: 'note', text: 'correlation ' + m.correlationId }) : null,
      h('span', { class: 'badge zero', text: m.reason || 'unknown' }),
      h('span', { class: 'note', text: 'attempt ' + m.attempt + ' · failed ' + when(m.failedAt) + ' · #' + (m.position + 1) + ' in the queue' }),
      h(
        'div',
        { class: 'actions' },
        h(
          'button',
          {
            class: 'secondary',
            'data-action': 'edit-message',
            disabled: busy || !m.edit.editable,
            title: m.edit.editable ? 'Edit its body or headers, review the changes, and send it back' : 'Not editable here: ' + m.edit.why,
            onclick: function () {
              openEditor(queue, m);
            },
          },
          'Edit',
        ),
        h(
          'button',
          {
            class: 'secondary',
            'data-action': 'replay-message',
            disabled: busy,
            onclick: function () {
              replayMessage(queue, m);
            },
          },
          'Replay',
        ),
        h(
          'button',
          {
            class: 'danger',
            'data-action': 'purge-message',
            disabled: busy,
            onclick: function () {
              purgeMessage(queue, m);
            },
          },
          'Purge',
        ),
      ),
    ),
    h(
      'details',
      {
        open: S.detailsOpen[m.key] ?? open,
        /** @param {Event} e */
        ontoggle: function (e) {
          S.detailsOpen[m.key] = /** @type {HTMLDetailsElement} */ (e.target).open;
        },
      },
      h('summary', { text: (m.errorName || 'Error') + ': ' + (m.error || '') }),
      h(
        'div',
        { class: 'parts' },
        h('div', { class: 'part wide' }, h('h4', { text: bodyTitle }), pre(body.kind === 'empty' ? '(empty)' : body.text)),
        h('div', { class: 'part wide' }, h('h4', { text: 'Stack' }), pre(m.stack || '(none)')),
        h('div', { class: 'part' }, h('h4', { text: 'Headers' }), pre(JSON.stringify(headersShown(m.headers), null, 2))),
        h('div', { class: 'part' }, h('h4', { text: 'Properties' }), pre(JSON.stringify(m.properties, null, 2))),
      ),
    ),
  );
}
