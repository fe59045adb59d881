import { type DynamicModule, Logger, Module } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, ModulesContainer } from '@nestjs/core';
import { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator';

import { RabbitRetry } from '../client';
import { UnsupportedOptionError } from '../errors';
import { AmqpConnection, AmqpConnectionManager } from './amqp-connection';
import { RABBIT_RETRY } from './constants';
import { RabbitRetryConsumers } from './consumers';
import { RabbitRetryExplorer } from './explorer';
import { declareTopology } from './topology';
import {
  ConfigurableModuleClass,
  GOLEVELUP_OPTION_KEYS,
  MODULE_OPTION_KEYS,
  RABBIT_RETRY_MODULE_OPTIONS,
  ROOT_OPTION_KEYS,
  checkAsyncOptions,
  checkModuleOptions,
  infoLogger,
  type RabbitRetryModuleAsyncOptions,
  type RabbitRetryModuleOptions,
  type RabbitRetryModuleRootOptions,
} from './options';

async function connect(options: RabbitRetryModuleOptions): Promise<RabbitRetry> {
  checkModuleOptions('RabbitRetryModule options', options, MODULE_OPTION_KEYS);
  if (options.enableControllerDiscovery === false) {
    throw new UnsupportedOptionError(
      'enableControllerDiscovery',
      '`enableControllerDiscovery: false` is not supported: controllers are always scanned, as providers are; remove it',
    );
  }
  const { defaultOnFailure: _defaults, prefetch: _prefetch, ...rest } = options;
  const connectOptions = Object.fromEntries(Object.entries(rest).filter(([k]) => !(k in GOLEVELUP_OPTION_KEYS)));
  const logger = new Logger('RabbitRetry');
  const rr = await RabbitRetry.connect({
    logger: { warn: (m) => logger.warn(m), error: (m) => logger.error(m) },
    connectTimeoutMs: options.connectionInitOptions?.timeout,
    ...connectOptions,
  });
  try {
    await declareTopology(rr, options);
  } catch (err) {
    await rr.close().catch(() => undefined);
    throw err;
  }
  infoLogger(options, logger)(`connected to ${rr.url}`);
  return rr;
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
 * the same instance. {@link AmqpConnection} (golevelup's publishing and request
 * side, over that client) is injected by its class.
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
    {
      provide: AmqpConnection,
      useFactory: (rr: RabbitRetry, o: RabbitRetryModuleOptions) => {
        const connection = new AmqpConnection(rr, o);
        AmqpConnectionManager.add(o.name ?? 'default', connection);
        return connection;
      },
      inject: [RABBIT_RETRY, RABBIT_RETRY_MODULE_OPTIONS],
    },
    { provide: AmqpConnectionManager, useFactory: () => new AmqpConnectionManager() },
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
        AmqpConnection,
      ],
    },
  ],
  exports: [RABBIT_RETRY, RabbitRetry, RabbitRetryConsumers, AmqpConnection, AmqpConnectionManager],
})(RabbitRetryModule);
