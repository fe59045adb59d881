import { ConfigurableModuleBuilder } from '@nestjs/common';

import type { ConnectOptions, ConsumeOptions, OnFailureOptions } from '../options';

/** Options of {@link RabbitRetryModule}: how to connect, and defaults for every `@Consume` handler. */
export interface RabbitRetryModuleOptions extends ConnectOptions {
  /**
   * What to do when a handler throws, for handlers without `@OnFailure`. A
   * method's `@OnFailure` overrides it field by field (`delays`, `retryable`).
   * @default { delays: ['5s', '1m', '10m'] } with every error but a NonRetryableError retryable
   */
  defaultOnFailure?: OnFailureOptions;
  /** Handlers in flight per consumer, unless `@Consume({ prefetch })` says otherwise. @default 10 */
  prefetch?: number;
}

/** What {@link Consume} takes: {@link ConsumeOptions} without `onFailure`, which {@link OnFailure} sets. */
export type ConsumeHandlerOptions = Omit<ConsumeOptions, 'onFailure'>;

/** Extra options of `forRoot` and `forRootAsync`. */
export interface RabbitRetryModuleExtras {
  /** Register the module globally, so every module can inject the client. @default false */
  isGlobal?: boolean;
}

const builder = new ConfigurableModuleBuilder<RabbitRetryModuleOptions>({ moduleName: 'RabbitRetry' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRabbitRetryOptions')
  .setExtras<RabbitRetryModuleExtras>({ isGlobal: false }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();

/** @internal */
export const ConfigurableModuleClass = builder.ConfigurableModuleClass;

/** The injection token of the module's options. */
export const RABBIT_RETRY_MODULE_OPTIONS = builder.MODULE_OPTIONS_TOKEN;

/** What `forRoot` takes: the module options and `isGlobal`. */
export type RabbitRetryModuleRootOptions = typeof builder.OPTIONS_TYPE;

/** What `forRootAsync` takes: `imports`, `inject` and one of `useFactory`, `useClass`, `useExisting`, plus `isGlobal`. */
export type RabbitRetryModuleAsyncOptions = typeof builder.ASYNC_OPTIONS_TYPE;

/**
 * A class `forRootAsync({ useClass })` can instantiate to build the options.
 */
export interface RabbitRetryOptionsFactory {
  /** Returns the module options. */
  createRabbitRetryOptions(): RabbitRetryModuleOptions | Promise<RabbitRetryModuleOptions>;
}
