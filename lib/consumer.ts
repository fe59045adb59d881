import { AsyncLocalStorage } from 'node:async_hooks';
import { EventEmitter } from 'node:events';

import { checkCloseOptions } from './check-options';
import { type RabbitRetryError, fromNative, native } from './errors';
import type { Message } from './message';
import type { ConsumerMetrics } from './metrics';
import type { NativeBatch, NativeConsumer } from './native';
import type { AlertOptions, CloseOptions, Logger, TableRouteOptions } from './options';
import { AlertWatch } from './consumer/alerts';
import { type DeliveryMeta, type WireEvent, deliveriesOf, eventsOf, messageOf, parseEvents } from './wire';
import { reasonOf } from './consumer/error-text';
import type { CloseResult, ConsumerEvents, ConsumerHealth, ConsumerState, ConsumerStats, Handler, StuckEvent } from './consumer/events';
import { FailureRoute } from './consumer/failure';
import { InFlight, type Tracked, stuckCheckEveryMs } from './consumer/in-flight';
import { type Log, logTo } from './consumer/log';
import { Settlements, UNREADABLE_FAILURE } from './consumer/settlement';
import { CloseBound } from './consumer/close-bound';
import { type ConsumerTracing, type ProcessSpan, consumerTracing } from './tracing';
import type { Circuit, CircuitClosedEvent, CircuitHalfOpenEvent, CircuitMember, CircuitOpenEvent, CircuitRecord, ProbeResult } from './circuit';
import type { CircuitIo } from './consumer/circuit-io';

/** @internal */
export interface ConsumerContext {
  inner: NativeConsumer;
  handler: Handler;
  retryable: (err: unknown, msg: Message) => boolean;
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
  /** The consumer's circuit breaker, and what it does on the broker. */
  circuit?: { circuit: Circuit; io: CircuitIo };
  onClosed: (c: Consumer) => void;
}

/** A handler running now: what its context holds, and what the stuck check reads. */
interface Running extends Tracked {
  readonly consumer: Consumer;
  /** The handler returned (or threw); code it started may still run in its context. */
  done: boolean;
}

/** Which handler the code running now belongs to, if any. */
const handlerScope = new AsyncLocalStorage<Running>();

/**
 * The consumer whose handler is running in the current async context, if a
 * handler is running there (and has not returned yet).
 * @internal
 */
export function runningConsumer(): Consumer | undefined {
  const r = handlerScope.getStore();
  return r !== undefined && !r.done ? r.consumer : undefined;
}

/**
 * Runs `f` outside any handler's context: what it starts does not count as
 * running inside a handler.
 * @internal
 */
export function outsideHandlers<T>(f: () => T): T {
  return handlerScope.exit(f);
}

/**
 * A running consumer of one work queue. Created by {@link RabbitRetry.consume}.
 *
 * Events: `retry`, `parked`, `stored`, `publishFailed`, `stuck`, `alert`,
 * `tableAlert`, `disconnected`, `recovered` and `error` (see {@link ConsumerEvents}).
 */
export class Consumer extends EventEmitter<ConsumerEvents> {
  /** The work queue. */
  readonly queue: string;
  private readonly inner: NativeConsumer;
  private readonly handler: Handler;
  private readonly log: Log;
  private readonly metrics: ConsumerMetrics;
  /** Handlers running now, by delivery id, in the order they started. */
  private readonly running: InFlight<Running>;
  private readonly route: FailureRoute;
  /** Settled since the last flush. */
  private readonly settlements: Settlements;
  private readonly streamDone: Promise<void>;
  private endStream!: () => void;
  private readonly alerts?: AlertWatch;
  // ES private fields: printing or serialising the consumer never meets a timer's circular internals.
  readonly #stuckTimer: NodeJS.Timeout;
  private closing?: Promise<CloseResult>;
  /** Resolves when deliveries have stopped, once a close began. */
  private stopped?: Promise<void>;
  /** When the close stops waiting for handlers. */
  readonly #bound = new CloseBound();
  /** The close stopped waiting with handlers still running: what they settle is dropped. */
  private abandoned = false;
  /** The channel is closing: deliveries that arrive now are not started (the closed channel gives them back). */
  private finishing = false;
  private closed = false;
  /** The node the consumer consumes from (it changes when recovery moves to another). */
  private node: string;
  private readonly tracing: ConsumerTracing;
  private readonly circuit?: Circuit;
  /** The consumer as its circuit sees it. */
  private readonly member?: CircuitMember;
  private readonly counts: Omit<ConsumerStats, 'queue' | 'state' | 'url' | 'inFlight' | 'stuck' | 'oldestInFlightMs'> = {
    acked: 0,
    failed: 0,
    retried: 0,
    retriedByDelay: {},
    parked: 0,
    parkedByReason: {},
    stored: 0,
    publishFailed: 0,
    released: 0,
    returnedEarly: 0,
    handlerMs: { count: 0, total: 0, max: 0 },
  };

  /** @internal */
  constructor(private readonly ctx: ConsumerContext) {
    // A listener's returned Promise that rejects comes to the method below, never unhandled.
    super({ captureRejections: true });
    this.inner = ctx.inner;
    this.handler = ctx.handler;
    this.log = logTo(ctx.logger);
    this.metrics = ctx.metrics;
    this.queue = ctx.inner.queue;
    this.node = ctx.url;
    this.tracing = consumerTracing(this.queue);
    this.running = new InFlight<Running>(ctx.stuckAfterMs);
    this.route = new FailureRoute({
      queue: this.queue,
      // The predicate runs with the consumer as `this`, as the handler does.
      retryable: (err, msg) => ctx.retryable.call(this, err, msg),
      table: ctx.table,
      log: this.log,
    });
    this.settlements = new Settlements({
      queue: this.queue,
      inner: this.inner,
      log: this.log,
      closing: () => this.closing !== undefined,
      closed: () => this.closed,
      fail: (err) => this.fail(err),
    });
    if (ctx.alert) {
      this.alerts = new AlertWatch(ctx.alert, {
        queue: this.queue,
        parkedDepth: ctx.parkedDepth,
        oldestDueAge: ctx.oldestDueAge,
        emit: (event, alert) => (this.emit as (e: string, a: unknown) => boolean)(event, alert),
        log: this.log,
      });
    }
    this.#stuckTimer = setInterval(this.checkStuck, stuckCheckEveryMs(ctx.stuckAfterMs));
    this.#stuckTimer.unref();
    this.streamDone = new Promise((resolve) => (this.endStream = resolve));
    if (ctx.circuit) {
      this.circuit = ctx.circuit.circuit;
      this.member = this.circuitMember(ctx.circuit.io);
    }
    this.inner.start(ctx.batchSize, this.onBatch);
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
    if (this.closed) return 'closed';
    if (this.closing) return 'closing';
    return this.inner.state as ConsumerState;
  }

  /** Counts since the consumer started; the same numbers the metrics report. */
  stats(): ConsumerStats {
    const c = this.counts;
    return {
      queue: this.queue,
      state: this.state,
      url: this.node,
      inFlight: this.running.size,
      ...c,
      retriedByDelay: { ...c.retriedByDelay },
      parkedByReason: { ...c.parkedByReason },
      handlerMs: { ...c.handlerMs },
      ...this.running.ages(),
      ...(this.circuit ? { circuit: this.circuit.status() } : {}),
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
      ...(this.circuit ? { circuit: this.circuit.status() } : {}),
    };
  }

  /**
   * Joins the circuit: reads its state queue (a circuit left open, or a probe
   * that never finished, starts it open) and pauses when it is open.
   * @internal
   */
  async joinCircuit(): Promise<void> {
    if (!this.circuit || !this.member || !this.ctx.circuit) return;
    const restored = await this.ctx.circuit.io.restore();
    await this.circuit.join(this.member, restored);
  }

  /** The consumer as its circuit sees it. */
  private circuitMember(io: CircuitIo): CircuitMember {
    const notify = (event: 'circuitOpen' | 'circuitHalfOpen' | 'circuitClosed', e: CircuitOpenEvent | CircuitHalfOpenEvent | CircuitClosedEvent): void => {
      if (event === 'circuitOpen') this.safely(() => this.metrics.circuitOpened((e as CircuitOpenEvent).dependency));
      if (this.listenerCount(event) === 0) {
        // Unheard, an open and a close still reach the log; a probe does not.
        if (event === 'circuitOpen') {
          const o = e as CircuitOpenEvent;
          this.log('warn', `rabbit-retry: the circuit of '${o.dependency}' opened (${o.cause}); the consumer of '${this.queue}' stops taking messages and probes`);
        } else if (event === 'circuitClosed') {
          const c = e as CircuitClosedEvent;
          this.log('warn', `rabbit-retry: the circuit of '${c.dependency}' closed (${c.cause}) after ${c.openMs} ms; the consumer of '${this.queue}' takes messages again`);
        }
        return;
      }
      try {
        (this.emit as (ev: string, arg: unknown) => boolean)(event, e);
      } catch (err) {
        this.log('error', `rabbit-retry: a '${event}' listener of the consumer of '${this.queue}' threw: ${reasonOf(err)}`);
      }
    };
    return {
      queue: this.queue,
      pause: () => (this.closing ? Promise.resolve() : native(() => this.inner.pause())),
      resume: () => (this.closing ? Promise.resolve() : native(() => this.inner.resume())),
      probe: () => this.probe(),
      returnEarly: async (rate, go) => {
        try {
          const n = await io.returnEarly(rate, () => go() && !this.closing);
          this.counts.returnedEarly += n;
          return n;
        } catch (err) {
          // Closing took the channel away: what was not sent back waits out its delay.
          if (this.closing) return 0;
          throw err;
        }
      },
      record: (r: CircuitRecord) => io.record(r),
      notify: notify as CircuitMember['notify'],
      warn: (line) => this.log('warn', `rabbit-retry: ${line}`),
    };
  }

  /**
   * Takes one message of the paused work queue and runs the handler on it. A
   * handler still running after `stuckAfterMs` counts as a failed probe: one
   * message that hangs does not hold the circuit. It goes on running, and its
   * message is settled when it ends.
   */
  private async probe(): Promise<ProbeResult> {
    if (this.closing || this.closed) return 'empty';
    const p = await native(() => this.inner.probe());
    if (p.outcome === 'empty') return 'empty';
    const [d] = p.batch ? deliveriesOf(p.batch) : [];
    if (!d || !p.batch || this.finishing) return 'other';
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<ProbeResult>((resolve) => {
      timer = setTimeout(() => resolve('failure'), this.running.stuckAfterMs);
      timer.unref();
    });
    try {
      return await Promise.race([this.handle(d, p.batch), stuck]);
    } finally {
      clearTimeout(timer);
    }
  }

  private readonly checkStuck = (): void => {
    this.running.checkStuck((r, sinceMs) => {
      const event: StuckEvent = { queue: this.queue, messageId: r.messageId, sinceMs, attempt: r.attempt };
      if (this.listenerCount('stuck') > 0) {
        try {
          this.emit('stuck', event);
        } catch (err) {
          this.log('error', `rabbit-retry: a 'stuck' listener of the consumer of '${this.queue}' threw: ${reasonOf(err)}`);
        }
      } else {
        this.log(
          'warn',
          `rabbit-retry: the handler of message ${r.messageId ?? '(no id)'} of '${this.queue}' has not settled after ${event.sinceMs} ms (stuckAfterMs ${this.running.stuckAfterMs})`,
        );
      }
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
    let timeoutMs: number;
    try {
      timeoutMs = checkCloseOptions(options);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!this.closed) this.#bound.by(timeoutMs);
    const fromOwnHandler = runningConsumer() === this;
    if (!this.closing) {
      this.closing = outsideHandlers(() => this.shutdown());
      // Closed from a handler, nobody awaits the shutdown: a failure is logged, never unhandled.
      this.closing.catch((err: unknown) => {
        if (fromOwnHandler) this.log('error', `rabbit-retry: closing the consumer of '${this.queue}' failed: ${reasonOf(err)}`);
      });
    }
    if (!fromOwnHandler) return this.closing;
    return this.deliveriesStopped().then(() => ({ unfinished: 0 }));
  }

  /**
   * Resolves once a close has stopped deliveries (at once when no close began).
   * @internal
   */
  deliveriesStopped(): Promise<void> {
    return this.stopped ? this.#bound.within(this.stopped).catch(() => undefined) : Promise.resolve();
  }

  private async shutdown(): Promise<CloseResult> {
    this.alerts?.stop();
    if (this.member) this.circuit?.leave(this.member);
    try {
      this.stopped = native(() => this.inner.stop());
      await this.#bound.within(this.stopped);
      await this.#bound.within(this.streamDone);
      await this.#bound.within(this.running.idle());
      const unfinished = this.running.size;
      if (unfinished > 0) this.abandoned = true;
      this.finishing = true;
      this.settlements.flush();
      const late = await native(() => this.inner.finish());
      for (const e of parseEvents(late)) this.reportSafely(e);
      if (unfinished > 0) {
        this.log(
          'warn',
          `rabbit-retry: closed the consumer of '${this.queue}' with ${unfinished} handler(s) still running; their messages went back to the queue unacked`,
        );
      }
      return { unfinished };
    } finally {
      clearInterval(this.#stuckTimer);
      this.tracing.close();
      this.#bound.clear();
      this.closed = true;
      try {
        this.metrics.stop();
      } catch {
        // The meter provider's own problem: the consumer is closed all the same.
      }
      this.ctx.onClosed(this);
    }
  }

  /** Deliveries and events from the native consumer, as they arrive. */
  private readonly onBatch = (batch: NativeBatch): void => {
    for (const e of eventsOf(batch)) this.reportSafely(e);
    if (!this.finishing) {
      const circuit = this.circuit;
      if (!circuit) {
        for (const d of deliveriesOf(batch)) void this.handle(d, batch);
      } else if (circuit.admits) {
        for (const d of deliveriesOf(batch)) void this.handle(d, batch).then((r) => this.reportOutcome(circuit, r));
      } else {
        // The circuit opened after these were sent: back in their place, never started.
        const ids = deliveriesOf(batch).map((d) => d.id);
        if (ids.length > 0) {
          this.counts.released += ids.length;
          try {
            this.inner.release(ids);
          } catch (err) {
            this.log('warn', `rabbit-retry: giving back ${ids.length} message(s) of '${this.queue}' failed (the broker redelivers them when the channel closes): ${reasonOf(err)}`);
          }
        }
      }
    }
    if (batch.closed) this.endStream();
  };

  /** Tells the circuit how a handler went. */
  private reportOutcome(circuit: Circuit, r: ProbeResult): void {
    if (r === 'failure') circuit.failure();
    else if (r === 'success') circuit.success();
  }

  /** Reports an event; a listener that throws is logged, and consuming goes on. */
  private reportSafely(e: WireEvent): void {
    try {
      this.report(e);
    } catch (err) {
      this.log('error', `rabbit-retry: a '${e.kind}' listener of the consumer of '${this.queue}' threw: ${reasonOf(err)}`);
    }
  }

  /**
   * Runs the handler for one delivery and settles it; resolves to how it
   * went (`failure` for a retryable one). Never rejects.
   */
  private async handle(d: DeliveryMeta, batch: NativeBatch): Promise<ProbeResult> {
    let run: Running | undefined;
    try {
      const { msg, messageId } = messageOf(d, batch);
      const span = this.tracing.process(msg.headers, () => ({
        exchange: d.exchange,
        routingKey: d.routingKey,
        messageId,
        bodySize: msg.body.length,
        attempt: d.attempt,
      }));
      const r: Running = {
        consumer: this,
        startedAt: performance.now(),
        messageId,
        attempt: d.attempt,
        reported: false,
        done: false,
      };
      run = r;
      this.running.add(d.id, r);
      let threw = false;
      let error: unknown;
      const call = () => handlerScope.run(r, () => this.handler(msg));
      try {
        await (span ? span.run(call) : call());
      } catch (err) {
        threw = true;
        error = err;
      }
      r.done = true;
      span?.end(error, threw);
      // The close gave up on this handler and the channel took its message back.
      if (this.abandoned || this.closed) return 'other';
      if (!threw) {
        this.succeeded(d.id, r.startedAt);
        return 'success';
      }
      return this.failedWith(d.id, msg, error, r.startedAt, d.table === true, span) ? 'failure' : 'other';
    } catch (internal) {
      // Nothing above should throw; if it did, the delivery still gets settled.
      if (!this.abandoned && !this.closed) {
        this.settlements.fail(d.id, { ...UNREADABLE_FAILURE, message: `the message could not be handled: ${reasonOf(internal)}` });
      }
      return 'other';
    } finally {
      if (run) run.done = true;
      this.running.delete(d.id);
    }
  }

  private succeeded(id: number, started: number): void {
    this.settlements.ack(id);
    this.counts.acked++;
    this.safely(() => {
      this.timed(started, 'success');
      this.metrics.acked();
    });
  }

  /** Settles a failure; true when it was retryable. */
  private failedWith(id: number, msg: Message, err: unknown, started: number, tableBound: boolean, span?: ProcessSpan): boolean {
    const failure = this.route.failureOf(err, msg, tableBound);
    this.settlements.fail(id, span ? { ...failure, ...span.moving(id) } : failure);
    this.counts.failed++;
    this.safely(() => this.timed(started, 'failure'));
    return failure.retryable;
  }

  private timed(started: number, outcome: 'success' | 'failure'): void {
    const ms = performance.now() - started;
    const h = this.counts.handlerMs;
    h.count++;
    h.total += ms;
    if (ms > h.max) h.max = ms;
    this.metrics.handlerDuration(ms, outcome);
  }

  /** Runs bookkeeping that must not keep a message from being settled. */
  private safely(f: () => void): void {
    try {
      f();
    } catch (err) {
      this.log('warn', `rabbit-retry: recording a settled message of '${this.queue}' failed: ${reasonOf(err)}`);
    }
  }

  private report(e: WireEvent): void {
    this.safely(() => this.tracing.settled(e));
    switch (e.kind) {
      case 'retry': {
        const { delay, target } = e;
        const messageId = e.messageId ?? undefined;
        this.counts.retried++;
        this.counts.retriedByDelay[delay] = (this.counts.retriedByDelay[delay] ?? 0) + 1;
        this.metrics.retried(delay);
        this.emit('retry', { queue: this.queue, target, messageId, attempt: e.attempt, delay, error: e.error });
        return;
      }
      case 'parked': {
        const { reason, target } = e;
        const messageId = e.messageId ?? undefined;
        this.counts.parked++;
        this.counts.parkedByReason[reason] = (this.counts.parkedByReason[reason] ?? 0) + 1;
        this.metrics.parked(reason);
        this.emit('parked', { queue: this.queue, target, messageId, reason, attempt: e.attempt, error: e.error });
        return;
      }
      case 'stored':
        this.counts.stored++;
        this.emit('stored', {
          queue: this.queue,
          rowId: e.rowId,
          messageId: e.messageId ?? undefined,
          attempt: e.attempt,
          dependency: e.dependency ?? undefined,
          error: e.error,
        });
        return;
      case 'publish-failed': {
        const { target } = e;
        const messageId = e.messageId ?? undefined;
        this.counts.publishFailed++;
        this.metrics.publishFailed();
        const error = fromNative(new Error(e.error)) as RabbitRetryError;
        if (this.listenerCount('publishFailed') > 0) {
          this.emit('publishFailed', { queue: this.queue, target, messageId, error });
        } else {
          this.log(
            'warn',
            `rabbit-retry: could not move message ${messageId ?? '(no id)'} of '${this.queue}' to '${target}'; it stays unacked and the broker will redeliver it: ${error.message}`,
          );
        }
        return;
      }
      case 'disconnected': {
        const error = fromNative(new Error(e.error)) as Error;
        if (this.listenerCount('disconnected') > 0) this.emit('disconnected', { queue: this.queue, error, url: e.url });
        else this.log('warn', `rabbit-retry: consumer of '${this.queue}' lost its channel on ${e.url}, recovering: ${error.message}`);
        return;
      }
      case 'recovered':
        this.node = e.url;
        this.emit('recovered', { queue: this.queue, attempts: e.attempts, afterMs: e.afterMs, url: e.url });
        return;
      default:
        this.fail(fromNative(new Error(e.error)));
    }
  }

  private fail(err: unknown): void {
    const error = err instanceof Error ? err : new Error(reasonOf(err));
    if (this.listenerCount('error') === 0) {
      this.log('error', `rabbit-retry: consumer of '${this.queue}': ${error.message}`);
      return;
    }
    try {
      this.emit('error', error);
    } catch (listenerErr) {
      this.log('error', `rabbit-retry: an 'error' listener of the consumer of '${this.queue}' threw: ${reasonOf(listenerErr)}`);
    }
  }
}
