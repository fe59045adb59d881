import { type DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner, ModulesContainer } from '@nestjs/core';
import { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator';

import { RabbitRetry } from '../client';
import { AmqpConnection, AmqpConnectionManager } from './amqp-connection';
import { RABBIT_RETRY } from './constants';
import { RabbitRetryConsumers } from './consumers';
import { RabbitRetryExplorer } from './explorer';
import { connectModule } from './connect';
import {
  ConfigurableModuleClass,
  RABBIT_RETRY_MODULE_OPTIONS,
  ROOT_OPTION_KEYS,
  checkAsyncOptions,
  checkModuleOptions,
  type RabbitRetryModuleAsyncOptions,
  type RabbitRetryModuleOptions,
  type RabbitRetryModuleRootOptions,
} from './options';

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
    { provide: RABBIT_RETRY, useFactory: connectModule, inject: [RABBIT_RETRY_MODULE_OPTIONS] },
    { provide: RabbitRetry, useExisting: RABBIT_RETRY },
    {
      provide: AmqpConnection,
      useFactory: async (rr: RabbitRetry, o: RabbitRetryModuleOptions) => {
        const connection = new AmqpConnection(rr, o);
        await connection.openChannel();
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
