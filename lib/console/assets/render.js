// @ts-check
// Drawing the page from the state: the header, the list of work queues,
// the jobs, the retry table and the outbox; each part again only when what it shows
// changed, so that what the operator opened or types survives a poll.

import { stopJob, tableAction } from './actions.js';
import { $, h, ms, n, replace, tile, when } from './dom.js';
import { select } from './reading.js';
import { renderOutbox } from './render-outbox.js';
import { renderQueue } from './render-queue.js';
import { S, jobsOf, queueView } from './store.js';

/** @typedef {import('./store.js').ConsoleState} ConsoleState */

/** Draws what changed of the page. */
export function render() {
  var st = S.state;
  if (!st) return;
  $('broker').textContent = 'broker ' + st.broker;
  var m = $('management');
  m.textContent =
    st.management.state === 'ok'
      ? 'management API: ' + st.management.detail
      : st.management.state === 'off'
        ? 'management API not asked'
        : 'management API not answering (' + st.management.detail + ')';
  m.className = st.management.state === 'ok' ? 'good' : st.management.state === 'off' ? '' : 'bad';
  $('updated').textContent = 'updated ' + when(st.at);
  var queue = S.selected;
  var answer = queue ? S.groups[queue] : null;
  var state = st;
  once('queues', [st.queues, S.selected], function () {
    renderQueues(state);
  });
  once(
    'queue',
    [queue && queueView(queue), answer, queue && jobsOf(queue), S.open, openSig(), queue && S.settled[queue], queue && S.reading[queue], S.timelineRes],
    function () {
      renderQueue();
    },
  );
  once('jobs', [st.jobs], function () {
    renderJobs(state);
  });
  once('table', [st.table, st.tableError], function () {
    renderTable(state);
  });
  once('outbox', [st.outbox, st.outboxError], function () {
    renderOutbox(state);
  });
}

/** What the opened group shows: its key, and its messages' keys or error. */
function openSig() {
  var o = S.openMessages;
  if (!o) return null;
  return [
    o.key,
    o.error || null,
    o.messages
      ? o.messages.map(function (m) {
          return m.key;
        })
      : null,
  ];
}

/** @type {Record<string, string>} */
var drawn = {};

/**
 * Runs `draw` when `data` differs from the last time `part` was drawn: what the operator opened or types survives a poll.
 * @param {string} part
 * @param {unknown} data
 * @param {() => void} draw
 */
function once(part, data, draw) {
  var sig = JSON.stringify(data);
  if (drawn[part] === sig) return;
  drawn[part] = sig;
  draw();
}

/** @param {ConsoleState} st */
function renderQueues(st) {
  var list = $('queue-list');
  replace(
    list,
    st.queues.map(function (x) {
      var retry = x.retry.reduce(function (a, r) {
        return a + r.messages;
      }, x.delayed ?? 0);
      return h(
        'li',
        null,
        h(
          'button',
          {
            class: 'queue-item' + (x.queue === S.selected ? ' selected' : ''),
            'data-queue': x.queue,
            onclick: function () {
              select(x.queue);
            },
          },
          h('span', { class: 'name', text: x.queue }),
          h(
            'span',
            { class: 'badges' },
            h('span', { class: 'badge parked' + (x.parked ? '' : ' zero'), text: n(x.parked ?? 0) + ' parked' }),
            x.brokerDelay && x.delayed === null
              ? h('span', { class: 'badge zero', text: 'delayed: ?' })
              : h('span', { class: 'badge' + (retry ? ' warn' : ' zero'), text: n(retry) + (x.brokerDelay ? ' delayed' : ' retrying') }),
            x.work ? h('span', { class: 'badge zero', text: n(x.work.messages) + ' ready' }) : null,
            x.busy ? h('span', { class: 'badge', text: 'acting' }) : null,
          ),
        ),
      );
    }),
  );
  $('queue-note').textContent = st.queues.length
    ? 'Listed from ' + sourcesText(st) + '.'
    : 'No work queue known yet: name queues on the command line (rabbit-retry ui <queue>…), consume in this process, or enable the management API.';
}

/**
 * Where the queues were learned of, in words.
 * @param {ConsoleState} st
 */
function sourcesText(st) {
  /** @type {Record<string, boolean>} */
  var seen = {};
  st.queues.forEach(function (x) {
    x.sources.forEach(function (s) {
      seen[s] = true;
    });
  });
  /** @type {Record<string, string>} */
  var words = { consumer: 'this process’s consumers', named: 'the queues named to the console', management: 'the management API' };
  return Object.keys(seen)
    .map(function (s) {
      return words[s] || s;
    })
    .join(', ');
}

/** @param {ConsoleState} st */
function renderJobs(st) {
  var panel = $('jobs');
  var jobs = st.jobs.slice().reverse().slice(0, 12);
  if (!jobs.length) {
    replace(panel);
    return;
  }
  replace(
    panel,
    h('h2', { text: 'Replays and purges' }),
    h(
      'table',
      { class: 'jobs' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', { text: 'Action' }),
          h('th', { text: 'Queue' }),
          h('th', { text: 'Of' }),
          h('th', { text: 'State' }),
          h('th', { text: 'Progress' }),
          h('th', { text: 'Started' }),
          h('th'),
        ),
      ),
      h(
        'tbody',
        null,
        jobs.map(function (j) {
          var going = j.state === 'queued' || j.state === 'running';
          return h(
            'tr',
            { 'data-job': j.id },
            h('td', { text: j.kind + (j.ratePerSec ? ' at ' + j.ratePerSec + '/s' : '') }),
            h('td', { class: 'mono', text: j.queue }),
            h('td', { class: 'emsg', text: j.label }),
            h(
              'td',
              null,
              h('span', { class: 'state-' + j.state, text: j.state }),
              j.error ? h('div', { class: 'error', text: j.error.code + ': ' + j.error.message }) : null,
            ),
            h(
              'td',
              null,
              h('span', {
                class: 'progress-text',
                text: j.done + ' of ' + j.total + (!going && typeof j.left === 'number' ? '; ' + j.left + ' left parked' : ''),
              }),
              h(
                'div',
                { class: 'progress' + (j.kind === 'purge' ? ' purge' : '') },
                h('div', { style: { width: Math.round((100 * j.done) / Math.max(1, j.total)) + '%' } }),
              ),
            ),
            h('td', { class: 'when', text: when(j.startedAt || j.createdAt) }),
            h(
              'td',
              null,
              going
                ? h(
                    'button',
                    {
                      class: 'secondary',
                      onclick: function () {
                        stopJob(j);
                      },
                    },
                    'Stop',
                  )
                : null,
            ),
          );
        }),
      ),
    ),
  );
}

/** @param {ConsoleState} st */
function renderTable(st) {
  var panel = $('table');
  var t = st.table;
  if (!t) {
    replace(
      panel,
      h('h2', { text: 'Retry table' }),
      h('p', {
        class: st.tableError ? 'error' : 'note',
        text:
          st.tableError ||
          'No retry table: start the console with --db postgres://… (or RETRY_TABLE_URL), or connect its client with { retryTable: { url } }.',
      }),
    );
    return;
  }
  var deps = t.dependencies.map(function (d) {
    var name = d.dependency ?? '(none)';
    const dependency = d.dependency;
    var actions =
      dependency === null
        ? null
        : h(
            'div',
            { class: 'actions' },
            d.pauseInForce
              ? h(
                  'button',
                  {
                    'data-action': 'resume',
                    onclick: function () {
                      tableAction('resume', { dependency: dependency }, 'Resumed ' + name);
                    },
                  },
                  'Resume',
                )
              : h(
                  'button',
                  {
                    class: 'secondary',
                    'data-action': 'pause',
                    onclick: function () {
                      tableAction('pause', { dependency: dependency }, 'Paused ' + name);
                    },
                  },
                  'Pause',
                ),
            h(
              'button',
              {
                class: 'secondary',
                'data-action': 'retry-now',
                disabled: !d.rows,
                onclick: function () {
                  tableAction('retry-now', { dependency: dependency }, 'Due now in ' + name);
                },
              },
              'Retry now',
            ),
          );
    return h(
      'tr',
      { 'data-dependency': name },
      h('td', { class: 'mono', text: name }),
      h('td', { class: 'num', text: n(d.rows) }),
      h('td', { class: 'num', text: n(d.paused) }),
      h('td', { class: 'num', text: n(d.held) }),
      h('td', { class: 'num', text: n(d.due) }),
      h('td', null, d.pauseInForce ? h('span', { class: 'badge warn', text: 'paused' }) : h('span', { class: 'badge ok', text: 'running' })),
      h('td', null, actions),
    );
  });
  var rows = t.oldest.map(function (r) {
    return h(
      'tr',
      null,
      h('td', { class: 'num', text: r.id }),
      h('td', { class: 'mono', text: r.queue }),
      h('td', { class: 'mono', text: r.dependency || '–' }),
      h('td', { class: 'num', text: r.attempt }),
      h('td', { class: 'when', text: r.paused ? 'paused' : r.nextAttemptAt ? when(r.nextAttemptAt) : 'held' }),
      h('td', { class: 'emsg', text: (r.errorName || 'Error') + ': ' + (r.lastError || '') }),
      h(
        'td',
        null,
        h(
          'button',
          {
            class: 'secondary',
            onclick: function () {
              tableAction('retry-now', { id: r.id }, 'Row ' + r.id + ' due now');
            },
          },
          'Retry now',
        ),
      ),
    );
  });
  replace(
    panel,
    h('h2', { text: 'Retry table' }),
    h(
      'div',
      { class: 'tiles' },
      tile('rows', n(t.rows)),
      tile('paused', n(t.paused)),
      tile('held', n(t.held), '', 'wait for a person'),
      tile('due', n(t.due)),
      tile('oldest due', t.oldestDueAgeMs ? ms(t.oldestDueAgeMs) : '–', '', t.oldestDueAgeMs ? 'ago' : 'none due'),
    ),
    t.truncated ? h('p', { class: 'scan truncated', text: 'Counted by dependency from the oldest ' + n(t.read) + ' of ' + n(t.rows) + ' rows.' }) : null,
    t.dependencies.length
      ? h(
          'table',
          { class: 'dependencies' },
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              h('th', { text: 'Dependency' }),
              h('th', { class: 'num', text: 'Rows' }),
              h('th', { class: 'num', text: 'Paused' }),
              h('th', { class: 'num', text: 'Held' }),
              h('th', { class: 'num', text: 'Due' }),
              h('th', { text: 'State' }),
              h('th'),
            ),
          ),
          h('tbody', null, deps),
        )
      : h('p', { class: 'empty', text: 'The retry table is empty.' }),
    rows.length
      ? [
          h('h2', { text: 'Oldest rows', style: { marginTop: '14px' } }),
          h(
            'table',
            null,
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', { class: 'num', text: 'Id' }),
                h('th', { text: 'Queue' }),
                h('th', { text: 'Dependency' }),
                h('th', { class: 'num', text: 'Attempt' }),
                h('th', { text: 'Next attempt' }),
                h('th', { text: 'Error' }),
                h('th'),
              ),
            ),
            h('tbody', null, rows),
          ),
        ]
      : null,
  );
}
