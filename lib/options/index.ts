/**
 * The options of rabbit-retry's API: the client's and a consumer's, their
 * types, the tables of their keys and the defaults applied in TypeScript
 * (lib/options/check.ts checks them). A part's own options stand in its folder
 * (table/options.ts, circuit/options.ts, inbox/options.ts, outbox/options.ts)
 * and are handed on from here.
 * The defaults of the consume options the native layer takes are the native
 * layer's (`consumeDefaults()`); the `@default`s here describe them.
 */
import type { CircuitOptions } from '../circuit/options';
import type { InboxOptions } from '../inbox/options';
import type { Message, MessageProperties } from '../message';
import type { OutboxOptions } from '../outbox/options';
import type { RetryTableOptions, TableRouteOptions } from '../table/options';
import type { MeterProviderLike } from '../telemetry/otel';
import type { BrokerDelayOptions, Delay } from './delay';
import type { RecoveryOptions } from './recovery';
import type { OptionKeys } from './shape';

export { type BrokerDelayOptions, type Delay, DEFAULT_DELAYS } from './delay';
export { type RecoveryOptions, RECOVERY_OPTION_KEYS } from './recovery';
export type { OptionKeys } from './shape';
export { type CircuitOptions, CIRCUIT_OPTION_KEYS } from '../circuit/options';
export { type TableRouteOptions, type RetryTableOptions, TABLE_ROUTE_OPTION_KEYS, RETRY_TABLE_OPTION_KEYS } from '../table/options';

/** How to connect to the broker. */
export interface ConnectOptions {
  /**
   * `amqp://user:password@host:5672/vhost`, or the URLs of the nodes of one
   * cluster: the client connects to one of them and, when its connection is
   * lost, moves to the next.
   * @default process.env.AMQP_URL (several separated by commas), else `amqp://guest:guest@127.0.0.1:5672`
   */
  url?: string | readonly string[];
  /**
   * The order the nodes of `url` are tried in: `shuffle` spreads the clients
   * of a fleet over the nodes; `ordered` tries them as listed (a preferred
   * node first).
   * @default 'shuffle'
   */
  hostOrder?: 'shuffle' | 'ordered';
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
  /** The transactional outbox in PostgreSQL, and its relay. */
  outbox?: OutboxOptions;
  /**
   * Where warnings go when nobody listens for a consumer's `error` event. A
   * logger that throws, or returns a Promise that rejects, is ignored.
   * @default console
   */
  logger?: Logger;
  /** The OpenTelemetry meter provider for metrics. @default the global one of `@opentelemetry/api` when installed; else no metrics */
  meterProvider?: MeterProviderLike;
}

/** The keys of {@link ConnectOptions}. @internal */
export const CONNECT_OPTION_KEYS = {
  url: true,
  hostOrder: true,
  connectionName: true,
  heartbeat: true,
  connectTimeoutMs: true,
  confirmTimeoutMs: true,
  tls: true,
  retryTable: true,
  outbox: true,
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
  /**
   * Called on each crossing of `parkedAbove` (the consumer also emits
   * `alert`). What it throws, or a rejection of a Promise it returns, is
   * logged as a warning; the checks go on.
   */
  onAlert?: (alert: ParkedAlert) => void;
  /**
   * Called on each crossing of `oldestDueAboveMs` (the consumer also emits
   * `tableAlert`). What it throws, or a rejection of a Promise it returns,
   * is logged as a warning; the checks go on.
   */
  onTableAlert?: (alert: RetryTableAlert) => void;
}

/** The keys of {@link AlertOptions}. @internal */
export const ALERT_OPTION_KEYS = {
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

/** The keys of {@link TlsOptions}. @internal */
export const TLS_OPTION_KEYS = { caFile: true, ca: true, certFile: true, keyFile: true } satisfies OptionKeys<TlsOptions>;

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
  /** RabbitMQ 4.3 quorum queues, instead of `delays`: the broker holds a failed message itself, without retry queues (docs/broker-delay.md). */
  brokerDelay?: BrokerDelayOptions;
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
  /** The error's stack (`retry-error-stack`) on every retried copy too, not only on one that parks or goes to the retry table. @default false */
  stackOnRetry?: boolean;
  /**
   * The `retry-*` headers of a copy bound for a retry queue. `'minimal'`:
   * `retry-attempt`, `retry-last-error`, `retry-first-failed-at`,
   * `retry-original-exchange` and `retry-original-routing-key` (and the stack
   * with `stackOnRetry`), what counting its attempts and parking it later
   * need; each header costs the broker CPU on every retry. `'full'`: the
   * parked copy's ten as well (`retry-reason`, `retry-error-name`,
   * `retry-error-stack`, `retry-failed-at`, `retry-queue`). A parked copy
   * and a row of the retry table always carry every header.
   * @default 'minimal'
   */
  retryHeaders?: 'minimal' | 'full';
  /**
   * After the delays, store failures in the retry table (PostgreSQL, see
   * `ConnectOptions.retryTable`) instead of parking them: for failures that
   * wait on a person or a condition, not a clock. `delays: []` uses the table alone.
   */
  table?: TableRouteOptions;
  /**
   * A circuit breaker: after a run of retryable failures the consumer stops
   * taking messages (they wait in the work queue, in order), probes the
   * dependency every `probeEvery`, and consumes again when a probe succeeds,
   * sending what waits in its retry queues back at once. Consumers of one
   * process that name the same `dependency` share one circuit.
   */
  circuit?: CircuitOptions;
}

/** The keys of {@link OnFailureOptions}. @internal */
export const ON_FAILURE_OPTION_KEYS = {
  delays: true,
  brokerDelay: true,
  retryable: true,
  stackOnRetry: true,
  retryHeaders: true,
  table: true,
  circuit: true,
} satisfies OptionKeys<OnFailureOptions>;

/** The keys of {@link BrokerDelayOptions}. @internal */
export const BROKER_DELAY_OPTION_KEYS = { min: true, max: true, attempts: true } satisfies OptionKeys<BrokerDelayOptions>;

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
  /** The binding key, or several (each a binding to `exchange`). @default the queue name */
  routingKey?: string | readonly string[];
  /** At most this many handlers in flight. @default 10 */
  prefetch?: number;
  /**
   * The consumer's tag on the work queue (1 to 255 bytes), which the
   * management UI shows and each {@link Message} carries.
   * @default one the broker makes (`amq.ctag-…`)
   */
  consumerTag?: string;
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
  /**
   * Quorum queues only: how long the broker lets a delivery stay unacked
   * before it takes it back (`x-consumer-timeout`, RabbitMQ 4.3). When it
   * passes, the broker returns the consumer's unacked messages to the queue
   * and cancels the consumer, which subscribes again; the handlers still
   * running then are not stopped, and their messages are handled again. The
   * default asks for the largest value, so that no delivery is taken back
   * from a running handler; `stuckAfterMs` reports a handler that runs too
   * long. RabbitMQ 3.x ignores it (its channel-wide `consumer_timeout`, 30
   * minutes by default, closes the channel instead); classic queues refuse it.
   * @default 2147483647 (about 24.8 days)
   */
  consumerTimeoutMs?: number;
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
  /**
   * Runs each handler in a transaction of your PostgreSQL database that also
   * records the message's id: a message whose effects were committed is acked
   * and never handled again (the handler gets `{ tx }` second). See the inbox guide.
   */
  inbox?: InboxOptions;
}

/** The keys of {@link ConsumeOptions}. @internal */
export const CONSUME_OPTION_KEYS = {
  queue: true,
  exchange: true,
  exchangeType: true,
  routingKey: true,
  prefetch: true,
  consumerTag: true,
  queueType: true,
  deliveryLimit: true,
  consumerTimeoutMs: true,
  assertQueue: true,
  queueArguments: true,
  retryQueueArguments: true,
  parkedQueueArguments: true,
  onFailure: true,
  alert: true,
  recovery: true,
  stuckAfterMs: true,
  inbox: true,
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

/** The keys of {@link CloseOptions}. @internal */
export const CLOSE_OPTION_KEYS = { timeoutMs: true } satisfies OptionKeys<CloseOptions>;

/** How long `close` waits for in-flight handlers by default: 30 seconds. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 30_000;

/** Options of {@link RabbitRetry.publish}. */
export interface PublishOptions extends Omit<MessageProperties, 'timestamp' | 'expiration' | 'deliveryMode'> {
  /** A `Date`, or seconds since the epoch. */
  timestamp?: Date | number;
  /** Per-message TTL in milliseconds. */
  expiration?: string | number;
  /** Whether the broker writes the message to disk. @default true */
  persistent?: boolean;
  /** Application headers. */
  headers?: Record<string, unknown>;
}
