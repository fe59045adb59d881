// @ts-check
// What the page knows: the last state the console answered, the groupings
// it read, and what the operator chose; and the counts derived from them.

/** @typedef {import('../state').ConsoleState} ConsoleState */
/** @typedef {import('../state').QueueView} QueueView */
/** @typedef {import('../groups').GroupsAnswer} GroupsAnswer */
/** @typedef {import('../jobs').JobView} JobView */
/** @typedef {import('../views').ParkedGroup} ParkedGroup */
/** @typedef {import('../views').MessageDetail} MessageDetail */

/**
 * The messages of the opened group, or why they could not be read.
 * @typedef {{ key: string, messages: MessageDetail[], scanned: number, truncated: boolean, error?: undefined }
 *   | { key: string, error: string, messages?: undefined }} OpenMessages
 */

/** A group a finished job emptied, kept on the page at 0, with what the job did. @typedef {{ group: ParkedGroup, note: string }} Settled */

/**
 * The page's state.
 * @typedef {object} PageState
 * @property {string | null} token The console's token.
 * @property {ConsoleState | null} state The last state read.
 * @property {string | null} selected The queue shown.
 * @property {number | string | null} rate The replay rate, as typed.
 * @property {Record<string, GroupsAnswer>} groups Queue -> answer of api/queues/<q>/groups.
 * @property {Record<string, Record<string, Settled>>} settled Queue -> key -> the group a job emptied.
 * @property {Record<number, boolean>} absorbed Job id -> true: its end was taken into a new grouping.
 * @property {string | null} open The key of the opened group.
 * @property {OpenMessages | null} openMessages Its messages.
 * @property {Record<string, number>} lastGrouped Queue -> Date.now() of the last reading.
 * @property {Record<string, boolean>} reading Queue -> true while a reading is asked.
 * @property {ReturnType<typeof setTimeout> | undefined} pollTimer The next poll.
 * @property {HTMLInputElement | null} rateInput The rate's input, kept across draws.
 * @property {Record<string, boolean>} detailsOpen Message key -> whether its details are open.
 * @property {import('../timeline').TimelineResolution} timelineRes The failure timeline's resolution: per minute or per hour.
 */

/** @type {PageState} */
export var S = {
  token: null,
  state: null,
  selected: null,
  rate: null,
  groups: {},
  settled: {},
  absorbed: {},
  open: null,
  openMessages: null,
  lastGrouped: {},
  reading: {},
  pollTimer: undefined,
  rateInput: null,
  detailsOpen: {},
  timelineRes: 'minute',
};

/** @type {() => void} */
var draw = function () {
  // Nothing to draw until console.js hands over the page's drawing.
};

/**
 * Sets what {@link redraw} runs: the page's drawing.
 * @param {() => void} f
 */
export function drawWith(f) {
  draw = f;
}

/** Draws the page again from {@link S}. */
export function redraw() {
  draw();
}

/**
 * The jobs of `queue`.
 * @param {string} queue
 */
export function jobsOf(queue) {
  return (S.state?.jobs ?? []).filter(function (j) {
    return j.queue === queue;
  });
}

/**
 * The jobs of `queue` that are queued or running.
 * @param {string} queue
 */
export function activeJobs(queue) {
  return jobsOf(queue).filter(function (j) {
    return j.state === 'queued' || j.state === 'running';
  });
}

/** Whether any job is queued or running. */
export function anyActive() {
  return (S.state?.jobs ?? []).some(function (j) {
    return j.state === 'queued' || j.state === 'running';
  });
}

/**
 * A group's count, less what the jobs since its reading moved.
 * @param {string} queue
 * @param {ParkedGroup} g
 */
export function liveCount(queue, g) {
  var answer = S.groups[queue];
  var c = g.count;
  jobsOf(queue).forEach(function (j) {
    if (answer && j.id >= answer.jobsFrom) c -= j.byGroup[g.key] || 0;
  });
  return Math.max(0, c);
}

/**
 * The state's view of queue `name`.
 * @param {string} name
 * @returns {QueueView | null}
 */
export function queueView(name) {
  for (var q of S.state?.queues ?? []) if (q.queue === name) return q;
  return null;
}
