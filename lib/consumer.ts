import { AsyncLocalStorage } from 'node:async_hooks';
import { EventEmitter } from 'node:events';

import { ClosedError, NonRetryableError, RabbitRetryError, fromNative, fromNativeCall, native } from './errors';
import { Message } from './message';
import type { NativeBatch, NativeConsumer, NativeEvent, NativeFailureInfo as FailureInfo, NativeMessageProperties } from './native';
import type { ConsumerMetrics } from './metrics';
import {
  checkCloseOptions,
  type AlertOptions,
  type CloseOptions,
  type Logger,
  type ParkedAlert,
  type RetryTableAlert,
  type TableRouteOptions,
} from './options';

export type { ParkedAlert, RetryTableAlert } from './options';

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
  /** Handlers running now for longer than `stuckAfterMs`. */
  stuck: number;
  /** Milliseconds the longest-running handler has been running; 0 when none runs. */
  oldestInFlightMs: number;
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
  /** After this many milliseconds a running handler counts as stuck. */
  stuckAfterMs: number;
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
  /** A handler has not settled its message after `stuckAfterMs` (once per delivery). */
  stuck: [StuckEvent];
  /** The consumer hit an error (a failed ack, a lost channel). */
  error: [Error];
}

/** A handler running now: what its context holds, and what the stuck check reads. */
interface Running {
  readonly consumer: Consumer;
  /** `performance.now()` when the handler started. */
  readonly startedAt: number;
  readonly messageId?: string;
  readonly attempt: number;
  /** A `stuck` event went out for it. */
  reported: boolean;
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

/** The failure passed to the native side when nothing better can be. */
const UNREADABLE_FAILURE: FailureInfo = {
  name: 'Error',
  message: 'the handler failed, and its error could not be passed on',
  stack: '',
  retryable: false,
};

/** What a thrown value is, in words, for a reason: never throws. */
function reasonOf(e: unknown): string {
  try {
    if (typeof e === 'string') return e;
    if (e !== null && (typeof e === 'object' || typeof e === 'function')) {
      const m = (e as { message?: unknown }).message;
      if (typeof m === 'string' && m.length > 0) return m;
    }
    return textOf(e);
  } catch {
    return 'a value that cannot be read';
  }
}

/** A readable text of any value: never throws. */
function textOf(v: unknown): string {
  try {
    switch (typeof v) {
      case 'string':
        return v;
      case 'number':
      case 'boolean':
      case 'bigint':
      case 'undefined':
        return String(v);
      case 'symbol':
        return v.toString();
      case 'function': {
        const name = (v as { name?: unknown }).name;
        return typeof name === 'string' && name.length > 0 ? `a function ${name}` : 'a function';
      }
    }
    if (v === null) return 'null';
  } catch {
    return 'a value that cannot be read';
  }
  try {
    const json = JSON.stringify(v);
    if (typeof json === 'string') return json;
  } catch {
    // Not JSON: a cycle, a BigInt, a throwing toJSON or getter; try String().
  }
  try {
    return String(v);
  } catch (e) {
    return `an object that can be neither read as JSON nor turned into a string (${reasonOf(e)})`;
  }
}

type Read = { ok: true; value: unknown } | { ok: false; why: string };

/** Reads one property; a getter or proxy trap that throws gives its reason. */
function readProp(obj: object, key: string): Read {
  try {
    return { ok: true, value: (obj as Record<string, unknown>)[key] };
  } catch (e) {
    return { ok: false, why: reasonOf(e) };
  }
}

/** The class name of an object, when it can be read. */
function constructorName(obj: object): string | undefined {
  const c = readProp(obj, 'constructor');
  if (!c.ok || c.value === null || (typeof c.value !== 'function' && typeof c.value !== 'object')) return undefined;
  const n = readProp(c.value, 'name');
  return n.ok && typeof n.value === 'string' && n.value.length > 0 && n.value !== 'Object' ? n.value : undefined;
}

/**
 * The name, message and stack of whatever a handler threw, as strings. Each
 * is read on its own, so a getter or a proxy that throws spoils only its own
 * part, which then says why it could not be read. Never throws.
 */
function errorInfo(err: unknown): { name: string; message: string; stack: string } {
  try {
    if (err === undefined || err === null) {
      return {
        name: 'Error',
        message: `the handler threw ${String(err)}; throw an Error to keep a message and a stack`,
        stack: '',
      };
    }
    if (typeof err !== 'object' && typeof err !== 'function') return { name: 'Error', message: textOf(err), stack: '' };
    let isError = false;
    try {
      isError = err instanceof Error;
    } catch {
      // A proxy whose getPrototypeOf trap throws: read it as an object.
    }
    const name = readProp(err, 'name');
    const message = readProp(err, 'message');
    const stack = readProp(err, 'stack');
    let nameText: string;
    if (name.ok && typeof name.value === 'string' && name.value.length > 0) nameText = name.value;
    else if (name.ok && name.value !== undefined && name.value !== null && name.value !== '') nameText = textOf(name.value);
    else nameText = (isError ? constructorName(err) : undefined) ?? 'Error';
    let messageText: string;
    if (!message.ok) messageText = `the error's message could not be read: ${message.why}`;
    else if (typeof message.value === 'string') messageText = message.value;
    else if (message.value !== undefined && message.value !== null) messageText = textOf(message.value);
    else if (isError) messageText = `the handler threw an error (${nameText}) whose message is ${String(message.value)}`;
    else messageText = `the handler threw a non-Error ${typeof err === 'function' ? 'function' : 'object'}: ${textOf(err)}`;
    let stackText: string;
    if (!stack.ok) stackText = `the error's stack could not be read: ${stack.why}`;
    else if (typeof stack.value === 'string') stackText = stack.value;
    else if (stack.value === undefined || stack.value === null) stackText = '';
    else stackText = textOf(stack.value);
    if (!name.ok && !stackText) stackText = `the error's name could not be read: ${name.why}`;
    return { name: nameText, message: messageText, stack: stackText };
  } catch (e) {
    return { name: 'Error', message: `the handler's error could not be read: ${reasonOf(e)}`, stack: '' };
  }
}

/** What a `retryable` predicate returned, in words, for a warning. */
function resultKind(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (isThenable(v)) return 'a Promise (an async function?)';
  switch (typeof v) {
    case 'number':
      return `a number (${String(v)})`;
    case 'string':
      return 'a string';
    case 'function':
      return 'a function';
    case 'bigint':
      return 'a bigint';
    case 'symbol':
      return 'a symbol';
    default:
      return 'an object';
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return false;
  try {
    return typeof (v as { then?: unknown }).then === 'function';
  } catch {
    return false;
  }
}

function isNonRetryable(err: unknown): boolean {
  try {
    return err instanceof NonRetryableError;
  } catch {
    return false;
  }
}

/** A failure every field of which the native side takes. */
function sanitized(f: FailureInfo): FailureInfo {
  try {
    const str = (v: unknown, fallback: string) => (typeof v === 'string' ? v : fallback);
    return {
      name: str(f.name, 'Error'),
      message: str(f.message, UNREADABLE_FAILURE.message),
      stack: str(f.stack, ''),
      retryable: f.retryable === true,
    };
  } catch {
    return UNREADABLE_FAILURE;
  }
}

function isClosedError(err: unknown): boolean {
  return err instanceof ClosedError;
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
  private readonly retryable: (err: unknown, msg: Message) => boolean;
  private readonly logger: Logger;
  private readonly metrics: ConsumerMetrics;
  /** Handlers running now, by delivery id, in the order they started. */
  private readonly running = new Map<number, Running>();
  /** Who waits for no handler to run. */
  private idleWaiters: (() => void)[] = [];
  /** Settled since the last flush: acked ids, failed ids and their failures. */
  private acked: number[] = [];
  private failed: number[] = [];
  private failures: FailureInfo[] = [];
  private readonly streamDone: Promise<void>;
  private endStream!: () => void;
  private readonly alertTimer?: NodeJS.Timeout;
  // ES private fields: printing or serialising the consumer never meets a timer's circular internals.
  readonly #stuckTimer: NodeJS.Timeout;
  private readonly stuckAfterMs: number;
  private alerting = false;
  private tableAlerting = false;
  private closing?: Promise<CloseResult>;
  /** Resolves when deliveries have stopped, once a close began. */
  private stopped?: Promise<void>;
  /** When the close stops waiting for handlers. */
  #bound?: { at: number; timer?: NodeJS.Timeout; passed: Promise<void>; pass: () => void };
  /** The close stopped waiting with handlers still running: what they settle is dropped. */
  private abandoned = false;
  /** The channel is closing: deliveries that arrive now are not started (the closed channel gives them back). */
  private finishing = false;
  private closed = false;
  private reportedSettleClosed = false;
  /** Kinds of non-boolean `retryable` results already warned about. */
  private readonly warnedResults = new Set<string>();
  private readonly counts: Omit<ConsumerStats, 'queue' | 'state' | 'inFlight' | 'stuck' | 'oldestInFlightMs'> = {
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
    this.stuckAfterMs = ctx.stuckAfterMs;
    if (ctx.alert) {
      const alert = ctx.alert;
      this.alertTimer = setInterval(() => void this.checkAlert(alert), alert.everyMs);
      this.alertTimer.unref();
      void this.checkAlert(alert);
    }
    // A quarter of the bound, between 25 ms and 5 s: a stuck handler is seen at most that late.
    this.#stuckTimer = setInterval(this.checkStuck, Math.min(Math.max(Math.floor(ctx.stuckAfterMs / 4), 25), 5000));
    this.#stuckTimer.unref();
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
      inFlight: this.running.size,
      ...c,
      retriedByDelay: { ...c.retriedByDelay },
      parkedByReason: { ...c.parkedByReason },
      handlerMs: { ...c.handlerMs },
      ...this.ages(),
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
    const { stuck, oldestInFlightMs } = this.ages();
    return {
      queue: this.queue,
      state,
      healthy: state === 'connected' && stuck === 0,
      inFlight: this.running.size,
      stuck,
      oldestInFlightMs,
    };
  }

  /** Handlers past the stuck bound now, and the age of the oldest. */
  private ages(): { stuck: number; oldestInFlightMs: number } {
    const now = performance.now();
    let stuck = 0;
    let oldest = 0;
    for (const r of this.running.values()) {
      const age = now - r.startedAt;
      if (oldest === 0) oldest = age;
      // They are in the order they started: the first younger than the bound ends the count.
      if (age < this.stuckAfterMs) break;
      stuck++;
    }
    return { stuck, oldestInFlightMs: Math.round(oldest) };
  }

  private readonly checkStuck = (): void => {
    const now = performance.now();
    for (const r of this.running.values()) {
      const age = now - r.startedAt;
      if (age < this.stuckAfterMs) break;
      if (r.reported) continue;
      r.reported = true;
      const event: StuckEvent = { queue: this.queue, messageId: r.messageId, sinceMs: Math.round(age), attempt: r.attempt };
      if (this.listenerCount('stuck') > 0) {
        try {
          this.emit('stuck', event);
        } catch (err) {
          this.log('error', `rabbit-retry: a 'stuck' listener of the consumer of '${this.queue}' threw: ${reasonOf(err)}`);
        }
      } else {
        this.log(
          'warn',
          `rabbit-retry: the handler of message ${r.messageId ?? '(no id)'} of '${this.queue}' has not settled after ${event.sinceMs} ms (stuckAfterMs ${this.stuckAfterMs})`,
        );
      }
    }
  };

  private async checkAlert(alert: NonNullable<ConsumerContext['alert']>): Promise<void> {
    const notify = <T>(event: 'alert' | 'tableAlert', a: T, callback?: (a: T) => void) => {
      try {
        callback?.(a);
      } catch (err) {
        const name = event === 'alert' ? 'onAlert' : 'onTableAlert';
        this.log('warn', `rabbit-retry: alert.${name} threw: ${reasonOf(err)}`);
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
    this.boundBy(timeoutMs);
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
    return this.stopped ? this.withinBound(this.stopped).catch(() => undefined) : Promise.resolve();
  }

  /** Makes the close stop waiting for handlers `timeoutMs` from now, unless it stops sooner already. */
  private boundBy(timeoutMs: number): void {
    if (this.closed) return;
    if (!this.#bound) {
      let pass!: () => void;
      const passed = new Promise<void>((resolve) => (pass = resolve));
      this.#bound = { at: Infinity, passed, pass };
    }
    const b = this.#bound;
    // Longer than a timer can wait is for ever.
    const at = timeoutMs > 0x7fffffff ? Infinity : performance.now() + timeoutMs;
    if (at >= b.at) return;
    b.at = at;
    if (b.timer) clearTimeout(b.timer);
    b.timer = setTimeout(b.pass, Math.max(0, at - performance.now()));
  }

  /** `p`, or nothing once the close's bound passed. */
  private async withinBound(p: Promise<unknown>): Promise<void> {
    const passed = this.#bound?.passed;
    await (passed ? Promise.race([p, passed]) : p);
  }

  private idle(): Promise<void> {
    if (this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async shutdown(): Promise<CloseResult> {
    if (this.alertTimer) clearInterval(this.alertTimer);
    try {
      this.stopped = native(() => this.inner.stop());
      await this.withinBound(this.stopped);
      await this.withinBound(this.streamDone);
      await this.withinBound(this.idle());
      const unfinished = this.running.size;
      if (unfinished > 0) this.abandoned = true;
      this.finishing = true;
      this.flushSettled();
      await native(() => this.inner.finish());
      for (const e of this.inner.takeEvents()) this.reportSafely(e);
      if (unfinished > 0) {
        this.log(
          'warn',
          `rabbit-retry: closed the consumer of '${this.queue}' with ${unfinished} handler(s) still running; their messages went back to the queue unacked`,
        );
      }
      return { unfinished };
    } finally {
      clearInterval(this.#stuckTimer);
      if (this.#bound?.timer) clearTimeout(this.#bound.timer);
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
    for (const e of batch.events.length > 2 ? (JSON.parse(batch.events) as NativeEvent[]) : []) this.reportSafely(e);
    if (batch.meta.length > 2 && !this.finishing) {
      for (const d of JSON.parse(batch.meta) as DeliveryMeta[]) void this.handle(d, batch);
    }
    if (batch.closed) this.endStream();
  };

  /** Reports an event; a listener that throws is logged, and consuming goes on. */
  private reportSafely(e: NativeEvent): void {
    try {
      this.report(e);
    } catch (err) {
      this.log('error', `rabbit-retry: a '${e.kind}' listener of the consumer of '${this.queue}' threw: ${reasonOf(err)}`);
    }
  }

  /** Runs the handler for one delivery and settles it. Never rejects. */
  private async handle(d: DeliveryMeta, batch: NativeBatch): Promise<void> {
    let run: Running | undefined;
    try {
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
      const r: Running = {
        consumer: this,
        startedAt: performance.now(),
        messageId: typeof p.messageId === 'string' ? p.messageId : undefined,
        attempt: d.a,
        reported: false,
        done: false,
      };
      run = r;
      this.running.set(d.i, r);
      let threw = false;
      let error: unknown;
      try {
        await handlerScope.run(r, () => this.handler(msg));
      } catch (err) {
        threw = true;
        error = err;
      }
      r.done = true;
      // The close gave up on this handler and the channel took its message back.
      if (this.abandoned || this.closed) return;
      if (threw) this.failedWith(d.i, msg, error, r.startedAt);
      else this.succeeded(d.i, r.startedAt);
    } catch (internal) {
      // Nothing above should throw; if it did, the delivery still gets settled.
      if (!this.abandoned && !this.closed) {
        this.failed.push(d.i);
        this.failures.push({ ...UNREADABLE_FAILURE, message: `the message could not be handled: ${reasonOf(internal)}` });
        this.queueFlush();
      }
    } finally {
      if (run) run.done = true;
      this.running.delete(d.i);
      if (this.running.size === 0 && this.idleWaiters.length > 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
    }
  }

  private succeeded(id: number, started: number): void {
    this.acked.push(id);
    this.queueFlush();
    this.counts.acked++;
    this.safely(() => {
      this.timed(started, 'success');
      this.metrics.acked();
    });
  }

  private failedWith(id: number, msg: Message, err: unknown, started: number): void {
    let failure: FailureInfo;
    try {
      const retryable = this.isRetryable(err, msg);
      const table = retryable ? this.tableInfo(err, msg) : undefined;
      failure = { ...errorInfo(err), retryable, table };
    } catch (internal) {
      failure = { ...errorInfo(err), retryable: false };
      this.log('error', `rabbit-retry: deciding where a failed message of '${this.queue}' goes failed (${reasonOf(internal)}); parking it`);
    }
    this.failed.push(id);
    this.failures.push(failure);
    this.queueFlush();
    this.counts.failed++;
    this.safely(() => this.timed(started, 'failure'));
  }

  /**
   * The `retryable` predicate's verdict: `true` retries; `false`, a throw or
   * anything that is not a boolean parks (the last with a warning).
   */
  private isRetryable(err: unknown, msg: Message): boolean {
    if (isNonRetryable(err)) return false;
    let result: unknown;
    try {
      result = this.retryable(err, msg);
    } catch (predicateErr) {
      this.log('warn', `rabbit-retry: onFailure.retryable threw (${reasonOf(predicateErr)}); parking the message of queue '${this.queue}'`);
      return false;
    }
    if (result === true || result === false) return result;
    if (isThenable(result)) {
      // Not awaited; its rejection must not become an unhandled one.
      try {
        result.then(undefined, () => undefined);
      } catch {
        // A thenable whose then throws: nothing to wait for either way.
      }
    }
    const kind = resultKind(result);
    if (!this.warnedResults.has(kind)) {
      this.warnedResults.add(kind);
      this.log(
        'warn',
        `rabbit-retry: onFailure.retryable of queue '${this.queue}' returned ${kind}, not true or false; ` +
          'such messages are parked as non-retryable. Return a boolean, synchronously',
      );
    }
    return false;
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
        this.log('warn', `rabbit-retry: onFailure.table.${name} threw (${reasonOf(e)}); using its default`);
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

  /** Runs bookkeeping that must not keep a message from being settled. */
  private safely(f: () => void): void {
    try {
      f();
    } catch (err) {
      this.log('warn', `rabbit-retry: recording a settled message of '${this.queue}' failed: ${reasonOf(err)}`);
    }
  }

  /** Logs through the configured logger; a logger that throws is ignored. */
  private log(level: 'warn' | 'error', text: string): void {
    try {
      this.logger[level](text);
    } catch {
      // Nowhere left to say it.
    }
  }

  /**
   * Settlements go to the native side in one call per turn of the event
   * loop: the handlers that finished in the same turn share it.
   */
  private queueFlush(): void {
    if (this.acked.length + this.failed.length === 1) setImmediate(this.flushSettled);
  }

  /**
   * Hands the settled deliveries to the native side. If the call for the
   * whole batch fails, the acks are settled on their own and each failure on
   * its own (with a sanitized failure if needed), so one bad entry cannot
   * leave the others unacked. Only a closed consumer drops settlements: its
   * channel gave their messages back.
   */
  private readonly flushSettled = (): void => {
    if (this.acked.length + this.failed.length === 0) return;
    const { acked, failed, failures } = this;
    this.acked = [];
    this.failed = [];
    this.failures = [];
    if (this.closed) return;
    let batchErr: unknown;
    try {
      this.inner.settle(acked, failed, failures);
      return;
    } catch (err) {
      batchErr = fromNativeCall(err);
    }
    if (isClosedError(batchErr)) {
      this.settleFailed(batchErr);
      return;
    }
    this.log(
      'warn',
      `rabbit-retry: settling ${acked.length + failed.length} message(s) of '${this.queue}' at once failed (${reasonOf(batchErr)}); settling them one by one`,
    );
    if (acked.length > 0) {
      try {
        this.inner.settle(acked, [], []);
      } catch (err) {
        this.settleFailed(fromNativeCall(err));
      }
    }
    for (const [i, id] of failed.entries()) {
      try {
        this.inner.settle([], [id], [sanitized(failures[i])]);
      } catch {
        try {
          this.inner.settle([], [id], [UNREADABLE_FAILURE]);
        } catch (err) {
          this.settleFailed(fromNativeCall(err));
        }
      }
    }
  };

  /** A settle the native side refused: quiet once the consumer is closing or closed (the broker takes the message back). */
  private settleFailed(err: unknown): void {
    if (isClosedError(err)) {
      if (this.closing || this.closed || this.reportedSettleClosed) return;
      this.reportedSettleClosed = true;
    }
    this.fail(err);
  }

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
          this.log(
            'warn',
            `rabbit-retry: could not move message ${messageId ?? '(no id)'} of '${this.queue}' to '${target}'; it stays unacked and the broker will redeliver it: ${error.message}`,
          );
        }
        return;
      }
      case 'disconnected': {
        const error = fromNative(new Error(e.error)) as Error;
        if (this.listenerCount('disconnected') > 0) this.emit('disconnected', { queue: this.queue, error });
        else this.log('warn', `rabbit-retry: consumer of '${this.queue}' lost its channel, recovering: ${error.message}`);
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
