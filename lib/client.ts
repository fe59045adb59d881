import type { MoveListener } from './consumer/moves';
import { Consumer, alertSettings, runningConsumers } from './consumer';
import type { CloseResult, Handler, SchedulerStopResult } from './consumer/events';
import { ClosedError, InvalidOptionsError, native, nativeSync } from './errors';
import { Parked } from './parked';
import { Replies } from './messaging/replies';
import { type RequestOptions, outgoingRequest, replyValue, sendRequest } from './messaging/request';
import { RetryTable } from './table';
import { Outbox } from './outbox/outbox';
import { binding, type NativeClient, parkedQueueName, retryQueueName } from './native';
import { consumerMetrics } from './telemetry/metrics';
import { Inbox } from './inbox';
import type { InboxAdapterOptions, InboxHandler, InboxPoolOptions } from './inbox/options';
import type { PgClientOf, PgPoolLike } from './sql/transaction';
import { drainTracing, tracedPublish } from './telemetry/tracing';
import { type CircuitRecord, checkCircuitFits, circuitFor, circuitSettings } from './circuit';
import { CircuitIo, circuitQueueName, readCircuitState } from './consumer/circuit-io';
import { reasonOf } from './support/error-text';
import { logTo } from './support/log';
import { type Body, checkPublishOptions, toBuffer, toNativeProps } from './messaging/publish';
import { nativeConnectOptions, nativeConsumeOptions } from './options/native';
import { brokerUrls, checkCloseOptions, checkConnectOptions, checkConsumeOptions, checkString, delayStrings } from './options/check';
import {
  type DeclareOptions,
  type ExchangeDeclareOptions,
  type QueueDeclareOptions,
  bindingArguments,
  exchangeDeclaration,
  queueDeclaration,
} from './messaging/declare';
import { type Delay, DEFAULT_STUCK_AFTER_MS, type CloseOptions, type ConnectOptions, type ConsumeOptions, type PublishOptions } from './options';

/** The default broker URL when neither the options nor `AMQP_URL` give one. */
export const DEFAULT_URL = 'amqp://guest:guest@127.0.0.1:5672';

/** The defaults the native layer applies to consume options left out. */
const CONSUME_DEFAULTS = binding.consumeDefaults();

/** The broker URLs each client connected with, passwords included: for the console's management API calls only. */
const connectedUrls = new WeakMap<RabbitRetry, readonly string[]>();

/**
 * The URLs `rr` connected with, as given (with their passwords): the console
 * derives the management API's address and credentials from them, server-side.
 * @internal
 */
export function brokerUrlsOf(rr: RabbitRetry): readonly string[] {
  return connectedUrls.get(rr) ?? [];
}

/** A work queue a client's consumer consumes, and the labels of its retry delays. @internal */
export interface ConsumedQueue {
  /** The work queue. */
  queue: string;
  /** Its delays' labels, in order (`5s`, `1m`): its retry queues are `<queue>.retry.<label>`. */
  delays: string[];
  /** Set when it retries with `onFailure.brokerDelay` (no retry queue). */
  brokerDelay?: true;
}

/**
 * A connection to RabbitMQ with rabbit-retry's failure path: consumers that
 * never requeue a handler error, and publishes that wait for the broker's confirm.
 *
 * ```ts
 * const rr = await RabbitRetry.connect({ url: 'amqp://guest:guest@127.0.0.1:5672' });
 * const consumer = await rr.consume({ queue: 'shipment.requested', onFailure: { delays: ['5s', '1m'] } }, async (msg) => {
 *   await carrier.rate(msg.json());
 * });
 * ```
 */
export class RabbitRetry {
  private readonly consumers = new Set<Consumer>();
  /** Every consumer this client made, closed or not: whose handlers count as this client's. */
  private readonly made = new WeakSet<Consumer>();
  private closed = false;
  private closing?: Promise<CloseResult>;
  /** Every work queue a consumer of this client consumed, running or not, by name. */
  readonly #consumed = new Map<string, ConsumedQueue>();

  // An ES private field: printing or serialising the client never shows the URL's password.
  readonly #options: ConnectOptions;
  /** The reply channel of {@link RabbitRetry.request}, opened on the first request. */
  #replies?: Replies;

  private constructor(
    private readonly inner: NativeClient,
    options: ConnectOptions,
  ) {
    this.#options = options;
    if (options.retryTable) {
      this.#table = new RetryTable(inner, logTo(options.logger ?? console));
      this.#table.observe(options.meterProvider);
    }
    const outbox = inner.outbox();
    if (outbox) {
      this.#outbox = new Outbox(outbox, options.outbox?.relay !== false);
      this.#outbox.observe(options.meterProvider);
    }
  }

  readonly #table?: RetryTable;
  readonly #outbox?: Outbox;

  /** The transactional outbox (connect with `outbox: { url }`): stats and parked rows. */
  get outbox(): Outbox {
    if (!this.#outbox) throw new InvalidOptionsError("no outbox: connect with { outbox: { url: 'postgres://…' } }");
    return this.#outbox;
  }

  /**
   * The retry table (connect with `retryTable: { url }`): pause, resume,
   * retryNow, list, stats and pauseWhen.
   */
  get retryTable(): RetryTable {
    if (!this.#table) {
      throw new InvalidOptionsError("no retry table: connect with { retryTable: { url: 'postgres://…' } }");
    }
    return this.#table;
  }

  /**
   * Connects to the broker. Rejects with a {@link ConnectionError} when it
   * does not answer within `connectTimeoutMs`, or an {@link InvalidOptionsError}.
   */
  static async connect(options: ConnectOptions = {}): Promise<RabbitRetry> {
    checkConnectOptions(options);
    const urls = brokerUrls(options.url, process.env.AMQP_URL, DEFAULT_URL);
    const inner = await native(() => binding.connect(nativeConnectOptions(options, urls)));
    const drains = options.retryTable && options.retryTable.scheduler !== false ? drainTracing() : undefined;
    if (drains)
      inner.traceDrains(
        (row) => drains.start(row),
        (drain) => drains.end(drain),
      );
    const rr = new RabbitRetry(inner, options);
    connectedUrls.set(rr, urls);
    return rr;
  }

  /**
   * The URL of the node the client is connected to now, with its password
   * hidden, safe to log. With several nodes it changes when the client
   * moves to another.
   */
  get url(): string {
    return this.inner.safeUrl;
  }

  /** Every node's URL with its password hidden, in the order they are tried. */
  get urls(): string[] {
    return this.inner.safeUrls;
  }

  /**
   * Declares the work queue, its retry queues and its parked queue (and the
   * exchange and binding when given), then starts `handler` on every delivery.
   * Rejects with a {@link TopologyMismatchError} when a queue exists with other
   * arguments, or an {@link InvalidOptionsError} naming the bad option.
   *
   * With `inbox`, the handler runs in a transaction of your database that
   * records the message's id, and gets `{ tx }` second: a pg client of
   * `inbox.pool`, or the transaction of `inbox.adapter` (see the inbox guide).
   */
  consume<P extends PgPoolLike>(options: ConsumeOptions & { inbox: InboxPoolOptions<P> }, handler: InboxHandler<PgClientOf<P>>): Promise<Consumer>;
  consume<Tx>(options: ConsumeOptions & { inbox: InboxAdapterOptions<Tx> }, handler: InboxHandler<Tx>): Promise<Consumer>;
  consume(options: ConsumeOptions, handler: Handler): Promise<Consumer>;
  consume(options: ConsumeOptions, handler: Handler | InboxHandler<never>): Promise<Consumer> {
    return this.consumeWith(options, handler);
  }

  /** {@link RabbitRetry.consume}, telling `moves` where each failed or refused message went (a transport answers a parked request's caller). @internal */
  consumeWatched(options: ConsumeOptions, handler: Handler, moves: MoveListener): Promise<Consumer> {
    return this.consumeWith(options, handler, moves);
  }

  private async consumeWith(options: ConsumeOptions, handler: Handler | InboxHandler<never>, moves?: MoveListener): Promise<Consumer> {
    this.assertOpen();
    checkConsumeOptions(options);
    if (typeof handler !== 'function') throw new InvalidOptionsError('handler must be a function (msg) => Promise<void>');
    const inbox = options.inbox && new Inbox(options.inbox, options.queue);
    const brokerDelay = options.onFailure?.brokerDelay;
    // With brokerDelay no retry queue is declared: the default delays do not apply.
    const delays = delayStrings(options.onFailure?.delays ?? (brokerDelay ? [] : undefined));
    // The alert is TypeScript's own: checked before the native layer declares anything or starts the consumer.
    const alert = options.alert && alertSettings(options.alert, this.#table !== undefined);
    // A circuit's options are checked against those of a circuit this process already shares.
    const circuitOptions = options.onFailure?.circuit;
    const circuit = circuitOptions ? circuitSettings(circuitOptions) : undefined;
    const dependency = circuitOptions?.dependency ?? options.queue;
    if (circuit) checkCircuitFits(dependency, circuit);
    // The inbox's tables exist before anything is declared.
    await inbox?.prepare();
    // Left-out options go as undefined: the native layer checks every value and applies the defaults.
    const inner = await native(() => this.inner.consume(nativeConsumeOptions(options, delays, moves !== undefined)));
    const parkedDepth = async () => (await native(() => this.inner.queueInfo(parkedQueueName(options.queue))))?.messages;
    const table = this.#table;
    const oldestDueAge = table ? async () => (await table.stats()).oldestDueAgeMs : undefined;
    // The native consumer started: the circuit is made (or joined) now.
    const shared = circuit && circuitFor(dependency, circuit);
    const consumer = new Consumer({
      inner,
      handler: inbox ? inbox.wrap(handler as InboxHandler<unknown>) : (handler as Handler),
      retryable: options.onFailure?.retryable,
      stackOnRetry: options.onFailure?.stackOnRetry,
      batchSize: options.prefetch ?? CONSUME_DEFAULTS.prefetch,
      url: this.url,
      logger: this.#options.logger ?? console,
      metrics: consumerMetrics(options.queue, this.#options.meterProvider, parkedDepth, shared ? () => shared.status() : undefined),
      parkedDepth,
      oldestDueAge,
      alert,
      table: options.onFailure?.table,
      stuckAfterMs: options.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS,
      consumerTag: options.consumerTag,
      circuit: shared && {
        circuit: shared,
        io: new CircuitIo(
          this.inner,
          options.queue,
          delays.map((d) => retryQueueName(options.queue, d as Delay)),
        ),
      },
      background: inbox,
      moves,
      onClosed: (c) => {
        void inbox?.stop();
        this.consumers.delete(c);
      },
    });
    inbox?.start({ duplicate: (key) => consumer.duplicate(inbox.consumer, key), fail: (err) => consumer.reportError(err) });
    this.consumers.add(consumer);
    this.made.add(consumer);
    const labels = delays.length ? nativeSync(() => binding.parseDelays(delays)).map((d) => d.label) : [];
    this.#consumed.set(options.queue, { queue: options.queue, delays: labels, ...(brokerDelay ? { brokerDelay: true } : {}) });
    if (shared) {
      try {
        await consumer.joinCircuit();
      } catch (err) {
        await consumer.close().catch(() => undefined);
        throw err;
      }
    }
    return consumer;
  }

  /**
   * The state the circuit of `queue`'s consumers last recorded in the state
   * queue `<queue>.circuit` (see `onFailure.circuit`), read without taking
   * it; null when no consumer of `queue` has a circuit.
   */
  async circuitState(queue: string): Promise<CircuitRecord | null> {
    this.assertOpen();
    checkString('queue', queue, { nonEmpty: true });
    return (await readCircuitState(this.inner, circuitQueueName(queue), queue)) ?? null;
  }

  /**
   * The work queues this client's consumers consumed, running or closed, in
   * the order they started: what the console shows without being told.
   * @internal
   */
  consumedQueues(): ConsumedQueue[] {
    return [...this.#consumed.values()].map((q) => ({ ...q, delays: [...q.delays] }));
  }

  /**
   * Publishes a message with `mandatory` set and waits for the broker's
   * confirm. Objects are sent as JSON (`application/json`), strings as text.
   * Rejects with an {@link UnroutableError} when no queue takes it, a
   * {@link PublishNackedError} when the broker refuses it, or a
   * {@link PublishFailedError} when the confirm never comes.
   */
  async publish(exchange: string, routingKey: string, body: Body, options: PublishOptions = {}): Promise<void> {
    this.assertOpen();
    if (typeof exchange !== 'string') throw new InvalidOptionsError("exchange must be a string ('' is the default exchange)");
    if (typeof routingKey !== 'string') throw new InvalidOptionsError('routingKey must be a string');
    checkPublishOptions(options);
    const { buf, contentType } = toBuffer(body, options);
    const props = toNativeProps(options, contentType);
    const published = { exchange, routingKey, messageId: options.messageId, bodySize: buf.length };
    await tracedPublish(published, (trace) => {
      // The caller's own trace headers, when it wrote them, win.
      if (trace) props.headers = { ...trace, ...options.headers };
      return native(() => this.inner.publish(exchange, routingKey, buf, props));
    });
  }

  /**
   * Publishes the reply to a request to its `replyTo` (through the default
   * exchange), on a connection of replies opened on the first, and waits for
   * the broker's confirm. Rejects with a `ReplyRefusedError` when the
   * broker would refuse the reply or did, else as {@link RabbitRetry.publish};
   * a reply to a direct reply-to address is never `UNROUTABLE` (the broker's
   * return of one says nothing: RabbitMQ 3.x returns them all, delivered or not).
   * @internal
   */
  async reply(replyTo: string, body: Buffer, options: PublishOptions = {}): Promise<void> {
    this.assertOpen();
    if (typeof replyTo !== 'string') throw new InvalidOptionsError('replyTo must be a string');
    checkPublishOptions(options);
    const props = toNativeProps(options, undefined);
    const published = { exchange: '', routingKey: replyTo, messageId: options.messageId, bodySize: body.length };
    await tracedPublish(published, (trace) => {
      if (trace) props.headers = { ...trace, ...options.headers };
      return native(() => this.inner.reply(replyTo, body, props));
    });
  }

  /**
   * The parked queue of work queue `queue` (`<queue>.parked`), to count, look
   * at, replay and purge its messages.
   */
  parked(queue: string): Parked {
    this.assertOpen();
    if (typeof queue !== 'string' || queue.length === 0) throw new InvalidOptionsError('queue must be the name of a work queue');
    return new Parked(this.inner, queue);
  }

  /**
   * A channel for requests that wait for a reply (direct reply-to), opened
   * on the first request.
   * @internal
   */
  replies(): Replies {
    this.assertOpen();
    return new Replies(
      () => {
        this.assertOpen();
        return this.inner.openReplies();
      },
      (options) => {
        checkPublishOptions(options);
        if (options.replyTo !== undefined) throw new InvalidOptionsError('replyTo of a request is direct reply-to; leave it out');
        return toNativeProps(options, undefined);
      },
    );
  }

  /**
   * Publishes `payload` (encoded as `publish` encodes a body) over direct reply-to, and resolves with the
   * reply: its JSON, its text when `text/plain` or not JSON, `undefined` when empty. Rejects with a
   * `RequestTimeoutError` (`REQUEST_TIMEOUT`) when none comes within `timeout` ms (default 10 s), a
   * `RemoteError` (`REMOTE_ERROR`) when the handler answered with its error, or as `publish` does.
   */
  async request<T = unknown>(options: RequestOptions): Promise<T> {
    this.assertOpen();
    const request = outgoingRequest(options);
    this.#replies ??= this.replies();
    return replyValue(await sendRequest(this.#replies, request)) as T;
  }

  /** Messages and consumers of `queue`, or `null` when it does not exist. */
  async queueInfo(queue: string): Promise<{
    /** Messages ready in the queue (the broker does not count those delivered and not yet acked). */
    messages: number;
    /** Consumers of the queue. */
    consumers: number;
  } | null> {
    this.assertOpen();
    return (await native(() => this.inner.queueInfo(queue))) ?? null;
  }

  /**
   * Deletes `queue` with its messages, for tests and tooling (the broker
   * cancels its consumers). Resolves to how many messages it held, or `null`
   * when it did not exist.
   */
  async deleteQueue(queue: string): Promise<number | null> {
    this.assertOpen();
    if (typeof queue !== 'string' || queue.length === 0) throw new InvalidOptionsError('queue must be a queue name');
    return (await native(() => this.inner.deleteQueue(queue))) ?? null;
  }

  /**
   * Binds `queue` to `exchange` with `routingKey` beside the binding its
   * consumer made (both must exist): the transport's `wildcards` bind one key
   * per handler pattern this way.
   */
  async bindQueue(queue: string, exchange: string, routingKey: string): Promise<void> {
    this.assertOpen();
    await native(() => this.inner.bindQueue(queue, exchange, routingKey));
  }

  /**
   * Declares the exchange `name` of type `type` (`topic`, `direct`, `fanout`,
   * `headers`, or a plugin's), durable unless `options` say otherwise; with
   * `passive`, only checks that it exists. An exchange that exists with other
   * options fails with `TOPOLOGY_MISMATCH`.
   */
  async declareExchange(name: string, type: string, options: ExchangeDeclareOptions = {}): Promise<void> {
    this.assertOpen();
    const d = exchangeDeclaration(type, options);
    await native(() => this.inner.declareExchange(name, type, d));
  }

  /** Declares the queue `name`, durable unless `options` say otherwise, as {@link declareExchange} does. */
  async declareQueue(name: string, options: QueueDeclareOptions = {}): Promise<void> {
    this.assertOpen();
    await native(() => this.inner.declareQueue(name, queueDeclaration(options)));
  }

  /** Binds the exchange `destination` to `source` with `pattern` (both must exist), with the binding's `args`. */
  async bindExchange(destination: string, source: string, pattern: string, args?: DeclareOptions['arguments']): Promise<void> {
    this.assertOpen();
    const json = bindingArguments(args);
    await native(() => this.inner.bindExchange(destination, source, pattern, json));
  }

  /** Deletes `exchange`, for tests and tooling. */
  async deleteExchange(exchange: string): Promise<void> {
    this.assertOpen();
    if (typeof exchange !== 'string' || exchange.length === 0) throw new InvalidOptionsError('exchange must be an exchange name');
    await native(() => this.inner.deleteExchange(exchange));
  }

  /**
   * Closes every consumer (see {@link Consumer.close}), then the connection.
   * Each consumer waits at most `timeoutMs` (default 30 s) for its in-flight
   * handlers; the result counts the handlers still running then, whose
   * messages went back to the broker unacked. Safe to call more than once:
   * every call resolves when the same shutdown ends.
   *
   * Called from inside a handler of one of this client's consumers, it does
   * not wait for the handlers (the calling one among them could never
   * finish): it stops every consumer's deliveries and resolves with
   * `{ unfinished: 0 }`; the handlers then finish, their messages are settled
   * as usual (acked, retried or parked), and the consumers and the connection
   * close in the background, within the same bound.
   *
   * The retry table's scheduler, when this process runs one, stops at the
   * start of the close, within about a second even mid-drain (see
   * {@link SchedulerStopResult}); the result's `retryTable` says what it
   * published and what it left, and a warning is logged when it left due rows.
   * The outbox's relay stops alongside it: its batch in hand commits what was
   * confirmed, within about a second, or rolls back.
   */
  close(options?: CloseOptions): Promise<CloseResult> {
    let timeoutMs: number;
    try {
      timeoutMs = checkCloseOptions(options);
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on what the check threw (a getter of the options may throw anything)
      return Promise.reject(err);
    }
    const fromOwnHandler = runningConsumers().some((c) => this.made.has(c));
    if (this.closing) {
      // A later call may only shorten the wait.
      for (const c of this.consumers) c.close({ timeoutMs }).catch(() => undefined);
    } else {
      this.closed = true;
      const consumers = [...this.consumers];
      this.closing = this.shutdown(consumers, timeoutMs);
    }
    if (!fromOwnHandler) return this.closing;
    this.closing.catch((err: unknown) => this.log('error', `rabbit-retry: closing the client in the background failed: ${reasonOf(err)}`));
    return Promise.all([...this.consumers].map((c) => c.deliveriesStopped())).then(() => ({ unfinished: 0 }));
  }

  private async shutdown(consumers: Consumer[], timeoutMs: number): Promise<CloseResult> {
    // The retry table's scheduler stops at once, alongside the consumers: its
    // drain does not wait for their handlers.
    await this.#replies?.close();
    const [results, stopped, relay] = await Promise.all([
      Promise.all(consumers.map((c) => c.close({ timeoutMs }))),
      native(() => this.inner.stopScheduler()),
      native(() => this.inner.stopRelay()),
    ]);
    this.#outbox?.stopped();
    await native(() => this.inner.close());
    if (relay && relay.unconfirmed > 0) {
      this.log(
        'warn',
        `rabbit-retry: the outbox relay stopped mid-batch: ${relay.unconfirmed} row(s) sent without a confirm stay, and will be published again`,
      );
    }
    const unfinished = results.reduce((n, r) => n + r.unfinished, 0);
    if (!stopped) return { unfinished };
    const retryTable: SchedulerStopResult = { published: stopped.published, unconfirmed: stopped.unconfirmed, due: stopped.due ?? null };
    if (retryTable.unconfirmed > 0 || (retryTable.due ?? 0) > 0) {
      this.log(
        'warn',
        `rabbit-retry: the retry table's scheduler stopped mid-drain: ${retryTable.published} row(s) published, ` +
          `${retryTable.due ?? 'an unknown number of'} due row(s) left in the table for the next scheduler` +
          (retryTable.unconfirmed > 0 ? `; ${retryTable.unconfirmed} of them were sent without a confirm, and will be published again` : ''),
      );
    }
    return { unfinished, retryTable };
  }

  /** Writes a line to the logger of the connect options (fenced). */
  private log(level: 'warn' | 'error', text: string): void {
    logTo(this.#options.logger ?? console)(level, text);
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('this RabbitRetry client is closed; connect again');
  }
}
