/**
 * The operators' console: an HTTP handler (node's `IncomingMessage` and
 * `ServerResponse`, so Express, Fastify, NestJS or a bare `http.Server` can
 * mount it) that serves the page and its JSON API. The page shows the work
 * queues with retry topology, their parked messages grouped by failure, and
 * the retry table; it replays and purges parked messages and pauses, resumes
 * and retries the table's dependencies, through the same code as the API.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

import { type RabbitRetry, brokerUrlsOf } from '../client';
import { checkKeys, checkObject, checkString } from '../check-options';
import { InvalidOptionsError, RabbitRetryError } from '../errors';
import { reasonOf } from '../error-text';
import { delayLabel, parkedQueueName } from '../names';
import { DEFAULT_DELAYS, type Delay, type OptionKeys } from '../options';
import type { ParkedMessage } from '../parked';
import type { RetryRow, RetryTable } from '../table';
import { asset } from './assets';
import {
  type KnownQueue,
  type ManagementStatus,
  type ManagementTarget,
  managementQueueNames,
  managementTarget,
  mergeQueues,
  workQueuesOf,
} from './discovery';
import { fingerprint } from './fingerprint';
import { type Job, type JobScope, type JobView, Jobs, KeyedQueue } from './jobs';
import { type Grouping, type MessageDetail, detailOf, groupParked, messageKey } from './views';

/** The header every API request carries the console's token in. */
export const CONSOLE_TOKEN_HEADER = 'x-rabbit-retry-token';

/** The environment variable the console reads its token from when the options give none. */
export const CONSOLE_TOKEN_ENV = 'RABBIT_RETRY_UI_TOKEN';

/** Options of {@link RabbitRetryConsole}. */
export interface ConsoleOptions {
  /** The connected client the console reads and acts through (its broker, and its retry table when it has one). */
  client: RabbitRetry;
  /**
   * Work queues to show, besides those the client's consumers consume and
   * those the management API lists.
   */
  queues?: string[];
  /** The delays of `queues`, which name their retry queues. @default ['5s', '1m', '10m'] */
  delays?: Delay[];
  /** Group at most this many parked messages of a queue; the page says when a queue holds more. @default 10000 */
  scanLimit?: number;
  /** The replay rate the page offers first, messages a second. @default 20 */
  ratePerSec?: number;
  /**
   * The token every API request must carry in the `X-Rabbit-Retry-Token`
   * header; the page asks the operator for it. @default $RABBIT_RETRY_UI_TOKEN,
   * else a random one the console writes into its own page: then requests
   * from another site cannot act (they cannot read the page), but anyone
   * who can load the page can; put the console behind the service's own
   * authentication, or give a token.
   *
   * A token is never blank, and does not begin or end with spaces. When
   * `allowedHosts` names a host beyond the loopback, it has at least
   * {@link CONSOLE_MIN_TOKEN_LENGTH} (16) characters: the console refuses a
   * shorter one with an {@link InvalidOptionsError}.
   */
  token?: string;
  /**
   * RabbitMQ's management API, to list the broker's queues: its URL
   * (`http://user:password@host:15672`; without credentials, the broker
   * URL's are used), or `false` not to ask it. The credentials stay in the
   * server. @default http on the broker's host, port 15672, with the broker URL's user and password
   */
  management?: string | false;
  /**
   * The path the console is mounted at (`/ops/rabbit-retry`), read from
   * `req.originalUrl` or `req.url`; leave it out when the framework strips
   * it from `req.url` (Express's `app.use(path, handler)`).
   */
  basePath?: string;
  /**
   * The host names, beyond the loopback's, the console answers to: a name
   * (`ops.example.com`: any port) or a name and a port
   * (`ops.example.com:8443`). The console answers a request only when its
   * `Host` header is `127.0.0.1`, `localhost` or `[::1]` (any port) or one
   * of these, so that a page of another site cannot reach it through a DNS
   * name pointed at it; and it refuses a request that changes anything
   * (every method but GET, HEAD and OPTIONS) whose `Origin` is another host.
   * Both refusals are HTTP 403 (`FORBIDDEN_HOST`, `FORBIDDEN_ORIGIN`).
   * A host beyond the loopback here needs a `token` of at least 16
   * characters when a token is given.
   * @default [] (the loopback only)
   */
  allowedHosts?: string[];
}

/** The keys of {@link ConsoleOptions}. */
const CONSOLE_OPTION_KEYS = {
  client: true,
  queues: true,
  delays: true,
  scanLimit: true,
  ratePerSec: true,
  token: true,
  management: true,
  basePath: true,
  allowedHosts: true,
} satisfies OptionKeys<ConsoleOptions>;

/**
 * A request handler: node's request and response, and for frameworks that
 * pass one, `next` (never called: every path under the console is its own).
 */
export type ConsoleHandler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void;

/**
 * The codes of the console's HTTP errors (the JSON body is
 * `{ error: { code, message } }`): those of the library's errors
 * (`INVALID_OPTIONS`, `CONNECTION`, `RETRY_TABLE`, ...), and the console's own.
 */
export type ConsoleErrorCode =
  | RabbitRetryError['code']
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN_HOST'
  | 'FORBIDDEN_ORIGIN'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'BUSY'
  | 'NO_RETRY_TABLE'
  | 'INTERNAL';

/** An error the console answers with its HTTP status. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ConsoleErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** The HTTP status of a library error. */
function statusOf(code: RabbitRetryError['code']): number {
  switch (code) {
    case 'INVALID_OPTIONS':
      return 400;
    case 'CLOSED':
      return 503;
    default:
      return 502;
  }
}

/** A work queue's depths, as the page shows them. */
export interface QueueView {
  /** The work queue. */
  queue: string;
  /** Where the console learned of it. */
  sources: KnownQueue['sources'];
  /** The work queue's ready messages and consumers; null when it does not exist. */
  work: { messages: number; consumers: number } | null;
  /** Each retry queue that exists: its delay's label, name and ready messages. */
  retry: { delay: string; queue: string; messages: number }[];
  /** The parked queue's name. */
  parkedQueue: string;
  /** Parked messages; null when the parked queue does not exist. */
  parked: number | null;
  /** Rows of the retry table for this queue (among those read), or null without a table. */
  tableRows: number | null;
  /** Whether a replay or purge of its parked messages is queued or running. */
  busy: boolean;
}

/** A dependency of the retry table, with its rows counted. */
export interface DependencyView {
  /** The dependency; null for rows without one. */
  dependency: string | null;
  /** Its rows. */
  rows: number;
  /** Rows paused (among those read). */
  paused: number;
  /** Rows waiting for a person (among those read). */
  held: number;
  /** Rows due now and not paused (among those read). */
  due: number;
  /** Whether a pause of the dependency is in force (rows stored later are paused too). */
  pauseInForce: boolean;
}

/** A retry-table row, as the page reads it. */
export type RowView = Omit<RetryRow, 'nextAttemptAt' | 'firstFailedAt' | 'updatedAt'> & {
  /** When it is due, ISO 8601; null waits for a person. */
  nextAttemptAt: string | null;
  /** When it failed first, ISO 8601. */
  firstFailedAt: string;
  /** Last change, ISO 8601. */
  updatedAt: string;
};

/** The retry table, as the page shows it. */
export interface TableView {
  /** Rows in all. */
  rows: number;
  /** Paused rows. */
  paused: number;
  /** Rows waiting for a person. */
  held: number;
  /** Rows due now and not paused. */
  due: number;
  /** Age of the oldest due row, ms. */
  oldestDueAgeMs: number;
  /** Rows read to count by dependency and queue (the oldest first). */
  read: number;
  /** Whether the table holds more rows than were read. */
  truncated: boolean;
  /** Its dependencies, the most rows first. */
  dependencies: DependencyView[];
  /** Rows by work queue (among those read). */
  byQueue: Record<string, number>;
  /** The oldest rows, up to 25. */
  oldest: RowView[];
}

/** What the page polls: everything but the groups. */
export interface ConsoleState {
  /** The broker's URL, password hidden. */
  broker: string;
  /** Whether the management API answered. */
  management: ManagementStatus;
  /** The most parked messages grouped per queue. */
  scanLimit: number;
  /** The replay rate the page offers first. */
  ratePerSec: number;
  /** The work queues. */
  queues: QueueView[];
  /** Replays and purges, oldest first. */
  jobs: JobView[];
  /** The retry table; null when the client has none. */
  table: TableView | null;
  /** Why the table could not be read. */
  tableError: string | null;
  /** When this was read, ISO 8601. */
  at: string;
}

/** What `GET api/queues/<queue>/groups` answers. */
export interface GroupsAnswer {
  /** The grouping; null when the queue is busy and was not grouped yet. */
  grouping: Grouping | null;
  /** Jobs with an id from this one on started after the grouping: the page takes what they did off its counts. */
  jobsFrom: number;
  /** Whether a job is acting on the queue (the grouping is then the last one made before it). */
  busy: boolean;
}

/** Rows of the retry table read to count them by dependency and queue. */
const TABLE_READ = 10_000;
/** How long depths and table counts are reused, ms. */
const FRESH_MS = 1000;
/** The longest wait for the parked queue's depth once a job ended, ms. */
const DEPTH_AFTER_MS = 2000;

function isLoopbackName(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Whether `host` (an address to listen on) is this machine's loopback. */
export function isLoopback(host: string): boolean {
  return isLoopbackName(host.toLowerCase());
}

/**
 * The fewest characters of a token when the console answers beyond the
 * loopback: listening on another address, or mounted with `allowedHosts`
 * beyond the loopback.
 */
export const CONSOLE_MIN_TOKEN_LENGTH = 16;

/** A host the console answers to: its name (lower case; an IPv6 address in brackets), and its port, or any. @internal */
export interface AllowedHost {
  /** `ops.example.com`, `10.0.0.5`, `[fd00::5]`. */
  name: string;
  /** The port; any when left out. */
  port?: string;
}

/** A host as a request names it: its name, and its port (`''` when it names none). */
interface RequestHost {
  name: string;
  port: string;
}

/** The ports a host without one stands for, by scheme. */
const DEFAULT_PORTS = new Set(['80', '443']);

/** `value` (`name`, `name:port`, `[v6]:port`) as its name and port, or undefined when it is not a host. */
function splitHost(value: string): RequestHost | undefined {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?$/.exec(value.toLowerCase());
  if (!m) return undefined;
  if (m[2] === undefined) return { name: m[1], port: '' };
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { name: m[1], port: String(port) } : undefined;
}

/** A host as `allowedHosts` writes it. */
function hostText(h: AllowedHost): string {
  return h.port === undefined ? h.name : `${h.name}:${h.port}`;
}

/**
 * `allowedHosts` read: each a host name, with a port or without (any port);
 * an IPv6 address with or without its brackets. Throws an
 * {@link InvalidOptionsError} naming an entry that is not a host.
 * @internal
 */
export function allowedHostsOf(list: unknown): AllowedHost[] {
  if (list === undefined) return [];
  if (!Array.isArray(list) || list.some((h) => typeof h !== 'string')) {
    throw new InvalidOptionsError('allowedHosts must be an array of host names such as ops.example.com or ops.example.com:8443');
  }
  return (list as string[]).map((entry) => {
    const trimmed = entry.trim();
    // A bare IPv6 address (two colons or more) is written in brackets in a Host header.
    const h = splitHost(/^[0-9a-f:.]+$/i.test(trimmed) && (trimmed.match(/:/g) ?? []).length >= 2 ? `[${trimmed}]` : trimmed);
    if (!h) throw new InvalidOptionsError(`allowedHosts: ${JSON.stringify(entry)} is not a host name such as ops.example.com or ops.example.com:8443`);
    return h.port === '' ? { name: h.name } : { name: h.name, port: h.port };
  });
}

/** Whether a request naming `host` is one the console answers: the loopback's, or one of `allowed`. */
function answers(allowed: readonly AllowedHost[], host: RequestHost): boolean {
  if (isLoopbackName(host.name)) return true;
  return allowed.some(
    (a) => a.name === host.name && (a.port === undefined || a.port === host.port || (host.port === '' && DEFAULT_PORTS.has(a.port))),
  );
}

/** The host of an `Origin` header (`https://ops.example.com`), or undefined when it names none (`null`). */
function originHost(origin: string): RequestHost | undefined {
  try {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    return { name: url.hostname.toLowerCase(), port: url.port };
  } catch {
    return undefined;
  }
}

/** Methods that change nothing: their `Origin` is not checked. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses a token that cannot protect the console: blank, or beginning or
 * ending with spaces (a header's value is read without them, so no request
 * could carry it); and, when `beyond` says why the console answers beyond
 * the loopback, shorter than {@link CONSOLE_MIN_TOKEN_LENGTH}. `source` names
 * where the token came from. Throws an {@link InvalidOptionsError}; the
 * message never shows the token.
 * @internal
 */
export function checkConsoleToken(token: string | undefined, beyond: string | undefined, source = 'token'): void {
  if (token === undefined) return;
  if (token.trim() === '') throw new InvalidOptionsError(`the console's token (${source}) is blank`);
  if (token.trim() !== token) throw new InvalidOptionsError(`the console's token (${source}) begins or ends with spaces: no request header could carry it`);
  if (beyond !== undefined && token.length < CONSOLE_MIN_TOKEN_LENGTH) {
    throw new InvalidOptionsError(
      `${beyond} needs a token of at least ${CONSOLE_MIN_TOKEN_LENGTH} characters; the one given (${source}) has ${token.length}`,
    );
  }
}

function sameToken(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

function rowView(r: RetryRow): RowView {
  return {
    ...r,
    nextAttemptAt: r.nextAttemptAt ? r.nextAttemptAt.toISOString() : null,
    firstFailedAt: r.firstFailedAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
  };
}

/** The delays' labels (`5s`), refusing what is not a delay. */
function labels(delays: readonly Delay[]): string[] {
  return delays.map((d) => delayLabel(d));
}

/**
 * The console. Mount {@link handle} under a path of a service, or serve it
 * with {@link startConsole}; {@link close} stops its jobs (what they had not
 * yet moved stays parked). However it is served, it answers only requests
 * addressed to the loopback or to its `allowedHosts`, and acts for no page
 * of another `Origin`.
 *
 * ```ts
 * const ui = new RabbitRetryConsole({
 *   client: rr,
 *   basePath: '/ops/rabbit-retry',
 *   allowedHosts: ['ops.example.com'], // besides the loopback
 *   token: process.env.RABBIT_RETRY_UI_TOKEN, // 16 characters or more
 * });
 * app.use('/ops/rabbit-retry', ui.handle); // Express; Fastify: reply.hijack(), then ui.handle(request.raw, reply.raw)
 * ```
 */
export class RabbitRetryConsole {
  /** The handler: serves the page (`<path>/`) and its API (`<path>/api/…`). */
  readonly handle: ConsoleHandler;
  /** Whether the operator must give the page the token (it was set); otherwise the page carries it. */
  readonly tokenRequired: boolean;

  private readonly client: RabbitRetry;
  readonly #token: string;
  readonly #management?: ManagementTarget;
  private readonly named: { queue: string; delays: string[] }[];
  private readonly scanLimit: number;
  private readonly ratePerSec: number;
  private readonly basePath: string;
  private readonly allowedHosts: readonly AllowedHost[];
  private readonly order = new KeyedQueue();
  private readonly jobs = new Jobs(this.order);
  private readonly groupings = new Map<string, { grouping: Grouping; jobsFrom: number; stale: boolean }>();
  private readonly grouping = new Map<string, Promise<GroupsAnswer>>();
  private managementStatus: ManagementStatus;
  private managementNames: string[] = [];
  private managementAt = 0;
  private managementAsk?: Promise<void>;
  private depths = new Map<string, QueueView>();
  private depthsAt = 0;
  private depthsAsk?: Promise<void>;
  private table: { view: TableView | null; error: string | null; at: number } = { view: null, error: null, at: 0 };
  private tableAsk?: Promise<void>;
  private closed = false;
  /** Aborted by {@link close}: readings of the parked queues stop taking messages. */
  readonly #closing = new AbortController();

  constructor(options: ConsoleOptions) {
    checkObject('console options', options, 'an object such as { client }');
    checkKeys('RabbitRetryConsole', options, CONSOLE_OPTION_KEYS);
    if (options.client === null || typeof options.client !== 'object' || typeof options.client.parked !== 'function') {
      throw new InvalidOptionsError('client must be a connected RabbitRetry client');
    }
    this.client = options.client;
    if (options.queues !== undefined && (!Array.isArray(options.queues) || options.queues.some((q) => typeof q !== 'string' || q === ''))) {
      throw new InvalidOptionsError('queues must be an array of work queue names');
    }
    const delays = labels(options.delays ?? DEFAULT_DELAYS);
    this.named = (options.queues ?? []).map((queue) => ({ queue, delays }));
    this.scanLimit = options.scanLimit ?? 10_000;
    if (!Number.isInteger(this.scanLimit) || this.scanLimit < 1) {
      throw new InvalidOptionsError(`scanLimit must be a whole number of at least 1, got ${String(options.scanLimit)}`);
    }
    this.ratePerSec = options.ratePerSec ?? 20;
    if (typeof this.ratePerSec !== 'number' || !(this.ratePerSec > 0) || !Number.isFinite(this.ratePerSec)) {
      throw new InvalidOptionsError(`ratePerSec must be a positive number, got ${String(options.ratePerSec)}`);
    }
    this.allowedHosts = allowedHostsOf(options.allowedHosts);
    checkString('token', options.token, { nonEmpty: true });
    const token = options.token ?? (process.env[CONSOLE_TOKEN_ENV] || undefined);
    const beyond = this.allowedHosts.filter((h) => !isLoopbackName(h.name));
    checkConsoleToken(
      token,
      beyond.length > 0 ? `answering ${beyond.map(hostText).join(', ')} (allowedHosts beyond the loopback)` : undefined,
      options.token === undefined ? CONSOLE_TOKEN_ENV : 'token',
    );
    this.tokenRequired = token !== undefined;
    this.#token = token ?? randomBytes(24).toString('hex');
    checkString('basePath', options.basePath);
    this.basePath = (options.basePath ?? '').replace(/\/+$/, '');
    if (this.basePath !== '' && !this.basePath.startsWith('/')) this.basePath = `/${this.basePath}`;
    if (options.management === false) {
      this.managementStatus = { state: 'off', detail: 'not asked' };
    } else {
      if (options.management !== undefined && typeof options.management !== 'string') {
        throw new InvalidOptionsError('management must be a URL such as http://user:password@host:15672, or false');
      }
      this.#management = managementTarget(brokerUrlsOf(this.client)[0], options.management);
      this.managementStatus = this.#management
        ? { state: 'unavailable', detail: `${this.#management.base}: not asked yet` }
        : { state: 'off', detail: 'no broker URL to derive it from' };
    }
    this.handle = (req, res) => {
      void this.serve(req, res);
    };
  }

  /**
   * Stops every replay and purge and waits for them to end, which takes no
   * longer than the broker's answer to the move under way: their waits end
   * at once, they take no message more, and what they had not moved stays
   * parked, in its place. Resolves to the jobs it stopped, as they ended
   * (`done` moved, `left` in the parked queue). Readings of the parked
   * queues under way stop too, and the console takes no new action.
   */
  async close(): Promise<JobView[]> {
    this.closed = true;
    this.#closing.abort();
    return this.jobs.stopAll();
  }

  // ---------------------------------------------------------------------------
  // HTTP

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await this.route(req, res);
    } catch (err) {
      this.fail(res, err);
    }
  }

  private fail(res: ServerResponse, err: unknown): void {
    let status = 500;
    let code: ConsoleErrorCode = 'INTERNAL';
    let message = 'the console failed';
    if (err instanceof HttpError) {
      status = err.status;
      code = err.code;
      message = err.message;
    } else if (err instanceof RabbitRetryError) {
      status = statusOf(err.code);
      code = err.code;
      message = err.message;
    } else if (err instanceof Error) {
      message = err.message;
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    this.json(res, status, { error: { code, message } });
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    const data = Buffer.from(JSON.stringify(body), 'utf8');
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': data.length,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    });
    res.end(data);
  }

  /** The path under the console of `req`, and the full path it came as. */
  private pathOf(req: IncomingMessage): { sub: string; full: string; query: URLSearchParams } {
    const original = (req as IncomingMessage & { originalUrl?: unknown }).originalUrl;
    const urls = [typeof original === 'string' ? original : undefined, req.url].filter((u): u is string => typeof u === 'string');
    const parse = (u: string) => new URL(u, 'http://console.invalid');
    const full = parse(urls[0] ?? '/');
    if (this.basePath !== '') {
      for (const u of urls) {
        const p = parse(u);
        if (p.pathname === this.basePath || p.pathname.startsWith(`${this.basePath}/`)) {
          return { sub: p.pathname.slice(this.basePath.length), full: p.pathname, query: p.searchParams };
        }
      }
    }
    const own = parse(req.url ?? '/');
    return { sub: own.pathname, full: full.pathname, query: own.searchParams };
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const host = splitHost(String(req.headers.host ?? ''));
    if (!host || !answers(this.allowedHosts, host)) {
      throw new HttpError(403, 'FORBIDDEN_HOST', 'the console does not answer to this Host: it answers 127.0.0.1, localhost, [::1] and its allowedHosts');
    }
    const method = req.method ?? 'GET';
    const origin = req.headers.origin;
    if (!SAFE_METHODS.has(method) && origin !== undefined) {
      const from = originHost(origin);
      if (!from || !answers(this.allowedHosts, from)) {
        throw new HttpError(403, 'FORBIDDEN_ORIGIN', 'the console does not act for a page of this Origin: only for the loopback and its allowedHosts');
      }
    }
    const { sub, full, query } = this.pathOf(req);
    if (sub === '' || sub === '/' || sub === '/index.html') {
      if (!full.endsWith('/') && sub !== '/index.html') {
        res.writeHead(308, { location: `${full}/`, 'cache-control': 'no-store' });
        res.end();
        return;
      }
      return this.page(res, method);
    }
    if (sub === '/console.js' || sub === '/console.css') return this.staticAsset(res, method, sub === '/console.js' ? 'console.js' : 'console.css');
    if (!sub.startsWith('/api/')) throw new HttpError(404, 'NOT_FOUND', `nothing at ${sub}`);
    this.authorize(req);
    const parts = sub
      .slice('/api/'.length)
      .split('/')
      .map((p) => {
        try {
          return decodeURIComponent(p);
        } catch {
          throw new HttpError(400, 'BAD_REQUEST', 'a path segment is not valid percent-encoding');
        }
      });
    return this.api(req, res, method, parts, query);
  }

  private page(res: ServerResponse, method: string): void {
    if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'the page is read with GET');
    const meta = this.tokenRequired ? '' : `<meta name="rabbit-retry-token" content="${this.#token}">`;
    let text = asset('index.html').toString('utf8').replace('<!--token-->', meta);
    if (this.basePath !== '') {
      // Under a known path the assets are named from the root, whether or not the page's URL ends with a slash.
      const at = attribute(this.basePath);
      text = text.replace('href="console.css"', `href="${at}/console.css"`).replace('src="console.js"', `src="${at}/console.js"`);
    }
    const html = Buffer.from(text, 'utf8');
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-length': html.length,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'content-security-policy':
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    });
    res.end(method === 'HEAD' ? undefined : html);
  }

  private staticAsset(res: ServerResponse, method: string, name: 'console.js' | 'console.css'): void {
    if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'assets are read with GET');
    const body = asset(name);
    res.writeHead(200, {
      'content-type': name.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8',
      'content-length': body.length,
      'cache-control': 'no-cache',
      'x-content-type-options': 'nosniff',
    });
    res.end(method === 'HEAD' ? undefined : body);
  }

  private authorize(req: IncomingMessage): void {
    const given = req.headers[CONSOLE_TOKEN_HEADER];
    if (typeof given !== 'string' || !sameToken(given, this.#token)) {
      throw new HttpError(401, 'UNAUTHORIZED', `this request needs the console's token in the ${CONSOLE_TOKEN_HEADER} header`);
    }
  }

  private async api(req: IncomingMessage, res: ServerResponse, method: string, parts: string[], query: URLSearchParams): Promise<void> {
    const [first, second, third, fourth, fifth] = parts;
    const get = method === 'GET';
    const post = method === 'POST';
    if (parts.length === 1 && first === 'state') {
      if (!get) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'read the state with GET');
      return this.json(res, 200, await this.state());
    }
    if (first === 'queues' && second !== undefined) {
      const queue = await this.knownQueue(second);
      if (parts.length === 3 && third === 'groups') {
        if (!get) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'read the groups with GET');
        return this.json(res, 200, await this.groups(queue, query.get('refresh') === '1'));
      }
      if (parts.length === 5 && third === 'groups' && fifth === 'messages') {
        if (!get) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'read the messages with GET');
        const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 20) || 20));
        return this.json(res, 200, await this.groupMessages(queue, fourth, limit));
      }
      if (parts.length === 3 && (third === 'replay' || third === 'purge')) {
        if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${third} with POST`);
        const body = await readJson(req);
        const job = third === 'replay' ? this.replay(queue, body) : this.purge(queue, body);
        return this.json(res, 202, { job });
      }
    }
    if (first === 'jobs' && parts.length === 3 && third === 'stop') {
      if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'stop a job with POST');
      await readJson(req);
      return this.json(res, 200, { stopped: this.jobs.stop(Number(second)) });
    }
    if (first === 'table' && parts.length === 2 && (second === 'pause' || second === 'resume' || second === 'retry-now')) {
      if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${second} with POST`);
      const body = await readJson(req);
      return this.json(res, 200, { rows: await this.tableAction(second, body) });
    }
    throw new HttpError(404, 'NOT_FOUND', `no API at ${parts.join('/')}`);
  }

  // ---------------------------------------------------------------------------
  // Queues and depths

  /**
   * Asks the management API again when its answer is older than 10 s (30 s
   * after a failure): the first time it waits for the answer, later it uses
   * the last one while the next is on its way.
   */
  private async refreshManagement(): Promise<void> {
    const target = this.#management;
    if (!target) return;
    const first = this.managementAt === 0;
    const age = Date.now() - this.managementAt;
    if (age < (this.managementStatus.state === 'ok' ? 10_000 : 30_000)) return;
    this.managementAsk ??= managementQueueNames(target)
      .then(
        (names) => {
          this.managementNames = names;
          this.managementStatus = { state: 'ok', detail: `${target.base}: ${names.length} queue(s) in vhost '${target.vhost}'` };
        },
        (err: unknown) => {
          this.managementNames = [];
          this.managementStatus = { state: 'unavailable', detail: `${target.base}: ${reasonOf(err)}` };
        },
      )
      .finally(() => {
        this.managementAt = Date.now();
        this.managementAsk = undefined;
      });
    if (first) await this.managementAsk;
  }

  /** Every work queue the console knows of. */
  private async knownQueues(): Promise<KnownQueue[]> {
    await this.refreshManagement();
    const consumed = this.client.consumedQueues();
    return mergeQueues([
      { source: 'consumer', queues: consumed },
      { source: 'named', queues: this.named },
      { source: 'management', queues: workQueuesOf(this.managementNames) },
    ]);
  }

  private async knownQueue(name: string): Promise<string> {
    if (!(await this.knownQueues()).some((q) => q.queue === name)) {
      throw new HttpError(404, 'NOT_FOUND', `the console does not know a work queue '${name}'`);
    }
    return name;
  }

  private async refreshDepths(queues: KnownQueue[]): Promise<void> {
    if (Date.now() - this.depthsAt < FRESH_MS && queues.every((q) => this.depths.has(q.queue))) return;
    this.depthsAsk ??= (async () => {
      const next = new Map<string, QueueView>();
      const info = (name: string) => this.client.queueInfo(name);
      for (let i = 0; i < queues.length; i += 8) {
        await Promise.all(
          queues.slice(i, i + 8).map(async (q) => {
            const parkedQueue = parkedQueueName(q.queue);
            const reading = this.order.busy(q.queue) && !this.jobs.active(q.queue);
            const [work, read, ...retry] = await Promise.all([
              info(q.queue),
              // A reading holds the parked messages unacked for a moment: keep the depth read before it.
              reading && this.depths.has(q.queue) ? Promise.resolve(undefined) : info(parkedQueue),
              ...q.delays.map((d) => info(`${q.queue}.retry.${d}`)),
            ]);
            // A job holds up to the queue's depth unacked while it works: what is parked is what it had not yet moved.
            const job = this.jobs.running(q.queue);
            const parked = read && job?.parkedAtStart !== undefined ? { ...read, messages: Math.max(read.messages, job.parkedAtStart - job.done) } : read;
            next.set(q.queue, {
              queue: q.queue,
              sources: q.sources,
              work,
              retry: q.delays.flatMap((d, j) => (retry[j] ? [{ delay: d, queue: `${q.queue}.retry.${d}`, messages: retry[j].messages }] : [])),
              parkedQueue,
              parked: parked === undefined ? (this.depths.get(q.queue)?.parked ?? null) : (parked?.messages ?? null),
              tableRows: null,
              busy: false,
            });
          }),
        );
      }
      this.depths = next;
      this.depthsAt = Date.now();
    })().finally(() => {
      this.depthsAsk = undefined;
    });
    await this.depthsAsk;
  }

  private retryTable(): RetryTable | undefined {
    try {
      return this.client.retryTable;
    } catch {
      return undefined;
    }
  }

  private async refreshTable(): Promise<void> {
    const table = this.retryTable();
    if (!table || Date.now() - this.table.at < FRESH_MS) return;
    this.tableAsk ??= (async () => {
      try {
        const [stats, rows] = await Promise.all([table.stats(), table.list({ limit: TABLE_READ })]);
        const byDependency = new Map<string | null, DependencyView>();
        for (const d of stats.byDependency) {
          byDependency.set(d.dependency, { dependency: d.dependency, rows: d.rows, paused: 0, held: 0, due: 0, pauseInForce: false });
        }
        const byQueue: Record<string, number> = {};
        const now = Date.now();
        for (const r of rows) {
          byQueue[r.queue] = (byQueue[r.queue] ?? 0) + 1;
          let d = byDependency.get(r.dependency);
          if (!d) {
            d = { dependency: r.dependency, rows: 0, paused: 0, held: 0, due: 0, pauseInForce: false };
            byDependency.set(r.dependency, d);
          }
          if (r.paused) d.paused++;
          if (r.nextAttemptAt === null) d.held++;
          else if (!r.paused && r.nextAttemptAt.getTime() <= now) d.due++;
        }
        const dependencies = [...byDependency.values()].sort((a, b) => b.rows - a.rows);
        await Promise.all(
          dependencies.map(async (d) => {
            if (d.dependency !== null) d.pauseInForce = await table.isPaused({ dependency: d.dependency });
          }),
        );
        this.table = {
          view: {
            rows: stats.rows,
            paused: stats.paused,
            held: stats.held,
            due: stats.due,
            oldestDueAgeMs: stats.oldestDueAgeMs,
            read: rows.length,
            truncated: stats.rows > rows.length,
            dependencies,
            byQueue,
            oldest: rows.slice(0, 25).map(rowView),
          },
          error: null,
          at: Date.now(),
        };
      } catch (err) {
        this.table = { view: this.table.view, error: reasonOf(err), at: Date.now() };
      }
    })().finally(() => {
      this.tableAsk = undefined;
    });
    await this.tableAsk;
  }

  /** Everything the page polls. */
  private async state(): Promise<ConsoleState> {
    const queues = await this.knownQueues();
    await Promise.all([this.refreshDepths(queues), this.refreshTable()]);
    const table = this.table.view;
    return {
      broker: this.client.url,
      management: this.managementStatus,
      scanLimit: this.scanLimit,
      ratePerSec: this.ratePerSec,
      queues: queues.map((q) => {
        const d = this.depths.get(q.queue);
        return {
          queue: q.queue,
          sources: q.sources,
          work: d?.work ?? null,
          retry: d?.retry ?? [],
          parkedQueue: parkedQueueName(q.queue),
          parked: d?.parked ?? null,
          tableRows: table ? (table.byQueue[q.queue] ?? 0) : null,
          busy: this.jobs.active(q.queue),
        };
      }),
      jobs: this.jobs.views(),
      table,
      tableError: this.retryTable() ? this.table.error : null,
      at: new Date().toISOString(),
    };
  }

  // ---------------------------------------------------------------------------
  // Groups and messages

  /** The queue's grouping: the last one, or a new reading when asked, when there is none, or after a job. */
  private async groups(queue: string, refresh: boolean): Promise<GroupsAnswer> {
    const cached = this.groupings.get(queue);
    const busy = this.jobs.active(queue);
    if (busy || (cached && !refresh && !cached.stale)) {
      return { grouping: cached?.grouping ?? null, jobsFrom: cached?.jobsFrom ?? this.jobs.nextJobId, busy };
    }
    let reading = this.grouping.get(queue);
    if (!reading) {
      reading = this.order
        .run(queue, async () => {
          const jobsFrom = this.jobs.nextJobId;
          const grouping = await groupParked(this.client.parked(queue), this.scanLimit, this.#closing.signal);
          this.checkOpen();
          this.groupings.set(queue, { grouping, jobsFrom, stale: false });
          return { grouping, jobsFrom, busy: false };
        })
        .finally(() => this.grouping.delete(queue));
      this.grouping.set(queue, reading);
    }
    return reading;
  }

  /** Up to `limit` messages of group `key`, in full, read in the queue's turn. */
  private async groupMessages(queue: string, key: string, limit: number): Promise<{ messages: MessageDetail[]; scanned: number; truncated: boolean }> {
    checkKey(key);
    if (this.jobs.active(queue)) {
      throw new HttpError(409, 'BUSY', `a replay or purge of '${queue}' is running; its messages open when it ends`);
    }
    return this.order.run(queue, async () => {
      const messages: MessageDetail[] = [];
      const parked = this.client.parked(queue);
      const depth = await parked.count();
      const scanned = await parked.scan(this.scanLimit, (m, position) => {
        if (fingerprint(m).key === key) messages.push(detailOf(m, position));
        return messages.length < limit && !this.#closing.signal.aborted;
      });
      this.checkOpen();
      return { messages, scanned, truncated: messages.length < limit && depth > scanned };
    });
  }

  // ---------------------------------------------------------------------------
  // Actions

  private label(queue: string, scope: JobScope, key: string | null): string {
    if (scope === 'queue') return `every parked message of ${queue}`;
    if (scope === 'message') return `message ${key}`;
    const g = this.groupings.get(queue)?.grouping.groups.find((x) => x.key === key);
    return g ? `${g.errorName}: ${g.message}` : `group ${key}`;
  }

  /** What the job selects: the whole queue, a group, or a message. */
  private matcher(scope: JobScope, key: string | null): (m: ParkedMessage) => boolean {
    if (scope === 'group') return (m) => fingerprint(m).key === key;
    if (scope === 'message') return (m) => messageKey(m) === key;
    return () => true;
  }

  private checkOpen(): void {
    if (this.closed) throw new HttpError(503, 'CLOSED', 'the console is closing');
  }

  private replay(queue: string, body: Record<string, unknown>): JobView {
    this.checkOpen();
    const { scope, key, count } = actionOf(body, ['queue', 'group', 'message']);
    const rate = body.ratePerSec ?? this.ratePerSec;
    if (typeof rate !== 'number' || !(rate > 0) || rate > 10_000) {
      throw new HttpError(400, 'BAD_REQUEST', 'ratePerSec must be a number above 0 and at most 10000');
    }
    return this.run('replay', queue, scope, key, count, rate);
  }

  private purge(queue: string, body: Record<string, unknown>): JobView {
    this.checkOpen();
    const { scope, key, count } = actionOf(body, ['group', 'message']);
    return this.run('purge', queue, scope, key, count, null);
  }

  /**
   * Starts a job that replays or purges the parked messages of `queue` that
   * `scope` and `key` select, at most `count`, counting each by its group.
   * Once it ends, it reads how many messages the parked queue holds.
   */
  private run(kind: 'replay' | 'purge', queue: string, scope: JobScope, key: string | null, count: number, ratePerSec: number | null): JobView {
    const match = this.matcher(scope, key);
    const job = this.jobs.start({ kind, queue, scope, key, label: this.label(queue, scope, key), total: count, ratePerSec }, async (j: Job) => {
      try {
        const parked = this.client.parked(queue);
        j.parkedAtStart = await parked.count();
        await parked.move({
          kind,
          limit: count,
          depth: j.parkedAtStart,
          ratePerSec,
          signal: j.signal,
          select: (m) => {
            if (!match(m)) return false;
            if (scope === 'message') j.label = `message ${m.properties.messageId ?? key}`;
            return true;
          },
          onMoved: (m, moved, skipped) => {
            const group = fingerprint(m).key;
            j.done = moved;
            j.skipped = skipped;
            j.byGroup[group] = (j.byGroup[group] ?? 0) + 1;
          },
        });
      } finally {
        j.left = await this.depthAfter(queue);
        this.invalidate(queue);
      }
    });
    return this.jobs.view(job.id) as JobView;
  }

  /** The parked queue's depth after a job, or null when it cannot be read in time. */
  private async depthAfter(queue: string): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const late = new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), DEPTH_AFTER_MS);
      });
      return await Promise.race([this.client.parked(queue).count(), late]);
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The next reading of `queue` reads it anew. */
  private invalidate(queue: string): void {
    const cached = this.groupings.get(queue);
    if (cached) cached.stale = true;
    this.depthsAt = 0;
  }

  private async tableAction(action: 'pause' | 'resume' | 'retry-now', body: Record<string, unknown>): Promise<number> {
    this.checkOpen();
    const table = this.retryTable();
    if (!table) throw new HttpError(404, 'NO_RETRY_TABLE', 'the console has no retry table: connect the client with { retryTable: { url } }');
    const { dependency, id } = body;
    this.table.at = 0;
    if (action === 'retry-now' && id !== undefined) {
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 1) throw new HttpError(400, 'BAD_REQUEST', 'id must be a row id');
      return (await table.retryNow(id)) ? 1 : 0;
    }
    if (typeof dependency !== 'string' || dependency === '') {
      throw new HttpError(400, 'BAD_REQUEST', action === 'retry-now' ? 'give a dependency or a row id' : 'give a dependency');
    }
    if (action === 'pause') return table.pause({ dependency });
    if (action === 'resume') return table.resume({ dependency });
    let n = 0;
    for (const r of await table.list({ dependency, limit: TABLE_READ })) {
      if (this.closed) break;
      if (await table.retryNow(r.id)) n++;
    }
    return n;
  }
}

/** `s` as the value of a double-quoted HTML attribute. */
function attribute(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Checks a group's or a message's key. */
function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || !/^[0-9a-f]{16,24}$/.test(key)) throw new HttpError(400, 'BAD_REQUEST', 'key must be a group or message key');
}

/** The scope, key and confirmed count of an action's body. */
function actionOf(body: Record<string, unknown>, scopes: JobScope[]): { scope: JobScope; key: string | null; count: number } {
  const scope = body.scope;
  if (typeof scope !== 'string' || !scopes.includes(scope as JobScope)) {
    throw new HttpError(400, 'BAD_REQUEST', `scope must be one of ${scopes.join(', ')}`);
  }
  let key: string | null = null;
  if (scope !== 'queue') {
    checkKey(body.key);
    key = body.key;
  }
  const count = body.count;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1) {
    throw new HttpError(400, 'BAD_REQUEST', 'count must be the number of messages the operator confirmed (a whole number of at least 1)');
  }
  return { scope: scope as JobScope, key, count: scope === 'message' ? 1 : count };
}

/** The most a request body may hold, in bytes. */
const MAX_BODY = 16 * 1024;

/** The request's JSON object body (already parsed by a framework, or read here). */
async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const type = String(req.headers['content-type'] ?? '');
  if (!/^application\/json\b/i.test(type)) throw new HttpError(400, 'BAD_REQUEST', 'send the body as application/json');
  const parsed = (req as IncomingMessage & { body?: unknown }).body;
  let value: unknown = parsed;
  if (parsed === undefined || Buffer.isBuffer(parsed) || typeof parsed === 'string') {
    let text: string;
    if (parsed !== undefined) text = String(parsed);
    else {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of req) {
        size += (chunk as Buffer).length;
        if (size > MAX_BODY) throw new HttpError(400, 'BAD_REQUEST', 'the body is too large');
        chunks.push(chunk as Buffer);
      }
      text = Buffer.concat(chunks).toString('utf8');
    }
    try {
      value = text.trim() === '' ? {} : JSON.parse(text);
    } catch {
      throw new HttpError(400, 'BAD_REQUEST', 'the body is not valid JSON');
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new HttpError(400, 'BAD_REQUEST', 'the body must be a JSON object');
  return value as Record<string, unknown>;
}
