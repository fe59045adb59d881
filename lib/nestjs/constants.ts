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
 * The context type guards and interceptors see:
 * `context.getType<RabbitRetryContextType>() === 'rabbit-retry'`.
 */
export const RABBIT_RETRY_CONTEXT = 'rabbit-retry';

/** The context type of a handler's execution context. */
export type RabbitRetryContextType = typeof RABBIT_RETRY_CONTEXT;

/** Whether a guard's or an interceptor's context is a rabbit-retry handler's (golevelup's `isRabbitContext`). */
export function isRabbitContext(context: { getType(): string }): boolean {
  return context.getType() === RABBIT_RETRY_CONTEXT;
}
