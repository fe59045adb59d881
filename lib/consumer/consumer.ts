/**
 * The consumer of one work queue: what its user sees (events, `state`,
 * `stats()`, `health()`, `close()`), wired to the parts that do the work:
 * {@link Handling} runs the handler, {@link Settlements} hands the outcome
 * to the native side, {@link Reporter} tells the events, {@link Tally}
 * counts, {@link Membership} joins the circuit, {@link Shutdown} closes.
 */
import { EventEmitter } from 'node:events';

import type { Circuit } from '../circuit';
import { reasonOf } from '../support/error-text';
import { native } from '../errors';
import { type Log, logTo } from '../support/log';
import type { Message } from '../message';
import type { ConsumerMetrics } from '../telemetry/metrics';
import type { NativeBatch, NativeConsumer } from '../native';
import type { AlertOptions, CloseOptions, Logger, TableRouteOptions } from '../options';
import { type ConsumerTracing, consumerTracing } from '../telemetry/tracing';
import { deliveriesOf, eventsOf, parseEvents } from '../wire';
import { AlertWatch } from './alerts';
import type { CircuitIo } from './circuit-io';
import type { CloseResult, ConsumerEvents, ConsumerHealth, ConsumerState, ConsumerStats, Handler } from './events';
import { FailureReporter } from './failure';
import { Handling } from './handling';
import { InFlight, type Tracked, stuckCheckEveryMs } from './in-flight';
import { type MoveListener, MoveWatch } from './moves';
import { Membership } from './membership';
import { type CircuitNotice, Reporter } from './reporter';
import { runningOwners } from './scope';
import { Settlements } from './settlement';
import { Shutdown } from './shutdown';
import { Tally } from './tally';

/** @internal */
export interface ConsumerContext {
  inner: NativeConsumer;
  /** Hears where each failed message went, from the first delivery (the native consumer was told). */
  moves?: MoveListener;
  handler: Handler;
  /** `onFailure.retryable`; without one, every error but the library's non-retryable ones is worth another attempt. */
  retryable?: (err: unknown, msg: Message) => boolean;
  /** `onFailure.stackOnRetry`. */
  stackOnRetry?: boolean;
  batchSize: number;
  /** The node the client was connected to when the consumer started (password hidden). */
  url: string;
  logger: Logger;
  metrics: ConsumerMetrics;
  parkedDepth: () => Promise<number | undefined>;
  oldestDueAge?: () => Promise<number>;
  alert?: AlertOptions & { everyMs: number };
  table?: TableRouteOptions;
  /** After this many milliseconds a running handler counts as stuck. */
  stuckAfterMs: number;
  /** `consumerTag`, when the options name one. */
  consumerTag?: string;
  /** The consumer's circuit breaker, and what it does on the broker. */
  circuit?: { circuit: Circuit; io: CircuitIo };
  /** Work the consumer runs beside its deliveries (its inbox's cleanup): stopped when it closes, and waited for within the close's bound. */
  background?: { stop(): Promise<void> };
  onClosed: (c: Consumer) => void;
}

/**
 * A running consumer of one work queue. Created by {@link RabbitRetry.consume}.
 *
 * Events: `retry`, `parked`, `stored`, `duplicate`, `publishFailed`, `stuck`, `alert`,
 * `tableAlert`, `disconnected`, `recovered` and `error` (see {@link ConsumerEvents}).
 */
export class Consumer extends EventEmitter<ConsumerEvents> {
  /** The work queue. */
  readonly queue: string;
  private readonly inner: NativeConsumer;
  /**
   * The handler, held by the consumer, which is its `this`: a stack names its
   * frame `Consumer.<name> [as handler]`, as the console's grouping reads it.
   */
  private readonly handler: Handler;
  private readonly log: Log;
  /** Handlers running now, by delivery id, in the order they started. */
  private readonly running: InFlight<Tracked>;
  /** Counts and metrics. */
  private readonly tally: Tally;
  /** Events, and the log lines that stand in for them. */
  private readonly reporter: Reporter;
  /** Settled since the last flush. */
  private readonly settlements: Settlements;
  private readonly handling: Handling;
  private readonly shutdown: Shutdown;
  /** Ends the stream of batches: the native side sent its last. */
  private endStream!: () => void;
  private readonly alerts?: AlertWatch;
  // An ES private field: printing or serialising the consumer never meets a timer's circular internals.
  readonly #stuckTimer: NodeJS.Timeout;
  /** The node the consumer consumes from (it changes when recovery moves to another). */
  private node: string;
  private readonly tracing: ConsumerTracing;
  /** The consumer in its circuit, when it has one. */
  private readonly membership?: Membership;
  /** Where failed messages went, for a part that waits on it ({@link Consumer.watchMoves}). */
  #moves?: MoveWatch;

  /** @internal */
  constructor(ctx: ConsumerContext) {
    // A listener's returned Promise that rejects comes to the method below, never unhandled.
    super({ captureRejections: true });
    const queue = ctx.inner.queue;
    const userRetryable = ctx.retryable;
    const inner = ctx.inner;
    const log = logTo(ctx.logger);
    this.queue = queue;
    this.inner = inner;
    this.handler = ctx.handler;
    this.log = log;
    this.node = ctx.url;
    this.tracing = consumerTracing(queue);
    this.running = new InFlight<Tracked>(ctx.stuckAfterMs);
    this.tally = new Tally(queue, ctx.metrics, log);
    this.reporter = new Reporter(
      {
        queue,
        log,
        heard: (event) => this.listenerCount(event) > 0,
        emit: (event, ...args) => (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args),
        movedTo: (url) => (this.node = url),
        moves: () => this.#moves,
      },
      this.tally,
      this.tracing,
    );
    this.shutdown = new Shutdown({
      queue,
      log,
      running: this.running,
      streamDone: new Promise((resolve) => (this.endStream = resolve)),
      quiet: async () => {
        this.alerts?.stop();
        this.membership?.leave();
        await ctx.background?.stop();
      },
      stop: () => native(() => inner.stop()),
      finish: async () => {
        this.settlements.flush();
        const late = await native(() => inner.finish());
        for (const e of parseEvents(late)) this.reporter.event(e);
      },
      release: () => {
        clearInterval(this.#stuckTimer);
        this.tracing.close();
        this.tally.stop();
        this.#moves?.clear();
        ctx.onClosed(this);
      },
    });
    this.settlements = new Settlements({
      queue,
      inner,
      log,
      closing: () => this.shutdown.began,
      closed: () => this.shutdown.closed,
      fail: (err) => this.reporter.fail(err),
    });
    this.handling = new Handling({
      owner: this,
      handler: this.handler,
      tracing: this.tracing,
      running: this.running,
      settlements: this.settlements,
      route: new FailureReporter({
        queue,
        // The predicate runs with the consumer as `this`, as the handler does.
        retryable: userRetryable && ((err, msg) => userRetryable.call(this, err, msg)),
        stackOnRetry: ctx.stackOnRetry,
        table: ctx.table,
        log,
      }),
      tally: this.tally,
      consumerTag: ctx.consumerTag,
      dropped: () => this.shutdown.abandoned || this.shutdown.closed,
      moves: { failed: (id, msg) => this.#moves?.failed(id, msg) },
    });
    if (ctx.alert) {
      this.alerts = new AlertWatch(ctx.alert, {
        queue,
        parkedDepth: ctx.parkedDepth,
        oldestDueAge: ctx.oldestDueAge,
        emit: (event, alert) => (this.emit as (e: string, a: unknown) => boolean)(event, alert),
        log,
      });
    }
    this.#stuckTimer = setInterval(this.checkStuck, stuckCheckEveryMs(ctx.stuckAfterMs));
    this.#stuckTimer.unref();
    if (ctx.circuit) {
      this.membership = new Membership(ctx.circuit.circuit, ctx.circuit.io, {
        queue,
        inner,
        log,
        stuckAfterMs: ctx.stuckAfterMs,
        closing: () => this.shutdown.began,
        closed: () => this.shutdown.closed,
        finishing: () => this.shutdown.finishing,
        handle: (d, batch) => this.handling.handle(d, batch),
        returnedEarly: (n) => this.tally.returnedEarly(n),
        notify: (...notice: CircuitNotice) => this.reporter.circuit(...notice),
      });
    }
    if (ctx.moves) this.#moves = new MoveWatch(ctx.moves, log, queue);
    // The native side reports retries and parks one by one only while this consumer has listeners for them.
    this.tellHeard();
    (this as EventEmitter).on('newListener', (event: string | symbol) => {
      if (event === 'retry' || event === 'parked') this.tellHeard(event);
    });
    (this as EventEmitter).on('removeListener', (event: string | symbol) => {
      if (event === 'retry' || event === 'parked') this.tellHeard();
    });
    inner.start(ctx.batchSize, this.onBatch);
  }

  /**
   * A listener returned a Promise that rejected: logged, and consuming goes on.
   * @internal
   */
  override [EventEmitter.captureRejectionSymbol](error: unknown, event: unknown, ..._args: unknown[]): void {
    this.log('error', `rabbit-retry: a '${String(event)}' listener of the consumer of '${this.queue}' rejected: ${reasonOf(error)}`);
  }

  /**
   * `connected` while consuming, `recovering` after a lost channel or
   * connection until it consumes again, `closing` during {@link close},
   * `closed` after it (or when recovery gave up).
   */
  get state(): ConsumerState {
    if (this.shutdown.closed) return 'closed';
    if (this.shutdown.began) return 'closing';
    return this.inner.state as ConsumerState;
  }

  /** Counts since the consumer started; the same numbers the metrics report. */
  stats(): ConsumerStats {
    return {
      queue: this.queue,
      state: this.state,
      url: this.node,
      inFlight: this.running.size,
      ...this.tally.counts(),
      ...this.running.ages(),
      ...(this.membership ? { circuit: this.membership.status() } : {}),
    };
  }

  /**
   * Whether the consumer is consuming with no handler stuck: for a readiness
   * probe or a health indicator. `healthy` is false while the consumer is not
   * `connected` (recovering, closing, closed) or while a handler has run for
   * longer than `stuckAfterMs`.
   */
  health(): ConsumerHealth {
    const state = this.state;
    const { stuck, oldestInFlightMs } = this.running.ages();
    return {
      queue: this.queue,
      state,
      healthy: state === 'connected' && stuck === 0,
      inFlight: this.running.size,
      stuck,
      oldestInFlightMs,
      ...(this.membership ? { circuit: this.membership.status() } : {}),
    };
  }

  /**
   * Joins the circuit: reads its state queue (a circuit left open, or a probe
   * that never finished, starts it open) and pauses when it is open.
   * @internal
   */
  async joinCircuit(): Promise<void> {
    await this.membership?.join();
  }

  private readonly checkStuck = (): void => {
    this.running.checkStuck((r, sinceMs) => {
      this.reporter.stuck({ queue: this.queue, messageId: r.messageId, sinceMs, attempt: r.attempt }, this.running.stuckAfterMs);
    });
  };

  /** Handlers running now. */
  get inFlightCount(): number {
    return this.running.size;
  }

  /**
   * Stops taking deliveries, lets in-flight handlers finish and settles them,
   * puts deliveries that never started back in the queue, then closes the
   * consumer's channel. Safe to call more than once: every call resolves when
   * the same close ends (a later call may shorten its bound, never lengthen it).
   *
   * It waits at most `timeoutMs` (default 30 s) for in-flight handlers. Then
   * it closes the channel anyway: the broker takes back, unacked, the messages
   * of the handlers still running, and delivers them again; whatever those
   * handlers do afterwards is dropped. The result counts them (`unfinished`).
   *
   * Called from inside one of this consumer's handlers, it does not wait for
   * the handlers (the calling one among them could never finish): it stops
   * deliveries and resolves with `{ unfinished: 0 }`. The handlers then
   * finish, their messages are settled as usual (acked, retried or parked),
   * and the channel closes in the background, within the same bound.
   */
  close(options?: CloseOptions): Promise<CloseResult> {
    return this.shutdown.close(options, runningConsumers().includes(this));
  }

  /**
   * The inbox named `consumer` acked a copy of message `messageId` it had
   * handled already: counted, and emitted as `duplicate`.
   * @internal
   */
  duplicate(consumer: string, messageId: string): void {
    this.reporter.duplicate({ queue: this.queue, consumer, messageId });
  }

  /**
   * Reports an error of the consumer's own work (its inbox's cleanup) as `error`, or logs it when nobody listens.
   * @internal
   */
  reportError(err: Error): void {
    this.reporter.fail(err);
  }

  /**
   * Resolves once a close has stopped deliveries (at once when no close began).
   * @internal
   */
  deliveriesStopped(): Promise<void> {
    return this.shutdown.deliveriesStopped();
  }

  /**
   * Tells the native side whether `retry` and `parked` have listeners
   * (`adding` is the one about to get its first): without one, it counts
   * those moves instead of reporting each.
   */
  private tellHeard(adding?: 'retry' | 'parked'): void {
    // A part that waits on where failures go needs each move, with its delivery.
    const watched = this.#moves !== undefined;
    const retry = watched || adding === 'retry' || this.listenerCount('retry') > 0;
    const parked = watched || adding === 'parked' || this.listenerCount('parked') > 0;
    try {
      this.inner.heard(retry, parked, watched);
    } catch {
      // A closed consumer reports nothing more.
    }
  }

  /** Deliveries and events from the native consumer, as they arrive. */
  private readonly onBatch = (batch: NativeBatch): void => {
    let ds = deliveriesOf(batch);
    // Refused before their handler, handed over only to be watched: known before their park is heard.
    if (this.#moves) ds = this.handling.watchRefused(ds, batch);
    for (const e of eventsOf(batch)) this.reporter.event(e);
    if (!this.shutdown.finishing) {
      const membership = this.membership;
      if (!membership) {
        this.handling.handleAll(ds, batch);
      } else if (membership.admits) {
        this.handling.handleAll(ds, batch, (r) => membership.outcome(r));
      } else {
        this.release(ds.map((d) => d.id));
      }
    }
    if (batch.closed) this.endStream();
  };

  /** The circuit opened after these deliveries were sent: back in their place, never started. */
  private release(ids: number[]): void {
    if (ids.length === 0) return;
    this.tally.released(ids.length);
    try {
      this.inner.release(ids);
    } catch (err) {
      this.log(
        'warn',
        `rabbit-retry: giving back ${ids.length} message(s) of '${this.queue}' failed (the broker redelivers them when the channel closes): ${reasonOf(err)}`,
      );
    }
  }
}

/**
 * The consumers one of whose handlers runs the code running now: the
 * handler calls it, or awaits (however deep) what does, and has not returned.
 * @internal
 */
export function runningConsumers(): Consumer[] {
  return runningOwners().filter((owner): owner is Consumer => owner instanceof Consumer);
}
