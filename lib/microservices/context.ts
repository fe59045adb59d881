import { RmqContext } from '@nestjs/microservices';

import type { Message } from '../message';
import { RabbitSubscribeMessage, type ConsumeMessageFields, type ConsumeMessageProperties } from '../nestjs/raw';

/** What a handler asked of its message through the channel of its context. */
export type ChannelVerdict =
  | {
      /** `ack`: the message is done. */
      kind: 'ack';
    }
  | {
      /** `nack` or `reject`: it failed. */
      kind: 'reject';
      /** Whether it goes to the next retry queue (`true`) or is parked (`false`). */
      requeue: boolean;
    };

/**
 * The channel `RabbitRetryContext.getChannelRef()` gives, so that handlers
 * written for `Transport.RMQ` with `noAck: false`, which ack or nack their
 * message themselves, run unchanged. The transport settles every message
 * itself once its handler has finished: `ack` changes nothing, and `nack` or
 * `reject` fail the message, through the retry queues when `requeue` is true
 * (amqplib's default) and to the parked queue when it is false. Nothing is
 * ever requeued at once.
 */
export class RabbitRetryChannelRef {
  #verdict?: ChannelVerdict;

  /** Nothing to do: the message is acked when its handler has finished. */
  ack(_message?: unknown, _allUpTo?: boolean): void {
    this.#verdict = { kind: 'ack' };
  }

  /**
   * Fails the message once its handler has finished: `requeue` (the
   * default) sends it to the next retry queue, `false` parks it.
   */
  nack(_message?: unknown, _allUpTo?: boolean, requeue?: boolean): void {
    this.#verdict = { kind: 'reject', requeue: requeue !== false };
  }

  /** As {@link RabbitRetryChannelRef.nack}. */
  reject(_message?: unknown, requeue?: boolean): void {
    this.#verdict = { kind: 'reject', requeue: requeue !== false };
  }

  /** The last of `ack`, `nack` and `reject` the handler called, if any. @internal */
  verdict(): ChannelVerdict | undefined {
    return this.#verdict;
  }
}

/** amqplib's `fields` of a delivery, as far as the transport knows them. */
export type RmqMessageFields = ConsumeMessageFields;

/** The properties of a {@link RabbitRetryRmqMessage}: amqplib's, with the headers among them. */
export type RmqMessageProperties = ConsumeMessageProperties;

/**
 * The message `RabbitRetryContext.getMessage()` gives: shaped as amqplib's
 * message that Nest's `RmqContext` gives (`content`, `fields`, `properties`
 * with `headers`), and rabbit-retry's {@link Message} besides (`body`,
 * `headers`, `attempt`, `json()`); the same shape a `@RabbitSubscribe`
 * handler gets.
 */
export class RabbitRetryRmqMessage extends RabbitSubscribeMessage {}

/**
 * What `@Ctx()` gives a handler run by {@link RabbitRetryServer}: the
 * message (a {@link RabbitRetryRmqMessage}: amqplib's shape, and its `attempt`), the
 * pattern, and a channel for handlers that settle their own messages. It is
 * an `RmqContext`, so a parameter typed `RmqContext` keeps working.
 */
export class RabbitRetryContext extends RmqContext {
  #message?: RabbitRetryRmqMessage;

  /** @internal */
  constructor(message: Message, channel: RabbitRetryChannelRef, pattern: string) {
    super([message, channel, pattern]);
  }

  /**
   * The message being handled, in amqplib's shape as `Transport.RMQ` gives it
   * (`content`, `fields`, `properties.headers`), and as rabbit-retry's
   * {@link Message}: `attempt` (0 on the first delivery), `headers`, `body`, `json()`.
   */
  override getMessage(): RabbitRetryRmqMessage {
    // Made on first use: most handlers read only their payload.
    this.#message ??= new RabbitRetryRmqMessage(this.getArgByIndex(0) as Message);
    return this.#message;
  }

  /** A channel whose `ack`, `nack` and `reject` settle the message once the handler has finished (see {@link RabbitRetryChannelRef}). */
  override getChannelRef(): RabbitRetryChannelRef {
    return this.getArgByIndex(1) as RabbitRetryChannelRef;
  }

  /** The message's pattern, as text. */
  override getPattern(): string {
    return this.getArgByIndex(2) as string;
  }

  /** How many earlier attempts of this message failed: 0 on the first delivery. */
  getAttempt(): number {
    return (this.getArgByIndex(0) as Message).attempt;
  }

  /** The message's headers (the `retry-*` headers of earlier failures among them). */
  getHeaders(): Record<string, unknown> {
    return (this.getArgByIndex(0) as Message).headers;
  }
}
