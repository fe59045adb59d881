// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/rpc/reply.error.callback.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import type { Channel, ConsumeMessage } from 'amqplib';

export function ReplyErrorCallback(
  channel: Channel,
  msg: ConsumeMessage,
  error: any,
) {
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
