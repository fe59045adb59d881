import { InvalidOptionsError } from './errors';
import type { Message } from './message';
import type { MeterProviderLike } from './metrics';

/**
 * A delay: a positive whole number with a unit of `ms`, `s`, `m` or `h`
 * (`'500ms'`, `'5s'`, `'90s'`, `'1m'`, `'2h'`), or a number of milliseconds
 * (`500`, or the string `'500'`). Spellings such as `'5 seconds'`, `'5sec'` or
 * `'5d'` do not compile; what the type cannot tell apart (`'1.5s'`, `'0s'`,
 * `'-5s'`) is refused at run time with an {@link InvalidOptionsError}.
 */
export type Delay = number | `${number}` | `${number}ms` | `${number}s` | `${number}m` | `${number}h`;

/**
 * Every key of `T` mapped to `true`: the type of a table of an options
 * object's keys, written with `satisfies` so that a field added to the
 * interface without an entry in its table, or an entry that is not a field,
 * fails to compile.
 * @internal
 */
export type OptionKeys<T> = Record<keyof T, true>;

/** The number of single-character edits (insert, delete, substitute) between `a` and `b`, or `max + 1` when it is above `max`. */
function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const d = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(d);
      best = Math.min(best, d);
    }
    if (best > max) return max + 1;
    prev = row;
  }
  return prev[b.length];
}

/**
 * The known key `key` was probably meant to be: the same letters in another
 * case, else the closest key at most 2 edits away (and fewer edits than
 * `key` has characters, so that a short key is not matched to any other).
 */
function nearestKey(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const sameLetters = known.find((k) => k.toLowerCase() === lower);
  if (sameLetters !== undefined) return sameLetters;
  let nearest: string | undefined;
  let nearestDistance = 3;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase(), 2);
    if (d < nearestDistance && d < key.length) {
      nearest = k;
      nearestDistance = d;
    }
  }
  return nearest;
}

/** A key as a message shows it: in backticks, cut when it is long. */
function showKey(key: string): string {
  return `\`${key.length > 64 ? `${key.slice(0, 64)}…` : key}\``;
}

/**
 * Refuses an options object with a key that is not one of `known`, with an
 * {@link InvalidOptionsError} naming the key, `where` it is, and the known
 * key it was probably meant to be (or the known keys when none is close):
 * "`delay` is not an option of onFailure; did you mean `delays`?". Only key
 * names appear in the message, never a value. `hints` gives a key's advice
 * instead of the suggestion.
 * @internal
 */
export function checkKeys(where: string, obj: object, known: Readonly<Record<string, true>>, hints: Readonly<Record<string, string>> = {}): void {
  let keys: string[];
  try {
    keys = Object.keys(obj);
  } catch {
    throw new InvalidOptionsError(`the keys of ${where} could not be read`);
  }
  const unknown = keys.filter((k) => !Object.prototype.hasOwnProperty.call(known, k));
  if (unknown.length === 0) return;
  const [key, ...others] = unknown;
  const names = Object.keys(known);
  const near = nearestKey(key, names);
  const hint = Object.prototype.hasOwnProperty.call(hints, key) ? hints[key] : undefined;
  let message = `${showKey(key)} is not an option of ${where}`;
  if (hint !== undefined) message += `; ${hint}`;
  else if (near !== undefined) message += `; did you mean ${showKey(near)}?`;
  else message += `; its options are ${names.map(showKey).join(', ')}`;
  if (others.length > 0) message += ` (also not an option: ${others.map(showKey).join(', ')})`;
  throw new InvalidOptionsError(message);
}

/** How to connect to the broker. */
export interface ConnectOptions {
  /**
   * `amqp://user:password@host:5672/vhost`.
   * @default process.env.AMQP_URL, else `amqp://guest:guest@127.0.0.1:5672`
   */
  url?: string;
  /** The name the broker's tools show for this connection. */
  connectionName?: string;
  /** Heartbeat in seconds. @default the broker's (60) */
  heartbeat?: number;
  /** Milliseconds to wait for the broker before `connect` rejects. @default 10000 */
  connectTimeoutMs?: number;
  /** Milliseconds to wait for a publisher confirm before a publish counts as failed. @default 30000 */
  confirmTimeoutMs?: number;
  /** TLS settings for `amqps://` URLs. */
  tls?: TlsOptions;
  /** The retry table in PostgreSQL, for `onFailure.table`. */
  retryTable?: RetryTableOptions;
  /** Where warnings go when nobody listens for a consumer's `error` event. @default console */
  logger?: Logger;
  /**
   * The OpenTelemetry meter provider for metrics.
   * @default the global one of `@opentelemetry/api` when installed; else no metrics
   */
  meterProvider?: MeterProviderLike;
}

/** The keys of {@link ConnectOptions}. @internal */
export const CONNECT_OPTION_KEYS = {
  url: true,
  connectionName: true,
  heartbeat: true,
  connectTimeoutMs: true,
  confirmTimeoutMs: true,
  tls: true,
  retryTable: true,
  logger: true,
  meterProvider: true,
} satisfies OptionKeys<ConnectOptions>;

/** Emitted once each time the parked queue's depth rises above the alert threshold. */
export interface ParkedAlert {
  /** The work queue. */
  queue: string;
  /** The parked queue. */
  parkedQueue: string;
  /** Messages in the parked queue at the check. */
  depth: number;
  /** The threshold it rose above. */
  threshold: number;
}

/** Emitted once each time the retry table's oldest due row grows older than the alert threshold. */
export interface RetryTableAlert {
  /** The work queue of the consumer that checked. */
  queue: string;
  /** Age in ms of the oldest row whose due time has passed. */
  oldestDueAgeMs: number;
  /** The threshold it passed. */
  threshold: number;
}

/** Checks the parked queue on a timer and alerts once each time its depth rises above a threshold. */
export interface AlertOptions {
  /** Alert when the parked queue holds more than this many messages. */
  parkedAbove?: number;
  /** Alert when the retry table's oldest due row is older than this many milliseconds (a stopped scheduler). */
  oldestDueAboveMs?: number;
  /** How often to check. @default '1m' */
  every?: Delay;
  /** Called on each crossing of `parkedAbove` (the consumer also emits `alert`). */
  onAlert?: (alert: ParkedAlert) => void;
  /** Called on each crossing of `oldestDueAboveMs` (the consumer also emits `tableAlert`). */
  onTableAlert?: (alert: RetryTableAlert) => void;
}

/** The keys of {@link AlertOptions}. */
const ALERT_OPTION_KEYS = {
  parkedAbove: true,
  oldestDueAboveMs: true,
  every: true,
  onAlert: true,
  onTableAlert: true,
} satisfies OptionKeys<AlertOptions>;

/** TLS settings for `amqps://` URLs. */
export interface TlsOptions {
  /** A PEM file of certificate authorities to trust (instead of the system's). */
  caFile?: string;
  /** Certificate authorities to trust, PEM. */
  ca?: string | Buffer;
  /** A PEM client certificate file, for brokers that authenticate clients by certificate. */
  certFile?: string;
  /** The PEM PKCS#8 private key file of `certFile`. */
  keyFile?: string;
}

/** The keys of {@link TlsOptions}. */
const TLS_OPTION_KEYS = { caFile: true, ca: true, certFile: true, keyFile: true } satisfies OptionKeys<TlsOptions>;

/** The part of a logger rabbit-retry uses. */
export interface Logger {
  /** Logs a warning. */
  warn(message: string): void;
  /** Logs an error. */
  error(message: string): void;
}

/** What to do when a handler throws. */
export interface OnFailureOptions {
  /**
   * One retry queue per delay, tried in order; after the last the message parks.
   * `[]` parks on the first failure.
   * @default ['5s', '1m', '10m']
   */
  delays?: readonly Delay[];
  /**
   * Whether an error is worth another attempt: `true` retries the message,
   * `false` parks it at once (`retry-reason: non-retryable`). It is called
   * synchronously and must return a boolean. Anything else it returns
   * (`undefined`, a number, a string, a Promise from an async function) parks
   * the message as non-retryable and logs a warning naming what it returned
   * (once per consumer for each kind of value); a returned Promise is not
   * awaited, and its rejection is ignored. A predicate that throws parks the
   * message too. A {@link NonRetryableError} always parks, whatever this says.
   * @default every error but a {@link NonRetryableError}
   */
  retryable?: (err: unknown, msg: Message) => boolean;
  /**
   * After the delays, store failures in the retry table (PostgreSQL, see
   * `ConnectOptions.retryTable`) instead of parking them: for failures that
   * wait on a person or a condition, not a clock. `delays: []` uses the table alone.
   */
  table?: TableRouteOptions;
}

/** The keys of {@link OnFailureOptions}. */
const ON_FAILURE_OPTION_KEYS = { delays: true, retryable: true, table: true } satisfies OptionKeys<OnFailureOptions>;

/** How failures go into the retry table. */
export interface TableRouteOptions {
  /** What the message waits on (a carrier, a service), for `pause`/`resume`/`pauseWhen`. */
  dependency?: (err: unknown, msg: Message) => string | undefined;
  /** Whose message it is, for `pause`/`resume`. */
  tenant?: (msg: Message) => string | undefined;
  /**
   * When the row is due: a Date, or `null` to wait for a person (`resume`,
   * `retryNow`). `attempt` is the attempt count the row carries.
   * @default one minute from now
   */
  nextAttemptAt?: (err: unknown, attempt: number) => Date | null;
  /** Attempts through the table before the message parks as exhausted. @default 10 */
  maxAttempts?: number;
}

/** The keys of {@link TableRouteOptions}. */
const TABLE_ROUTE_OPTION_KEYS = {
  dependency: true,
  tenant: true,
  nextAttemptAt: true,
  maxAttempts: true,
} satisfies OptionKeys<TableRouteOptions>;

/** The retry table: where failures that wait on a person or a condition are kept. */
export interface RetryTableOptions {
  /** `postgres://user:password@host:5432/database`; the table `message_retries` is created there. */
  url: string;
  /** The scheduler publishes at most this many due rows a second (per scheduler process). @default 50 */
  ratePerSec?: number;
  /** Whether this process runs a scheduler. Run it in every consumer process, or in one process of its own. @default true */
  scheduler?: boolean;
}

/** The keys of {@link RetryTableOptions}. */
const RETRY_TABLE_OPTION_KEYS = { url: true, ratePerSec: true, scheduler: true } satisfies OptionKeys<RetryTableOptions>;

/**
 * Queue arguments (`x-max-length`, `x-dead-letter-exchange`, `x-queue-mode`, …)
 * as RabbitMQ takes them in a queue declaration: strings, numbers (whole
 * numbers are sent as integers) and booleans.
 */
export type QueueArguments = Readonly<Record<string, string | number | boolean>>;

/** What a consumer consumes, and how. */
export interface ConsumeOptions {
  /** The work queue; declared durable if missing (see {@link ConsumeOptions.assertQueue}). */
  queue: string;
  /**
   * `false` consumes a work queue that exists as it is: it is checked (it must
   * exist) but never declared, so its arguments, whoever set them, stay as
   * they are. The retry and parked queues are still declared, and the exchange
   * and binding when given. With a quorum queue that rabbit-retry does not
   * declare, the broker's `x-delivery-limit` backstop is whatever the queue has.
   * @default true
   */
  assertQueue?: boolean;
  /**
   * Arguments added to the work queue's declaration, for a queue that exists
   * with arguments of its own (for example `{ 'x-max-length': 100000 }` set by
   * an operator, or a dead-letter exchange from an earlier setup). A queue
   * that exists with other arguments fails `consume` with a
   * TopologyMismatchError that names the argument and this option. Not
   * `x-queue-type` (see {@link ConsumeOptions.queueType}), nor, on quorum
   * queues, the dead-lettering that {@link ConsumeOptions.deliveryLimit} sets.
   */
  queueArguments?: QueueArguments;
  /**
   * Arguments added to every retry queue's declaration. Not the TTL or the
   * dead-lettering (the retry topology sets them), nor `x-expires`; a length
   * limit needs `'x-overflow': 'reject-publish'`, so that a full retry queue
   * refuses the republish (the original stays unacked) instead of dropping
   * its oldest message.
   */
  retryQueueArguments?: QueueArguments;
  /**
   * Arguments added to the parked queue's declaration. Not `x-expires` or
   * `x-message-ttl` (parked messages would vanish unread); a length limit needs
   * `'x-overflow': 'reject-publish'`.
   */
  parkedQueueArguments?: QueueArguments;
  /** An exchange to declare (durable) and bind the queue to. */
  exchange?: string;
  /** The exchange's type. @default 'topic' */
  exchangeType?: 'topic' | 'direct' | 'fanout' | 'headers';
  /** The binding key. @default the queue name */
  routingKey?: string;
  /** At most this many handlers in flight. @default 10 */
  prefetch?: number;
  /**
   * Queue type of the work, retry and parked queues. Quorum queues are
   * replicated; their retry queues dead-letter at-least-once.
   * @default 'classic'
   */
  queueType?: 'classic' | 'quorum';
  /**
   * Quorum queues only: after this many deliveries of one message that were
   * never settled (the process crashed on it), the message parks with
   * `retry-reason: delivery-limit` without calling the handler again. The
   * broker's own `x-delivery-limit` is set one above it, dead-lettering to the
   * parked queue, as a backstop.
   * @default 5
   */
  deliveryLimit?: number;
  /** What to do when the handler throws. */
  onFailure?: OnFailureOptions;
  /** Alert when the parked queue fills up. */
  alert?: AlertOptions;
  /** How the consumer reconnects after losing its channel or connection. */
  recovery?: RecoveryOptions;
  /**
   * A handler that has not settled its message after this many milliseconds
   * counts as stuck: the consumer emits `stuck` once for that delivery (or
   * logs a warning when nobody listens), `stats().stuck` counts it and
   * `health()` reports the consumer unhealthy until it settles.
   * @default 300000 (5 minutes)
   */
  stuckAfterMs?: number;
}

/** The keys of {@link ConsumeOptions}. @internal */
export const CONSUME_OPTION_KEYS = {
  queue: true,
  exchange: true,
  exchangeType: true,
  routingKey: true,
  prefetch: true,
  queueType: true,
  deliveryLimit: true,
  assertQueue: true,
  queueArguments: true,
  retryQueueArguments: true,
  parkedQueueArguments: true,
  onFailure: true,
  alert: true,
  recovery: true,
  stuckAfterMs: true,
} satisfies OptionKeys<ConsumeOptions>;

/** How long a handler may run before it counts as stuck: 5 minutes. */
export const DEFAULT_STUCK_AFTER_MS = 300_000;

/** Options of `Consumer.close` and `RabbitRetry.close`. */
export interface CloseOptions {
  /**
   * How long to wait for in-flight handlers. When it passes, the consumer's
   * channel closes anyway and the broker takes back, unacked, the messages of
   * the handlers still running (they are redelivered); what those handlers do
   * afterwards is dropped. `Infinity` waits for ever.
   * @default 30000
   */
  timeoutMs?: number;
}

/** The keys of {@link CloseOptions}. */
const CLOSE_OPTION_KEYS = { timeoutMs: true } satisfies OptionKeys<CloseOptions>;

/** How long `close` waits for in-flight handlers by default: 30 seconds. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 30_000;

/** Reconnecting after a lost channel or connection: exponential backoff with jitter. */
export interface RecoveryOptions {
  /** The first wait, in milliseconds. @default 500 */
  initialDelayMs?: number;
  /** The longest wait, in milliseconds. @default 30000 */
  maxDelayMs?: number;
  /**
   * Give up after this many tries: the consumer closes and emits `error`.
   * @default Infinity (never give up)
   */
  maxAttempts?: number;
  /**
   * How long one broker round trip of starting, recovering or stopping the
   * consumer (declare, channel open, qos, consume, cancel, ack, channel close)
   * may take before it counts as failed: a broker that stops answering cannot
   * hold recovery or `close()` for good.
   * @default 15000
   */
  stepTimeoutMs?: number;
}

/** The keys of {@link RecoveryOptions}. */
const RECOVERY_OPTION_KEYS = {
  initialDelayMs: true,
  maxDelayMs: true,
  maxAttempts: true,
  stepTimeoutMs: true,
} satisfies OptionKeys<RecoveryOptions>;

/** Default retry delays. */
export const DEFAULT_DELAYS: readonly Delay[] = ['5s', '1m', '10m'];

/** @internal */
export function delayStrings(delays: readonly Delay[] | undefined, option = 'onFailure.delays'): string[] {
  const list = delays ?? DEFAULT_DELAYS;
  if (!Array.isArray(list)) throw new InvalidOptionsError(`${option} must be an array such as ['5s', '1m']`);
  return list.map((d, i) => {
    if (typeof d === 'number') {
      if (!Number.isInteger(d) || d <= 0) {
        throw new InvalidOptionsError(`${option}[${i}] is ${d}: a number of milliseconds must be a positive whole number`);
      }
      return String(d);
    }
    if (typeof d !== 'string') {
      throw new InvalidOptionsError(`${option}[${i}] must be a string such as '5s' or a number of milliseconds`);
    }
    return d;
  });
}

/**
 * A value as an error message may show it: numbers and booleans as they are,
 * anything else by its kind only, since a string, an array or an object can
 * hold a secret (a URL with its password, a key).
 * @internal
 */
export function kindOf(v: unknown): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'undefined':
      return 'undefined';
    case 'number':
      return String(v);
    case 'boolean':
      return String(v);
    case 'string':
      return 'a string';
    case 'bigint':
      return 'a bigint';
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    default:
      try {
        if (Array.isArray(v)) return 'an array';
        if (Buffer.isBuffer(v)) return 'a Buffer';
        if (v instanceof Date) return 'a Date';
      } catch {
        // A proxy that refuses to be inspected is still an object.
      }
      return 'an object';
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** @internal */
export function checkObject(name: string, v: unknown, what = 'an object'): void {
  if (!isRecord(v)) throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
}

/** @internal */
export function checkString(name: string, v: unknown, opts: { optional?: boolean; nonEmpty?: boolean; what?: string } = {}): void {
  if (v === undefined && opts.optional !== false) return;
  const what = opts.what ?? (opts.nonEmpty ? 'a non-empty string' : 'a string');
  if (typeof v !== 'string') throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
  if (opts.nonEmpty && v.length === 0) throw new InvalidOptionsError(`${name} must be ${what}, got an empty string`);
}

/** @internal */
export function checkFunction(name: string, v: unknown, what = 'a function'): void {
  if (v !== undefined && typeof v !== 'function') throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
}

/** @internal */
export function checkBoolean(name: string, v: unknown): void {
  if (v !== undefined && typeof v !== 'boolean') throw new InvalidOptionsError(`${name} must be true or false, got ${kindOf(v)}`);
}

/** A whole number from `min` to `max` (optional). @internal */
export function checkWhole(name: string, v: unknown, min: number, max: number, what: string): void {
  if (v === undefined) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
  }
}

/** One of `allowed` (optional); a string that is none of them is not echoed. */
function checkOneOf(name: string, v: unknown, allowed: readonly string[]): void {
  if (v === undefined) return;
  if (typeof v !== 'string' || !allowed.includes(v)) {
    const list = allowed.map((a) => `'${a}'`);
    const choices = `${list.slice(0, -1).join(', ')} or ${list[list.length - 1]}`;
    throw new InvalidOptionsError(`${name} must be ${choices}, got ${typeof v === 'string' ? 'another string' : kindOf(v)}`);
  }
}

const U32 = 0xffffffff;

/** Checks every option of `RabbitRetry.connect` before anything reaches the native layer. @internal */
export function checkConnectOptions(o: ConnectOptions): void {
  checkObject('connect options', o, 'an object such as { url }');
  checkKeys('RabbitRetry.connect', o, CONNECT_OPTION_KEYS);
  checkString('url', o.url, { nonEmpty: true, what: "a non-empty string such as 'amqp://user:password@host:5672/vhost'" });
  checkString('connectionName', o.connectionName);
  checkWhole('heartbeat', o.heartbeat, 0, U32, 'a whole number of seconds');
  checkWhole('connectTimeoutMs', o.connectTimeoutMs, 0, U32, 'a whole number of milliseconds');
  checkWhole('confirmTimeoutMs', o.confirmTimeoutMs, 0, U32, 'a whole number of milliseconds');
  if (o.tls !== undefined) {
    checkObject('tls', o.tls);
    checkKeys('tls', o.tls, TLS_OPTION_KEYS);
    const t = o.tls;
    if (t.ca !== undefined && typeof t.ca !== 'string' && !Buffer.isBuffer(t.ca)) {
      throw new InvalidOptionsError(`tls.ca must be a string or a Buffer of PEM certificates, got ${kindOf(t.ca)}`);
    }
    for (const key of ['caFile', 'certFile', 'keyFile'] as const) checkString(`tls.${key}`, t[key], { what: 'a file path (a string)' });
  }
  if (o.retryTable !== undefined) {
    const what = "a PostgreSQL URL such as 'postgres://user@127.0.0.1:5432/app'";
    if (!isRecord(o.retryTable)) throw new InvalidOptionsError(`retryTable must be an object such as { url }, got ${kindOf(o.retryTable)}`);
    checkKeys('retryTable', o.retryTable, RETRY_TABLE_OPTION_KEYS);
    const t = o.retryTable;
    checkString('retryTable.url', t.url, { optional: false, nonEmpty: true, what });
    const rate = t.ratePerSec;
    if (rate !== undefined && (typeof rate !== 'number' || !Number.isFinite(rate) || rate <= 0)) {
      throw new InvalidOptionsError(`retryTable.ratePerSec must be a positive number of rows a second, got ${kindOf(rate)}`);
    }
    checkBoolean('retryTable.scheduler', t.scheduler);
  }
  if (o.logger !== undefined) {
    const l = o.logger as unknown;
    if (l === null || (typeof l !== 'object' && typeof l !== 'function')) {
      throw new InvalidOptionsError(`logger must be an object with warn(message) and error(message), got ${kindOf(l)}`);
    }
    const { warn, error } = l as Record<string, unknown>;
    checkFunction('logger.warn', warn, 'a function (message) => void');
    checkFunction('logger.error', error, 'a function (message) => void');
    if (warn === undefined || error === undefined) throw new InvalidOptionsError('logger must have both warn(message) and error(message)');
  }
  if (o.meterProvider !== undefined) {
    const m = o.meterProvider as unknown;
    if (m === null || typeof m !== 'object' || typeof (m as { getMeter?: unknown }).getMeter !== 'function') {
      throw new InvalidOptionsError(`meterProvider must be an OpenTelemetry MeterProvider (an object with getMeter()), got ${kindOf(m)}`);
    }
  }
}

/** @internal */
export function checkCloseOptions(o: CloseOptions | undefined): number {
  if (o === undefined) return DEFAULT_CLOSE_TIMEOUT_MS;
  checkObject('close options', o, 'an object such as { timeoutMs }');
  checkKeys('close', o, CLOSE_OPTION_KEYS);
  const t = o.timeoutMs;
  if (t === undefined) return DEFAULT_CLOSE_TIMEOUT_MS;
  if (t === Infinity) return t;
  checkWhole('timeoutMs', t, 0, Number.MAX_SAFE_INTEGER, 'a whole number of milliseconds (0 or more), or Infinity');
  return t;
}

/** Checks that `v`, given as the option `name`, is {@link QueueArguments}. */
function checkQueueArguments(name: string, v: unknown): void {
  if (v === undefined) return;
  checkObject(name, v, "an object of argument names to values, such as { 'x-max-length': 1000 }");
  for (const [key, value] of Object.entries(v as object)) {
    const ok = typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
    if (!ok) throw new InvalidOptionsError(`${name}['${key}'] must be a string, a finite number or a boolean, got ${kindOf(value)}`);
  }
}

/** @internal */
export function checkConsumeOptions(o: ConsumeOptions): void {
  if (!isRecord(o)) throw new InvalidOptionsError(`consume options must be an object with at least { queue }, got ${kindOf(o)}`);
  checkKeys('consume', o, CONSUME_OPTION_KEYS);
  checkString('queue', o.queue, { optional: false, nonEmpty: true, what: 'a non-empty string: the work queue to consume' });
  checkString('exchange', o.exchange);
  checkString('routingKey', o.routingKey);
  checkWhole('prefetch', o.prefetch, 1, 65535, 'a whole number from 1 to 65535');
  checkOneOf('queueType', o.queueType, ['classic', 'quorum']);
  checkOneOf('exchangeType', o.exchangeType, ['topic', 'direct', 'fanout', 'headers']);
  checkBoolean('assertQueue', o.assertQueue);
  for (const key of ['queueArguments', 'retryQueueArguments', 'parkedQueueArguments'] as const) {
    checkQueueArguments(key, o[key]);
  }
  if (o.deliveryLimit !== undefined) {
    checkWhole('deliveryLimit', o.deliveryLimit, 1, 0xfffffffe, 'a whole number of at least 1');
    if (o.queueType !== 'quorum') {
      throw new InvalidOptionsError("deliveryLimit needs queueType 'quorum': classic queues do not count deliveries");
    }
  }
  checkWhole('stuckAfterMs', o.stuckAfterMs, 1, 0x7fffffff, 'a whole number of milliseconds from 1 to 2147483647');
  if (o.alert !== undefined) {
    const a = o.alert as unknown;
    if (isRecord(a)) checkKeys('alert', a, ALERT_OPTION_KEYS);
    if (!isRecord(a) || (a.parkedAbove === undefined && a.oldestDueAboveMs === undefined)) {
      throw new InvalidOptionsError('alert needs parkedAbove (messages) or oldestDueAboveMs (milliseconds)');
    }
    checkWhole('alert.parkedAbove', a.parkedAbove, 0, Number.MAX_SAFE_INTEGER, 'a whole number (0 or more)');
    checkWhole('alert.oldestDueAboveMs', a.oldestDueAboveMs, 0, Number.MAX_SAFE_INTEGER, 'a whole number (0 or more)');
    if (a.every !== undefined && typeof a.every !== 'string' && typeof a.every !== 'number') {
      throw new InvalidOptionsError(`alert.every must be a delay such as '1m' or a number of milliseconds, got ${kindOf(a.every)}`);
    }
    checkFunction('alert.onAlert', a.onAlert);
    checkFunction('alert.onTableAlert', a.onTableAlert);
  }
  if (o.recovery !== undefined) {
    checkObject('recovery', o.recovery);
    checkKeys('recovery', o.recovery, RECOVERY_OPTION_KEYS);
    checkWhole('recovery.initialDelayMs', o.recovery.initialDelayMs, 1, U32, 'a whole number of milliseconds');
    checkWhole('recovery.maxDelayMs', o.recovery.maxDelayMs, 1, U32, 'a whole number of milliseconds');
    checkWhole('recovery.stepTimeoutMs', o.recovery.stepTimeoutMs, 1, U32, 'a whole number of milliseconds');
    const m = o.recovery.maxAttempts;
    if (m !== undefined && m !== Infinity) {
      checkWhole('recovery.maxAttempts', m, 1, Number.MAX_SAFE_INTEGER, 'a whole number of at least 1, or Infinity');
    }
  }
  if (o.onFailure !== undefined) {
    checkOnFailureKeys('onFailure', o.onFailure);
    const f = o.onFailure;
    if (f.delays !== undefined && !Array.isArray(f.delays)) {
      throw new InvalidOptionsError(`onFailure.delays must be an array such as ['5s', '1m'], got ${kindOf(f.delays)}`);
    }
    checkFunction('onFailure.retryable', f.retryable, 'a function (err, msg) => boolean');
    const t = f.table;
    if (t !== undefined) {
      for (const key of ['dependency', 'tenant', 'nextAttemptAt'] as const) checkFunction(`onFailure.table.${key}`, t[key]);
      checkWhole('onFailure.table.maxAttempts', t.maxAttempts, 1, U32, 'a whole number of at least 1');
    }
  }
}

/**
 * Checks that `f`, the {@link OnFailureOptions} at `path` (`onFailure`,
 * `@OnFailure`, `defaultOnFailure`), is an object of known keys, and so is its
 * `table`.
 * @internal
 */
export function checkOnFailureKeys(path: string, f: unknown): void {
  checkObject(path, f, 'an object such as { delays, retryable }');
  checkKeys(path, f as object, ON_FAILURE_OPTION_KEYS);
  const t = (f as OnFailureOptions).table;
  if (t !== undefined) {
    checkObject(`${path}.table`, t);
    checkKeys(`${path}.table`, t, TABLE_ROUTE_OPTION_KEYS);
  }
}
