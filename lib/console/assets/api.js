// @ts-check
// The console's API, with the token every request carries; a refused token
// shows the login.

import { $, input } from './dom.js';
import { S } from './store.js';

/** @typedef {import('./store.js').ConsoleState} ConsoleState */
/** @typedef {import('./store.js').GroupsAnswer} GroupsAnswer */
/** @typedef {import('./store.js').JobView} JobView */
/** @typedef {import('./store.js').MessageDetail} MessageDetail */
/** @typedef {import('../edit').EditAnswer} EditAnswer */

/**
 * An edit of one parked message: which (`messageId`, and `key`, the console's id of the message opened), who edits,
 * the body as typed (`asText` sends one that is not JSON as text), the headers set and those left out.
 * @typedef {{ messageId: string, key: string, by: string, body?: string, asText?: boolean, headers: Record<string, unknown>, removeHeaders: string[] }} EditBody
 */

var TOKEN_HEADER = 'x-rabbit-retry-token';
/** Where the tab keeps the token the operator gave. */
export var TOKEN_KEY = 'rabbit-retry-console-token';
var base = location.pathname.replace(/index\.html$/, '');
if (!base.endsWith('/')) base += '/';

/** The token: the page's own, one given in the URL's fragment (kept for the tab), or the tab's. */
export function readToken() {
  var own = document.querySelector('meta[name="rabbit-retry-token"]')?.getAttribute('content');
  if (own) return own;
  var m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    var t = decodeURIComponent(m[1]);
    sessionStorage.setItem(TOKEN_KEY, t);
    history.replaceState(null, '', location.pathname + location.search);
    return t;
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

/**
 * Asks the operator for the token.
 * @param {string} message why
 */
export function showLogin(message) {
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  input('login-token').focus();
}

/** An error the API answered. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/**
 * Whether `e` is the API refusing the token: the login already asks for another, so nothing else is shown.
 * @param {unknown} e
 */
export function refused(e) {
  return e instanceof ApiError && e.status === 401;
}

/**
 * What a failed request or drawing says, for the operator.
 * @param {unknown} e an {@link ApiError}, or fetch's error when the console does not answer
 */
export function messageOf(e) {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Reads (GET) or, with a body, does (POST) `api/<path>`; rejects with an {@link ApiError}.
 * @param {string} path
 * @param {object} [body]
 * @returns {Promise<unknown>}
 */
function api(path, body) {
  /** @type {Record<string, string>} */
  var headers = {};
  headers[TOKEN_HEADER] = S.token || '';
  /** @type {RequestInit} */
  var init = { method: body ? 'POST' : 'GET', headers: headers, cache: 'no-store' };
  if (body) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  return fetch(base + 'api/' + path, init).then(function (res) {
    return res
      .json()
      .catch(function () {
        return {};
      })
      .then(function (/** @type {unknown} */ data) {
        if (res.ok) return data;
        // The console's errors are `{ error: { code, message } }`; anything else falls back to the HTTP status.
        var e = /** @type {{ error?: { code?: string, message?: string } } | null} */ (data)?.error ?? {};
        if (res.status === 401) showLogin(S.token ? 'That token was refused.' : '');
        throw new ApiError(res.status, e.code || 'HTTP_' + res.status, e.message || res.statusText);
      });
  });
}

/** @param {string} name */
function q(name) {
  return encodeURIComponent(name);
}

/** @returns {Promise<ConsoleState>} */
export function getState() {
  return /** @type {Promise<ConsoleState>} */ (api('state'));
}

/**
 * @param {string} queue
 * @param {boolean} refresh read the parked messages again
 * @returns {Promise<GroupsAnswer>}
 */
export function getGroups(queue, refresh) {
  return /** @type {Promise<GroupsAnswer>} */ (api('queues/' + q(queue) + '/groups' + (refresh ? '?refresh=1' : '')));
}

/**
 * @param {string} queue
 * @param {string} key the group's
 * @returns {Promise<{ messages: MessageDetail[], scanned: number, truncated: boolean }>}
 */
export function getMessages(queue, key) {
  return /** @type {Promise<{ messages: MessageDetail[], scanned: number, truncated: boolean }>} */ (
    api('queues/' + q(queue) + '/groups/' + key + '/messages?limit=20')
  );
}

/**
 * Starts a replay or purge of what `body` selects.
 * @param {'replay' | 'purge'} kind
 * @param {string} queue
 * @param {{ scope: 'queue' | 'group' | 'message', key?: string, count: number, ratePerSec?: number }} body
 * @returns {Promise<{ job: JobView }>}
 */
export function startJob(kind, queue, body) {
  return /** @type {Promise<{ job: JobView }>} */ (api('queues/' + q(queue) + '/' + kind, body));
}

/**
 * Sends the parked message `body` names back to `queue`'s work queue, edited.
 * @param {string} queue
 * @param {EditBody} body
 * @returns {Promise<EditAnswer>}
 */
export function editMessage(queue, body) {
  return /** @type {Promise<EditAnswer>} */ (api('queues/' + q(queue) + '/edit', body));
}

/**
 * @param {number} id
 * @returns {Promise<{ stopped: boolean }>}
 */
export function stopJob(id) {
  return /** @type {Promise<{ stopped: boolean }>} */ (api('jobs/' + id + '/stop', {}));
}

/**
 * @param {'pause' | 'resume' | 'retry-now'} action
 * @param {{ dependency?: string, id?: number }} body
 * @returns {Promise<{ rows: number }>}
 */
export function tableAction(action, body) {
  return /** @type {Promise<{ rows: number }>} */ (api('table/' + action, body));
}

/**
 * Puts the outbox's parked rows `ids` back to be published, or deletes them.
 * @param {'retry' | 'delete'} action
 * @param {number[]} ids
 * @returns {Promise<{ rows: number }>}
 */
export function outboxAction(action, ids) {
  return /** @type {Promise<{ rows: number }>} */ (api('outbox/' + action, { ids: ids }));
}
