/**
 * `AmqpConnection`: the publishing and request side of `@golevelup/nestjs-rabbitmq`,
 * over the module's {@link RabbitRetry} client, so that code that injects it keeps
 * working with an import swapped. It encodes as golevelup does (every value through
 * the module's `serializer`, JSON by default, strings included; `null` and
 * `undefined` as an empty body), which `rr.publish` does not (it sends strings as
 * text).
 */
import { randomUUID } from 'node:crypto';

import { RabbitRetry } from '../client';
import type { Consumer } from '../consumer';
import { ClosedError, InvalidOptionsError, UnroutableError, UnsupportedOptionError } from '../errors';
import type { Message } from '../message';
import type { PublishOptions } from '../options';
import { checkTimeout, sendRequest } from '../messaging/request';
import type { Replies } from '../messaging/replies';
import { type AmqpPublishOptions, type MessageDeserializer, type MessageSerializer, defaultDeserializer, defaultSerializer } from './serialize';
import { type RabbitSubscribeOptions, type SubscribePlan, bindOthers, subscribePlan } from './subscribe';
import { removeOwnQueues } from './own-queue';
import { type AmqplibChannel, type AmqplibConnection, type AmqplibLink, closeAmqplib, noChannelError, openAmqplib } from './amqplib';
import { DEFAULT_HEARTBEAT, connectModule, moduleUrls } from './connect';
import { rawOf } from './raw';
import type { RabbitRetryModuleOptions } from './options';

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

/** {@link AmqpConnection.configuration}: the connection's options, with its name. */
export interface AmqpConnectionConfiguration extends RabbitRetryModuleOptions {
  /** The module's `name`, `'default'` when the options give none. */
  name: string;
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
  /** The last part of the name of a queue derived for options without `queue`. */
  name: string;
  consumer?: Consumer;
  /** Its consumer's options, worked out at its first start (a queue of the instance's own keeps its name on resume). */
  plan?: SubscribePlan;
}

/**
 * golevelup's `AmqpConnection`, injectable by its class from a RabbitRetryModule,
 * or made on its own (`new AmqpConnection({ url })`, then `init()`):
 * `publish`, `request`, `createSubscriber`, `cancelConsumer` and `resumeConsumer`.
 * `client` is its {@link RabbitRetry}; `channel` an amqplib confirm channel when
 * amqplib is installed.
 */
export class AmqpConnection {
  #rr?: RabbitRetry;
  readonly #own: boolean;
  readonly #options: AmqpConnectionOptions & RabbitRetryModuleOptions;
  readonly #serialize: MessageSerializer;
  readonly #deserialize: MessageDeserializer;
  readonly #subscriptions = new Map<string, Subscription>();
  #replies?: Replies;
  #amqplib?: AmqplibLink;
  #noChannel = 'the connection is not initialised yet (init())';

  /**
   * A connection of its own, with a module's options (`url`, `heartbeat`,
   * `exchanges`, `queues`, …, golevelup's `RabbitMQConfig`): it connects at
   * {@link AmqpConnection.init}, and {@link AmqpConnectionManager.addConnection}
   * registers it.
   */
  constructor(config: RabbitRetryModuleOptions);
  /** The module's connection, over its client. @internal */
  constructor(rr: RabbitRetry, options?: RabbitRetryModuleOptions);
  constructor(first: RabbitRetry | RabbitRetryModuleOptions, options: RabbitRetryModuleOptions = {}) {
    if (first instanceof RabbitRetry) {
      this.#rr = first;
      this.#own = false;
    } else {
      if (first === null || typeof first !== 'object')
        throw new InvalidOptionsError('new AmqpConnection(config) takes the options of a module, such as { url }');
      options = first;
      this.#own = true;
    }
    this.#options = options;
    this.#serialize = options.serializer ?? defaultSerializer;
    this.#deserialize = options.deserializer ?? defaultDeserializer;
  }

  /**
   * Connects a connection made with `new AmqpConnection(config)`: its client,
   * the topology of its options, and its amqplib channel. Resolves at once for
   * the module's, which the module connected.
   */
  async init(): Promise<void> {
    if (this.#rr) return;
    const rr = await connectModule(this.#options);
    this.#rr = rr;
    try {
      await this.openChannel();
    } catch (err) {
      this.#rr = undefined;
      await rr.close().catch(() => undefined);
      throw err;
    }
  }

  /** Opens the amqplib connection and channel of {@link AmqpConnection.channel}, when amqplib is installed. @internal */
  async openChannel(): Promise<void> {
    if (this.#options.amqplibChannel === false) {
      this.#noChannel = 'the module was given `amqplibChannel: false`';
      return;
    }
    const warn = (m: string): void => this.#options.logger?.warn(m);
    this.#amqplib = await openAmqplib(moduleUrls(this.#options), this.#options.heartbeat ?? DEFAULT_HEARTBEAT, warn);
    if (!this.#amqplib) this.#noChannel = 'amqplib is not installed';
  }

  /** golevelup's `configuration`: the options, and `name` (`'default'` when they give none). */
  get configuration(): AmqpConnectionConfiguration {
    return { ...this.#options, name: this.#options.name ?? 'default' };
  }

  /** The rabbit-retry client. Throws `CLOSED` before `init()` of a connection of its own. */
  get client(): RabbitRetry {
    if (!this.#rr) throw new ClosedError('the AmqpConnection is not initialised: call init() first');
    return this.#rr;
  }

  /**
   * golevelup's `channel`: amqplib's `ConfirmChannel` (an amqplib type: cast it,
   * `amqpConnection.channel as Channel`), on an amqplib connection of its own
   * (golevelup's URL, `?heartbeat=5`), for declaring, checking and deleting.
   * Handlers are not consumed on it, so it does not ack their messages. Throws
   * `UNSUPPORTED_OPTION`, naming the client's methods to use instead, when
   * amqplib is not installed or the module was given `amqplibChannel: false`.
   */
  get channel(): AmqplibChannel {
    if (!this.#amqplib) throw noChannelError('channel', this.#noChannel);
    return this.#amqplib.channel;
  }

  /** golevelup's `connection`: the amqplib connection of {@link AmqpConnection.channel}; throws as `channel` does. */
  get connection(): AmqplibConnection {
    if (!this.#amqplib) throw noChannelError('connection', this.#noChannel);
    return this.#amqplib.connection;
  }

  /**
   * golevelup's `managedChannel` (amqp-connection-manager's `ChannelWrapper`):
   * not available, always throws `UNSUPPORTED_OPTION`; `publish` here
   * reconnects as the wrapper did, and {@link AmqpConnection.channel} declares.
   */
  get managedChannel(): never {
    throw noChannelError(
      'managedChannel',
      "there is no amqp-connection-manager wrapper: publish with amqpConnection.publish, which reconnects, and use amqpConnection.channel for amqplib's calls",
    );
  }

  /**
   * Publishes `message` as golevelup does: a Buffer or Uint8Array as it is,
   * `null` or `undefined` as an empty body, anything else (strings too) through
   * the serializer (JSON by default). Resolves with `true` once the broker
   * confirmed it, also when no queue takes it, as golevelup's; with
   * `mandatory: true` such a publish rejects with `UNROUTABLE`.
   */
  async publish(exchange: string, routingKey: string, message: unknown, options?: AmqpPublishOptions): Promise<boolean> {
    const { mandatory, ...publish } = { ...this.#options.defaultPublishOptions, ...options } as AmqpPublishOptions & { mandatory?: unknown };
    if (mandatory !== undefined && typeof mandatory !== 'boolean') throw new InvalidOptionsError('mandatory must be true or false');
    try {
      await this.client.publish(exchange, routingKey, this.encode(message), publishOptionsOf(publish));
    } catch (err) {
      if (mandatory !== true && err instanceof UnroutableError) return true;
      throw err;
    }
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
    this.#replies ??= this.client.replies();
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
    originalHandlerName?: string,
  ): Promise<SubscriptionResult> {
    const consumerTag = `rabbit-retry-${randomUUID()}`;
    const subscription: Subscription = { options, handler: handler as Subscription['handler'], name: originalHandlerName ?? 'subscriber' };
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

  /** Closes the reply channel, the subscriptions and the amqplib connection; and the client of a connection of its own. */
  async close(): Promise<void> {
    const subscriptions = [...this.#subscriptions.values()];
    const consumers = subscriptions.flatMap((s) => (s.consumer ? [s.consumer] : []));
    this.#subscriptions.clear();
    const link = this.#amqplib;
    this.#amqplib = undefined;
    this.#noChannel = 'the connection is closed';
    await Promise.allSettled([this.#replies?.close(), ...consumers.map((c) => c.close()), closeAmqplib(link)]);
    this.#replies = undefined;
    for (const { plan } of subscriptions) {
      if (plan?.own && this.#rr) await removeOwnQueues(this.#rr, { ...plan.consume, onFailure: plan.onFailure }).catch(() => undefined);
    }
    if (this.#own && this.#rr) {
      const rr = this.#rr;
      this.#rr = undefined;
      await rr.close().catch(() => undefined);
    }
  }

  private async start(subscription: Subscription): Promise<void> {
    const plan = (subscription.plan ??= subscribePlan(subscription.options, {
      deserializer: this.#deserialize,
      handler: subscription.name,
      serviceName: this.#options.serviceName,
    }));
    subscription.consumer = await this.client.consume({ ...plan.consume, onFailure: plan.onFailure }, async (msg) => {
      await subscription.handler(plan.body(msg), rawOf(msg), msg.headers);
    });
    await bindOthers(this.client, plan.consume.queue, plan.bindings);
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
  const { deliveryMode, ...rest } = options as AmqpPublishOptions & Record<string, unknown>;
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

  /** golevelup's `addConnection`: registers `connection` under its `configuration.name`. */
  addConnection(connection: AmqpConnection): void {
    AmqpConnectionManager.#connections.set(connection.configuration.name, connection);
  }

  /** Forgets every connection (without closing them). */
  clearConnections(): void {
    AmqpConnectionManager.#connections.clear();
  }

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
