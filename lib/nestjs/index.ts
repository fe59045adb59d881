/**
 * rabbit-retry for NestJS: `RabbitRetryModule`, `@Consume`, `@OnFailure`,
 * `@RabbitSubscribe` (with the options of `@golevelup/nestjs-rabbitmq`'s), `@RabbitTx` and
 * `@InjectRabbitRetry`. Needs `@nestjs/common`, `@nestjs/core`,
 * `reflect-metadata` and `rxjs` (NestJS 10, 11 or 12).
 */
export { RabbitRetryModule } from './module';
export { RabbitRetryConsumers, type ConsumersHealth } from './consumers';
export { RabbitRetryConsoleModule, RabbitRetryConsoleHost, RABBIT_RETRY_CONSOLE_OPTIONS, type RabbitRetryConsoleModuleOptions } from './console-module';
export { Consume, OnFailure, InjectRabbitRetry, RabbitPayload, RabbitMessage, RabbitRequest, RabbitHeader, RabbitTx, type PipeLike } from './decorators';
export {
  RabbitSubscribe,
  Nack,
  type RabbitSubscribeOptions,
  type RabbitSubscribeQueueOptions,
  type RabbitSubscribeBinding,
  type RabbitSubscribeConsumerOptions,
} from './subscribe';
export type { RabbitSubscribeBatchOptions, BatchErrorChannel, BatchErrorHandler } from './batch';
export { RabbitSubscribeMessage, type ConsumeMessageFields, type ConsumeMessageProperties } from './raw';
export type {
  AmqplibChannel,
  AmqplibConnection,
  AmqplibMessage,
  AmqplibMessageProperties,
  AmqplibDelivery,
  AmqplibDeliveryFields,
  AmqplibGetMessage,
  AmqplibDeliveryProperties,
  AmqplibPublishOptions,
  AmqplibQueueOptions,
  AmqplibExchangeOptions,
  AmqplibQueueReply,
  AmqplibServerProperties,
  AmqplibCountReply,
  AmqplibExchangeReply,
  AmqplibConsumerReply,
  ErrorHandlerOf,
} from './amqplib';
export { RabbitRPC, MessageHandlerErrorBehavior, type RabbitRPCOptions, type RpcErrorHandler, type RpcErrorChannel } from './rpc';
export {
  AmqpConnection,
  AmqpConnectionManager,
  type AmqpConnectionOptions,
  type AmqpConnectionConfiguration,
  type AmqpRequestOptions,
  type SubscriptionResult,
} from './amqp-connection';
export type { MessageSerializer, MessageDeserializer, AmqpPublishOptions } from './serialize';
export {
  RABBIT_RETRY_MODULE_OPTIONS,
  type RabbitRetryModuleOptions,
  type RabbitRetryModuleRootOptions,
  type RabbitRetryModuleAsyncOptions,
  type RabbitRetryModuleExtras,
  type RabbitRetryOptionsFactory,
  type ConsumeHandlerOptions,
  type GolevelupModuleOptions,
  type HandlerConfig,
  type RabbitRetryChannelOptions,
  type RabbitRetryModuleLogger,
} from './options';
export type {
  RabbitRetryExchangeConfig,
  RabbitRetryExchangeOptions,
  RabbitRetryQueueConfig,
  RabbitRetryExchangeBinding,
  RabbitRetryConnectionInitOptions,
} from './topology';
export { RABBIT_RETRY, RABBIT_RETRY_CONTEXT, RMQ_CONTEXT, type RabbitRetryContextType, isRabbitContext } from './constants';
export {
  RabbitRetry,
  Message,
  NonRetryableError,
  NoHandlerError,
  UnsupportedOptionError,
  RequestTimeoutError,
  RemoteError,
  type OnFailureOptions,
} from '..';
