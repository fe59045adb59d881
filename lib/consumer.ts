import { EventEmitter } from 'node:events';

import { NonRetryableError, RabbitRetryError, fromNative, native, nativeSync } from './errors';
import { Message } from './message';
import type { NativeBatch, NativeConsumer, NativeEvent, NativeFailureInfo as FailureInfo, NativeMessageProperties } from './native';
import type { ConsumerMetrics } from './metrics';
import type { AlertOptions, Logger, TableRouteOptions } from './options';

/** One delivery's entry in a batch's `meta` (see `NativeBatch` in src/binding/consumer.rs). */
interface DeliveryMeta {
  /** Its id, to settle it with. */
  i: number;
  /** Exchange. */
  x: string;
  /** Routing key. */
  k: string;
  /** Redelivered. */
  r: boolean;
  /** Earlier failed attempts. */
  a: number;
  /** Properties and headers. */
  p: NativeMessageProperties;
  /** Offset and length of the body in the batch's shared buffer. */
  o?: number;
  n?: number;
  /** Or the index of its own buffer in `large`. */
  l?: number;
}

/** A handler: resolve to ack the message, throw to retry or park it. */
export type Handler = (msg: Message) => unknown;

/** Emitted when a failed message was copied to a retry queue and acked. */
export interface RetryEvent {
  /** The work queue. */
  queue: string;
  /** The retry queue it waits in. */
  target: string;
  /** Its message id, if any. */
  messageId?: string;
  /** The `retry-attempt` it carries now. */
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
  /** `exhausted` or `non-retryable`. */
  reason: string;
  /** The `retry-attempt` it carries. */
  attempt: number;
  /** The handler's error message. */
  error: string;
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

/** What a consumer is doing. */
export type ConsumerState = 'connected' | 'recovering' | 'closing' | 'closed';

/** Emitted once each time the retry table's oldest due row grows older than the alert threshold. */
export interface RetryTableAlert {
  /** The work queue of the consumer that checked. */
  queue: string;
  /** Age in ms of the oldest row whose due time has passed. */
  oldestDueAgeMs: number;
  /** The threshold it passed. */
  threshold: number;
}

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
  /** Handlers running now. */
  inFlight: number;
  /** Messages handled successfully and acked. */
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
  /** Handler durations in milliseconds. */
  handlerMs: { count: number; total: number; max: number };
}

/** @internal */
export interface ConsumerContext {
  inner: NativeConsumer;
  handler: Handler;
  retryable: (err: unknown, msg: Message) => boolean;
  batchSize: number;
  logger: Logger;
  metrics: ConsumerMetrics;
  parkedDepth: () => Promise<number | undefined>;
  oldestDueAge?: () => Promise<number>;
  alert?: AlertOptions & { everyMs: number };
  table?: TableRouteOptions;
  /** How many retry queues come before the table. */
  delayCount: number;
  onClosed: (c: Consumer) => void;
}

/** Emitted when the consumer lost its channel or connection and starts recovering. */
export interface DisconnectedEvent {
  /** The work queue. */
  queue: string;
  /** What happened. */
  error: Error;
}

/** Emitted when the consumer consumes again after a loss. */
export interface RecoveredEvent {
  /** The work queue. */
  queue: string;
  /** Tries it took. */
  attempts: number;
  /** Milliseconds since the loss. */
  afterMs: number;
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
  /** A republish failed; the message stays unacked until the channel closes. */
  publishFailed: [PublishFailedEvent];
  /** The consumer hit an error (a failed ack, a lost channel). */
  error: [Error];
}

function errorInfo(err: unknown): { name: string; message: string; stack: string } {
  if (err instanceof Error) {
    return { name: err.name || err.constructor?.name || 'Error', message: err.message, stack: err.stack ?? '' };
  }
  if (err === undefined || err === null) {
    return {
      name: 'Error',
      message: `the handler threw ${String(err)}; throw an Error to keep a message and a stack`,
      stack: '',
    };
  }
  if (typeof err === 'object') {
    const o = err as { name?: unknown; message?: unknown; stack?: unknown };
    let text: string;
    try {
      text = JSON.stringify(err);
    } catch {
      text = String(err);
    }
    return {
      name: typeof o.name === 'string' ? o.name : 'Error',
      message: typeof o.message === 'string' ? o.message : `the handler threw a non-Error object: ${text}`,
      stack: typeof o.stack === 'string' ? o.stack : '',
    };
  }
  return { name: 'Error', message: String(err), stack: '' };
}

/**
 * A running consumer of one work queue. Created by {@link RabbitRetry.consume}.
 *
 * Events: `retry`, `parked`, `publishFailed` and `error` (see {@link ConsumerEvents}).
 */
export class Consumer extends EventEmitter<ConsumerEvents> {
  /** The work queue. */
  readonly queue: string;
  private readonly inner: NativeConsumer;
  private readonly handler: Handler;
  private readonly retryable: (err: unknown, msg: Message) => boolean;
  private readonly logger: Logger;
  private readonly metrics: ConsumerMetrics;
  /** Handlers running now, and who waits for none to run. */
  private inFlight = 0;
  private idle?: () => void;
  /** Settled since the last flush: acked ids, failed ids and their failures. */
  private acked: number[] = [];
  private failed: number[] = [];
  private failures: FailureInfo[] = [];
  private readonly streamDone: Promise<void>;
  private endStream!: () => void;
  private readonly alertTimer?: NodeJS.Timeout;
  private alerting = false;
  private tableAlerting = false;
  private closing?: Promise<void>;
  private closed = false;
  private readonly counts: Omit<ConsumerStats, 'queue' | 'state' | 'inFlight'> = {
    acked: 0,
    failed: 0,
    retried: 0,
    retriedByDelay: {},
    parked: 0,
    parkedByReason: {},
    stored: 0,
    publishFailed: 0,
    handlerMs: { count: 0, total: 0, max: 0 },
  };

  /** @internal */
  constructor(private readonly ctx: ConsumerContext) {
    super();
    this.inner = ctx.inner;
    this.handler = ctx.handler;
    this.retryable = ctx.retryable;
    this.logger = ctx.logger;
    this.metrics = ctx.metrics;
    this.queue = ctx.inner.queue;
    if (ctx.alert) {
      const alert = ctx.alert;
      this.alertTimer = setInterval(() => void this.checkAlert(alert), alert.everyMs);
      this.alertTimer.unref();
      void this.checkAlert(alert);
    }
    this.streamDone = new Promise((resolve) => (this.endStream = resolve));
    this.inner.start(ctx.batchSize, this.onBatch);
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
      inFlight: this.inFlight,
      ...c,
      retriedByDelay: { ...c.retriedByDelay },
      parkedByReason: { ...c.parkedByReason },
      handlerMs: { ...c.handlerMs },
    };
  }

  private async checkAlert(alert: NonNullable<ConsumerContext['alert']>): Promise<void> {
    const notify = <T>(event: 'alert' | 'tableAlert', a: T, callback?: (a: T) => void) => {
      try {
        callback?.(a);
      } catch (err) {
        const name = event === 'alert' ? 'onAlert' : 'onTableAlert';
        this.logger.warn(`rabbit-retry: alert.${name} threw: ${errorInfo(err).message}`);
      }
      (this.emit as (e: string, a: T) => boolean)(event, a);
    };
    if (alert.parkedAbove !== undefined) {
      const depth = await this.ctx.parkedDepth().catch(() => undefined);
      if (depth !== undefined) {
        // Once per crossing: re-armed only when the depth falls back to the threshold.
        if (depth > alert.parkedAbove) {
          if (!this.alerting) {
            this.alerting = true;
            notify<ParkedAlert>('alert', { queue: this.queue, parkedQueue: `${this.queue}.parked`, depth, threshold: alert.parkedAbove }, alert.onAlert);
          }
        } else {
          this.alerting = false;
        }
      }
    }
    if (alert.oldestDueAboveMs !== undefined && this.ctx.oldestDueAge) {
      const age = await this.ctx.oldestDueAge().catch(() => undefined);
      if (age !== undefined) {
        if (age > alert.oldestDueAboveMs) {
          if (!this.tableAlerting) {
            this.tableAlerting = true;
            notify<RetryTableAlert>('tableAlert', { queue: this.queue, oldestDueAgeMs: age, threshold: alert.oldestDueAboveMs }, alert.onTableAlert);
          }
        } else {
          this.tableAlerting = false;
        }
      }
    }
  }

  /** Handlers running now. */
  get inFlightCount(): number {
    return this.inFlight;
  }

  /**
   * Stops taking deliveries, lets in-flight handlers finish and settles them,
   * puts deliveries that never started back in the queue, then closes the
   * consumer's channel. Safe to call more than once.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    if (this.alertTimer) clearInterval(this.alertTimer);
    await native(this.inner.stop());
    await this.streamDone;
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    this.flushSettled();
    await native(this.inner.finish());
    for (const e of this.inner.takeEvents()) this.report(e);
    this.metrics.stop();
    this.closed = true;
    this.ctx.onClosed(this);
  }

  /** Deliveries and events from the native consumer, as they arrive. */
  private readonly onBatch = (batch: NativeBatch): void => {
    for (const e of batch.events.length > 2 ? (JSON.parse(batch.events) as NativeEvent[]) : []) {
      try {
        this.report(e);
      } catch (err) {
        // An event listener threw: say so, and keep consuming.
        this.logger.error(`rabbit-retry: a '${e.kind}' listener of the consumer of '${this.queue}' threw: ${errorInfo(err).message}`);
      }
    }
    if (batch.meta.length > 2) {
      for (const d of JSON.parse(batch.meta) as DeliveryMeta[]) {
        this.inFlight++;
        void this.handle(d, batch);
      }
    }
    if (batch.closed) this.endStream();
  };

  /** Runs the handler for one delivery and settles it. */
  private async handle(d: DeliveryMeta, batch: NativeBatch): Promise<void> {
    const p = d.p as NativeMessageProperties & { messageId?: string | number; correlationId?: string | number };
    // Short ids travel beside the JSON (see `NativeBatch.strings`): put them back.
    if (typeof p.messageId === 'number') p.messageId = batch.strings[p.messageId];
    if (typeof p.correlationId === 'number') p.correlationId = batch.strings[p.correlationId];
    const own = d.l === undefined ? undefined : batch.large[d.l];
    const start = own ? 0 : (d.o ?? 0);
    const msg = new Message({
      exchange: d.x,
      routingKey: d.k,
      redelivered: d.r,
      attempt: d.a,
      properties: d.p,
      bytes: own ?? batch.bodies,
      start,
      end: own ? own.length : start + (d.n ?? 0),
    });
    const started = performance.now();
    let threw = false;
    let error: unknown;
    try {
      await this.handler(msg);
    } catch (err) {
      threw = true;
      error = err;
    }
    try {
      if (threw) this.failedWith(d.i, msg, error, started);
      else this.succeeded(d.i, started);
    } finally {
      if (--this.inFlight === 0 && this.idle) this.idle();
    }
  }

  private succeeded(id: number, started: number): void {
    this.timed(started, 'success');
    this.acked.push(id);
    this.queueFlush();
    this.counts.acked++;
    this.metrics.acked();
  }

  private failedWith(id: number, msg: Message, err: unknown, started: number): void {
    this.timed(started, 'failure');
    this.counts.failed++;
    let retryable: boolean;
    try {
      retryable = !(err instanceof NonRetryableError) && this.retryable(err, msg);
    } catch (predicateErr) {
      retryable = false;
      this.logger.warn(
        `rabbit-retry: onFailure.retryable threw (${errorInfo(predicateErr).message}); parking the message of queue '${this.queue}'`,
      );
    }
    const table = retryable ? this.tableInfo(err, msg) : undefined;
    this.failed.push(id);
    this.failures.push({ ...errorInfo(err), retryable, table });
    this.queueFlush();
  }

  /** Where the row goes if the route is the retry table; callbacks that throw fall back to defaults. */
  private tableInfo(err: unknown, msg: Message): { dependency?: string; tenant?: string; nextAttemptAtMs?: number } | undefined {
    const t = this.ctx.table;
    // Only a failure past the delays and within the table's attempts becomes a row.
    if (!t || msg.attempt < this.ctx.delayCount || msg.attempt >= this.ctx.delayCount + (t.maxAttempts ?? 10)) return undefined;
    const call = <T>(name: string, f: () => T, fallback: T): T => {
      try {
        return f();
      } catch (e) {
        this.logger.warn(`rabbit-retry: onFailure.table.${name} threw (${errorInfo(e).message}); using its default`);
        return fallback;
      }
    };
    const dependency = t.dependency ? call('dependency', () => t.dependency?.(err, msg), undefined) : undefined;
    const tenant = t.tenant ? call('tenant', () => t.tenant?.(msg), undefined) : undefined;
    const fallback = new Date(Date.now() + 60_000);
    const next = t.nextAttemptAt ? call<Date | null>('nextAttemptAt', () => t.nextAttemptAt?.(err, msg.attempt + 1) ?? null, fallback) : fallback;
    let nextAttemptAtMs: number | undefined;
    if (next === null) nextAttemptAtMs = undefined; // waits for a person
    else if (next instanceof Date && !Number.isNaN(next.getTime())) nextAttemptAtMs = next.getTime();
    else nextAttemptAtMs = fallback.getTime();
    return {
      dependency: typeof dependency === 'string' ? dependency : undefined,
      tenant: typeof tenant === 'string' ? tenant : undefined,
      nextAttemptAtMs,
    };
  }

  private timed(started: number, outcome: 'success' | 'failure'): void {
    const ms = performance.now() - started;
    const h = this.counts.handlerMs;
    h.count++;
    h.total += ms;
    if (ms > h.max) h.max = ms;
    this.metrics.handlerDuration(ms, outcome);
  }

  /**
   * Settlements go to the native side in one call per turn of the event
   * loop: the handlers that finished in the same turn share it.
   */
  private queueFlush(): void {
    if (this.acked.length + this.failed.length === 1) setImmediate(this.flushSettled);
  }

  private readonly flushSettled = (): void => {
    if (this.acked.length + this.failed.length === 0) return;
    const { acked, failed, failures } = this;
    this.acked = [];
    this.failed = [];
    this.failures = [];
    try {
      nativeSync(() => this.inner.settle(acked, failed, failures));
    } catch (err) {
      // Settling only fails once the consumer is gone: the broker takes the message back.
      this.fail(err);
    }
  };

  private report(e: NativeEvent): void {
    const messageId = e.messageId ?? undefined;
    const target = e.target ?? '';
    switch (e.kind) {
      case 'retry': {
        const delay = e.delay ?? '';
        this.counts.retried++;
        this.counts.retriedByDelay[delay] = (this.counts.retriedByDelay[delay] ?? 0) + 1;
        this.metrics.retried(delay);
        this.emit('retry', { queue: this.queue, target, messageId, attempt: e.attempt ?? 0, delay, error: e.error });
        return;
      }
      case 'parked': {
        const reason = e.reason ?? '';
        this.counts.parked++;
        this.counts.parkedByReason[reason] = (this.counts.parkedByReason[reason] ?? 0) + 1;
        this.metrics.parked(reason);
        this.emit('parked', { queue: this.queue, target, messageId, reason, attempt: e.attempt ?? 0, error: e.error });
        return;
      }
      case 'stored':
        this.counts.stored++;
        this.emit('stored', {
          queue: this.queue,
          rowId: e.rowId ?? 0,
          messageId,
          attempt: e.attempt ?? 0,
          dependency: e.dependency ?? undefined,
          error: e.error,
        });
        return;
      case 'publish-failed': {
        this.counts.publishFailed++;
        this.metrics.publishFailed();
        const error = fromNative(new Error(e.error)) as RabbitRetryError;
        if (this.listenerCount('publishFailed') > 0) {
          this.emit('publishFailed', { queue: this.queue, target, messageId, error });
        } else {
          this.logger.warn(
            `rabbit-retry: could not move message ${messageId ?? '(no id)'} of '${this.queue}' to '${target}'; it stays unacked and the broker will redeliver it: ${error.message}`,
          );
        }
        return;
      }
      case 'disconnected': {
        const error = fromNative(new Error(e.error)) as Error;
        if (this.listenerCount('disconnected') > 0) this.emit('disconnected', { queue: this.queue, error });
        else this.logger.warn(`rabbit-retry: consumer of '${this.queue}' lost its channel, recovering: ${error.message}`);
        return;
      }
      case 'recovered':
        this.emit('recovered', { queue: this.queue, attempts: e.attempt ?? 1, afterMs: e.afterMs ?? 0 });
        return;
      default:
        this.fail(fromNative(new Error(e.error)));
    }
  }

  private fail(err: unknown): void {
    const error = err instanceof Error ? err : new Error(String(err));
    if (this.listenerCount('error') > 0) this.emit('error', error);
    else this.logger.error(`rabbit-retry: consumer of '${this.queue}': ${error.message}`);
  }
}
