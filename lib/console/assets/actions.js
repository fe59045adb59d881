// @ts-check
// What the operator does: replays and purges, each confirmed with the count
// it acts on, stops of jobs, the retry table's actions, and the outbox's
// parked rows put back or deleted.

import { messageOf, outboxAction as askOutbox, refused, startJob, stopJob as askStop, tableAction as askTable } from './api.js';
import { $, toast } from './dom.js';
import { loadMessages, poll } from './reading.js';
import { S, liveCount, redraw } from './store.js';

/** @typedef {import('./store.js').ParkedGroup} ParkedGroup */
/** @typedef {import('./store.js').MessageDetail} MessageDetail */
/** @typedef {import('./store.js').JobView} JobView */

// ---------------------------------------------------------------------------
// Confirmation

/** @type {((answer: boolean) => void) | null} */
var pending = null;

/**
 * Asks the operator to confirm; resolves to whether they did.
 * @param {string} title
 * @param {string} text
 * @param {string} okText
 * @param {boolean} [danger]
 * @returns {Promise<boolean>}
 */
function confirmAction(title, text, okText, danger) {
  $('modal-title').textContent = title;
  $('modal-text').textContent = text;
  var ok = $('modal-ok');
  ok.textContent = okText;
  ok.className = danger ? 'danger solid' : '';
  $('modal').hidden = false;
  ok.focus();
  return new Promise(function (resolve) {
    pending = resolve;
  });
}

/**
 * Closes the confirmation with the operator's answer.
 * @param {boolean} answer
 */
export function closeModal(answer) {
  $('modal').hidden = true;
  if (pending) {
    var p = pending;
    pending = null;
    p(answer);
  }
}

// ---------------------------------------------------------------------------
// Actions

/** The replay rate typed, or 20. */
export function rate() {
  var v = Number(S.rate);
  return v > 0 ? v : 20;
}

/** @param {JobView} job */
function started(job) {
  toast((job.kind === 'replay' ? 'Replay' : 'Purge') + ' started: ' + job.label);
  poll();
}

/** @param {unknown} e */
function failed(e) {
  if (!refused(e)) toast(messageOf(e), true);
}

/** @param {{ job: JobView }} a */
function startedJob(a) {
  started(a.job);
}

/**
 * @param {string} queue
 * @param {ParkedGroup} g
 */
export function replayGroup(queue, g) {
  var count = liveCount(queue, g);
  var r = rate();
  confirmAction(
    'Replay ' + count + ' message' + (count === 1 ? '' : 's') + '?',
    'The ' +
      count +
      ' parked message' +
      (count === 1 ? '' : 's') +
      ' of "' +
      g.errorName +
      ': ' +
      g.message +
      '" go back to ' +
      queue +
      ' at ' +
      r +
      ' a second, with retry-attempt reset to 0.',
    'Replay ' + count,
  )
    .then(function (ok) {
      if (ok) return startJob('replay', queue, { scope: 'group', key: g.key, count: count, ratePerSec: r }).then(startedJob);
    })
    .catch(failed);
}

/**
 * @param {string} queue
 * @param {ParkedGroup} g
 */
export function purgeGroup(queue, g) {
  var count = liveCount(queue, g);
  confirmAction(
    'Purge ' + count + ' message' + (count === 1 ? '' : 's') + '?',
    'The ' +
      count +
      ' parked message' +
      (count === 1 ? '' : 's') +
      ' of "' +
      g.errorName +
      ': ' +
      g.message +
      '" are deleted for good. The other parked messages stay, in their order.',
    'Purge ' + count + ' message' + (count === 1 ? '' : 's'),
    true,
  )
    .then(function (ok) {
      if (ok) return startJob('purge', queue, { scope: 'group', key: g.key, count: count }).then(startedJob);
    })
    .catch(failed);
}

/**
 * @param {string} queue
 * @param {number} count
 */
export function replayQueue(queue, count) {
  var r = rate();
  confirmAction(
    'Replay ' + count + ' parked message' + (count === 1 ? '' : 's') + '?',
    'Every parked message of ' + queue + ', at most ' + count + ', goes back to the work queue at ' + r + ' a second, with retry-attempt reset to 0.',
    'Replay ' + count,
  )
    .then(function (ok) {
      if (ok) return startJob('replay', queue, { scope: 'queue', count: count, ratePerSec: r }).then(startedJob);
    })
    .catch(failed);
}

/** @param {MessageDetail} m */
function messageName(m) {
  return m.messageId ? 'message ' + m.messageId : 'message #' + (m.position + 1);
}

/**
 * @param {string} queue
 * @param {MessageDetail} m
 */
export function replayMessage(queue, m) {
  confirmAction('Replay 1 message?', messageName(m) + ' goes back to ' + queue + ', with retry-attempt reset to 0.', 'Replay 1')
    .then(function (ok) {
      if (ok) return startJob('replay', queue, { scope: 'message', key: m.key, count: 1, ratePerSec: rate() }).then(startedJob);
    })
    .catch(failed);
}

/**
 * @param {string} queue
 * @param {MessageDetail} m
 */
export function purgeMessage(queue, m) {
  confirmAction('Purge 1 message?', messageName(m) + ' is deleted for good.', 'Purge 1 message', true)
    .then(function (ok) {
      if (ok) return startJob('purge', queue, { scope: 'message', key: m.key, count: 1 }).then(startedJob);
    })
    .catch(failed);
}

/** @param {JobView} job */
export function stopJob(job) {
  askStop(job.id).then(poll, failed);
}

/**
 * @param {'pause' | 'resume' | 'retry-now'} action
 * @param {{ dependency?: string, id?: number }} body
 * @param {string} what in the toast
 */
export function tableAction(action, body, what) {
  askTable(action, body).then(function (r) {
    toast(what + ': ' + r.rows + ' row' + (r.rows === 1 ? '' : 's'));
    poll();
  }, failed);
}

/**
 * Opens group `key` (reading its messages), or closes it.
 * @param {string} queue
 * @param {string} key
 */
export function toggleGroup(queue, key) {
  if (S.open === key) {
    S.open = null;
    S.openMessages = null;
  } else {
    S.open = key;
    S.openMessages = null;
    loadMessages(queue, key);
  }
  redraw();
}

/**
 * Puts the outbox's parked rows `ids` back to be published, or deletes them, once the operator confirms.
 * @param {'retry' | 'delete'} action
 * @param {number[]} ids
 * @param {string} what the rows, in words
 */
export function outboxRows(action, ids, what) {
  var count = ids.length;
  var rows = count + ' parked outbox row' + (count === 1 ? '' : 's');
  confirmAction(
    (action === 'retry' ? 'Publish ' : 'Delete ') + rows + '?',
    action === 'retry'
      ? 'The relay publishes ' + what + ' again, first of their ordering keys.'
      : 'Deleted from the outbox for good, never to be published: ' + what + '.',
    (action === 'retry' ? 'Publish ' : 'Delete ') + count,
    action === 'delete',
  )
    .then(function (ok) {
      if (!ok) return;
      return askOutbox(action, ids).then(function (r) {
        toast((action === 'retry' ? 'Put back to publish: ' : 'Deleted: ') + r.rows + ' row' + (r.rows === 1 ? '' : 's'));
        poll();
      });
    })
    .catch(failed);
}
