/**
 * What a consumer counts for `stats()`, and the same numbers recorded in its
 * metrics: each outcome is counted and recorded in one call.
 */
import { reasonOf } from '../support/error-text';
import type { Log } from '../support/log';
import type { ConsumerMetrics } from '../telemetry/metrics';
import type { ConsumerStats } from './events';

/** The counts of {@link ConsumerStats}: what the consumer did since it started. */
export type Counts = Omit<ConsumerStats, 'queue' | 'state' | 'url' | 'inFlight' | 'stuck' | 'oldestInFlightMs' | 'circuit'>;

/** A consumer's counts and metrics. */
export class Tally {
  private readonly c: Counts = {
    acked: 0,
    failed: 0,
    retried: 0,
    retriedByDelay: {},
    parked: 0,
    parkedByReason: {},
    stored: 0,
    publishFailed: 0,
    faultsFailed: 0,
    duplicates: 0,
    released: 0,
    returnedEarly: 0,
    takenBack: 0,
    handlerMs: { count: 0, total: 0, max: 0 },
  };

  constructor(
    /** The work queue, for log lines. */
    private readonly queue: string,
    private readonly metrics: ConsumerMetrics,
    private readonly log: Log,
  ) {}

  /** The counts now, copied. */
  counts(): Counts {
    const c = this.c;
    return {
      ...c,
      retriedByDelay: { ...c.retriedByDelay },
      parkedByReason: { ...c.parkedByReason },
      handlerMs: { ...c.handlerMs },
    };
  }

  /** A handler that started at `started` (`performance.now()`) resolved, and its message was acked. */
  acked(started: number): void {
    this.c.acked++;
    this.safely(() => {
      this.timed(started, 'success');
      this.metrics.acked();
    });
  }

  /** A handler that started at `started` threw. */
  failed(started: number): void {
    this.c.failed++;
    this.safely(() => this.timed(started, 'failure'));
  }

  /** `n` failed messages (one by default) went to the retry queue of `delay`. */
  retried(delay: string, n = 1): void {
    this.c.retried += n;
    this.c.retriedByDelay[delay] = (this.c.retriedByDelay[delay] ?? 0) + n;
    this.metrics.retried(delay, n);
  }

  /** `n` failed messages (one by default) were parked for `reason`. */
  parked(reason: string, n = 1): void {
    this.c.parked += n;
    this.c.parkedByReason[reason] = (this.c.parkedByReason[reason] ?? 0) + n;
    this.metrics.parked(reason, n);
  }

  /** A failed message was stored in the retry table. */
  stored(): void {
    this.c.stored++;
  }

  /** A failed message's republish failed. */
  publishFailed(): void {
    this.c.publishFailed++;
    this.metrics.publishFailed();
  }

  /** The broker refused the fault event of a parked message. */
  faultFailed(): void {
    this.c.faultsFailed++;
    this.safely(() => this.metrics.faultFailed());
  }

  /** The inbox acked a copy of a message handled already. */
  duplicate(): void {
    this.c.duplicates++;
    this.safely(() => this.metrics.duplicate());
  }

  /** `n` deliveries went back to the queue unstarted (the circuit opened). */
  released(n: number): void {
    this.c.released += n;
  }

  /**
   * A delivery was settled after the broker had taken it back (a consumer
   * timeout, a lost channel): nothing was acked, and an ack counted for it
   * (`acked`: its handler succeeded) is taken back from `acked`.
   */
  takenBack(acked: boolean): void {
    this.c.takenBack++;
    if (acked && this.c.acked > 0) this.c.acked--;
  }

  /** The circuit sent `n` messages of the retry queues back early. */
  returnedEarly(n: number): void {
    this.c.returnedEarly += n;
  }

  /** The consumer's circuit of `dependency` opened. */
  circuitOpened(dependency: string): void {
    this.safely(() => this.metrics.circuitOpened(dependency));
  }

  /** The consumer closed: its instruments stop. */
  stop(): void {
    try {
      this.metrics.stop();
    } catch {
      // The meter provider's own problem: the consumer is closed all the same.
    }
  }

  /** Runs bookkeeping that must not keep a message from being settled. */
  safely(f: () => void): void {
    try {
      f();
    } catch (err) {
      this.log('warn', `rabbit-retry: recording a settled message of '${this.queue}' failed: ${reasonOf(err)}`);
    }
  }

  private timed(started: number, outcome: 'success' | 'failure'): void {
    const ms = performance.now() - started;
    const h = this.c.handlerMs;
    h.count++;
    h.total += ms;
    if (ms > h.max) h.max = ms;
    this.metrics.handlerDuration(ms, outcome);
  }
}
