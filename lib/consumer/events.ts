/**
 * The public types of a consumer: its handler, the events it emits, and what
 * `stats()`, `health()` and `close()` return.
 */
import type { ParkReason } from '../contract';
import type { RabbitRetryError } from '../errors';
import type { Message } from '../message';
import type { ParkedAlert, RetryTableAlert } from '../options';
import type { CircuitClosedEvent, CircuitHalfOpenEvent, CircuitOpenEvent, CircuitStatus } from '../circuit';

/** A handler: resolve to ack the message, throw to retry or park it. */
export type Handler = (msg: Message) => unknown;

/** Emitted when a failed message was copied to a retry queue and acked. */
export interface RetryEvent {
  /** The work queue. */
  queue: string;
  /** The retry queue it waits in; with `onFailure.brokerDelay`, the work queue (the broker holds it). */
  target: string;
  /** Its message id, if any. */
  messageId?: string;
  /** The `retry-attempt` it carries now; with `onFailure.brokerDelay`, its failed deliveries so far. */
  attempt: number;
  /** The delay's label, such as `5s`. */
  delay: string;
  /** The handler's error message. */
  error: string;
}

/** Emitted when a failed message was copied to the parked queue and acked. */
export interface ParkedEvent {
  /** The work queue. */
  queue: string;
  /** The parked queue. */
  target: string;
  /** Its message id, if any. */
  messageId?: string;
  /** Why it parked: `exhausted`, `non-retryable`, … (every reason is in `PARK_REASONS`). */
  reason: ParkReason;
  /** The `retry-attempt` it carries. */
  attempt: number;
  /** The handler's error message. */
  error: string;
}

/** Emitted when a consumer with an inbox acked a copy of a message it had handled already, without calling the handler. */
export interface DuplicateEvent {
  /** The work queue. */
  queue: string;
  /** The inbox's consumer name (`inbox.consumer`, by default the queue). */
  consumer: string;
  /** The message's key: its message id, or what `inbox.key` gave. */
  messageId: string;
}

/** Emitted when a failed message could not be republished; it stays unacked and nothing is lost. */
export interface PublishFailedEvent {
  /** The work queue. */
  queue: string;
  /** Where it was meant to go. */
  target: string;
  /** Its message id, if any. */
  messageId?: string;
  /** Why the publish failed (an {@link UnroutableError}, {@link PublishNackedError}, ...). */
  error: RabbitRetryError;
}

/**
 * Emitted when the broker refused the fault event of a parked message
 * (`onFailure.faults`): the message parked all the same, and was acked.
 */
export interface FaultFailedEvent {
  /** The work queue. */
  queue: string;
  /** The parked message's id, if any. */
  messageId?: string;
  /** Why it parked. */
  reason: ParkReason;
  /** Why the broker refused its fault event. */
  error: RabbitRetryError;
}

/** What a consumer is doing. */
export type ConsumerState = 'connected' | 'recovering' | 'closing' | 'closed';

/** Emitted when a failed message was stored in the retry table and acked. */
export interface StoredEvent {
  /** The work queue. */
  queue: string;
  /** The row id. */
  rowId: number;
  /** Its message id, if any. */
  messageId?: string;
  /** The `retry-attempt` the row carries. */
  attempt: number;
  /** What it waits on. */
  dependency?: string;
  /** The handler's error message. */
  error: string;
}

/** Counts since the consumer started, as {@link Consumer.stats} returns them. */
export interface ConsumerStats {
  /** The work queue. */
  queue: string;
  /** `connected`, `recovering`, `closing` or `closed`. */
  state: ConsumerState;
  /** The node it consumes from (or last consumed from, while recovering), its URL's password hidden. */
  url: string;
  /** Handlers running now. */
  inFlight: number;
  /** Messages handled successfully and acked (an ack that could not take, `takenBack`, is not counted). */
  acked: number;
  /** Handler failures. */
  failed: number;
  /** Failed messages sent to a retry queue. */
  retried: number;
  /** `retried`, by delay label. */
  retriedByDelay: Record<string, number>;
  /** Failed messages parked. */
  parked: number;
  /** `parked`, by reason. */
  parkedByReason: Record<string, number>;
  /** Failed messages stored in the retry table. */
  stored: number;
  /** Republishes that failed (the message stayed unacked). */
  publishFailed: number;
  /** Fault events of parked messages the broker refused (`onFailure.faults`; the messages parked all the same). */
  faultsFailed: number;
  /** Copies of already handled messages that the inbox acked without calling the handler (counted in `acked` too). */
  duplicates: number;
  /** Deliveries given back to the work queue, never started, because the circuit had opened. */
  released: number;
  /** Messages sent back from the retry queues early, when the circuit closed. */
  returnedEarly: number;
  /**
   * Handlers that ended after the broker had taken their message back (a
   * consumer timeout, a lost channel): nothing was acked or moved, and the
   * message is delivered again.
   */
  takenBack: number;
  /** How long the handler calls that ended took, in milliseconds. */
  handlerMs: {
    /** Handler calls that ended. */
    count: number;
    /** Milliseconds they took in all. */
    total: number;
    /** Milliseconds the longest one took. */
    max: number;
  };
  /** Handlers running now for longer than `stuckAfterMs`. */
  stuck: number;
  /** Milliseconds the longest-running handler has been running; 0 when none runs. */
  oldestInFlightMs: number;
  /** The consumer's circuit, when it has one. */
  circuit?: CircuitStatus;
}

/** Whether a consumer is consuming and none of its handlers is stuck, as {@link Consumer.health} reports it. */
export interface ConsumerHealth {
  /** The work queue. */
  queue: string;
  /** `connected`, `recovering`, `closing` or `closed`. */
  state: ConsumerState;
  /** True when the consumer is `connected` and no handler is stuck. */
  healthy: boolean;
  /** Handlers running now. */
  inFlight: number;
  /** Handlers running now for longer than `stuckAfterMs`. */
  stuck: number;
  /** Milliseconds the longest-running handler has been running; 0 when none runs. */
  oldestInFlightMs: number;
  /** The consumer's circuit, when it has one (`onFailure.circuit`). An open circuit does not make the consumer unhealthy: it waits for its dependency by design. */
  circuit?: CircuitStatus;
}

/** Emitted once for a delivery whose handler has not settled after `stuckAfterMs`. */
export interface StuckEvent {
  /** The work queue. */
  queue: string;
  /** Its message id, if any. */
  messageId?: string;
  /** Milliseconds since its handler started. */
  sinceMs: number;
  /** Earlier failed attempts of the message (its `msg.attempt`). */
  attempt: number;
}

/** What {@link Consumer.close} and {@link RabbitRetry.close} report. */
export interface CloseResult {
  /**
   * Handlers still running when the close's bound (`timeoutMs`) passed. Their
   * messages went back to the broker, unacked, when the channel closed, and
   * will be delivered again; what those handlers do afterwards is dropped.
   */
  unfinished: number;
  /**
   * What this client's retry-table scheduler had done when {@link RabbitRetry.close}
   * stopped it; absent from a consumer's close and without a scheduler.
   */
  retryTable?: SchedulerStopResult;
}

/**
 * What a retry-table scheduler had done when `close()` stopped it. The stop
 * comes within about a second even mid-drain: the rows it had not published
 * stay in the table, due as before, for the next scheduler.
 */
export interface SchedulerStopResult {
  /** Rows it published (and deleted) since it started. */
  published: number;
  /**
   * Rows it published whose confirm had not come a second after the stop (or
   * whose delete could not be committed): they stay in the table and are
   * published again, so their messages may come twice.
   */
  unconfirmed: number;
  /** Rows due (and not paused) in the table once it stopped; `null` when the database did not answer within a second. */
  due: number | null;
}

/** Emitted when the consumer lost its channel or connection and starts recovering. */
export interface DisconnectedEvent {
  /** The work queue. */
  queue: string;
  /** What happened. */
  error: Error;
  /** The node it was consuming from, its URL's password hidden. */
  url: string;
}

/** Emitted when the consumer consumes again after a loss. */
export interface RecoveredEvent {
  /** The work queue. */
  queue: string;
  /** Tries it took. */
  attempts: number;
  /** Milliseconds since the loss. */
  afterMs: number;
  /** The node it consumes from now (with several nodes, usually another), its URL's password hidden. */
  url: string;
}

/** The events a {@link Consumer} emits. */
export interface ConsumerEvents {
  /** The channel or connection was lost; the consumer reconnects with backoff. */
  disconnected: [DisconnectedEvent];
  /** The consumer consumes again; deliveries whose ack was lost come again (`redelivered`). */
  recovered: [RecoveredEvent];
  /** The parked queue rose above `alert.parkedAbove`. */
  alert: [ParkedAlert];
  /** The retry table's oldest due row grew older than `alert.oldestDueAboveMs`. */
  tableAlert: [RetryTableAlert];
  /** A failed message was stored in the retry table. */
  stored: [StoredEvent];
  /** A failed message went to a retry queue. */
  retry: [RetryEvent];
  /** A failed message was parked. */
  parked: [ParkedEvent];
  /** The inbox acked a copy of a message it had handled already, without calling the handler. */
  duplicate: [DuplicateEvent];
  /** A republish failed; the message stays unacked until the channel closes. */
  publishFailed: [PublishFailedEvent];
  /** The broker refused a parked message's fault event (`onFailure.faults`); the message parked all the same. */
  faultFailed: [FaultFailedEvent];
  /** A handler has not settled its message after `stuckAfterMs` (once per delivery). */
  stuck: [StuckEvent];
  /** The consumer hit an error (a failed ack, a lost channel). */
  error: [Error];
  /** Its circuit opened: the consumer stopped taking messages (`onFailure.circuit`). */
  circuitOpen: [CircuitOpenEvent];
  /** Its circuit is probing its dependency. */
  circuitHalfOpen: [CircuitHalfOpenEvent];
  /** Its circuit closed: the consumer takes messages again, and its retry queues are sent back. */
  circuitClosed: [CircuitClosedEvent];
}
