// @ts-check
// Drawing the transactional outbox: its backlog, this process's relay, its
// parked rows with their reasons (put back or deleted), and each consumer's
// inbox duplicates. Absent when the console's client has no outbox.

import { outboxRows } from './actions.js';
import { $, h, ms, n, replace, tile, when } from './dom.js';

/** @typedef {import('./store.js').ConsoleState} ConsoleState */
/** @typedef {import('../outbox-view').ParkedOutboxRowView} ParkedOutboxRowView */

/**
 * A button that acts on parked rows `ids`.
 * @param {'retry' | 'delete'} action
 * @param {number[]} ids
 * @param {string} what
 * @param {string} label
 */
function rowsButton(action, ids, what, label) {
  return h(
    'button',
    {
      class: action === 'delete' ? 'danger' : 'secondary',
      'data-outbox-action': action,
      onclick: function () {
        outboxRows(action, ids, what);
      },
    },
    label,
  );
}

/** @param {ParkedOutboxRowView} r */
function parkedRow(r) {
  var what = 'row ' + r.id + (r.messageId ? ' (' + r.messageId + ')' : '');
  return h(
    'tr',
    { 'data-outbox-row': r.id },
    h('td', { class: 'num', text: r.id }),
    h('td', { class: 'mono', text: (r.exchange || '(default)') + ' → ' + r.routingKey }),
    h('td', { class: 'mono', text: r.messageId || '–' }),
    h('td', null, h('span', { class: 'badge warn', text: r.parkReason })),
    h('td', { class: 'emsg', text: r.lastError || '' }),
    h('td', { class: 'when', text: when(r.parkedAt) }),
    h('td', null, h('div', { class: 'actions' }, rowsButton('retry', [r.id], what, 'Publish again'), rowsButton('delete', [r.id], what, 'Delete'))),
  );
}

/** @param {ConsoleState} st */
export function renderOutbox(st) {
  var panel = $('outbox');
  var o = st.outbox;
  if (!o) {
    if (st.outboxError) replace(panel, h('h2', { text: 'Outbox' }), h('p', { class: 'error', text: st.outboxError }));
    else replace(panel);
    return;
  }
  var reasons = Object.entries(o.parkedByReason)
    .map(function (e) {
      return e[0] + ' ' + n(e[1] ?? 0);
    })
    .join(', ');
  var ids = o.parkedRows.map(function (r) {
    return r.id;
  });
  var shown = 'the ' + n(ids.length) + ' parked row' + (ids.length === 1 ? '' : 's') + ' shown';
  replace(
    panel,
    h('h2', { text: 'Outbox' }),
    st.outboxError ? h('p', { class: 'error', text: st.outboxError }) : null,
    h(
      'div',
      { class: 'tiles' },
      tile('pending', n(o.pending)),
      tile('oldest pending', o.oldestPendingAgeMs ? ms(o.oldestPendingAgeMs) : '–', '', o.oldestPendingAgeMs ? 'ago' : 'none pending'),
      tile('parked', n(o.parked), o.parked ? 'parked' : '', reasons || undefined),
      tile('published', n(o.published), '', 'by this process’s relay'),
    ),
    o.parkedRows.length
      ? [
          h('h2', { text: 'Parked rows', style: { marginTop: '14px' } }),
          o.truncated ? h('p', { class: 'scan truncated', text: 'The oldest ' + n(o.parkedRows.length) + ' of ' + n(o.parked) + ' parked rows.' }) : null,
          h('div', { class: 'actions' }, rowsButton('retry', ids, shown, 'Publish all shown again'), rowsButton('delete', ids, shown, 'Delete all shown')),
          h(
            'table',
            { class: 'outbox-parked' },
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', { class: 'num', text: 'Id' }),
                h('th', { text: 'To' }),
                h('th', { text: 'Message id' }),
                h('th', { text: 'Reason' }),
                h('th', { text: 'Error' }),
                h('th', { text: 'Parked' }),
                h('th'),
              ),
            ),
            h('tbody', null, o.parkedRows.map(parkedRow)),
          ),
        ]
      : null,
    h('h2', { text: 'Inbox duplicates', style: { marginTop: '14px' } }),
    o.inboxDuplicates.length
      ? h(
          'table',
          { class: 'inbox-duplicates' },
          h('thead', null, h('tr', null, h('th', { text: 'Consumer' }), h('th', { class: 'num', text: 'Duplicates skipped' }), h('th', { text: 'Last' }))),
          h(
            'tbody',
            null,
            o.inboxDuplicates.map(function (d) {
              return h(
                'tr',
                { 'data-consumer': d.consumer },
                h('td', { class: 'mono', text: d.consumer }),
                h('td', { class: 'num', text: n(d.duplicates) }),
                h('td', { class: 'when', text: when(d.lastAt) }),
              );
            }),
          ),
        )
      : h('p', { class: 'empty', text: 'No consumer’s inbox has skipped a duplicate.' }),
  );
}
