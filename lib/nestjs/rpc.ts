/**
 * `@RabbitRPC`: a `@RabbitSubscribe` handler whose return value answers the
 * request, on its `reply-to` (direct reply-to) with its correlation id and
 * headers, as `@golevelup/nestjs-rabbitmq`'s decorator of the same name does.
 */
import { SetMetadata } from '@nestjs/common';

import type { RabbitRetry } from '../client';
import { reasonOf } from '../support/error-text';
import { NonRetryableError, ReplyRefusedError, UnsupportedOptionError } from '../errors';
import type { Message } from '../message';
import type { PublishOptions } from '../options';
import { REPLY_ERROR_HEADER } from '../messaging/request';
import { RABBIT_RPC_METADATA } from './constants';
import type { MessageSerializer } from './serialize';
import type { AmqplibMessage, ErrorHandlerOf } from './amqplib';
import { rawOf } from './raw';
import type { RabbitSubscribeOptions } from './subscribe';

/**
 * golevelup's `errorHandler` of an RPC handler (its `MessageErrorHandler`):
 * called with a channel whose `publish` sends (a reply, say), the request, and
 * what the handler threw; `ack` (or nothing) settles the request,
 * `nack(msg, false, true)` sends it to the next retry queue,
 * `nack(msg, false, false)` or `reject(msg, false)` parks it.
 *
 * A handler written for golevelup, `(channel: Channel, msg: ConsumeMessage, error: any)`
 * with amqplib's types, compiles as it is: its parameters are checked as a
 * method's are (bivariantly), amqplib's `Channel` having each method of
 * {@link RpcErrorChannel} and its `ConsumeMessage` being an {@link AmqplibMessage}.
 * Only those four methods of the channel exist at run time.
 */
export type RpcErrorHandler = ErrorHandlerOf<RpcErrorChannel, AmqplibMessage>;

/** The channel an {@link RpcErrorHandler} gets: amqplib's `Channel`, as far as an error handler uses it. */
export interface RpcErrorChannel {
  /** Publishes `content`; to `''` with a reply-to address as routing key, it is a reply. Sent once the error handler returns. */
  publish(exchange: string, routingKey: string, content: Buffer, options?: PublishOptions): boolean;
  /** Settles the request (the default). */
  ack(msg: AmqplibMessage, allUpTo?: boolean): void;
  /** `requeue` (the default) sends the request to the next retry queue, `false` parks it. */
  nack(msg: AmqplibMessage, allUpTo?: boolean, requeue?: boolean): void;
  /** `requeue: false` parks the request; `true` sends it to the next retry queue. */
  reject(msg: AmqplibMessage, requeue?: boolean): void;
}

/** What {@link RabbitRPC} takes: {@link RabbitSubscribeOptions}, and how failures are answered. */
export interface RabbitRPCOptions extends Omit<RabbitSubscribeOptions, 'errorHandler' | 'errorBehavior' | 'usePersistentReplyTo'> {
  /** Called when the handler throws, instead of the answer with the error (see {@link RpcErrorHandler}). */
  errorHandler?: RpcErrorHandler;
  /** Only `'ACK'` (what a failed request with a reply-to gets anyway: it is answered with the error, then acked). */
  errorBehavior?: MessageHandlerErrorBehavior;
  /** Replies are persistent. @default false */
  usePersistentReplyTo?: boolean;
}

/**
 * Answers requests with this provider method's return value, as
 * `@golevelup/nestjs-rabbitmq`'s `@RabbitRPC` does: consumed as
 * {@link RabbitSubscribe} would consume it, the value (through the module's
 * `serializer`, JSON by default) goes to the request's `reply-to` with its
 * correlation id and headers. A handler that throws answers with
 * `{ status: 'error', message, code }` (and the `rabbit-retry-error` header, which
 * `rr.request` turns into a `RemoteError`), then the request is acked; a
 * request without a reply-to takes the failure path. A {@link Nack} sends no
 * reply: `new Nack(true)` retries, `new Nack()` parks. Without `queue`, as golevelup
 * allows, it consumes a durable queue of its own, named as a `@RabbitSubscribe`
 * handler's without one (`<serviceName>.<exchange>.<routingKey>.<Class>.<method>`).
 *
 * ```ts
 * @RabbitRPC({ exchange: 'exchange1', routingKey: 'rpc', queue: 'rpc' })
 * rpc(message: object) { return { echo: message }; }
 * ```
 */
export function RabbitRPC(options: RabbitRPCOptions): MethodDecorator {
  return SetMetadata(RABBIT_RPC_METADATA, options);
}

/** golevelup's `MessageHandlerErrorBehavior`: of its values, `@RabbitRPC` takes `ACK` only (see {@link RabbitRPCOptions}). */
export const MessageHandlerErrorBehavior = {
  /** A failed request is answered with its error and acked. */
  ACK: 'ACK',
  /** Refused: give `errorHandler`, whose channel's `nack(msg, false, false)` parks the request. */
  NACK: 'NACK',
  /** Refused: a failed request is never requeued at once. */
  REQUEUE: 'REQUEUE',
} as const;

/** One of {@link MessageHandlerErrorBehavior}'s values. */
export type MessageHandlerErrorBehavior = (typeof MessageHandlerErrorBehavior)[keyof typeof MessageHandlerErrorBehavior];

/** Refuses an `errorBehavior` other than `ACK`. @internal */
export function checkErrorBehavior(options: RabbitRPCOptions): void {
  const behavior = options.errorBehavior as unknown;
  if (behavior === undefined || behavior === 'ACK') return;
  throw new UnsupportedOptionError(
    'errorBehavior',
    `\`errorBehavior: ${JSON.stringify(behavior)}\` of @RabbitRPC is not supported: a failed request is answered with its error and acked (ACK); give \`errorHandler\` to do otherwise (its channel's nack retries or parks the request)`,
  );
}

/** The options @RabbitRPC takes beyond @RabbitSubscribe's. @internal */
export const RPC_OPTIONS: ReadonlySet<string> = new Set(['errorHandler', 'errorBehavior', 'usePersistentReplyTo']);

/** How one @RabbitRPC handler answers. @internal */
export interface Answerer {
  rr: RabbitRetry;
  serialize: MessageSerializer;
  /** Logs a reply that could not be confirmed. */
  warn: (m: string) => void;
  options: RabbitRPCOptions;
  name: string;
}

/**
 * Sends a reply. The broker's refusal of it (`REPLY_REFUSED`) parks the request;
 * any other failure (a named reply queue that is gone, a confirm that never came)
 * is logged, not retried: a request handled again would run its handler twice.
 */
async function send(a: Answerer, replyTo: string, body: Buffer, options: PublishOptions): Promise<void> {
  try {
    await a.rr.reply(replyTo, body, options);
  } catch (err) {
    if (!(err instanceof ReplyRefusedError)) {
      a.warn(`${a.name}: the reply to '${replyTo}' was not confirmed: ${reasonOf(err)}`);
      return;
    }
    if (options.headers?.[REPLY_ERROR_HEADER] === undefined) await tellRefused(a, replyTo, options, err);
    throw err;
  }
}

/**
 * The caller of a request whose reply the broker refused (its size, a
 * property) is answered at once with that error, in a reply of the bare
 * minimum (its correlation id), rather than left to its timeout. A reply-to
 * the broker refuses is refused for this answer too: then the caller hears
 * nothing, as it would of any reply.
 */
async function tellRefused(a: Answerer, replyTo: string, refused: PublishOptions, err: ReplyRefusedError): Promise<void> {
  const body = Buffer.from(JSON.stringify({ status: 'error', message: reasonOf(err), code: err.code }));
  const options: PublishOptions = { persistent: false, headers: { [REPLY_ERROR_HEADER]: err.name } };
  if (refused.correlationId !== undefined) options.correlationId = refused.correlationId;
  const requestId = refused.headers?.['X-Request-ID'];
  if (typeof requestId === 'string' && options.headers) options.headers['X-Request-ID'] = requestId;
  await a.rr.reply(replyTo, body, options).catch(() => undefined);
}

/** The reply's bytes for `value`, as golevelup sends them. */
function encode(value: unknown, serialize: MessageSerializer): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value);
  if (value === null || value === undefined) return Buffer.alloc(0);
  return serialize(value);
}

/** The reply's properties: the request's correlation id, headers and expiration. */
function replyOptions(msg: Message, persistent: boolean, headers?: Record<string, unknown>): PublishOptions {
  const { correlationId, expiration } = msg.properties;
  const options: PublishOptions = { persistent, headers: { ...msg.headers, ...headers } };
  if (correlationId !== undefined) options.correlationId = correlationId;
  if (expiration !== undefined) options.expiration = expiration;
  return options;
}

/** Sends the handler's value to the request's reply-to (nothing when it has none). @internal */
export async function answer(a: Answerer, msg: Message, value: unknown): Promise<void> {
  const replyTo = msg.properties.replyTo;
  if (replyTo === undefined) return;
  await send(a, replyTo, encode(value, a.serialize), replyOptions(msg, a.options.usePersistentReplyTo === true));
}

/**
 * What a failed request gets: the `errorHandler`'s doing, or an answer with
 * the error; without a reply-to, the failure path (the error is thrown on).
 * @internal
 */
export async function answerFailure(a: Answerer, msg: Message, err: unknown): Promise<void> {
  if (a.options.errorHandler) return runErrorHandler(a, msg, err, a.options.errorHandler);
  const replyTo = msg.properties.replyTo;
  if (replyTo === undefined) throw err;
  const name = err instanceof Error ? err.name : 'Error';
  const body = Buffer.from(JSON.stringify({ status: 'error', message: reasonOf(err), code: codeOf(err) }));
  const options = replyOptions(msg, a.options.usePersistentReplyTo === true, { [REPLY_ERROR_HEADER]: name });
  await send(a, replyTo, body, options);
}

/** The error's string `code`, if it has one (left out of the JSON otherwise). */
function codeOf(err: unknown): string | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  try {
    const { code } = err as { code?: unknown };
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}

async function runErrorHandler(a: Answerer, msg: Message, err: unknown, handler: RpcErrorHandler): Promise<void> {
  const sends: Promise<void>[] = [];
  let verdict: 'ack' | 'retry' | 'park' = 'ack';
  const channel: RpcErrorChannel = {
    publish: (exchange, routingKey, content, options = {}) => {
      const direct = exchange === '' && routingKey.startsWith('amq.rabbitmq.reply-to');
      sends.push(direct ? a.rr.reply(routingKey, content, options) : a.rr.publish(exchange, routingKey, content, options));
      return true;
    },
    ack: () => undefined,
    nack: (_msg, _allUpTo, requeue = true) => {
      verdict = requeue ? 'retry' : 'park';
    },
    reject: (_msg, requeue = true) => {
      verdict = requeue ? 'retry' : 'park';
    },
  };
  await handler(channel, rawOf(msg), err);
  await Promise.all(sends);
  const settled = verdict as 'ack' | 'retry' | 'park';
  if (settled === 'park') throw new NonRetryableError(`${a.name}'s errorHandler parked the request: ${reasonOf(err)}`, { cause: err });
  if (settled === 'retry') throw err;
}
