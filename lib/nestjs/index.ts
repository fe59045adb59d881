/**
 * rabbit-retry for NestJS: `RabbitRetryModule`, `@Consume`, `@OnFailure`
 * and `@InjectRabbitRetry`. Needs `@nestjs/common`, `@nestjs/core`,
 * `reflect-metadata` and `rxjs` (NestJS 10 or 11).
 */
export { RabbitRetryModule } from './module';
export { RabbitRetryConsumers, type ConsumersHealth } from './consumers';
export {
  RabbitRetryConsoleModule,
  RabbitRetryConsoleHost,
  RABBIT_RETRY_CONSOLE_OPTIONS,
  type RabbitRetryConsoleModuleOptions,
} from './console-module';
export {
  Consume,
  OnFailure,
  InjectRabbitRetry,
  RabbitPayload,
  RabbitMessage,
  type PipeLike,
} from './decorators';
export {
  RABBIT_RETRY_MODULE_OPTIONS,
  type RabbitRetryModuleOptions,
  type RabbitRetryModuleRootOptions,
  type RabbitRetryModuleAsyncOptions,
  type RabbitRetryModuleExtras,
  type RabbitRetryOptionsFactory,
  type ConsumeHandlerOptions,
} from './options';
export { RABBIT_RETRY, RABBIT_RETRY_CONTEXT, type RabbitRetryContextType } from './constants';
export { RabbitRetry, Message, NonRetryableError, type OnFailureOptions } from '../index';
