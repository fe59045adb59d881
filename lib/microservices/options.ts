/**
 * The options of the transport's server and client, the tables of their
 * keys, and the `Transport.RMQ` options that have no meaning here.
 */
import type { ConsumerDeserializer, ConsumerSerializer, ProducerDeserializer, ProducerSerializer } from '@nestjs/microservices';

import type { RabbitRetry } from '../client';
import type { PublishOptions } from '../options';
import { UnsupportedOptionError } from '../errors';
import { CONNECT_OPTION_KEYS, CONSUME_OPTION_KEYS, type ConnectOptions, type ConsumeOptions, type OptionKeys } from '../options';

/**
 * Options of {@link RabbitRetryServer}: how to connect (or a connected
 * client), the work queue and its failure path as `rr.consume` takes them,
 * and Nest's serializer and deserializer.
 *
 * ```ts
 * new RabbitRetryServer({ url: 'amqp://guest:guest@127.0.0.1:5672', queue: 'cats_queue', onFailure: { delays: ['5s', '1m'] } })
 * ```
 */
export interface RabbitRetryServerOptions extends ConnectOptions, Omit<ConsumeOptions, 'inbox'> {
  /**
   * A connected client to consume with (the one of `RabbitRetryModule`, for
   * example) instead of a connection of the server's own. The server does not
   * close it; the connect options are then refused.
   */
  client?: RabbitRetry;
  /**
   * What a failed `@MessagePattern` request does. `false`: the caller is
   * answered with the error and the request is acked, as with `Transport.RMQ`.
   * `true`: the request takes the failure path of an event (the retry
   * queues, then the parked queue) and the caller is answered by the attempt
   * that succeeds, or with the error of the one that parks it. A request
   * without `reply-to` always takes the failure path: nobody could be answered.
   * @default false
   */
  retryRequests?: boolean;
  /**
   * Turns each reply packet (`{ id, response, err, isDisposed }`) into what
   * is sent. A throw, a rejection, or no answer within 5 s sends no reply,
   * and logs why. @default the packet as it is
   */
  serializer?: ConsumerSerializer;
  /**
   * Turns the parsed body of a message (and its properties) into
   * `{ pattern, data, id? }`; it receives the body as text when it is not
   * JSON. A throw, a rejection, no answer within 5 s, or an answer that is
   * not an object parks the message as `non-retryable`, saying which.
   * @default Nest's IncomingRequestDeserializer
   */
  deserializer?: ConsumerDeserializer;
  /**
   * How long `close()` (and so `app.close()`) waits for handlers in flight;
   * their messages then go back to the queue.
   * @default 30000
   */
  closeTimeoutMs?: number;
  /**
   * As `Transport.RMQ`'s: the queue is bound to the exchange named after it
   * (or `exchange`, a topic exchange unless `exchangeType` says otherwise)
   * with each handler's pattern, and a message whose pattern has no handler
   * of its own goes to the first handler whose topic pattern (`orders.*`,
   * `audit.#`) matches it.
   * @default false
   */
  wildcards?: boolean;
  /**
   * `exclusive: true` with `queue: ''` (Nest's server-named queue): a
   * broadcast's queue of this server's own, `<exchange>.<8 hex digits>`,
   * deleted with its retry queues when the server closes (its parked queue
   * too, when empty), and by the broker 5 minutes after a server that did not
   * close is gone (`x-expires`). `queue: ''` alone does the same. No other
   * key: the work queue is durable.
   */
  queueOptions?: {
    /** Whether the queue is the server's own (see above). */
    exclusive?: boolean;
  };
}

/** The keys of the server's own options (beside the connect and consume options). @internal */
const SERVER_OWN_KEYS = {
  client: true,
  retryRequests: true,
  serializer: true,
  deserializer: true,
  closeTimeoutMs: true,
  wildcards: true,
  queueOptions: true,
} satisfies OptionKeys<
  Pick<RabbitRetryServerOptions, 'client' | 'retryRequests' | 'serializer' | 'deserializer' | 'closeTimeoutMs' | 'wildcards' | 'queueOptions'>
>;

// The transport's handlers get no transaction: `inbox` is for `@Consume` and `rr.consume`.
const { inbox: _inbox, ...serverConsumeKeys } = CONSUME_OPTION_KEYS;

/** The keys of {@link RabbitRetryServerOptions}. @internal */
export const SERVER_OPTION_KEYS = {
  ...CONNECT_OPTION_KEYS,
  ...serverConsumeKeys,
  ...SERVER_OWN_KEYS,
} satisfies OptionKeys<RabbitRetryServerOptions>;

/**
 * `Transport.RMQ` options a server's options may still carry, and what to
 * do instead. @internal
 */
export const RMQ_SERVER_OPTIONS: Readonly<Record<string, string>> = {
  urls: 'write `url`, one URL or a list of them',
  prefetchCount: 'write `prefetch`',
  isGlobalPrefetchCount: 'remove it: the prefetch is per consumer',
  noAck: 'remove it: every message is acked once its handler has finished (or moved to a retry or the parked queue first)',
  noAssert: 'write `assertQueue: false`',
  socketOptions: 'write `heartbeat`, `connectTimeoutMs` and `tls`',
  consumerTag: "remove it: the consumer tag is the broker's",
  maxConnectionAttempts: 'write `recovery: { maxAttempts }`; the first connection fails at once with CONNECTION',
  exchangeArguments: 'remove it: the exchange is declared durable, with no arguments',
  replyQueue: 'it is an option of the client (RabbitRetryClient); the server answers the `reply-to` of each request',
  persistent: 'it is an option of the client (RabbitRetryClient)',
  headers: 'it is an option of the client (RabbitRetryClient)',
};

/**
 * Options of {@link RabbitRetryClient}: how to connect (or a connected
 * client), where requests and events go, and Nest's serializer and
 * deserializer.
 */
export interface RabbitRetryClientOptions extends ConnectOptions {
  /** A connected client to publish with, instead of a connection of this client's own; it is not closed by `close()`. */
  client?: RabbitRetry;
  /** The queue requests and events go to, through the default exchange (as `Transport.RMQ`'s `queue`). */
  queue?: string;
  /** An exchange to publish to instead, with `routingKey`, or with each message's pattern as its routing key. */
  exchange?: string;
  /** The routing key with `exchange`. @default the message's pattern */
  routingKey?: string;
  /**
   * As `Transport.RMQ`'s: requests and events go to the exchange named after
   * `queue` (or to `exchange`), with each message's pattern as its routing
   * key, for a server with `wildcards: true`.
   * @default false
   */
  wildcards?: boolean;
  /** Whether the broker writes requests and events to disk. @default true */
  persistent?: boolean;
  /** Headers every request and event carries. */
  headers?: Record<string, string>;
  /**
   * Turns each packet (`{ pattern, data, id? }`) into what is sent. What it
   * throws or rejects with fails the `send` or `emit`; so does no answer
   * within 5 s, with an Error that says so.
   * @default the packet, with an RmqRecord's options as the message's properties
   */
  serializer?: ProducerSerializer;
  /**
   * Turns each parsed reply into `{ err, response, isDisposed }`. What it
   * throws or rejects with ends the `send` with that error; no answer within
   * 5 s, or an answer that is not an object, ends it with an Error that says so.
   * @default Nest's IncomingResponseDeserializer
   */
  deserializer?: ProducerDeserializer;
}

/** The keys of {@link RabbitRetryClientOptions}. @internal */
export const CLIENT_OPTION_KEYS = {
  ...CONNECT_OPTION_KEYS,
  client: true,
  queue: true,
  exchange: true,
  routingKey: true,
  wildcards: true,
  persistent: true,
  headers: true,
  serializer: true,
  deserializer: true,
} satisfies OptionKeys<RabbitRetryClientOptions>;

/** `Transport.RMQ` client options a client's options may still carry, and what to do instead. @internal */
export const RMQ_CLIENT_OPTIONS: Readonly<Record<string, string>> = {
  urls: 'write `url`, one URL or a list of them',
  replyQueue: 'remove it: replies come over direct reply-to',
  queueOptions: 'remove it: the client declares nothing; the server declares its queue',
  noAssert: 'remove it: the client declares nothing',
  noAck: 'remove it: replies are taken as they come',
  prefetchCount: 'remove it: the client consumes replies only',
  isGlobalPrefetchCount: 'remove it: the client consumes replies only',
  socketOptions: 'write `heartbeat`, `connectTimeoutMs` and `tls`',
  maxConnectionAttempts: 'remove it: connect fails at once with CONNECTION, naming each node it tried',
  exchangeType: 'remove it: the client declares nothing; the server declares the exchange',
  exchangeArguments: 'remove it: the client declares nothing',
};

/** The connect options among `options`. @internal */
export function connectOptionsOf(options: ConnectOptions): ConnectOptions {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(CONNECT_OPTION_KEYS)) {
    const v = (options as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = v;
  }
  return out;
}

/** The consume options among `options`. @internal */
export function consumeOptionsOf(options: ConsumeOptions): ConsumeOptions {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(CONSUME_OPTION_KEYS)) {
    const v = (options as unknown as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = v;
  }
  return out as unknown as ConsumeOptions;
}

/** The message options (of an RmqRecord, or of a serializer's output) that a publish takes, by their name in {@link PublishOptions}. */
const MESSAGE_OPTIONS = [
  'expiration',
  'userId',
  'persistent',
  'contentType',
  'contentEncoding',
  'headers',
  'priority',
  'messageId',
  'correlationId',
  'replyTo',
  'timestamp',
  'type',
  'appId',
] as const;

/**
 * Message options as Nest's RMQ transport takes them (an RmqRecord's, or the
 * `options` a serializer returns) as publish options; one a publish cannot
 * honour (`CC`, `BCC`) throws an {@link UnsupportedOptionError}.
 * @internal
 */
export function publishOptionsOf(options: Readonly<Record<string, unknown>> | undefined, where = 'RmqRecord.options'): PublishOptions {
  const out: Record<string, unknown> = {};
  if (!options) return out;
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    if ((MESSAGE_OPTIONS as readonly string[]).includes(key)) out[key] = value;
    else if (key === 'deliveryMode') out.persistent = value === 2 || value === true;
    else if (key === 'mandatory') {
      // Every publish is mandatory already.
    } else {
      throw new UnsupportedOptionError(`${where}.${key}`, `\`${key}\` of ${where} has no meaning in rabbit-retry: publish to each destination instead`);
    }
  }
  return out;
}
