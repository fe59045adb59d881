import { InvalidOptionsError } from './errors';
import type { Message } from './message';
import type { MeterProviderLike } from './metrics';

/** A delay: `'500ms'`, `'5s'`, `'1m'`, `'2h'`, or a number of milliseconds. */
export type Delay = string | number;

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

/** Checks the parked queue on a timer and alerts once each time its depth rises above a threshold. */
export interface AlertOptions {
  /** Alert when the parked queue holds more than this many messages. */
  parkedAbove?: number;
  /** Alert when the retry table's oldest due row is older than this many milliseconds (a stopped scheduler). */
  oldestDueAboveMs?: number;
  /** How often to check. @default '1m' */
  every?: Delay;
  /** Called on each crossing of `parkedAbove` (the consumer also emits `alert`). */
  onAlert?: (alert: import('./consumer').ParkedAlert) => void;
  /** Called on each crossing of `oldestDueAboveMs` (the consumer also emits `tableAlert`). */
  onTableAlert?: (alert: import('./consumer').RetryTableAlert) => void;
}

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
  delays?: Delay[];
  /**
   * Whether an error is worth another attempt; `false` parks the message at once.
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

/** The retry table: where failures that wait on a person or a condition are kept. */
export interface RetryTableOptions {
  /** `postgres://user:password@host:5432/database`; the table `message_retries` is created there. */
  url: string;
  /** The scheduler publishes at most this many due rows a second (per scheduler process). @default 50 */
  ratePerSec?: number;
  /** Whether this process runs a scheduler. Run it in every consumer process, or in one process of its own. @default true */
  scheduler?: boolean;
}

/** What a consumer consumes, and how. */
export interface ConsumeOptions {
  /** The work queue; declared durable if missing. */
  queue: string;
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
}

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
}

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

/** @internal */
export function checkConsumeOptions(o: ConsumeOptions): void {
  if (o === null || typeof o !== 'object') throw new InvalidOptionsError('consume options must be an object with at least { queue }');
  if (typeof o.queue !== 'string' || o.queue.length === 0) {
    throw new InvalidOptionsError('queue must be a non-empty string: the work queue to consume');
  }
  for (const key of ['exchange', 'routingKey'] as const) {
    if (o[key] !== undefined && typeof o[key] !== 'string') throw new InvalidOptionsError(`${key} must be a string`);
  }
  if (o.prefetch !== undefined && (!Number.isInteger(o.prefetch) || o.prefetch < 1 || o.prefetch > 65535)) {
    throw new InvalidOptionsError(`prefetch must be a whole number from 1 to 65535, got ${String(o.prefetch)}`);
  }
  if (o.queueType !== undefined && o.queueType !== 'classic' && o.queueType !== 'quorum') {
    throw new InvalidOptionsError(`queueType must be 'classic' or 'quorum', got '${String(o.queueType)}'`);
  }
  if (o.deliveryLimit !== undefined) {
    if (!Number.isInteger(o.deliveryLimit) || o.deliveryLimit < 1 || o.deliveryLimit > 0xfffffffe) {
      throw new InvalidOptionsError(`deliveryLimit must be a whole number of at least 1, got ${String(o.deliveryLimit)}`);
    }
    if (o.queueType !== 'quorum') {
      throw new InvalidOptionsError("deliveryLimit needs queueType 'quorum': classic queues do not count deliveries");
    }
  }
  if (o.exchangeType !== undefined && !['topic', 'direct', 'fanout', 'headers'].includes(o.exchangeType)) {
    throw new InvalidOptionsError(`exchangeType must be 'topic', 'direct', 'fanout' or 'headers', got '${String(o.exchangeType)}'`);
  }
  if (o.alert !== undefined) {
    if (o.alert === null || typeof o.alert !== 'object' || (o.alert.parkedAbove === undefined && o.alert.oldestDueAboveMs === undefined)) {
      throw new InvalidOptionsError('alert needs parkedAbove (messages) or oldestDueAboveMs (milliseconds)');
    }
    for (const key of ['parkedAbove', 'oldestDueAboveMs'] as const) {
      const v = o.alert[key];
      if (v !== undefined && (!Number.isInteger(v) || v < 0)) {
        throw new InvalidOptionsError(`alert.${key} must be a whole number (0 or more), got ${String(v)}`);
      }
    }
    if (o.alert.onAlert !== undefined && typeof o.alert.onAlert !== 'function') {
      throw new InvalidOptionsError('alert.onAlert must be a function');
    }
  }
  if (o.recovery !== undefined) {
    for (const key of ['initialDelayMs', 'maxDelayMs'] as const) {
      const v = o.recovery[key];
      if (v !== undefined && (!Number.isInteger(v) || v < 1 || v > 0xffffffff)) {
        throw new InvalidOptionsError(`recovery.${key} must be a whole number of milliseconds, got ${String(v)}`);
      }
    }
    const m = o.recovery.maxAttempts;
    if (m !== undefined && m !== Infinity && (!Number.isInteger(m) || m < 1)) {
      throw new InvalidOptionsError(`recovery.maxAttempts must be a whole number of at least 1, or Infinity, got ${String(m)}`);
    }
  }
  const t = o.onFailure?.table;
  if (t !== undefined) {
    if (t === null || typeof t !== 'object') throw new InvalidOptionsError('onFailure.table must be an object');
    for (const key of ['dependency', 'tenant', 'nextAttemptAt'] as const) {
      if (t[key] !== undefined && typeof t[key] !== 'function') throw new InvalidOptionsError(`onFailure.table.${key} must be a function`);
    }
    if (t.maxAttempts !== undefined && (!Number.isInteger(t.maxAttempts) || t.maxAttempts < 1)) {
      throw new InvalidOptionsError(`onFailure.table.maxAttempts must be a whole number of at least 1, got ${String(t.maxAttempts)}`);
    }
  }
  if (o.onFailure?.retryable !== undefined && typeof o.onFailure.retryable !== 'function') {
    throw new InvalidOptionsError('onFailure.retryable must be a function (err, msg) => boolean');
  }
}
