import { NonRetryableError } from './errors';
import { reasonOf } from './support/error-text';
import type { NativeMessageProperties } from './native';

/** What a {@link Message} is made of. @internal */
export interface DeliveryParts {
  exchange: string;
  routingKey: string;
  redelivered: boolean;
  deliveryTag: number;
  attempt: number;
  consumerTag?: string;
  properties: NativeMessageProperties;
  /** The body is `bytes` from `start` to `end` (a part of a buffer several deliveries share, or all of its own). */
  bytes: Buffer;
  start: number;
  end: number;
}

/** AMQP properties of a message, as a handler reads them and `publish` writes them. */
export interface MessageProperties {
  /** Application message id; kept through every retry, handy for idempotency. */
  messageId?: string;
  /** Correlation id; kept through every retry. */
  correlationId?: string;
  /** MIME type of the body, such as `application/json`. */
  contentType?: string;
  /** Encoding of the body, such as `gzip`. */
  contentEncoding?: string;
  /** Application message type name. */
  type?: string;
  /** Id of the publishing application. */
  appId?: string;
  /** Seconds since the epoch (AMQP timestamps have second precision). */
  timestamp?: number;
  /** Priority, 0 to 255. */
  priority?: number;
  /** 1 transient, 2 persistent. */
  deliveryMode?: number;
  /** Reply-to address. */
  replyTo?: string;
  /** Per-message TTL in milliseconds, as a string. Dropped on republish. */
  expiration?: string;
  /** Publishing user; the broker checks it against the connection's user. */
  userId?: string;
}

/**
 * A delivery, as a handler receives it. Resolve the handler to ack it; throw
 * to retry it (or to park it, with a {@link NonRetryableError}).
 */
export class Message {
  #bytes: Buffer;
  #start: number;
  #end: number;
  #body?: Buffer;
  #native: NativeMessageProperties;
  #properties?: MessageProperties;
  /**
   * Application headers. Strings, numbers, booleans, arrays and tables come
   * as their JavaScript counterparts; byte arrays and non-UTF-8 strings as
   * arrays of byte values; decimals as numbers; timestamps as seconds.
   */
  get headers(): Record<string, unknown> {
    return (this.#native.headers ?? {}) as Record<string, unknown>;
  }
  /** The exchange the message was delivered through (`''` after a retry hop). */
  readonly exchange: string;
  /** The routing key it was delivered with. */
  readonly routingKey: string;
  /** Whether the broker delivered it before (after a crash or a close). */
  readonly redelivered: boolean;
  /**
   * The broker's delivery tag, on the channel the message came on (a new
   * channel after a reconnect counts from 1 again). For logs and tracing: the
   * handler settles the message by resolving or throwing.
   */
  readonly deliveryTag: number;
  /** How many earlier attempts of this message failed: 0 on the first delivery. */
  readonly attempt: number;
  /** The tag of the consumer it was delivered to, when its options named one (`consumerTag`); else `undefined`. */
  readonly consumerTag?: string;

  /** @internal */
  constructor(d: DeliveryParts) {
    this.#bytes = d.bytes;
    this.#start = d.start;
    this.#end = d.end;
    this.#native = d.properties;
    this.exchange = d.exchange;
    this.routingKey = d.routingKey;
    this.redelivered = d.redelivered;
    this.deliveryTag = d.deliveryTag;
    this.attempt = d.attempt;
    if (d.consumerTag !== undefined) this.consumerTag = d.consumerTag;
  }

  /**
   * The raw body. Small bodies arrive several to a buffer; reading `body`
   * copies this one out (once), so keeping it keeps no other message's bytes.
   * {@link text} and {@link json} read it in place.
   */
  get body(): Buffer {
    if (!this.#body) {
      const b = this.#bytes;
      this.#body = this.#start === 0 && this.#end === b.length ? b : Buffer.from(b.subarray(this.#start, this.#end));
    }
    return this.#body;
  }

  /** The message's properties (only those it has). */
  get properties(): MessageProperties {
    // Built on first use: most handlers read the body only.
    if (!this.#properties) {
      const properties: MessageProperties = {};
      for (const [k, v] of Object.entries(this.#native)) {
        if (k !== 'headers' && v !== undefined && v !== null) (properties as Record<string, unknown>)[k] = v;
      }
      this.#properties = properties;
    }
    return this.#properties;
  }

  /** The body decoded as UTF-8. */
  text(): string {
    return this.#bytes.toString('utf8', this.#start, this.#end);
  }

  /**
   * The body parsed as JSON. Invalid JSON throws a {@link NonRetryableError},
   * so a malformed message is parked at once instead of retried.
   */
  json<T = unknown>(): T {
    try {
      return JSON.parse(this.text()) as T;
    } catch (err) {
      throw new NonRetryableError(`the message body is not valid JSON: ${reasonOf(err)}`, { cause: err });
    }
  }
}
