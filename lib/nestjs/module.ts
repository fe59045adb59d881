import { Logger, Module } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, ModulesContainer } from '@nestjs/core';
import { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator';

import { RabbitRetry } from '../client';
import { RABBIT_RETRY } from './constants';
import { RabbitRetryConsumers } from './consumers';
import { RabbitRetryExplorer } from './explorer';
import { ConfigurableModuleClass, RABBIT_RETRY_MODULE_OPTIONS, type RabbitRetryModuleOptions } from './options';

function connect(options: RabbitRetryModuleOptions): Promise<RabbitRetry> {
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
 */
export class RabbitRetryModule extends ConfigurableModuleClass {}

// Applied as a call: the package compiles without `experimentalDecorators`.
Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: RABBIT_RETRY, useFactory: connect, inject: [RABBIT_RETRY_MODULE_OPTIONS] },
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
  exports: [RABBIT_RETRY, RabbitRetryConsumers],
})(RabbitRetryModule);
