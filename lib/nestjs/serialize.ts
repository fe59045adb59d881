/**
 * golevelup's `serializer` and `deserializer`: how `AmqpConnection` turns a
 * value into bytes, and how a handler's (or a reply's) bytes become a value.
 */
import type { Message } from '../message';
import type { PublishOptions } from '../options';

/** Turns a value into the bytes to publish (golevelup's `MessageSerializer`). */
export type MessageSerializer = (value: unknown) => Buffer;

/** Turns a body into a value (golevelup's `MessageDeserializer`); the second argument is rabbit-retry's Message. */
export type MessageDeserializer = (body: Buffer, msg: Message) => unknown;

/** JSON, as golevelup writes every value. @internal */
export const defaultSerializer: MessageSerializer = (value) => Buffer.from(JSON.stringify(value));

/** JSON, as golevelup reads every body. @internal */
export const defaultDeserializer: MessageDeserializer = (body) => JSON.parse(body.toString()) as unknown;

/**
 * amqplib's publish options, as golevelup's `publish` takes them: rabbit-retry's
 * {@link PublishOptions}, plus `deliveryMode` (1 or `false` transient, 2 or
 * `true` persistent) and `mandatory`.
 */
export interface AmqpPublishOptions extends PublishOptions {
  /** 1 (or `false`): transient; 2 (or `true`): persistent. */
  deliveryMode?: boolean | number;
  /** `true`: a message no queue takes rejects with `UNROUTABLE`. @default false: it resolves, as golevelup's */
  mandatory?: boolean;
}
