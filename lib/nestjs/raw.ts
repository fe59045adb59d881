/**
 * The message a `@RabbitSubscribe` (or `@RabbitRPC`) handler gets second: shaped
 * as amqplib's `ConsumeMessage` that golevelup handed (`content`, `fields`,
 * `properties` with `headers`), and rabbit-retry's {@link Message} besides.
 */
import { Message, type MessageProperties } from '../message';

/** amqplib's `fields` of a delivery, as far as rabbit-retry knows them. */
export interface ConsumeMessageFields {
  /** The consumer's tag when its options name one (`queueOptions.consumerOptions.consumerTag`, the module's `queues`); else `undefined`. */
  consumerTag?: string;
  /** The exchange the message was delivered through (`''` after a retry hop). */
  exchange: string;
  /** The routing key it was delivered with. */
  routingKey: string;
  /** Whether the broker delivered it before. */
  redelivered: boolean;
  /** The broker's delivery tag, on the channel the message came on (rabbit-retry settles it: see {@link Message.deliveryTag}). */
  deliveryTag: number;
}

/** amqplib's message properties: rabbit-retry's, with the headers among them. */
export type ConsumeMessageProperties = MessageProperties & {
  /** The application headers. */
  headers: Record<string, unknown>;
};

/** A {@link Message} with amqplib's `content`, `fields` and `properties.headers`, as golevelup's handlers read them. */
export class RabbitSubscribeMessage extends Message {
  /** The body, as amqplib's `content`. */
  readonly content: Buffer;
  /** The consumer's tag, the exchange, the routing key, `redelivered` and the delivery tag, as amqplib's `fields`. */
  readonly fields: ConsumeMessageFields;
  readonly #properties: ConsumeMessageProperties;

  /** @internal */
  constructor(msg: Message) {
    const body = msg.body;
    const properties = { ...msg.properties, headers: msg.headers };
    const { exchange, routingKey, redelivered, deliveryTag, attempt, consumerTag } = msg;
    super({ exchange, routingKey, redelivered, deliveryTag, attempt, consumerTag, properties, bytes: body, start: 0, end: body.length });
    this.content = body;
    this.fields = { exchange, routingKey, redelivered, deliveryTag };
    if (consumerTag !== undefined) this.fields.consumerTag = consumerTag;
    this.#properties = properties;
  }

  /** The message's properties, with `headers` among them as in amqplib. */
  override get properties(): ConsumeMessageProperties {
    return this.#properties;
  }
}

/** `msg` as a golevelup handler gets it. @internal */
export function rawOf(msg: Message): RabbitSubscribeMessage {
  return msg instanceof RabbitSubscribeMessage ? msg : new RabbitSubscribeMessage(msg);
}
