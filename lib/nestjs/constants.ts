import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';

/** Metadata key of {@link Consume}, stored on the handler function. @internal */
export const CONSUME_METADATA = 'rabbit-retry:consume';

/** Metadata key of {@link RabbitSubscribe}, stored on the handler function. @internal */
export const RABBIT_SUBSCRIBE_METADATA = 'rabbit-retry:rabbit-subscribe';

/** Metadata key of {@link RabbitRPC}, stored on the handler function. @internal */
export const RABBIT_RPC_METADATA = 'rabbit-retry:rabbit-rpc';

/** Metadata key of {@link OnFailure}, stored on the handler function. @internal */
export const ON_FAILURE_METADATA = 'rabbit-retry:on-failure';

/**
 * Metadata key of the handler parameter decorators ({@link RabbitPayload},
 * {@link RabbitMessage}): Nest's own, so that its scanner registers the pipe
 * classes they name. @internal
 */
export const ARGS_METADATA = ROUTE_ARGS_METADATA;

/**
 * The injection token of the module's {@link RabbitRetry} client; prefer
 * {@link InjectRabbitRetry}.
 */
export const RABBIT_RETRY = Symbol.for('rabbit-retry:client');

/**
 * The context type guards and interceptors of a `@Consume` handler see:
 * `context.getType<RabbitRetryContextType>() === 'rabbit-retry'`.
 */
export const RABBIT_RETRY_CONTEXT = 'rabbit-retry';

/**
 * The context type of a `@RabbitSubscribe` or `@RabbitRPC` handler:
 * golevelup's `'rmq'`, so that guards and interceptors written for golevelup
 * tell it as they did.
 */
export const RMQ_CONTEXT = 'rmq';

/** The context type of a handler's execution context. */
export type RabbitRetryContextType = typeof RABBIT_RETRY_CONTEXT | typeof RMQ_CONTEXT;

/** Whether a guard's or an interceptor's context is a rabbit-retry handler's, whichever decorator it has (golevelup's `isRabbitContext`). */
export function isRabbitContext(context: { getType(): string }): boolean {
  const type = context.getType();
  return type === RABBIT_RETRY_CONTEXT || type === RMQ_CONTEXT;
}
