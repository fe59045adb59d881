import { type DynamicModule, Logger, Module } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, ModulesContainer } from '@nestjs/core';
import { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator';

import { RabbitRetry } from '../client';
import { RABBIT_RETRY } from './constants';
import { RabbitRetryConsumers } from './consumers';
import { RabbitRetryExplorer } from './explorer';
import {
  ConfigurableModuleClass,
  MODULE_OPTION_KEYS,
  RABBIT_RETRY_MODULE_OPTIONS,
  ROOT_OPTION_KEYS,
  checkAsyncOptions,
  checkModuleOptions,
  type RabbitRetryModuleAsyncOptions,
  type RabbitRetryModuleOptions,
  type RabbitRetryModuleRootOptions,
} from './options';

function connect(options: RabbitRetryModuleOptions): Promise<RabbitRetry> {
  checkModuleOptions('RabbitRetryModule options', options, MODULE_OPTION_KEYS);
  const { defaultOnFailure: _defaults, prefetch: _prefetch, ...connectOptions } = options;
  const logger = new Logger('RabbitRetry');
  return RabbitRetry.connect({
    logger: { warn: (m) => logger.warn(m), error: (m) => logger.error(m) },
    ...connectOptions,
  });
}

/**
 * rabbit-retry for NestJS: one connection per imported module, closed on
 * application shutdown; the `@Consume` methods of providers and controllers
 * start consuming on bootstrap and close gracefully on shutdown.
 *
 * ```ts
 * @Module({
 *   imports: [RabbitRetryModule.forRoot({ url: process.env.AMQP_URL, isGlobal: true })],
 *   providers: [ShipmentConsumer],
 * })
 * export class AppModule {}
 * ```
 *
 * `forRootAsync({ imports, inject, useFactory | useClass | useExisting, isGlobal })`
 * builds the options from other providers, such as `ConfigService`.
 *
 * The client is injected by its class (`constructor(private readonly rr: RabbitRetry)`),
 * by {@link InjectRabbitRetry}, or by the {@link RABBIT_RETRY} token: all three give
 * the same instance.
 */
export class RabbitRetryModule extends ConfigurableModuleClass {
  /**
   * The module with these options. Throws an {@link index!InvalidOptionsError}
   * naming an option that is not one of the module's.
   */
  static override forRoot(options: RabbitRetryModuleRootOptions): DynamicModule {
    checkModuleOptions('RabbitRetryModule.forRoot', options, ROOT_OPTION_KEYS);
    return super.forRoot(options);
  }

  /**
   * The module with options built by a factory, a class or an existing
   * provider. Throws an {@link index!InvalidOptionsError} naming an option that is
   * not one of `forRootAsync`'s; the options the factory returns are checked
   * when the module starts.
   */
  static override forRootAsync(options: RabbitRetryModuleAsyncOptions): DynamicModule {
    checkAsyncOptions(options);
    return super.forRootAsync(options);
  }
}

// Applied as a call: the package compiles without `experimentalDecorators`.
Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: RABBIT_RETRY, useFactory: connect, inject: [RABBIT_RETRY_MODULE_OPTIONS] },
    { provide: RabbitRetry, useExisting: RABBIT_RETRY },
    { provide: RabbitRetryConsumers, useFactory: () => new RabbitRetryConsumers() },
    {
      provide: RabbitRetryExplorer,
      useFactory: (...deps: ConstructorParameters<typeof RabbitRetryExplorer>) => new RabbitRetryExplorer(...deps),
      inject: [
        DiscoveryService,
        MetadataScanner,
        ExternalContextCreator,
        ModulesContainer,
        RABBIT_RETRY_MODULE_OPTIONS,
        RABBIT_RETRY,
        RabbitRetryConsumers,
      ],
    },
  ],
  exports: [RABBIT_RETRY, RabbitRetry, RabbitRetryConsumers],
})(RabbitRetryModule);
