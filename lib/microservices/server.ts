import { EventEmitter } from 'node:events';

import { Logger } from '@nestjs/common';
import { type CustomTransportStrategy, type MessageHandler, type ReadPacket, Server, type WritePacket } from '@nestjs/microservices';
import { type Observable, lastValueFrom } from 'rxjs';

import { RabbitRetry } from '../client';
import type { ConsumeOptions, PublishOptions } from '../options';
import type { Consumer } from '../consumer';
import type { ConsumerEvents } from '../consumer/events';
import { ClosedError, InvalidOptionsError, NoHandlerError, NonRetryableError, RabbitRetryError, ReplyRefusedError } from '../errors';
import type { Message } from '../message';
import {
  checkBoolean,
  checkConsumeOptions,
  checkConnectOptions,
  checkFunction,
  checkKeys,
  checkObject,
  checkWhole,
  delayStrings,
  refuseForeign,
} from '../options/check';
import type { ParkedMove } from '../consumer/moves';
import { DEFAULT_CLOSE_TIMEOUT_MS } from '../options';
import { logMoves } from '../nestjs/follow';
import { removeOwnQueues } from '../nestjs/own-queue';
import { reasonOf } from '../support/error-text';
import { DEFAULT_CALLBACK_TIMEOUT_MS, OBJECT, fence } from '../support/fence';
import { RabbitRetryChannelRef, RabbitRetryContext } from './context';
import { NO_MESSAGE_HANDLER, answerOf, failureOf, isNestInternalError } from './errors';
import { RMQ_SERVER_OPTIONS, type RabbitRetryServerOptions, SERVER_OPTION_KEYS, connectOptionsOf, consumeOptionsOf, publishOptionsOf } from './options';
import { isTopicPattern, matchesTopic } from '../messaging/topic';
import { consumeTarget } from './topology';

/** The events a server passes on from its consumer: `on('parked', e => …)`. */
export type RabbitRetryServerEvents = ConsumerEvents;

/** The statuses a server reports through `status` (NestJS 11 and later). */
export type RabbitRetryServerStatus = 'connected' | 'disconnected' | 'closed';

/** A message's pattern as text, as Nest's handlers are registered by it. */
function patternText(pattern: unknown): string {
  if (typeof pattern === 'string') return pattern;
  try {
    return JSON.stringify(pattern) ?? String(pattern);
  } catch {
    return '[a pattern that cannot be written as JSON]';
  }
}

/** The body of a message as Nest's RMQ transport reads it: JSON, else its text. */
function parsedBody(msg: Message): { value: unknown; json: boolean; error?: string } {
  const text = msg.text();
  try {
    return { value: JSON.parse(text) as unknown, json: true };
  } catch (err) {
    return { value: text, json: false, error: reasonOf(err) };
  }
}

/**
 * A NestJS microservices transport with rabbit-retry's failure path. An app
 * whose handlers were written for `Transport.RMQ` runs them unchanged, on
 * the same wire format (`{ pattern, data, id? }` as JSON, replies
 * `{ id, err, response, isDisposed }` to `reply-to` with the request's
 * correlation id), so existing producers and clients keep working:
 *
 * - an `@EventPattern` handler that throws (an Error or an RpcException), or
 *   whose stream fails, sends the message to the next retry queue, and to
 *   `<queue>.parked` when the delays are used up; nothing is requeued at once;
 * - a `@MessagePattern` handler's replies go to the request's `reply-to`
 *   (direct reply-to or a reply queue); a failure answers the caller with the
 *   error and is not retried, unless `retryRequests` is set. Replies go out
 *   on a connection of their own; a request whose reply the broker refuses
 *   (its `reply-to`, a property) is parked once as `reply-refused`;
 * - a message whose pattern has no handler is parked at once with
 *   `retry-reason: no-handler` (a request's caller is answered first); a body
 *   that is not JSON is parked at once as `non-retryable`;
 * - `@Payload()` is the message's `data`, and `@Ctx()` a
 *   {@link RabbitRetryContext} with the {@link Message}, its attempt and headers.
 *
 * ```ts
 * const app = await NestFactory.createMicroservice(AppModule, {
 *   strategy: new RabbitRetryServer({ url: process.env.AMQP_URL, queue: 'orders', onFailure: { delays: ['5s', '1m'] } }),
 * });
 * app.useGlobalFilters(new RabbitRetryExceptionFilter()); // the handlers' own errors in the parked headers
 * await app.listen();
 * ```
 */
export class RabbitRetryServer extends Server implements CustomTransportStrategy {
  /** Nest's logger, under the name RabbitRetryServer. */
  protected override readonly logger = new Logger('RabbitRetryServer');
  readonly #options: RabbitRetryServerOptions;
  /** What it consumes: the options' queue, or a broadcast's queue of its own, and the exchange of `wildcards`. */
  readonly #target: { consume: ConsumeOptions; broadcast: boolean };
  // A listener's returned Promise that rejects is logged, never unhandled.
  readonly #events = new EventEmitter({ captureRejections: true });
  #rr?: RabbitRetry;
  #consumer?: Consumer;
  /** The answers of failed requests that retry, sent once the verdict parks them. */
  readonly #answerWhenParked = new Map<Message, () => Promise<void>>();
  #closing?: Promise<void>;
  #warnedInternal = false;

  /**
   * Checks the options at once: an unknown key, or a `Transport.RMQ` option
   * that has no meaning here (`noAck`, `urls`, …), throws with its name.
   */
  constructor(options: RabbitRetryServerOptions) {
    super();
    checkObject('RabbitRetryServer options', options, 'an object such as { queue }');
    refuseForeign('RabbitRetryServer', options, RMQ_SERVER_OPTIONS);
    checkKeys('RabbitRetryServer', options, SERVER_OPTION_KEYS);
    const { client, retryRequests, serializer, deserializer, closeTimeoutMs } = options;
    if (client !== undefined) {
      if (!(client instanceof RabbitRetry)) throw new InvalidOptionsError('client must be a connected RabbitRetry client');
      const given = Object.keys(connectOptionsOf(options));
      if (given.length > 0) {
        throw new InvalidOptionsError(`give either client or connect options, not both: ${given.map((k) => `\`${k}\``).join(', ')} would be ignored`);
      }
    } else {
      checkConnectOptions(connectOptionsOf(options));
    }
    checkBoolean('wildcards', options.wildcards);
    if (options.queueOptions !== undefined) checkObject('queueOptions', options.queueOptions, 'an object such as { exclusive: true }');
    checkBoolean('queueOptions.exclusive', options.queueOptions?.exclusive);
    this.#target = consumeTarget(options, consumeOptionsOf(options));
    checkConsumeOptions(this.#target.consume);
    delayStrings(options.onFailure?.delays);
    checkBoolean('retryRequests', retryRequests);
    for (const [name, hook, method] of [
      ['serializer', serializer, 'serialize'],
      ['deserializer', deserializer, 'deserialize'],
    ] as const) {
      if (hook === undefined) continue;
      checkObject(name, hook, `an object with ${method}()`);
      checkFunction(`${name}.${method}`, (hook as unknown as Record<string, unknown>)[method], `a function`);
    }
    checkWhole('closeTimeoutMs', closeTimeoutMs, 0, Number.MAX_SAFE_INTEGER, 'a whole number of milliseconds');
    this.#options = options;
    this.#events[EventEmitter.captureRejectionSymbol] = (error: unknown, event: unknown) =>
      this.logger.error(`a '${String(event)}' listener of RabbitRetryServer rejected: ${reasonOf(error)}`);
    this.initializeSerializer(options);
    this.initializeDeserializer(options);
  }

  /** Connects (unless given a client), declares the work queue's topology and starts consuming. */
  async listen(callback: (...optionalParams: unknown[]) => unknown): Promise<void> {
    try {
      const rr = this.#options.client ?? (await RabbitRetry.connect({ logger: this.rrLogger(), ...connectOptionsOf(this.#options) }));
      this.#rr = rr;
      const handle = (msg: Message) => this.handle(msg);
      // A request that retries is answered once the verdict parked it, never before.
      const consumer =
        this.#options.retryRequests === true
          ? await rr.consumeWatched(this.consumeOptions(), handle, (msg, parked) => this.moved(msg, parked))
          : await rr.consume(this.consumeOptions(), handle);
      this.#consumer = consumer;
      await this.bindPatterns(rr, consumer.queue);
      if (this.#closing) {
        // close() came while the consumer was starting: it stops now too.
        await consumer.close({ timeoutMs: this.#options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS });
        if (this.#options.client === undefined) await rr.close();
        callback(new ClosedError('RabbitRetryServer was closed while it started'));
        return;
      }
      this.follow(consumer);
      this.setStatus('connected');
      this.logger.log(`consuming '${consumer.queue}' on ${rr.url}`);
    } catch (err) {
      await this.close().catch(() => undefined);
      callback(err);
      return;
    }
    callback();
  }

  /**
   * Stops consuming, lets the handlers in flight finish (at most
   * `closeTimeoutMs`) and settles them, puts deliveries that never started
   * back in the queue, then closes the connection it opened.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      try {
        await this.#consumer?.close({ timeoutMs: this.#options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS });
        if (this.#target.broadcast && this.#rr) {
          await removeOwnQueues(this.#rr, this.#target.consume).catch((err: unknown) =>
            this.logger.warn(`the queues of broadcast queue '${this.#target.consume.queue}' could not be deleted: ${reasonOf(err)}`),
          );
        }
      } finally {
        if (this.#options.client === undefined) await this.#rr?.close().catch(() => undefined);
        this.setStatus('closed');
      }
    })();
    return this.#closing;
  }

  /** Listens to the consumer's events: `retry`, `parked`, `publishFailed`, `stuck`, `disconnected`, `recovered`, `error`. */
  on<K extends keyof RabbitRetryServerEvents>(event: K, callback: (...args: RabbitRetryServerEvents[K]) => void): this;
  /** Any other name is accepted and never called. */
  on(event: string, callback: (...args: never[]) => void): this;
  on(event: string, callback: (...args: never[]) => void): this {
    this.#events.on(event, callback as (...args: unknown[]) => void);
    return this;
  }

  /** The rabbit-retry client the server consumes with (for `publish`, `parked(queue)`, `queueInfo`). */
  unwrap<T = RabbitRetry>(): T {
    if (!this.#rr) throw new Error('RabbitRetryServer is not listening: call listen() (app.listen() or app.startAllMicroservices()) first');
    return this.#rr as unknown as T;
  }

  /** The consumer of the work queue, once listening: `stats()`, `health()`. */
  get consumer(): Consumer | undefined {
    return this.#consumer;
  }

  /** Handles one delivery; a throw takes the failure path (retry or park). */
  private async handle(msg: Message): Promise<void> {
    const packet = await this.packetOf(msg);
    const pattern = patternText(packet.pattern);
    const id = packet.id;
    const replyTo = msg.properties.replyTo;
    const answers = id !== undefined && id !== null && replyTo !== undefined && replyTo !== '';
    const handler = packet.pattern === undefined ? null : this.handlerFor(pattern);
    if (!handler) {
      if (answers) {
        // The message parks as no-handler either way: a refused answer is only logged.
        await this.reply(replyTo, msg, { id, err: NO_MESSAGE_HANDLER, status: 'error', isDisposed: true }).catch((err: unknown) =>
          this.logger.warn(reasonOf(err)),
        );
      }
      throw new NoHandlerError(
        packet.pattern === undefined
          ? 'the message has no pattern: it is not { pattern, data } JSON, and the deserializer gave it none'
          : `no handler for pattern ${pattern}: add an @EventPattern or @MessagePattern for it to the service that consumes this queue, or stop sending it here`,
      );
    }
    const channel = new RabbitRetryChannelRef();
    const ctx = new RabbitRetryContext(msg, channel, pattern);
    if (answers) {
      // The caller is answered with the error and the request acked, unless requests retry:
      // then only the failure that parks the request answers.
      const retries = this.#options.retryRequests === true;
      const send = (p: WritePacket) => this.reply(replyTo, msg, { ...p, id });
      const failed = await this.answer(handler, packet, ctx, send, !retries);
      if (failed.failed && retries) {
        this.#answerWhenParked.set(msg, failed.answer);
        throw failed.failure;
      }
      return;
    }
    try {
      const stream = this.transformToObservable(await handler(packet.data, ctx)) as Observable<unknown>;
      await lastValueFrom(stream, { defaultValue: undefined });
    } catch (err) {
      throw this.failure(err);
    }
    // A handler written to settle its own message (noAck: false) may have rejected it.
    const verdict = channel.verdict();
    if (verdict?.kind === 'reject') {
      if (verdict.requeue) throw new Error(`the handler of pattern ${pattern} rejected the message (nack with requeue): it goes to the next retry queue`);
      throw new NonRetryableError(`the handler of pattern ${pattern} rejected the message without requeue`);
    }
  }

  /**
   * Runs a request's handler and sends its replies as Nest does: each value
   * of its stream, the last with `isDisposed`; or, when it fails, the error
   * (as Nest's default filter would give it): at once with `answerNow`, else
   * returned as `answer`, for when the request parks. Rejects with a
   * {@link ReplyRefusedError} when the broker refused a reply (the replies
   * after it are not sent): the request then parks.
   */
  private async answer(
    handler: MessageHandler,
    packet: ReadPacket,
    ctx: RabbitRetryContext,
    send: (p: WritePacket) => Promise<void>,
    answerNow: boolean,
  ): Promise<{ failed: false } | { failed: true; failure: unknown; answer: () => Promise<void> }> {
    let pending: WritePacket | undefined;
    let sent = Promise.resolve();
    const queue = (p: WritePacket) => {
      sent = sent.then(() => send(p));
      // Awaited below; until then a refused reply is not an unhandled rejection.
      sent.catch(() => undefined);
    };
    try {
      const stream = this.transformToObservable(await handler(packet.data, ctx)) as Observable<unknown>;
      await new Promise<void>((resolve, reject) => {
        stream.subscribe({
          next: (response) => {
            if (pending) queue(pending);
            pending = { response };
          },
          error: reject,
          complete: resolve,
        });
      });
    } catch (err) {
      const failure = this.failure(err);
      const answer = () => {
        if (pending) queue(pending);
        queue({ err: answerOf(err), isDisposed: true });
        return sent;
      };
      if (answerNow) await answer();
      else await sent;
      return { failed: true, failure, answer };
    }
    queue(pending ? { ...pending, isDisposed: true } : { isDisposed: true });
    await sent;
    return { failed: false };
  }

  /**
   * The verdict moved a failed request: its caller is answered when it
   * parked, and only then; with its handler's answer, or, for a request
   * parked before its handler (its delivery limit), with why it parked.
   */
  private moved(msg: Message, parked: ParkedMove | undefined): void {
    const answer = this.#answerWhenParked.get(msg);
    this.#answerWhenParked.delete(msg);
    if (parked === undefined) return;
    const sent = answer ? answer() : this.answerParked(msg, parked);
    sent.catch((err: unknown) => this.logger.warn(`the answer to a parked request could not be sent: ${reasonOf(err)}`));
  }

  /** Answers the caller of a request its handler never saw, that parked (`parked` says why). */
  private async answerParked(msg: Message, parked: ParkedMove): Promise<void> {
    const replyTo = msg.properties.replyTo;
    if (replyTo === undefined || replyTo === '') return;
    const { id } = await this.packetOf(msg);
    if (id === undefined || id === null) return;
    const err = `the request was parked (${parked.reason}) without reaching its handler: ${parked.error}`;
    await this.reply(replyTo, msg, { id, err, status: 'error', isDisposed: true });
  }

  /** The consume options; with `wildcards`, bound with the first handler's pattern (the others are bound by {@link bindPatterns}). */
  private consumeOptions(): ConsumeOptions {
    const consume = this.#target.consume;
    if (this.#options.wildcards !== true) return consume;
    const first = [...this.getHandlers().keys()][0];
    return first === undefined ? consume : { ...consume, routingKey: first };
  }

  /** With `wildcards`, binds the queue with each handler's pattern beside the first, as `Transport.RMQ` does. */
  private async bindPatterns(rr: RabbitRetry, queue: string): Promise<void> {
    const exchange = this.#target.consume.exchange;
    if (this.#options.wildcards !== true || exchange === undefined) return;
    for (const pattern of [...this.getHandlers().keys()].slice(1)) await rr.bindQueue(queue, exchange, pattern);
  }

  /** The handler of `pattern`: its own, or with `wildcards` the first whose topic pattern matches it. */
  private handlerFor(pattern: string): MessageHandler | null {
    const own = this.getHandlerByPattern(pattern);
    if (own || this.#options.wildcards !== true) return own;
    for (const [p, handler] of this.getHandlers()) {
      if (isTopicPattern(p) && matchesTopic(p, pattern)) return handler;
    }
    return null;
  }

  /** The error the failure path records; warns once when Nest's filter hid the handler's error. */
  private failure(err: unknown): unknown {
    if (!this.#warnedInternal && isNestInternalError(err)) {
      this.#warnedInternal = true;
      this.logger.warn(
        "a handler's error reached the transport as Nest's 'Internal server error': its class, message and stack are not in the retry headers, " +
          'and a NonRetryableError retries. Register RabbitRetryExceptionFilter (app.useGlobalFilters(new RabbitRetryExceptionFilter())) to pass the error on as it was thrown',
      );
    }
    return failureOf(err);
  }

  /** The message's packet, through the deserializer; one that cannot be read parks at once. */
  private async packetOf(msg: Message): Promise<ReadPacket & { id?: unknown }> {
    const body = parsedBody(msg);
    const custom = this.#options.deserializer !== undefined;
    if (!body.json && !custom) {
      throw new NonRetryableError(`the message body is not valid JSON (${body.error}): a Nest message is { "pattern", "data" } as JSON`);
    }
    // Fenced: a throw, a rejection, no answer within the bound, or no packet parks the message.
    const r = await fence(
      'the deserializer of RabbitRetryServer',
      () => this.deserializer.deserialize(body.value, { ...msg.properties, headers: msg.headers }),
      {
        expect: OBJECT,
      },
    );
    if (!r.ok) {
      if (r.failure === 'unexpected')
        throw new NonRetryableError(`the deserializer returned no packet (${r.kind ?? 'something else'}): it must return { pattern, data, id? }`);
      if (r.failure === 'timedOut') throw new NonRetryableError(`the deserializer did not answer within ${DEFAULT_CALLBACK_TIMEOUT_MS} ms`);
      throw new NonRetryableError(`the deserializer could not read the message: ${reasonOf(r.error)}`, { cause: r.error });
    }
    const p = r.value as ReadPacket & { id?: unknown };
    try {
      return { pattern: p.pattern, data: p.data, id: p.id };
    } catch (err) {
      throw new NonRetryableError(`the deserializer returned a packet that cannot be read: ${reasonOf(err)}`);
    }
  }

  /**
   * Sends one reply packet to `replyTo` with the request's correlation id, on
   * the client's connection of replies. Rejects with a
   * {@link ReplyRefusedError} when the broker refuses the reply (checked
   * first: a `reply-to` that is no address the broker delivers to, a
   * `user-id` or `expiration` it refuses; or the broker closed the reply's
   * channel over it); any other failure to send is logged.
   */
  private async reply(replyTo: string, msg: Message, packet: WritePacket & { id?: unknown }): Promise<void> {
    const rr = this.#rr;
    if (!rr) return;
    // Fenced: a throw, a rejection or no answer within the bound sends no reply, and says why.
    const r = await fence('the serializer of RabbitRetryServer', () => this.serializer.serialize(packet as WritePacket & { id: string }));
    if (!r.ok) {
      this.logger.error(`the reply to ${replyTo} could not be serialized, so the caller gets none: ${r.problem}`);
      return;
    }
    let body: string;
    let options: PublishOptions;
    try {
      const serialized = r.value;
      if (serialized !== null && typeof serialized === 'object' && 'options' in serialized) {
        const { options: o, ...rest } = serialized as { options?: Record<string, unknown> };
        options = publishOptionsOf(o, "the serializer's options");
        body = JSON.stringify(rest);
      } else {
        options = {};
        body = JSON.stringify(serialized);
      }
    } catch (err) {
      this.logger.error(`the reply to ${replyTo} could not be serialized, so the caller gets none: ${reasonOf(err)}`);
      return;
    }
    const correlationId = msg.properties.correlationId;
    try {
      await rr.reply(replyTo, Buffer.from(body ?? 'null', 'utf8'), {
        contentType: 'application/json',
        ...options,
        ...(correlationId !== undefined ? { correlationId } : {}),
        persistent: false,
      });
    } catch (err) {
      if (!(err instanceof ReplyRefusedError)) {
        this.logger.warn(`the reply to ${replyTo} could not be sent (${err instanceof RabbitRetryError ? err.code : 'error'}): ${reasonOf(err)}`);
        return;
      }
      // The caller hears of it at once, in a packet of the bare minimum, rather than waiting out its timeout.
      if (packet.err === undefined) {
        const refused = JSON.stringify({ id: packet.id, err: `${err.code}: ${err.message}`, status: 'error', isDisposed: true });
        const answer = { contentType: 'application/json', persistent: false, ...(correlationId !== undefined ? { correlationId } : {}) };
        await rr.reply(replyTo, Buffer.from(refused, 'utf8'), answer).catch(() => undefined);
      }
      throw err;
    }
  }

  /** Logs the consumer's moves and passes its events on to `on()` listeners. */
  private follow(consumer: Consumer): void {
    const q = consumer.queue;
    logMoves(consumer, this.logger);
    consumer.on('disconnected', (e) => {
      this.setStatus('disconnected');
      this.logger.warn(`consumer of '${q}' lost its channel on ${e.url}, recovering: ${e.error.message}`);
    });
    consumer.on('recovered', () => this.setStatus('connected'));
    for (const event of ['retry', 'parked', 'stored', 'publishFailed', 'stuck', 'alert', 'tableAlert', 'disconnected', 'recovered', 'error'] as const) {
      consumer.on(event, (...args: unknown[]) => {
        if (this.#events.listenerCount(event) === 0) return;
        try {
          this.#events.emit(event, ...args);
        } catch (err) {
          this.logger.error(`a '${event}' listener of RabbitRetryServer threw: ${reasonOf(err)}`);
        }
      });
    }
  }

  private setStatus(status: RabbitRetryServerStatus): void {
    // NestJS 11 and later report it through `status`; NestJS 10 has no such stream.
    (this as unknown as { _status$?: { next(s: string): void } })._status$?.next(status);
  }

  private rrLogger(): { warn(m: string): void; error(m: string): void } {
    return { warn: (m) => this.logger.warn(m), error: (m) => this.logger.error(m) };
  }
}
