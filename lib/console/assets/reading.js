// @ts-check
// Reading the console: the state, polled (faster while a job acts), and the
// selected queue's groups, read again when a job on it ended or its parked
// depth moved.

import { getGroups, getMessages, getState, messageOf, refused } from './api.js';
import { $, toast, when } from './dom.js';
import { S, anyActive, jobsOf, queueView, redraw } from './store.js';

/** @typedef {import('./store.js').GroupsAnswer} GroupsAnswer */

/**
 * Reads the groups of `queue`, again from the parked queue when `refresh`.
 * @param {string} queue
 * @param {boolean} refresh
 * @returns {Promise<void>} settles once read; a failure is shown, never passed on
 */
export function readGroups(queue, refresh) {
  if (S.reading[queue]) return Promise.resolve();
  S.reading[queue] = true;
  var before = S.groups[queue];
  return getGroups(queue, refresh)
    .then(function (answer) {
      if (before?.grouping && answer.grouping && answer.grouping !== before.grouping) keepSettled(queue, before, answer);
      S.groups[queue] = answer;
      S.lastGrouped[queue] = Date.now();
      var open = S.open;
      if (open && answer.grouping && !answer.busy) {
        var still = answer.grouping.groups.some(function (g) {
          return g.key === open;
        });
        if (still) loadMessages(queue, open);
        else {
          S.open = null;
          S.openMessages = null;
        }
      }
      redraw();
    })
    .catch(function (/** @type {unknown} */ e) {
      if (!refused(e)) toast('Reading ' + queue + ' failed: ' + messageOf(e), true);
    })
    .then(function () {
      S.reading[queue] = false;
    });
}

/**
 * Groups a finished job emptied stay on the page, at 0, until the queue is read again by hand.
 * @param {string} queue
 * @param {GroupsAnswer} before
 * @param {GroupsAnswer} answer
 */
function keepSettled(queue, before, answer) {
  /** @type {Record<string, boolean>} */
  var now = {};
  const grouping = before.grouping;
  if (!answer.grouping || !grouping) return;
  answer.grouping.groups.forEach(function (g) {
    now[g.key] = true;
  });
  var kept = S.settled[queue] || (S.settled[queue] = {});
  jobsOf(queue).forEach(function (j) {
    if (j.id < before.jobsFrom || j.state === 'queued' || j.state === 'running') return;
    S.absorbed[j.id] = true;
    Object.keys(j.byGroup).forEach(function (key) {
      if (now[key]) return;
      var g = grouping.groups.find(function (x) {
        return x.key === key;
      });
      if (!g) return;
      var verb = j.kind === 'replay' ? 'replayed' : 'purged';
      kept[key] = { group: g, note: verb + ' ' + j.byGroup[key] + ' at ' + when(j.finishedAt) };
    });
  });
}

/**
 * Reads the messages of the opened group `key`.
 * @param {string} queue
 * @param {string} key
 */
export function loadMessages(queue, key) {
  getMessages(queue, key)
    .then(function (r) {
      if (S.open !== key) return;
      S.openMessages = { key: key, messages: r.messages, scanned: r.scanned, truncated: r.truncated };
      redraw();
    })
    .catch(function (/** @type {unknown} */ e) {
      if (S.open !== key) return;
      S.openMessages = { key: key, error: messageOf(e) };
      redraw();
    });
}

/**
 * Reads the selected queue again when a job on it ended, or its parked depth moved.
 * @returns {Promise<void> | undefined} the reading started, which never rejects
 */
function maybeRead() {
  var queue = S.selected;
  if (!queue || S.reading[queue]) return;
  var answer = S.groups[queue];
  var view = queueView(queue);
  if (!answer) return readGroups(queue, false);
  if (!view || view.busy) return;
  var ended = jobsOf(queue).some(function (j) {
    return j.id >= answer.jobsFrom && !S.absorbed[j.id] && j.state !== 'queued' && j.state !== 'running';
  });
  if (ended) return readGroups(queue, true);
  var g = answer.grouping;
  if (!g) return readGroups(queue, true);
  var took = g.tookMs || 0;
  var gap = Math.max(3000, took * 10);
  if (view.parked !== null && view.parked !== g.depth && Date.now() - (S.lastGrouped[queue] || 0) > gap) return readGroups(queue, true);
}

/** Reads the state now, and again in 0.7 s while a job acts, 2 s otherwise. */
export function poll() {
  clearTimeout(S.pollTimer);
  // The chain catches its failures (shown in the header) and then sets the next poll: nothing is left to await.
  void getState()
    .then(function (state) {
      S.state = state;
      S.rate ??= state.ratePerSec;
      if (!S.selected && state.queues.length) {
        var withParked = state.queues.find(function (x) {
          return x.parked;
        });
        select((withParked ?? state.queues[0]).queue);
      }
      redraw();
      // Not awaited: the next poll is timed from the state, whatever the groups take.
      void maybeRead();
    })
    .catch(function (/** @type {unknown} */ e) {
      if (!refused(e)) $('updated').textContent = 'not updated: ' + messageOf(e);
    })
    .then(function () {
      S.pollTimer = setTimeout(poll, anyActive() ? 700 : 2000);
    });
}

/**
 * Shows `queue`, and reads its groups again.
 * @param {string} queue
 */
export function select(queue) {
  if (S.selected !== queue) {
    S.open = null;
    S.openMessages = null;
  }
  S.selected = queue;
  S.settled[queue] = {};
  redraw();
  void readGroups(queue, true);
}
