// Written by `npm run options` (scripts/options.ts) from lib/options/consume.ts: do not edit.
import type { InboxOptions } from '../inbox/options';
import type { Message } from '../message';
import type { Delay } from './delay';
import type { ParkedAlert, QueueArguments, RetryTableAlert } from './values';
import type { OptionKeys } from './shape';

/** What a consumer consumes, and how. */
export interface ConsumeOptions {
  /** The work queue; declared durable if missing (see {@link ConsumeOptions.assertQueue}). */
  queue: string;
  /** An exchange to declare (durable) and bind the queue to. */
  exchange?: string;
  /**
   * The exchange's type.
   * @default 'topic'
   */
  exchangeType?: 'topic' | 'direct' | 'fanout' | 'headers';
  /**
   * The binding key, or several (each a binding to `exchange`).
   * @default the queue name
   */
  routingKey?: string | readonly string[];
  /**
   * At most this many handlers in flight.
   * @default 10
   */
  prefetch?: number;
  /**
   * The consumer's tag on the work queue (1 to 255 bytes), which the management UI shows and each
   * {@link Message} carries.
   * @default one the broker makes (`amq.ctag-…`)
   */
  consumerTag?: string;
  /**
   * Queue type of the work, retry and parked queues. Quorum queues are replicated; their retry queues
   * dead-letter at-least-once.
   * @default 'classic'
   */
  queueType?: 'classic' | 'quorum';
  /**
   * Quorum queues only: after this many deliveries of one message that were never settled (the process crashed
   * on it, or the broker took it back from a handler that outlived `consumerTimeoutMs`), the message parks with
   * `retry-reason: delivery-limit` (or `consumer-timeout`) without calling the handler again. The broker's own
   * `x-delivery-limit` is set one above it, dead-lettering to the parked queue, as a backstop.
   * @default 5
   */
  deliveryLimit?: number;
  /**
   * Quorum queues only: how long the broker lets a delivery stay unacked before it takes it back
   * (`x-consumer-timeout`, RabbitMQ 4.3). When it passes, the broker returns the consumer's unacked messages to
   * the queue and cancels the consumer, which subscribes again; the handlers still running then are not stopped,
   * their messages are handled again, and each such return counts toward `deliveryLimit`. The default asks for
   * the largest value, so that no delivery is taken back from a running handler; `stuckAfterMs` reports a
   * handler that runs too long. RabbitMQ 3.x ignores it (its channel-wide `consumer_timeout`, 30 minutes by
   * default, closes the channel instead); classic queues refuse it.
   * @default 2147483647 (about 24.8 days)
   */
  consumerTimeoutMs?: number;
  /**
   * `false` consumes a work queue that exists as it is: it is checked (it must exist) but never declared, so its
   * arguments, whoever set them, stay as they are; what the chosen mode depends on (`brokerDelay`'s
   * `x-delayed-retry-*` arguments) is still checked. The retry and parked queues are still declared, and the
   * exchange and binding when given. With a quorum queue that rabbit-retry does not declare, the broker's
   * `x-delivery-limit` backstop is whatever the queue has.
   * @default true
   */
  assertQueue?: boolean;
  /**
   * Arguments added to the work queue's declaration, for a queue that exists with arguments of its own (for
   * example `{ 'x-max-length': 100000 }` set by an operator, or a dead-letter exchange from an earlier setup). A
   * queue that exists with other arguments fails `consume` with a TopologyMismatchError that names the argument
   * and this option. Not `x-queue-type` (see {@link ConsumeOptions.queueType}), nor, on quorum queues, the
   * dead-lettering that {@link ConsumeOptions.deliveryLimit} sets.
   */
  queueArguments?: QueueArguments;
  /**
   * Arguments added to every retry queue's declaration. Not the TTL or the dead-lettering (the retry topology
   * sets them), nor `x-expires`; a length limit needs `'x-overflow': 'reject-publish'`, so that a full retry
   * queue refuses the republish (the original stays unacked) instead of dropping its oldest message.
   */
  retryQueueArguments?: QueueArguments;
  /**
   * Arguments added to the parked queue's declaration. Not `x-expires` or `x-message-ttl` (parked messages would
   * vanish unread); a length limit needs `'x-overflow': 'reject-publish'`.
   */
  parkedQueueArguments?: QueueArguments;
  /** What to do when the handler throws. */
  onFailure?: OnFailureOptions;
  /** Alert when the parked queue fills up. */
  alert?: AlertOptions;
  /**
   * How the consumer reconnects after losing its channel or connection.
   * @default each field its own
   */
  recovery?: RecoveryOptions;
  /**
   * A handler that has not settled its message after this many milliseconds counts as stuck: the consumer emits
   * `stuck` once for that delivery (or logs a warning when nobody listens), `stats().stuck` counts it and
   * `health()` reports the consumer unhealthy until it settles.
   * @default 300000 (5 minutes)
   */
  stuckAfterMs?: number;
  /**
   * Runs each handler in a transaction of your PostgreSQL database that also records the message's id: a message
   * whose effects were committed is acked and never handled again (the handler gets `{ tx }` second). See the
   * inbox guide.
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

/** What to do when a handler throws. */
export interface OnFailureOptions {
  /**
   * One retry queue per delay, tried in order; after the last the message parks. `[]` parks on the first
   * failure.
   * @default ['5s', '1m', '10m']
   */
  delays?: readonly Delay[];
  /**
   * RabbitMQ 4.3 quorum queues, instead of `delays`: the broker holds a failed message itself, without retry
   * queues (docs/broker-delay.md).
   */
  brokerDelay?: BrokerDelayOptions;
  /**
   * Whether an error is worth another attempt: `true` retries the message, `false` parks it at once
   * (`retry-reason: non-retryable`). It is called synchronously and must return a boolean. Anything else it
   * returns (`undefined`, a number, a string, a Promise from an async function) parks the message as
   * non-retryable and logs a warning naming what it returned (once per consumer for each kind of value); a
   * returned Promise is not awaited, and its rejection is ignored. A predicate that throws parks the message
   * too. A {@link NonRetryableError} always parks, whatever this says.
   * @default every error but a {@link NonRetryableError}
   */
  retryable?: (err: unknown, msg: Message) => boolean;
  /**
   * The error's stack (`retry-error-stack`) on every retried copy too, not only on one that parks or goes to the
   * retry table.
   * @default false
   */
  stackOnRetry?: boolean;
  /**
   * The `retry-*` headers of a copy bound for a retry queue. `'minimal'`: `retry-attempt`, `retry-last-error`,
   * `retry-first-failed-at`, `retry-original-exchange` and `retry-original-routing-key` (and the stack with
   * `stackOnRetry`), what counting its attempts and parking it later need; each header costs the broker CPU on
   * every retry. `'full'`: the parked copy's ten as well (`retry-reason`, `retry-error-name`,
   * `retry-error-stack`, `retry-failed-at`, `retry-queue`). A parked copy and a row of the retry table always
   * carry every header.
   * @default 'minimal'
   */
  retryHeaders?: 'minimal' | 'full';
  /**
   * After the delays, store failures in the retry table (PostgreSQL, see `ConnectOptions.retryTable`) instead of
   * parking them: for failures that wait on a person or a condition, not a clock. `delays: []` uses the table
   * alone.
   */
  table?: TableRouteOptions;
  /**
   * A circuit breaker: after a run of retryable failures the consumer stops taking messages (they wait in the
   * work queue, in order), probes the dependency every `probeEvery`, and consumes again when a probe succeeds,
   * sending what waits in its retry queues back at once. Consumers of one process that name the same
   * `dependency` share one circuit.
   */
  circuit?: CircuitOptions;
  /**
   * Publish a fault event for every message that parks: JSON with its ids, queue, park reason, error, attempts,
   * when it first failed and when it parked, and where it was first published; routed by the work queue's name,
   * confirmed after the park was confirmed and before the ack (at least once, never for a message that did not
   * park). A fault event the broker refuses does not hold up parking: the consumer emits `faultFailed`.
   */
  faults?: FaultOptions;
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
  faults: true,
} satisfies OptionKeys<OnFailureOptions>;

/** The broker's own delayed retry (see {@link OnFailureOptions.brokerDelay}). */
export interface BrokerDelayOptions {
  /** The delay after the first failure, and the step each later failure adds: `'5s'`, or milliseconds. */
  min: Delay;
  /** The longest delay: `'5m'`, or milliseconds. */
  max: Delay;
  /** Returns to the broker before a retryable failure parks as exhausted; at least 1. */
  attempts: number;
}

/** The keys of {@link BrokerDelayOptions}. @internal */
export const BROKER_DELAY_OPTION_KEYS = {
  min: true,
  max: true,
  attempts: true,
} satisfies OptionKeys<BrokerDelayOptions>;

/** How failures go into the retry table. */
export interface TableRouteOptions {
  /**
   * What the message waits on (a carrier, a service), for `pause`/`resume`/`pauseWhen`. A throw, or an answer
   * other than a string or `undefined`, stores the row without one (with a warning).
   */
  dependency?: (err: unknown, msg: Message) => string | undefined;
  /**
   * Whose message it is, for `pause`/`resume`. A throw, or an answer other than a string or `undefined`, stores
   * the row without one (with a warning).
   */
  tenant?: (msg: Message) => string | undefined;
  /**
   * When the row is due: a Date, or `null` to wait for a person (`resume`, `retryNow`). `attempt` is the attempt
   * count the row carries. A throw, an invalid Date or any other answer makes it due in one minute (with a
   * warning).
   * @default one minute from now
   */
  nextAttemptAt?: (err: unknown, attempt: number) => Date | null;
  /**
   * Attempts through the table before the message parks as exhausted.
   * @default 10
   */
  maxAttempts?: number;
}

/** The keys of {@link TableRouteOptions}. @internal */
export const TABLE_ROUTE_OPTION_KEYS = {
  dependency: true,
  tenant: true,
  nextAttemptAt: true,
  maxAttempts: true,
} satisfies OptionKeys<TableRouteOptions>;

/** A consumer's circuit breaker (see {@link OnFailureOptions.circuit}). */
export interface CircuitOptions {
  /**
   * What the circuit guards (a carrier, a service). Consumers of one process that name the same dependency share
   * one circuit, with the same options.
   * @default the work queue's name: a circuit of its own
   */
  dependency?: string;
  /**
   * It opens after this many retryable failures (errors the `retryable` predicate retries) within this window. A
   * {@link NonRetryableError} does not count: it says the message is bad, not the dependency.
   * @default { failures: 5, within: '10s' }
   */
  openAfter?: {
    /** Retryable failures that open it. */
    failures: number;
    /** The window they fall in. */
    within: Delay;
  };
  /**
   * While open, a probe this often.
   * @default '5s'
   */
  probeEvery?: Delay;
  /**
   * Probes that must succeed in a row to close it.
   * @default 1
   */
  closeAfter?: number;
  /**
   * A health check of the dependency. When given, it is the probe: called every `probeEvery` while open (no
   * message is spent), `true` closes the circuit. `false`, a throw or a rejection (of any value), an answer that
   * is not a boolean, or no answer within `probeEvery` is a failed check: it keeps the circuit open (with a
   * warning, but for `false`), and the next check comes `probeEvery` later.
   */
  check?: () => Promise<boolean> | boolean;
  /**
   * When it closes, the messages waiting in the consumer's retry queues are sent back to the work queue at once,
   * at this many a second (each acked in its retry queue only after the broker confirmed its copy).
   * @default 50
   */
  returnRate?: number;
}

/** The keys of {@link CircuitOptions}. @internal */
export const CIRCUIT_OPTION_KEYS = {
  dependency: true,
  openAfter: true,
  probeEvery: true,
  closeAfter: true,
  check: true,
  returnRate: true,
} satisfies OptionKeys<CircuitOptions>;

/**
 * Fault events: one for every message that parks, for other services to compensate or alert (see
 * {@link OnFailureOptions.faults}).
 */
export interface FaultOptions {
  /** The exchange of the fault events: declared (durable, `topic`) if it does not exist. */
  exchange: string;
}

/** The keys of {@link FaultOptions}. @internal */
export const FAULT_OPTION_KEYS = {
  exchange: true,
} satisfies OptionKeys<FaultOptions>;

/** Checks the parked queue on a timer and alerts once each time its depth rises above a threshold. */
export interface AlertOptions {
  /** Alert when the parked queue holds more than this many messages. */
  parkedAbove?: number;
  /**
   * Alert when the retry table's oldest due row is older than this many milliseconds (a stopped scheduler).
   */
  oldestDueAboveMs?: number;
  /**
   * How often to check.
   * @default '1m'
   */
  every?: Delay;
  /**
   * Called on each crossing of `parkedAbove` (the consumer also emits `alert`). What it throws, or a rejection
   * of a Promise it returns, is logged as a warning; the checks go on.
   */
  onAlert?: (alert: ParkedAlert) => void;
  /**
   * Called on each crossing of `oldestDueAboveMs` (the consumer also emits `tableAlert`). What it throws, or a
   * rejection of a Promise it returns, is logged as a warning; the checks go on.
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

/** Reconnecting after a lost channel or connection: exponential backoff with jitter. */
export interface RecoveryOptions {
  /**
   * The first wait, in milliseconds.
   * @default 500
   */
  initialDelayMs?: number;
  /**
   * The longest wait, in milliseconds.
   * @default 30000
   */
  maxDelayMs?: number;
  /**
   * Give up after this many tries: the consumer closes and emits `error`.
   * @default Infinity (never give up)
   */
  maxAttempts?: number;
  /**
   * How long one broker round trip of starting, recovering or stopping the consumer (declare, channel open, qos,
   * consume, cancel, ack, channel close) may take before it counts as failed: a broker that stops answering
   * cannot hold recovery or `close()` for good.
   * @default 15000
   */
  stepTimeoutMs?: number;
}

/** The keys of {@link RecoveryOptions}. @internal */
export const RECOVERY_OPTION_KEYS = {
  initialDelayMs: true,
  maxDelayMs: true,
  maxAttempts: true,
  stepTimeoutMs: true,
} satisfies OptionKeys<RecoveryOptions>;
