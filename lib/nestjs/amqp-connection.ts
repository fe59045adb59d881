/**
 * `AmqpConnection`: the publishing and request side of `@golevelup/nestjs-rabbitmq`,
 * over the module's {@link RabbitRetry} client, so that code that injects it keeps
 * working with an import swapped. It encodes as golevelup does (every value through
 * the module's `serializer`, JSON by default, strings included; `null` and
 * `undefined` as an empty body), which `rr.publish` does not (it sends strings as
 * text).
 */
import { randomUUID } from 'node:crypto';

import type { RabbitRetry } from '../client';
import type { Consumer } from '../consumer';
import { InvalidOptionsError, UnsupportedOptionError } from '../errors';
import type { Message } from '../message';
import type { PublishOptions } from '../options';
import { checkTimeout, sendRequest } from '../messaging/request';
import type { Replies } from '../messaging/replies';
import { type AmqpPublishOptions, type MessageDeserializer, type MessageSerializer, defaultDeserializer, defaultSerializer } from './serialize';
import { type RabbitSubscribeOptions, bindOthers, subscribePlan } from './subscribe';

/** What {@link AmqpConnection} takes from the module's options. */
export interface AmqpConnectionOptions {
  /** Turns a published value into bytes. @default JSON.stringify */
  serializer?: MessageSerializer;
  /** Turns a reply's bytes into its value. @default JSON.parse */
  deserializer?: MessageDeserializer;
  /** ms a request waits for its reply. @default 10000 */
  defaultRpcTimeout?: number;
  /** Publish options every `publish` starts from. */
  defaultPublishOptions?: AmqpPublishOptions;
}

/** golevelup's `RequestOptions`. */
export interface AmqpRequestOptions {
  /** The exchange to publish the request to. */
  exchange: string;
  /** Its routing key. */
  routingKey: string;
  /** The request's body, through the module's `serializer`. @default {} */
  payload?: unknown;
  /** ms to wait for the reply. @default the module's `defaultRpcTimeout`, else 10000 */
  timeout?: number;
  /** The correlation id the reply must carry. @default a new UUID */
  correlationId?: string;
  /** Headers of the request; an `X-Request-ID` must come back on the reply. */
  headers?: Record<string, unknown>;
  /** Per-request TTL, in ms. */
  expiration?: string | number;
  /** Other publish options of the request. */
  publishOptions?: AmqpPublishOptions;
}

/** What {@link AmqpConnection.createSubscriber} returns. */
export interface SubscriptionResult {
  /** Names the subscription for {@link AmqpConnection.cancelConsumer} and {@link AmqpConnection.resumeConsumer}. */
  consumerTag: string;
}

/** A subscription made by {@link AmqpConnection.createSubscriber}. */
interface Subscription {
  options: RabbitSubscribeOptions;
  handler: (msg: unknown, raw: Message, headers: Record<string, unknown>) => unknown;
  consumer?: Consumer;
}

/**
 * golevelup's `AmqpConnection`, injectable by its class from a RabbitRetryModule:
 * `publish`, `request`, `createSubscriber`, `cancelConsumer` and `resumeConsumer`.
 * `client` is the module's {@link RabbitRetry}.
 */
export class AmqpConnection {
  readonly #rr: RabbitRetry;
  readonly #options: AmqpConnectionOptions;
  readonly #serialize: MessageSerializer;
  readonly #deserialize: MessageDeserializer;
  readonly #subscriptions = new Map<string, Subscription>();
  #replies?: Replies;

  /** @internal */
  constructor(rr: RabbitRetry, options: AmqpConnectionOptions = {}) {
    this.#rr = rr;
    this.#options = options;
    this.#serialize = options.serializer ?? defaultSerializer;
    this.#deserialize = options.deserializer ?? defaultDeserializer;
  }

  /** The module's rabbit-retry client. */
  get client(): RabbitRetry {
    return this.#rr;
  }

  /**
   * Publishes `message` as golevelup does: a Buffer or Uint8Array as it is,
   * `null` or `undefined` as an empty body, anything else (strings too) through
   * the serializer (JSON by default). Resolves with `true` once the broker
   * confirmed it; rejects as `rr.publish` does (`UNROUTABLE` when no queue
   * takes it).
   */
  async publish(exchange: string, routingKey: string, message: unknown, options?: AmqpPublishOptions): Promise<boolean> {
    await this.#rr.publish(exchange, routingKey, this.encode(message), publishOptionsOf({ ...this.#options.defaultPublishOptions, ...options }));
    return true;
  }

  /**
   * Publishes a request over direct reply-to and resolves with the reply,
   * through the deserializer (`undefined` when its body is empty). Rejects with
   * a `RequestTimeoutError` (`REQUEST_TIMEOUT`) when no reply comes in time.
   */
  async request<T = unknown>(options: AmqpRequestOptions): Promise<T> {
    const { exchange, routingKey, payload, timeout, correlationId, headers, expiration, publishOptions } = options;
    const timeoutMs = checkTimeout(timeout ?? this.#options.defaultRpcTimeout);
    const publish = publishOptionsOf({ ...publishOptions, correlationId: correlationId ?? randomUUID() });
    if (headers !== undefined) publish.headers = headers;
    if (expiration !== undefined) publish.expiration = expiration;
    this.#replies ??= this.#rr.replies();
    const body = this.encode(payload ?? {});
    const reply = await sendRequest(this.#replies, { exchange, routingKey, body, options: publish, timeoutMs });
    return (reply.body.length > 0 ? this.#deserialize(reply.body, reply) : undefined) as T;
  }

  /**
   * Consumes with `handler` as a `@RabbitSubscribe` method with these options
   * would (its first argument the deserialized body, then the Message and its
   * headers). Resolves once it consumes.
   */
  async createSubscriber<T>(
    handler: (msg: T | undefined, raw: Message, headers: Record<string, unknown>) => unknown,
    options: RabbitSubscribeOptions,
    _originalHandlerName?: string,
  ): Promise<SubscriptionResult> {
    const consumerTag = `rabbit-retry-${randomUUID()}`;
    const subscription: Subscription = { options, handler: handler as Subscription['handler'] };
    await this.start(subscription);
    this.#subscriptions.set(consumerTag, subscription);
    return { consumerTag };
  }

  /** Stops the subscription `consumerTag` (its handlers in flight finish); {@link AmqpConnection.resumeConsumer} starts it again. */
  async cancelConsumer(consumerTag: string): Promise<void> {
    const subscription = this.#subscriptions.get(consumerTag);
    const consumer = subscription?.consumer;
    if (!consumer) return;
    subscription.consumer = undefined;
    await consumer.close();
  }

  /** Starts a cancelled subscription again; resolves with its tag, or `null` for an unknown tag. */
  async resumeConsumer(consumerTag: string): Promise<string | null> {
    const subscription = this.#subscriptions.get(consumerTag);
    if (!subscription) return null;
    if (!subscription.consumer) await this.start(subscription);
    return consumerTag;
  }

  /** Closes the reply channel and the subscriptions. @internal */
  async close(): Promise<void> {
    const consumers = [...this.#subscriptions.values()].flatMap((s) => (s.consumer ? [s.consumer] : []));
    this.#subscriptions.clear();
    await Promise.allSettled([this.#replies?.close(), ...consumers.map((c) => c.close())]);
  }

  private async start(subscription: Subscription): Promise<void> {
    const plan = subscribePlan(subscription.options, { deserializer: this.#deserialize });
    subscription.consumer = await this.#rr.consume({ ...plan.consume, onFailure: plan.onFailure }, async (msg) => {
      await subscription.handler(plan.body(msg), msg, msg.headers);
    });
    await bindOthers(this.#rr, plan.consume.queue, plan.bindings);
  }

  /** The bytes golevelup would send for `message`. */
  private encode(message: unknown): Buffer {
    if (Buffer.isBuffer(message)) return message;
    if (message instanceof Uint8Array) return Buffer.from(message);
    if (message === null || message === undefined) return Buffer.alloc(0);
    return this.#serialize(message);
  }
}

/** amqplib's publish options as rabbit-retry's. */
function publishOptionsOf(options: AmqpPublishOptions): PublishOptions {
  const { deliveryMode, mandatory, ...rest } = options as AmqpPublishOptions & Record<string, unknown>;
  if (mandatory === false) {
    throw new UnsupportedOptionError(
      'mandatory',
      '`mandatory: false` is not supported: every publish is mandatory, and one no queue takes fails with UNROUTABLE',
    );
  }
  for (const key of ['CC', 'BCC']) {
    if (key in rest) throw new UnsupportedOptionError(key, `\`${key}\` is not supported: publish to each destination instead`);
  }
  if (deliveryMode !== undefined) {
    if (![1, 2, true, false].includes(deliveryMode)) throw new InvalidOptionsError('deliveryMode must be 1, 2, true or false');
    rest.persistent ??= deliveryMode === 2 || deliveryMode === true;
  }
  return rest;
}

/**
 * golevelup's `AmqpConnectionManager`: the {@link AmqpConnection} of each
 * RabbitRetryModule of the application, by the module's `name` (`'default'`
 * when it has none).
 */
export class AmqpConnectionManager {
  static readonly #connections = new Map<string, AmqpConnection>();

  /** Registers the connection of the module named `name`. @internal */
  static add(name: string, connection: AmqpConnection): void {
    AmqpConnectionManager.#connections.set(name, connection);
  }

  /** Forgets the connection of the module named `name`, when it is `connection`. @internal */
  static remove(name: string, connection: AmqpConnection): void {
    if (AmqpConnectionManager.#connections.get(name) === connection) AmqpConnectionManager.#connections.delete(name);
  }

  /** The connection of the module named `name`. */
  getConnection(name: string): AmqpConnection | undefined {
    return AmqpConnectionManager.#connections.get(name);
  }

  /** Every module's connection. */
  getConnections(): AmqpConnection[] {
    return [...AmqpConnectionManager.#connections.values()];
  }
}
