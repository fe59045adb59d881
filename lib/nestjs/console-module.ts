import { type DynamicModule, Logger, Module, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost, ModuleRef } from '@nestjs/core';

import type { RabbitRetry } from '../client';
import { checkKeys, checkObject } from '../options/check';
import { InvalidOptionsError } from '../errors';
import { RabbitRetryConsole } from '../console/console';
import type { ConsoleOptions } from '../console/options';
import type { OptionKeys } from '../options';
import { RABBIT_RETRY } from './constants';

/** Options of {@link RabbitRetryConsoleModule.forRoot}: the console's options, and where to serve it. */
export interface RabbitRetryConsoleModuleOptions extends Omit<ConsoleOptions, 'client' | 'basePath'> {
  /**
   * The path the console is served under (`/ops/rabbit-retry`), from the
   * server's root: the application's global prefix does not apply to it.
   */
  path: string;
}

/** The keys of {@link RabbitRetryConsoleModuleOptions}. */
const CONSOLE_MODULE_OPTION_KEYS = {
  path: true,
  queues: true,
  delays: true,
  scanLimit: true,
  ratePerSec: true,
  token: true,
  management: true,
  allowedHosts: true,
} satisfies OptionKeys<RabbitRetryConsoleModuleOptions>;

/** The injection token of the console module's options. */
export const RABBIT_RETRY_CONSOLE_OPTIONS = Symbol.for('rabbit-retry:console-options');

/** The longest wait for the console's jobs to stop when the application shuts down. */
const CLOSE_WAIT_MS = 10_000;

/**
 * The console of a NestJS application: made when the module initialises,
 * with the application's {@link RabbitRetry} client (from
 * `RabbitRetryModule`), and mounted on its HTTP server (Express or Fastify)
 * under the module's `path`. Inject it to read {@link console}.
 */
export class RabbitRetryConsoleHost implements OnModuleInit, OnModuleDestroy {
  #console?: RabbitRetryConsole;
  private readonly logger = new Logger('RabbitRetryConsole');

  /** @internal */
  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly adapterHost: HttpAdapterHost | undefined,
    private readonly options: RabbitRetryConsoleModuleOptions,
  ) {}

  /** The console; set once the module has initialised. */
  get console(): RabbitRetryConsole {
    if (!this.#console) throw new InvalidOptionsError('the console is made when the module initialises');
    return this.#console;
  }

  /** Makes the console and mounts it under `path`. @internal */
  onModuleInit(): void {
    let client: RabbitRetry;
    try {
      client = this.moduleRef.get<RabbitRetry>(RABBIT_RETRY, { strict: false });
    } catch {
      throw new InvalidOptionsError('RabbitRetryConsoleModule needs RabbitRetryModule: import RabbitRetryModule.forRoot(...) in the application');
    }
    const { path, ...consoleOptions } = this.options;
    const basePath = normalizePath(path);
    this.#console = new RabbitRetryConsole({ ...consoleOptions, client, basePath });
    const adapter = this.adapterHost?.httpAdapter;
    if (!adapter) {
      this.logger.warn(`no HTTP server: the console is not served (mount RabbitRetryConsoleHost.console.handle yourself)`);
      return;
    }
    adapter.use(basePath, this.#console.handle);
    this.logger.log(`console served under ${basePath}/`);
  }

  /** Stops the console's jobs (what they had not moved stays parked). @internal */
  async onModuleDestroy(): Promise<void> {
    const c = this.#console;
    if (!c) return;
    await Promise.race([c.close(), new Promise((r) => setTimeout(r, CLOSE_WAIT_MS).unref())]);
  }
}

/** `path` as `/a/b`: one leading slash, none trailing. */
function normalizePath(path: string): string {
  const p = `/${path.replace(/^\/+|\/+$/g, '')}`;
  if (p === '/') throw new InvalidOptionsError("path must be a path under the server's root, such as /ops/rabbit-retry");
  return p;
}

/**
 * The operators' console in a NestJS application, served by its HTTP server
 * (Express or Fastify) under a path of your choosing. Import it beside
 * `RabbitRetryModule`: it uses that module's client, and shows the queues of
 * the application's `@Consume` handlers.
 *
 * ```ts
 * @Module({
 *   imports: [
 *     RabbitRetryModule.forRoot({ url: process.env.AMQP_URL }),
 *     RabbitRetryConsoleModule.forRoot({ path: '/ops/rabbit-retry', token: process.env.RABBIT_RETRY_UI_TOKEN }),
 *   ],
 * })
 * export class AppModule {}
 * ```
 */
export class RabbitRetryConsoleModule {
  /**
   * The module with these options. Throws an {@link InvalidOptionsError}
   * naming an option that is not one of the module's.
   */
  static forRoot(options: RabbitRetryConsoleModuleOptions): DynamicModule {
    checkObject('RabbitRetryConsoleModule.forRoot options', options, "an object such as { path: '/ops/rabbit-retry' }");
    checkKeys('RabbitRetryConsoleModule.forRoot', options, CONSOLE_MODULE_OPTION_KEYS);
    if (typeof options.path !== 'string') throw new InvalidOptionsError("path must be a string such as '/ops/rabbit-retry'");
    normalizePath(options.path);
    return {
      module: RabbitRetryConsoleModule,
      providers: [
        { provide: RABBIT_RETRY_CONSOLE_OPTIONS, useValue: options },
        {
          provide: RabbitRetryConsoleHost,
          useFactory: (moduleRef: ModuleRef, adapterHost: HttpAdapterHost | undefined, o: RabbitRetryConsoleModuleOptions) =>
            new RabbitRetryConsoleHost(moduleRef, adapterHost, o),
          inject: [ModuleRef, { token: HttpAdapterHost, optional: true }, RABBIT_RETRY_CONSOLE_OPTIONS],
        },
      ],
      exports: [RabbitRetryConsoleHost],
    };
  }
}

// Applied as a call: the package compiles without `experimentalDecorators`.
Module({})(RabbitRetryConsoleModule);
