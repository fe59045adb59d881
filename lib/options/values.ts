/**
 * Values the options name: queue arguments, and the alerts a consumer emits
 * (see {@link ConsumeOptions.alert}).
 */

/**
 * Queue arguments (`x-max-length`, `x-dead-letter-exchange`, `x-queue-mode`, …)
 * as RabbitMQ takes them in a queue declaration: strings, numbers (whole
 * numbers are sent as integers) and booleans.
 */
export type QueueArguments = Readonly<Record<string, string | number | boolean>>;

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
