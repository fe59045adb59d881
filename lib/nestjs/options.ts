import { ConfigurableModuleBuilder, type ConfigurableModuleCls, type ConfigurableModuleHost, type Logger as NestLogger } from '@nestjs/common';

import { checkKeys, checkObject, checkOnFailureKeys, refuseForeign } from '../options/check';
import {
  CONNECT_OPTION_KEYS,
  CONSUME_OPTION_KEYS,
  type ConnectOptions,
  type ConsumeOptions,
  type Logger,
  type OnFailureOptions,
  type OptionKeys,
} from '../options';
import type { AmqpPublishOptions, MessageDeserializer, MessageSerializer } from './serialize';
import {
  type RabbitRetryConnectionInitOptions,
  type RabbitRetryExchangeBinding,
  type RabbitRetryExchangeConfig,
  type RabbitRetryQueueConfig,
  checkTopology,
} from './topology';

/** The options of one entry of golevelup's `handlers`: those of `@RabbitSubscribe` (`exchange`, `routingKey`, `queue`, …). */
export type HandlerConfig = Readonly<Record<string, unknown>>;

/** A named channel of golevelup's `channels`: what a handler that names it (`queueOptions.channel`) takes. */
export interface RabbitRetryChannelOptions {
  /** The handler's prefetch, unless it gives its own. */
  prefetchCount?: number;
  /** The channel of handlers that name none, or a channel not listed. */
  default?: boolean;
}

/** The options of `@golevelup/nestjs-rabbitmq`'s module that have a meaning here. */
export interface GolevelupModuleOptions {
  /** The module's name; a handler with `connection: name` is consumed by this module only. */
  name?: string;
  /** Handler options by name: a handler's `name` (or `defaultHandler`) picks them; a list makes one consumer each. */
  handlers?: Record<string, HandlerConfig | readonly HandlerConfig[]>;
  /** The key of `handlers` for handlers without a `name`. */
  defaultHandler?: string;
  /** Named channels: their prefetch, for the handlers that name them. */
  channels?: Record<string, RabbitRetryChannelOptions>;
  /** `false`: no handler of this module consumes. @default true */
  registerHandlers?: boolean;
  /** `false`: no `@RabbitRPC` handler of this module consumes. @default true */
  enableDirectReplyTo?: boolean;
  /** Only `true`: controllers are always scanned, as providers are. */
  enableControllerDiscovery?: boolean;
  /** How `AmqpConnection` turns a value into bytes (publishes, requests and replies). @default JSON */
  serializer?: MessageSerializer;
  /** How a handler without its own `deserializer`, and `AmqpConnection.request`, read a body. @default JSON */
  deserializer?: MessageDeserializer;
  /** ms `AmqpConnection.request` waits for a reply. @default 10000 */
  defaultRpcTimeout?: number;
  /** Publish options every `AmqpConnection.publish` starts from. */
  defaultPublishOptions?: AmqpPublishOptions;
  /** Exchanges declared when the module connects, before any handler consumes. */
  exchanges?: readonly RabbitRetryExchangeConfig[];
  /** Queues declared (and bound) when the module connects, after `exchanges`; `consumerTag` tags the handlers that consume one. */
  queues?: readonly RabbitRetryQueueConfig[];
  /** Exchange-to-exchange bindings made when the module connects, after `queues`. */
  exchangeBindings?: readonly RabbitRetryExchangeBinding[];
  /** `timeout`: ms to wait for the broker at start-up (`connectTimeoutMs`); `wait` and `reject` only `true`. */
  connectionInitOptions?: RabbitRetryConnectionInitOptions;
}

/** The keys of {@link GolevelupModuleOptions}. @internal */
export const GOLEVELUP_OPTION_KEYS = {
  name: true,
  handlers: true,
  defaultHandler: true,
  channels: true,
  registerHandlers: true,
  enableDirectReplyTo: true,
  enableControllerDiscovery: true,
  serializer: true,
  deserializer: true,
  defaultRpcTimeout: true,
  defaultPublishOptions: true,
  exchanges: true,
  queues: true,
  exchangeBindings: true,
  connectionInitOptions: true,
} satisfies OptionKeys<GolevelupModuleOptions>;

/** A module's logger: `connect`'s, and a Nest `LoggerService`'s `log` if it has one. */
export interface RabbitRetryModuleLogger extends Logger {
  /** Logs an informational line. */
  log?(message: string): void;
}

/** Options of {@link RabbitRetryModule}: how to connect, and defaults for every `@Consume` handler. */
export interface RabbitRetryModuleOptions extends ConnectOptions, GolevelupModuleOptions {
  /**
   * Where warnings and errors go. A logger with a `log` method (a Nest
   * `LoggerService`, as golevelup's `logger`) also gets the module's
   * informational lines (the connection, what each handler consumes).
   * @default Nest's `Logger`, context 'RabbitRetry'
   */
  logger?: RabbitRetryModuleLogger;
  /**
   * What to do when a handler throws, for handlers without `@OnFailure`. A
   * method's `@OnFailure` overrides it field by field (`delays`, `retryable`).
   * @default { delays: ['5s', '1m', '10m'] } with every error but a NonRetryableError retryable
   */
  defaultOnFailure?: OnFailureOptions;
  /** Handlers in flight per consumer, unless `@Consume({ prefetch })` says otherwise. @default 10 */
  prefetch?: number;
  /**
   * The first part of the queue name of a `@RabbitSubscribe` handler without
   * `queue`: `<serviceName>.<exchange>.<routingKey>.<Class>.<method>`.
   * @default 'app'
   */
  serviceName?: string;
  /**
   * Whether `AmqpConnection` opens golevelup's amqplib channel (`channel`,
   * `connection`) on an amqplib connection of its own, when amqplib is
   * installed. `false`: no second connection, and `channel` throws
   * `UNSUPPORTED_OPTION`, naming the client's methods to use instead.
   * @default true
   */
  amqplibChannel?: boolean;
}

/** The keys of {@link RabbitRetryModuleOptions}. @internal */
export const MODULE_OPTION_KEYS = {
  ...CONNECT_OPTION_KEYS,
  ...GOLEVELUP_OPTION_KEYS,
  defaultOnFailure: true,
  prefetch: true,
  serviceName: true,
  amqplibChannel: true,
} satisfies OptionKeys<RabbitRetryModuleOptions>;

/** What {@link Consume} takes: {@link ConsumeOptions} without `onFailure`, which {@link OnFailure} sets. */
export type ConsumeHandlerOptions = Omit<ConsumeOptions, 'onFailure'>;

const { onFailure: _onFailure, ...consumeHandlerKeys } = CONSUME_OPTION_KEYS;

/** The keys of {@link ConsumeHandlerOptions}. @internal */
export const CONSUME_HANDLER_OPTION_KEYS = consumeHandlerKeys satisfies OptionKeys<ConsumeHandlerOptions>;

/** Advice for `@Consume` options that belong to another decorator. @internal */
export const CONSUME_HANDLER_HINTS: Readonly<Record<string, string>> = {
  onFailure: 'put it in @OnFailure({ delays, retryable }) on the same method',
};

/** Extra options of `forRoot` and `forRootAsync`. */
export interface RabbitRetryModuleExtras {
  /** Register the module globally, so every module can inject the client. @default false */
  isGlobal?: boolean;
}

// Typed by hand so that the declarations name @nestjs/common by this file's import: an inferred
// type would be written as an inline import() of the package, which for NestJS 12 (ESM-only)
// carries a resolution-mode import attribute that compilers before TypeScript 5.3 cannot parse.
type Host = ConfigurableModuleHost<RabbitRetryModuleOptions, 'forRoot', 'createRabbitRetryOptions', RabbitRetryModuleExtras>;

const builder: Host = new ConfigurableModuleBuilder<RabbitRetryModuleOptions>({ moduleName: 'RabbitRetry' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRabbitRetryOptions')
  .setExtras<RabbitRetryModuleExtras>({ isGlobal: false }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();

/** @internal */
export const ConfigurableModuleClass: ConfigurableModuleCls<RabbitRetryModuleOptions, 'forRoot', 'createRabbitRetryOptions', RabbitRetryModuleExtras> =
  builder.ConfigurableModuleClass;

/** The injection token of the module's options. */
export const RABBIT_RETRY_MODULE_OPTIONS = builder.MODULE_OPTIONS_TOKEN;

/** What `forRoot` takes: the module options and `isGlobal`. */
export type RabbitRetryModuleRootOptions = typeof builder.OPTIONS_TYPE;

/** The keys of {@link RabbitRetryModuleRootOptions}. @internal */
export const ROOT_OPTION_KEYS = { ...MODULE_OPTION_KEYS, isGlobal: true } satisfies OptionKeys<RabbitRetryModuleRootOptions>;

/** What `forRootAsync` takes: `imports`, `inject` and one of `useFactory`, `useClass`, `useExisting`, plus `isGlobal`. */
export type RabbitRetryModuleAsyncOptions = typeof builder.ASYNC_OPTIONS_TYPE;

/** The keys of {@link RabbitRetryModuleAsyncOptions}. @internal */
export const ASYNC_OPTION_KEYS = {
  imports: true,
  inject: true,
  useFactory: true,
  useClass: true,
  useExisting: true,
  provideInjectionTokensFrom: true,
  isGlobal: true,
} satisfies OptionKeys<RabbitRetryModuleAsyncOptions>;

/**
 * The options of `@golevelup/nestjs-rabbitmq`'s `RabbitMQModule.forRoot`
 * that have no meaning for a RabbitRetryModule, and what to do instead.
 * @internal
 */
export const GOLEVELUP_MODULE_OPTIONS: Readonly<Record<string, string>> = {
  uri: 'write `url`, one URL or a list of them',
  prefetchCount: 'write `prefetch`',
  defaultExchangeType: 'give `exchangeType` in @RabbitSubscribe (the default is topic)',
  defaultRpcErrorHandler: 'a @RabbitRPC handler that throws answers with its error; give `errorHandler` to the handler to answer otherwise',
  defaultSubscribeErrorBehavior: 'write `defaultOnFailure`: a handler that throws retries through the retry queues and parks, never requeues',
  connectionManagerOptions: 'write `heartbeat`, `connectTimeoutMs`, `tls` and `recovery` (on each handler)',
};

/**
 * Checks the keys of the module options `options` (of `forRoot` when
 * `where` is `RabbitRetryModule.forRoot`, which also takes `isGlobal`) and of
 * their `defaultOnFailure`. The connect options' own objects (`tls`,
 * `retryTable`) are checked by `RabbitRetry.connect`.
 * @internal
 */
export function checkModuleOptions(where: string, options: unknown, known: Readonly<Record<string, true>>): void {
  checkObject(`${where} options`, options, 'an object such as { url }');
  refuseForeign(where, options as object, GOLEVELUP_MODULE_OPTIONS);
  checkKeys(where, options as object, known);
  const defaults = (options as RabbitRetryModuleOptions).defaultOnFailure;
  if (defaults !== undefined) checkOnFailureKeys('defaultOnFailure', defaults);
  checkTopology(options as RabbitRetryModuleOptions);
}

/** Where the module's informational lines go: the options' logger when it has `log`, else Nest's `Logger`. @internal */
export function infoLogger(options: RabbitRetryModuleOptions, fallback: NestLogger): (message: string) => void {
  const own = options.logger;
  return typeof own?.log === 'function' ? (m) => own.log?.(m) : (m) => fallback.log(m);
}

/** Checks the keys of `forRootAsync`'s options. @internal */
export function checkAsyncOptions(options: unknown): void {
  checkObject('RabbitRetryModule.forRootAsync options', options, 'an object such as { useFactory, inject }');
  checkKeys('RabbitRetryModule.forRootAsync', options as object, ASYNC_OPTION_KEYS);
}

/**
 * A class `forRootAsync({ useClass })` can instantiate to build the options.
 */
export interface RabbitRetryOptionsFactory {
  /** Returns the module options. */
  createRabbitRetryOptions(): RabbitRetryModuleOptions | Promise<RabbitRetryModuleOptions>;
}
