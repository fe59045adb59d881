/**
 * Type-level tests of the declarations a `@golevelup/nestjs-rabbitmq` project
 * compiles against once its imports name `rabbit-retry/nestjs`, checked by
 * `npm run typecheck` (part of `npm test`), not run by Jest: golevelup's own
 * callbacks, typed with amqplib's `Channel` and `ConsumeMessage`, compile as
 * they are written, and each line under `@ts-expect-error` must fail to compile.
 */
import type { Channel, ConfirmChannel, ConsumeMessage, Options } from 'amqplib';

import {
  AmqpConnection,
  type BatchErrorHandler,
  type RabbitRPCOptions,
  type RabbitSubscribeBatchOptions,
  type RpcErrorHandler,
  RabbitRPC,
  RabbitSubscribe,
} from '../lib/nestjs';

// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/rpc/reply.error.callback.ts,
// as written. (The MIT License) Copyright (c) 2019 Jesse Carter.
/* eslint-disable */
export function ReplyErrorCallback(channel: Channel, msg: ConsumeMessage, error: any) {
  const { replyTo, correlationId } = msg.properties;
  if (replyTo) {
    if (error instanceof Error) {
      error = error.message;
    } else if (typeof error !== 'string') {
      error = JSON.stringify(error);
    }

    error = Buffer.from(JSON.stringify({ status: 'error', message: error }));

    channel.publish('', replyTo, error, { correlationId });
    channel.ack(msg);
  }
}
/* eslint-enable */

export class RpcService {
  @RabbitRPC({ routingKey: 'error-reply-rpc', exchange: 'exchange1', queue: 'error-reply-rpc', errorHandler: ReplyErrorCallback })
  errorReplyRpc(message: object) {
    throw new Error(JSON.stringify(message));
  }
}

export const rpcOptions: RabbitRPCOptions = { exchange: 'exchange1', routingKey: 'rpc', errorHandler: ReplyErrorCallback };

// golevelup's batch error handler type (lib/amqp/errorBehaviors.d.ts), with the body of its defaultNackErrorHandler.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type BatchMessageErrorHandler = (channel: Channel, msg: ConsumeMessage[], error: any) => Promise<void> | void;
export const nackBatch: BatchMessageErrorHandler = (channel, msg) => {
  for (const m of Array.isArray(msg) ? msg : [msg]) {
    channel.nack(m, false, false);
  }
};

export const batch: RabbitSubscribeBatchOptions = { size: 10, timeout: 200, errorHandler: nackBatch };

/** A @RabbitSubscribe batch with that handler, and one written inline against rabbit-retry's own types. */
export class BatchService {
  @RabbitSubscribe({ exchange: 'exchange1', routingKey: 'batch', queue: 'batch', batchOptions: { size: 2, errorHandler: nackBatch } })
  batch(_messages: object[], _raw: ConsumeMessage[]) {}

  @RabbitSubscribe({
    queue: 'batch-inline',
    batchOptions: {
      errorHandler: (channel, msgs, error) => {
        for (const msg of msgs) {
          if (msg.properties.headers?.['x-keep'] === true) channel.ack(msg);
          else channel.nack(msg, false, !(error instanceof TypeError) && msg.fields.redelivered);
        }
      },
    },
  })
  inline(_messages: object[]) {}
}

/** A @RabbitSubscribe handler reading amqplib's fields of the raw message, its errorHandler golevelup's (refused at start-up, but it compiles). */
export class SubscribeService {
  consumerTags: string[] = [];

  @RabbitSubscribe({ exchange: 'exchange1', routingKey: 'tagged', queue: 'tagged', errorHandler: ReplyErrorCallback })
  tagged(_message: object, amqpMsg: ConsumeMessage) {
    this.consumerTags.push(amqpMsg.fields.consumerTag);
  }
}

/** golevelup's `MessageErrorHandler`, written inline against rabbit-retry's types: the fields golevelup's handlers read are there. */
export const inlineRpc: RabbitRPCOptions = {
  exchange: 'exchange1',
  routingKey: 'rpc-inline',
  errorHandler: (channel, message, error) => {
    const { replyTo, correlationId } = message.properties;
    const tag: string | undefined = message.fields.consumerTag;
    if (replyTo) {
      channel.publish('', replyTo, Buffer.from(JSON.stringify({ error: String(error), tag, routingKey: message.fields.routingKey })), { correlationId });
      channel.ack(message);
    } else {
      channel.reject(message, false);
    }
  },
};

/** An errorHandler reading the consumer's tag from amqplib's ConsumeMessage, as golevelup types it. */
export function tagOf(channel: Channel, msg: ConsumeMessage, _error: unknown): void {
  if (msg.fields.consumerTag.startsWith('audit-')) channel.nack(msg, false, false);
}
export const taggedRpc: RpcErrorHandler = tagOf;

/** golevelup's `amqpConnection.channel`: declared, checked, deleted and spied on with amqplib's calls and types. */
export async function useChannel(amqpConnection: AmqpConnection, queueOptions: Options.AssertQueue): Promise<number> {
  const { queue } = await amqpConnection.channel.assertQueue('pre-existing', queueOptions);
  await amqpConnection.channel.bindQueue(queue, 'exchange1', 'key');
  await amqpConnection.channel.checkExchange('exchange1');
  await amqpConnection.channel.deleteExchange('gone');
  const spy = jest.spyOn(amqpConnection.channel, 'nack');
  spy.mockRestore();
  const got = await amqpConnection.channel.get(queue);
  if (got) amqpConnection.channel.ack(got);
  const asAmqplib: ConfirmChannel = amqpConnection.channel;
  const asChannel: Channel = amqpConnection.channel;
  await asChannel.prefetch(1);
  await asAmqplib.waitForConfirms();
  const { messageCount } = await amqpConnection.channel.checkQueue(queue);
  return messageCount;
}

// Negative cases: each must fail to compile, or this file does.

export const wrongChannel: RabbitRPCOptions = {
  // @ts-expect-error a channel that is not a channel
  errorHandler: (_channel: string, _msg: ConsumeMessage) => undefined,
};

export const batchGivenToRpc: RabbitRPCOptions = {
  // @ts-expect-error a batch's handler (an array of messages) where one message is taken
  errorHandler: nackBatch,
};

// @ts-expect-error a single message's handler where a batch's array is taken
export const rpcGivenToBatch: BatchErrorHandler = ReplyErrorCallback;

export const tooManyArguments: RabbitRPCOptions = {
  // @ts-expect-error a fourth parameter the call never passes
  errorHandler: (_channel: Channel, _msg: ConsumeMessage, _error: unknown, _extra: string) => undefined,
};

export const wrongTagType: RabbitRPCOptions = {
  // @ts-expect-error a message whose consumer's tag is a number
  errorHandler: (_channel: Channel, _msg: { fields: { consumerTag: number } }) => undefined,
};

export const readsDeliveryTag: RpcErrorHandler = (_channel, msg) => {
  const tag: number = msg.fields.deliveryTag;
  return tag > 0 ? undefined : undefined;
};

export const errorChannelDeclares: RpcErrorHandler = async (channel) => {
  // @ts-expect-error the error handler's channel publishes and settles; it does not declare
  await channel.assertQueue('q');
};

export const ackWhat: BatchErrorHandler = (channel) => {
  // @ts-expect-error ack takes a message
  channel.ack('msg');
};

export async function channelAcksDeliveriesOnly(amqpConnection: AmqpConnection, handled: ConsumeMessage) {
  await amqpConnection.channel.checkQueue('q');
  // @ts-expect-error its assertQueue takes a queue name, not options first
  await amqpConnection.channel.assertQueue({ durable: true });
  amqpConnection.channel.ack(handled);
}

// @ts-expect-error no batch for @RabbitRPC's options: the size is a number
export const badBatch: RabbitSubscribeBatchOptions = { size: '10' };
