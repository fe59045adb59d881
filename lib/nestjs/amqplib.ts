/**
 * The amqplib channel of {@link AmqpConnection.channel}: golevelup's
 * `amqpConnection.channel` is an amqplib `ConfirmChannel`, which code uses to
 * declare, check and delete queues and exchanges. When `amqplib` is installed
 * (as it is beside `@golevelup/nestjs-rabbitmq`), the connection opens one, on
 * its own amqplib connection, with golevelup's URL (`?heartbeat=5`). Handlers
 * are never consumed on it: rabbit-retry's core consumes, acks and retries.
 */
import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';

import { UnsupportedOptionError } from '../errors';
import type { MessageProperties } from '../message';
import type { ConsumeMessageFields } from './raw';

/**
 * A message as golevelup's callbacks (an `errorHandler`) read it: amqplib's
 * `ConsumeMessage`, as far as rabbit-retry's messages have it (its delivery tag
 * for logs: rabbit-retry's core acks). amqplib's `ConsumeMessage` is one, so callbacks typed
 * with it compile; the message given is a `RabbitSubscribeMessage`.
 */
export interface AmqplibMessage {
  /** The body. */
  readonly content: Buffer;
  /** The exchange, the routing key, `redelivered`, the delivery tag and the consumer's tag (when its options name one). */
  readonly fields: ConsumeMessageFields;
  /** The message's properties, with its `headers`. */
  readonly properties: AmqplibMessageProperties;
}

/** amqplib's message properties, as far as rabbit-retry's messages have them. */
export interface AmqplibMessageProperties extends MessageProperties {
  /** The application headers. */
  headers?: Record<string, unknown>;
}

/** amqplib's message properties as its channel delivers them: every key there, `undefined` when the message has none. */
export interface AmqplibDeliveryProperties {
  /** MIME type of the body. */
  contentType: string | undefined;
  /** Encoding of the body. */
  contentEncoding: string | undefined;
  /** The application headers. */
  headers: Record<string, unknown> | undefined;
  /** 1 transient, 2 persistent. */
  deliveryMode: number | undefined;
  /** Priority, 0 to 255. */
  priority: number | undefined;
  /** Correlation id. */
  correlationId: string | undefined;
  /** Reply-to address. */
  replyTo: string | undefined;
  /** Per-message TTL in milliseconds, as a string. */
  expiration: string | undefined;
  /** Application message id. */
  messageId: string | undefined;
  /** Seconds since the epoch. */
  timestamp: number | undefined;
  /** Application message type name. */
  type: string | undefined;
  /** Publishing user. */
  userId: string | undefined;
  /** Id of the publishing application. */
  appId: string | undefined;
  /** Cluster id (deprecated by AMQP 0-9-1). */
  clusterId: string | undefined;
}

/** The `fields` of an {@link AmqplibDelivery}. */
export interface AmqplibDeliveryFields {
  /** The delivery's tag on its channel. */
  deliveryTag: number;
  /** Whether the broker delivered it before. */
  redelivered: boolean;
  /** The exchange it was published to. */
  exchange: string;
  /** The routing key it was published with. */
  routingKey: string;
  /** The consumer's tag (`consume`). */
  consumerTag?: string;
  /** The messages left in the queue (`get`). */
  messageCount?: number;
}

/** A message {@link AmqplibChannel} got (`get`): the messages left in the queue are known. */
export interface AmqplibGetMessage extends AmqplibDelivery {
  /** The delivery's tag, where it came from, and the messages left in the queue. */
  fields: AmqplibDeliveryFields & {
    /** The messages left in the queue. */
    messageCount: number;
  };
}

/** A message {@link AmqplibChannel} delivered (its `get` or `consume`): what its `ack`, `nack` and `reject` take. */
export interface AmqplibDelivery {
  /** The body. */
  content: Buffer;
  /** The delivery's tag, which `ack`, `nack` and `reject` name, and where it came from. */
  fields: AmqplibDeliveryFields;

  /** The message's properties. */
  properties: AmqplibDeliveryProperties;
}

/** Publish options of {@link AmqplibChannel} (amqplib's `Options.Publish`). */
export interface AmqplibPublishOptions extends Omit<MessageProperties, 'expiration' | 'deliveryMode'> {
  /** Per-message TTL in milliseconds. */
  expiration?: string | number;
  /** Whether the broker writes the message to disk. */
  persistent?: boolean;
  /** 1 (or `false`) transient, 2 (or `true`) persistent. */
  deliveryMode?: boolean | number;
  /** Return the message when no queue takes it. */
  mandatory?: boolean;
  /** More routing keys, copied into the message. */
  CC?: string | string[];
  /** More routing keys, not copied into the message. */
  BCC?: string | string[];
  /** Application headers. */
  headers?: Record<string, unknown>;
}

/** Queue options of {@link AmqplibChannel.assertQueue} (amqplib's `Options.AssertQueue`). */
export interface AmqplibQueueOptions {
  /** Only the declaring connection may use it; deleted when it closes. */
  exclusive?: boolean;
  /** Survives a broker restart. @default true */
  durable?: boolean;
  /** Deleted when its last consumer goes. */
  autoDelete?: boolean;
  /** Queue arguments (`x-queue-type`, …). */
  arguments?: Record<string, unknown>;
  /** `x-message-ttl`. */
  messageTtl?: number;
  /** `x-expires`. */
  expires?: number;
  /** `x-dead-letter-exchange`. */
  deadLetterExchange?: string;
  /** `x-dead-letter-routing-key`. */
  deadLetterRoutingKey?: string;
  /** `x-max-length`. */
  maxLength?: number;
  /** `x-max-priority`. */
  maxPriority?: number;
  /** `x-overflow`. */
  overflow?: string;
  /** `x-queue-mode`. */
  queueMode?: string;
}

/** Exchange options of {@link AmqplibChannel.assertExchange} (amqplib's `Options.AssertExchange`). */
export interface AmqplibExchangeOptions {
  /** Survives a broker restart. @default true */
  durable?: boolean;
  /** Only exchanges bound to it publish to it. */
  internal?: boolean;
  /** Deleted when its last binding goes. */
  autoDelete?: boolean;
  /** `alternate-exchange`. */
  alternateExchange?: string;
  /** Exchange arguments. */
  arguments?: Record<string, unknown>;
}

/** A queue's name and counts, as `assertQueue` and `checkQueue` answer. */
export interface AmqplibQueueReply {
  /** The queue's name (the broker's, for `''`). */
  queue: string;
  /** Messages ready in it. */
  messageCount: number;
  /** Its consumers. */
  consumerCount: number;
}

/** What the broker said of itself when the amqplib connection opened (amqplib's `ServerProperties`). */
export interface AmqplibServerProperties {
  /** The broker's host name. */
  host: string;
  /** `RabbitMQ`. */
  product: string;
  /** The broker's version. */
  version: string;
  /** The Erlang version it runs on. */
  platform: string;
  /** Its copyright line. */
  copyright?: string;
  /** Its licence and web site. */
  information: string;
  /** Any other property it sent. */
  [key: string]: string | undefined;
}

/** The messages a queue held, as `deleteQueue` and `purgeQueue` answer. */
export interface AmqplibCountReply {
  /** How many. */
  messageCount: number;
}

/** An exchange's name, as `assertExchange` answers. */
export interface AmqplibExchangeReply {
  /** The exchange. */
  exchange: string;
}

/** A consumer's tag, as `consume` and `cancel` answer. */
export interface AmqplibConsumerReply {
  /** The consumer's tag. */
  consumerTag: string;
}

/**
 * A `(channel, msg, error)` callback whose parameters are checked as a method's
 * are (bivariantly): a function typed with amqplib's `Channel` and
 * `ConsumeMessage` compiles, one typed with something else (a string, a batch's
 * array for one message) does not.
 */
export type ErrorHandlerOf<C, M> = {
  /** Called unbound, with the channel, the message (or a batch's messages) and what the handler threw. */
  // eslint-disable-next-line @typescript-eslint/no-invalid-void-type -- `this: void`: it is called unbound
  handle(this: void, channel: C, msg: M, error: unknown): unknown;
}['handle'];

/**
 * amqplib's `ConfirmChannel`, which {@link AmqpConnection.channel} is: declared
 * here as amqplib declares it (with `unknown` for its `any`), so that code written
 * for golevelup's `amqpConnection.channel` compiles, and the channel can be passed
 * where amqplib's `Channel` or `ConfirmChannel` is taken, without amqplib's types
 * installed. Handlers are not consumed on it: its `ack` settles only what its own
 * `get` and `consume` delivered.
 */
export interface AmqplibChannel extends EventEmitter {
  /** The channel's connection, and what the broker said of itself. */
  readonly connection: {
    /** What the broker said of itself. */
    readonly serverProperties: AmqplibServerProperties;
  };
  /** Closes the channel. */
  close(): Promise<void>;
  /** Declares a queue (`''`: one the broker names). */
  assertQueue(queue?: string, options?: AmqplibQueueOptions): Promise<AmqplibQueueReply>;
  /** Checks that a queue exists (a missing one closes the channel with 404). */
  checkQueue(queue: string): Promise<AmqplibQueueReply>;
  /** Deletes a queue; resolves with the messages it held. */
  deleteQueue(queue: string, options?: { ifUnused?: boolean; ifEmpty?: boolean }): Promise<AmqplibCountReply>;
  /** Removes a queue's ready messages; resolves with their count. */
  purgeQueue(queue: string): Promise<AmqplibCountReply>;
  /** Binds a queue to an exchange. */
  bindQueue(queue: string, source: string, pattern: string, args?: Record<string, unknown>): Promise<object>;
  /** Removes a binding of a queue. */
  unbindQueue(queue: string, source: string, pattern: string, args?: Record<string, unknown>): Promise<object>;
  /** Declares an exchange. */
  assertExchange(exchange: string, type: string, options?: AmqplibExchangeOptions): Promise<AmqplibExchangeReply>;
  /** Checks that an exchange exists (a missing one closes the channel with 404). */
  checkExchange(exchange: string): Promise<object>;
  /** Deletes an exchange. */
  deleteExchange(exchange: string, options?: { ifUnused?: boolean }): Promise<object>;
  /** Binds an exchange to another. */
  bindExchange(destination: string, source: string, pattern: string, args?: Record<string, unknown>): Promise<object>;
  /** Removes a binding of an exchange. */
  unbindExchange(destination: string, source: string, pattern: string, args?: Record<string, unknown>): Promise<object>;
  /** Publishes; `callback` hears the broker's confirm. Returns `false` when the channel's buffer is full. */
  publish(exchange: string, routingKey: string, content: Buffer, options?: AmqplibPublishOptions, callback?: (err: unknown, ok: object) => void): boolean;
  /** Publishes to a queue through the default exchange. */
  sendToQueue(queue: string, content: Buffer, options?: AmqplibPublishOptions, callback?: (err: unknown, ok: object) => void): boolean;
  /** Consumes a queue on this channel (`null`: the broker cancelled the consumer). */
  consume(
    queue: string,
    onMessage: (msg: (AmqplibDelivery & { fields: { consumerTag: string } }) | null) => void,
    options?: { consumerTag?: string; noLocal?: boolean; noAck?: boolean; exclusive?: boolean; priority?: number; arguments?: Record<string, unknown> },
  ): Promise<AmqplibConsumerReply>;
  /** Cancels a consumer of this channel. */
  cancel(consumerTag: string): Promise<AmqplibConsumerReply>;
  /** Takes one message from a queue; `false` when it is empty. */
  get(queue: string, options?: { noAck?: boolean }): Promise<AmqplibGetMessage | false>;
  /** Acks a message this channel delivered. */
  ack(message: AmqplibDelivery, allUpTo?: boolean): void;
  /** Acks every message this channel delivered. */
  ackAll(): void;
  /** Nacks a message this channel delivered (`requeue`, by default, puts it back in its queue). */
  nack(message: AmqplibDelivery, allUpTo?: boolean, requeue?: boolean): void;
  /** Nacks every message this channel delivered. */
  nackAll(requeue?: boolean): void;
  /** Rejects a message this channel delivered. */
  reject(message: AmqplibDelivery, requeue?: boolean): void;
  /** Sets this channel's prefetch. */
  prefetch(count: number, global?: boolean): Promise<object>;
  /** Redelivers this channel's unacked messages. */
  recover(): Promise<object>;
  /** Resolves once the broker confirmed every publish so far. */
  waitForConfirms(): Promise<void>;
}

/** The part of amqplib's `ChannelModel` (its connection) rabbit-retry uses. */
export interface AmqplibConnection {
  /** Opens a confirm channel. */
  createConfirmChannel(): Promise<AmqplibChannel>;
  /** Closes the connection. */
  close(): Promise<void>;
  /** Listens for the connection's errors (logged, never thrown). */
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** The part of the `amqplib` package rabbit-retry calls. */
interface AmqplibModule {
  connect(url: string, socketOptions?: unknown): Promise<AmqplibConnection>;
}

/** `amqplib`, when the application has it; else `undefined`. */
function loadAmqplib(): AmqplibModule | undefined {
  try {
    return createRequire(__filename)('amqplib') as AmqplibModule;
  } catch {
    return undefined;
  }
}

/**
 * golevelup's connection URL: the node's URL with `heartbeat` in its query
 * (amqp-connection-manager's `?heartbeat=`), unless the URL sets one.
 * @internal
 */
export function amqplibUrl(url: string, heartbeat: number): string {
  if (/[?&]heartbeat=/.test(url)) return url;
  return `${url}${url.includes('?') ? '&' : '?'}heartbeat=${heartbeat}`;
}

/** An open amqplib connection and its confirm channel. @internal */
export interface AmqplibLink {
  connection: AmqplibConnection;
  channel: AmqplibChannel;
}

/**
 * Opens the amqplib connection and channel of {@link AmqpConnection.channel}
 * on the first of `urls` (a cluster's nodes, in order) that answers, or
 * resolves `undefined` when amqplib is not installed. Rejects with the last
 * node's error when none answers.
 * @internal
 */
export async function openAmqplib(urls: readonly string[], heartbeat: number, warn: (m: string) => void): Promise<AmqplibLink | undefined> {
  const amqplib = loadAmqplib();
  if (!amqplib) return undefined;
  let lastErr: unknown = new Error('no broker URL');
  for (const url of urls) {
    let connection: AmqplibConnection;
    try {
      connection = await amqplib.connect(amqplibUrl(url, heartbeat), undefined);
    } catch (err) {
      lastErr = err;
      continue;
    }
    connection.on('error', (err) => warn(`the amqplib connection of AmqpConnection.channel failed: ${err.message}`));
    try {
      return { connection, channel: await connection.createConfirmChannel() };
    } catch (err) {
      await connection.close().catch(() => undefined);
      throw err;
    }
  }
  throw lastErr;
}

/** Closes what {@link openAmqplib} opened. @internal */
export async function closeAmqplib(link: AmqplibLink | undefined): Promise<void> {
  if (!link) return;
  await link.connection.close().catch(() => undefined);
}

/** The error of `channel` (or `managedChannel`) when there is no amqplib channel. @internal */
export function noChannelError(property: string, why: string): UnsupportedOptionError {
  return new UnsupportedOptionError(
    property,
    `AmqpConnection.${property} is not available: ${why}. ` +
      'Declare and check with the client (`amqpConnection.client.declareQueue`, `declareExchange`, `bindQueue`, `checkQueue`) ' +
      'or install amqplib for an amqplib channel',
  );
}
