/**
 * rabbit-retry for NestJS microservices: `RabbitRetryServer`, a custom
 * transport strategy that runs `@EventPattern` and `@MessagePattern`
 * handlers written for `Transport.RMQ` on rabbit-retry's failure path, and
 * `RabbitRetryClient`, its `ClientProxy`. Needs `@nestjs/microservices`
 * (NestJS 10, 11 or 12) besides what `rabbit-retry/nestjs` needs.
 */
export { RabbitRetryServer, type RabbitRetryServerEvents, type RabbitRetryServerStatus } from './server';
export { RabbitRetryClient, type RabbitRetryClientStatus } from './client';
export {
  RabbitRetryContext,
  RabbitRetryChannelRef,
  RabbitRetryRmqMessage,
  type ChannelVerdict,
  type RmqMessageFields,
  type RmqMessageProperties,
} from './context';
export { RabbitRetryExceptionFilter } from './filter';
export { RpcHandlerError, RmqConnectionError } from './errors';
export type { RabbitRetryServerOptions, RabbitRetryClientOptions } from './options';
export { RabbitRetry, Message, NonRetryableError, NoHandlerError, ReplyRefusedError, UnsupportedOptionError, type OnFailureOptions, type Delay } from '..';
