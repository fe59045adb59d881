import { Inject, type PipeTransform, SetMetadata, type Type } from '@nestjs/common';

import type { OnFailureOptions } from '../options';
import { ARGS_METADATA, CONSUME_METADATA, ON_FAILURE_METADATA, RABBIT_RETRY } from './constants';
import type { ConsumeHandlerOptions } from './options';

/**
 * Consumes `options.queue` with this provider method once the application
 * bootstraps. The method receives the parsed JSON body first and the
 * {@link Message} second; resolve to ack, throw to retry or park (see
 * {@link OnFailure}). A body that is not JSON parks at once as `non-retryable`.
 * With `inbox`, it runs in a transaction of your database and receives
 * `{ tx }` third (or where {@link RabbitTx} marks it).
 *
 * Only stores metadata, so it combines with {@link OnFailure} in either order.
 */
export function Consume(options: ConsumeHandlerOptions): MethodDecorator {
  return SetMetadata(CONSUME_METADATA, options);
}

/**
 * What to do when the {@link Consume} handler throws: the retry delays and
 * which errors are worth another attempt. Overrides the module's
 * `defaultOnFailure` field by field. Only valid next to `@Consume`; alone it
 * fails the bootstrap.
 */
export function OnFailure(options: OnFailureOptions): MethodDecorator {
  return SetMetadata(ON_FAILURE_METADATA, options);
}

/** Injects the module's {@link RabbitRetry} client, for `publish`, `parked(...)` and `queueInfo`. */
export function InjectRabbitRetry(): PropertyDecorator & ParameterDecorator {
  return Inject(RABBIT_RETRY);
}

/**
 * The parameter kinds of a handler; the numbers of Nest's RPC payload and
 * context, and one more for the headers (which pipes see as `custom`). @internal
 */
export const ArgType = { Payload: 3, Message: 6, Headers: 7, Tx: 8 } as const;

/** @internal */
export type ArgType = (typeof ArgType)[keyof typeof ArgType];

/** A pipe as `@RabbitPayload` takes it: a class or an instance. */
export type PipeLike = Type<PipeTransform> | PipeTransform;

/** @internal */
export interface ArgMetadata {
  index: number;
  data?: string;
  pipes: PipeLike[];
}

function argDecorator(type: ArgType, data: string | undefined, pipes: PipeLike[]): ParameterDecorator {
  return (target, key, index) => {
    if (key === undefined) {
      throw new Error(
        'rabbit-retry: @RabbitPayload(), @RabbitMessage(), @RabbitHeader(), @RabbitRequest() and @RabbitTx() go on the parameters of a @Consume or @RabbitSubscribe method',
      );
    }
    const ctor = target.constructor;
    const existing = (Reflect.getMetadata(ARGS_METADATA, ctor, key) ?? {}) as Record<string, ArgMetadata>;
    Reflect.defineMetadata(ARGS_METADATA, { ...existing, [`${type}:${index}`]: { index, data, pipes } }, ctor, key);
  };
}

/**
 * Marks the parameter that receives the parsed JSON body (or its `property`),
 * so that pipes (global ones and those given here) transform and validate it.
 * Without any parameter decorator a handler gets `(body, msg)` and no pipe runs.
 */
export function RabbitPayload(property?: string | PipeLike, ...pipes: PipeLike[]): ParameterDecorator {
  if (property === undefined || typeof property === 'string') return argDecorator(ArgType.Payload, property, pipes);
  return argDecorator(ArgType.Payload, undefined, [property, ...pipes]);
}

/** Marks the parameter that receives the {@link Message}, when others use {@link RabbitPayload}. */
export function RabbitMessage(): ParameterDecorator {
  return argDecorator(ArgType.Message, undefined, []);
}

/**
 * Marks the parameter that receives the {@link Message}, as golevelup's
 * decorator of the same name marks amqplib's message: read `msg.body`,
 * `msg.headers`, `msg.routingKey` and `msg.properties` where amqplib has
 * `content`, `properties.headers`, `fields.routingKey` and `properties`.
 */
export function RabbitRequest(): ParameterDecorator {
  return argDecorator(ArgType.Message, undefined, []);
}

/**
 * Marks the parameter that receives the message's headers (or the header
 * `property`), so that pipes (global ones and those given here) transform it.
 */
export function RabbitHeader(property?: string | PipeLike, ...pipes: PipeLike[]): ParameterDecorator {
  if (property === undefined || typeof property === 'string') return argDecorator(ArgType.Headers, property, pipes);
  return argDecorator(ArgType.Headers, undefined, [property, ...pipes]);
}

/**
 * Marks the parameter that receives the inbox's transaction (`tx`: a pg
 * client with `inbox: { pool }`, the adapter's transaction with
 * `inbox: { adapter }`) of a `@Consume({ queue, inbox })` method. On a
 * method without an inbox it fails the bootstrap.
 */
export function RabbitTx(): ParameterDecorator {
  return argDecorator(ArgType.Tx, undefined, []);
}
