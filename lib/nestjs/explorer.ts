import { ForbiddenException, Logger, type OnApplicationBootstrap, type OnApplicationShutdown, Scope } from '@nestjs/common';
import type { DiscoveryService, MetadataScanner, ModulesContainer } from '@nestjs/core';
import type { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { Module as NestModule } from '@nestjs/core/injector/module';

import type { RabbitRetry } from '../client';
import type { Consumer } from '../consumer';
import { reasonOf } from '../support/error-text';
import { InvalidOptionsError, NoHandlerError, NonRetryableError, RabbitRetryError, UnsupportedOptionError } from '../errors';
import { binding } from '../native';
import type { InboxContext } from '../inbox/options';
import type { Message } from '../message';
import { checkKeys, checkObject, checkOnFailureKeys } from '../options/check';
import type { ConsumeOptions, OnFailureOptions } from '../options';
import { type AmqpConnection, AmqpConnectionManager } from './amqp-connection';
import {
  ARGS_METADATA,
  CONSUME_METADATA,
  ON_FAILURE_METADATA,
  RABBIT_RETRY_CONTEXT,
  RABBIT_RPC_METADATA,
  RABBIT_SUBSCRIBE_METADATA,
  RMQ_CONTEXT,
} from './constants';
import type { RabbitRetryConsumers } from './consumers';
import { ArgType } from './decorators';
import { CONSUME_HANDLER_HINTS, CONSUME_HANDLER_OPTION_KEYS, type ConsumeHandlerOptions, type RabbitRetryModuleOptions, infoLogger } from './options';
import { moduleExchangeType, queueConsumerTag } from './topology';
import { type RabbitSubscribeBinding, type RabbitSubscribeOptions, bindOthers, checkReturned, subscribePlan } from './subscribe';
import { type BatchPlan, batching } from './batch';
import { logMoves } from './follow';
import { type RabbitRPCOptions, RPC_OPTIONS, answer, answerFailure, checkErrorBehavior } from './rpc';
import { defaultSerializer } from './serialize';
import { handlerConfigs, keysOf, prefetchOf, routeByKey, shareByKey } from './golevelup';
import { rawOf } from './raw';
import { removeOwnQueues } from './own-queue';

/** One decorated method, found at bootstrap. */
interface HandlerRef {
  /** `Class.method`, for messages. */
  name: string;
  instance: object;
  method: string;
  /** What it consumes: `@Consume`'s options, or those `@RabbitSubscribe`'s map to (once checked). */
  consume: ConsumeHandlerOptions;
  onFailure?: OnFailureOptions;
  /** `@RabbitSubscribe`'s options, as written. */
  subscribe?: RabbitSubscribeOptions;
  /** How the body is read: JSON unless `@RabbitSubscribe` says otherwise. */
  body?: (msg: Message) => unknown;
  /** A @RabbitRPC handler: its value answers the request. */
  rpc?: boolean;
  /** `queueOptions.channel`: the module's channel whose prefetch it takes. */
  channel?: string;
  /** golevelup's `bindings` to exchanges other than the consumer's. */
  bindings?: readonly RabbitSubscribeBinding[];
  /** golevelup's `batchOptions`: the method takes its messages in batches. */
  batch?: BatchPlan;
  /** The queue is this instance's own (`queueOptions.exclusive` without `queue`): deleted at shutdown. */
  own?: boolean;
}

/**
 * What the handlers that share one consumer have alike (see `byQueue`); `undefined`
 * for a handler that consumes on its own: an @Consume one, a batch, one bound by
 * no key of its own, or one with a failure path or an inbox of its own.
 */
function shareKey(ref: HandlerRef): string | undefined {
  if (ref.rpc) return `rpc ${ref.consume.queue}`;
  const { routingKey, inbox, ...alike } = ref.consume;
  if (!ref.subscribe || ref.batch || alike.exchange === undefined || routingKey === undefined || inbox !== undefined || ref.onFailure !== undefined)
    return undefined;
  return `subscribe ${JSON.stringify([alike, ref.channel ?? null])}`;
}

/** The queue a handler's decorator names, for messages (before its options are checked). */
function queueOf(options: unknown): string {
  const q = options !== null && typeof options === 'object' ? (options as { queue?: unknown }).queue : undefined;
  return typeof q === 'string' ? q : '(no queue)';
}

// Methods a RabbitRetryModule already consumes for, so that two modules never start two consumers for one method.
const claimed = new WeakMap<object, Set<string>>();

/** Reads the handler's arguments for pipes: the body, a property of it, or the Message. */
const paramsFactory = {
  exchangeKeyForValue(type: number, data: unknown, args: unknown[]): unknown {
    if (type === ArgType.Message) return args[1];
    if (type === ArgType.Tx) return (args[3] as InboxContext<unknown> | undefined)?.tx;
    const value = type === ArgType.Headers ? (args[1] as Message).headers : args[0];
    if (typeof data !== 'string') return value;
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[data] : undefined;
  },
};

/** Whether a guard refused; a value that cannot be inspected is not a refusal. */
function isForbidden(err: unknown): err is ForbiddenException {
  try {
    return err instanceof ForbiddenException;
  } catch {
    return false;
  }
}

/**
 * A method's `@OnFailure` over the module's `defaultOnFailure`, field by
 * field; the way to retry is taken whole: a method's `brokerDelay` drops the
 * defaults' `delays` and `table`, and a method's `delays` or `table` drops the
 * defaults' `brokerDelay` (the two ways cannot be mixed).
 */
function mergeOnFailure(defaults: OnFailureOptions | undefined, own: OnFailureOptions | undefined): OnFailureOptions | undefined {
  if (!defaults) return own;
  if (!own) return defaults;
  const ownQueues = own.delays !== undefined || own.table !== undefined;
  const ownBroker = own.brokerDelay !== undefined;
  return {
    delays: own.delays ?? (ownBroker ? undefined : defaults.delays),
    brokerDelay: own.brokerDelay ?? (ownQueues ? undefined : defaults.brokerDelay),
    retryable: own.retryable ?? defaults.retryable,
    stackOnRetry: own.stackOnRetry ?? defaults.stackOnRetry,
    retryHeaders: own.retryHeaders ?? defaults.retryHeaders,
    table: own.table ?? (ownBroker ? undefined : defaults.table),
    circuit: own.circuit ?? defaults.circuit,
  };
}

/** A batch consumer's prefetch: at least a full batch, so that one can fill. */
function batchPrefetch(prefetch: number | undefined, batch: BatchPlan | undefined): number | undefined {
  if (!batch) return prefetch;
  return Math.max(prefetch ?? binding.consumeDefaults().prefetch, batch.size);
}

/**
 * Finds the `@Consume` methods of the application's providers and
 * controllers at bootstrap, starts one consumer for each, and closes them
 * (then the connection) on shutdown.
 * @internal
 */
export class RabbitRetryExplorer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('RabbitRetry');
  private readonly info: (message: string) => void;
  private readonly consumers: { ref: HandlerRef; consumer: Consumer }[] = [];
  /** The consumers of queues of this instance's own, deleted at shutdown once their consumers closed. */
  private readonly ownQueues: ConsumeOptions[] = [];
  private closing?: Promise<void>;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly contextCreator: ExternalContextCreator,
    private readonly modules: ModulesContainer,
    private readonly options: RabbitRetryModuleOptions,
    private readonly rr: RabbitRetry,
    private readonly registry: RabbitRetryConsumers,
    private readonly amqp: AmqpConnection,
  ) {
    this.info = infoLogger(options, this.logger);
  }

  /**
   * Checks every handler's decorator options, then starts the consumers; an
   * unknown option, or a consumer that cannot start, fails the bootstrap.
   */
  async onApplicationBootstrap(): Promise<void> {
    let found: HandlerRef[] = [];
    if (this.options.registerHandlers === false) {
      this.info('registerHandlers is false: no handler of this RabbitRetryModule consumes');
      return;
    }
    try {
      found = this.discover();
      for (const ref of found) this.named(ref, () => this.check(ref));
      for (const refs of this.byQueue(found)) await this.start(refs);
    } catch (err) {
      for (const ref of found) claimed.get(ref.instance)?.delete(ref.method);
      // The application will not run: leave nothing open that keeps the process alive.
      await this.shutdown();
      throw err;
    }
  }

  /** Closes the consumers (in-flight handlers finish, unstarted deliveries go back to their queue), then the connection. */
  async onApplicationShutdown(): Promise<void> {
    await this.shutdown();
  }

  private shutdown(): Promise<void> {
    this.closing ??= (async () => {
      const results = await Promise.allSettled(this.consumers.map(({ consumer }) => consumer.close()));
      for (const [i, r] of results.entries()) {
        if (r.status === 'rejected') this.logger.error(`closing the consumer of '${this.consumers[i].consumer.queue}' failed: ${reasonOf(r.reason)}`);
      }
      for (const { ref } of this.consumers) claimed.get(ref.instance)?.delete(ref.method);
      for (const own of this.ownQueues) {
        await removeOwnQueues(this.rr, own).catch((err: unknown) =>
          this.logger.warn(`the queues of '${own.queue}' could not be deleted: ${reasonOf(err)}`),
        );
      }
      this.registry.clear();
      AmqpConnectionManager.remove(this.options.name ?? 'default', this.amqp);
      await this.amqp.close();
      await this.rr.close();
    })();
    return this.closing;
  }

  private discover(): HandlerRef[] {
    const mine = this.ownModule();
    const several = [...this.modules.values()].filter((m) => m.providers.has(RabbitRetryExplorer)).length > 1;
    const problems: string[] = [];
    const found: HandlerRef[] = [];
    const wrappers = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    for (const wrapper of wrappers) {
      const proto = this.prototypeOf(wrapper);
      if (!proto) continue;
      const className = (wrapper.metatype as { name?: string } | null)?.name || String(wrapper.name);
      for (const method of this.scanner.getAllMethodNames(proto)) {
        const fn = (proto as Record<string, unknown>)[method];
        if (typeof fn !== 'function') continue;
        const consume = Reflect.getMetadata(CONSUME_METADATA, fn) as ConsumeHandlerOptions | undefined;
        const rpc = Reflect.getMetadata(RABBIT_RPC_METADATA, fn) as RabbitRPCOptions | undefined;
        const subscribe = (Reflect.getMetadata(RABBIT_SUBSCRIBE_METADATA, fn) ?? rpc) as RabbitSubscribeOptions | undefined;
        const onFailure = Reflect.getMetadata(ON_FAILURE_METADATA, fn) as OnFailureOptions | undefined;
        if (!consume && !subscribe && !onFailure) continue;
        const name = `${className}.${method}`;
        if (consume && subscribe) {
          problems.push(`${name} has both @Consume and @RabbitSubscribe: keep one`);
          continue;
        }
        if (!consume && !subscribe) {
          problems.push(`${name} has @OnFailure but no @Consume: add @Consume({ queue }) (or @RabbitSubscribe({ queue })), or remove @OnFailure`);
          continue;
        }
        const connection = subscribe?.connection;
        if (connection !== undefined ? connection !== this.options.name : several && mine && !this.sees(wrapper, mine)) continue;
        if (rpc && this.options.enableDirectReplyTo === false) {
          this.logger.warn(`${name} is a @RabbitRPC handler, and enableDirectReplyTo is false: it does not consume`);
          continue;
        }
        if (wrapper.scope === Scope.REQUEST || wrapper.scope === Scope.TRANSIENT || !wrapper.isDependencyTreeStatic()) {
          problems.push(
            `${name} is in a ${wrapper.scope === Scope.TRANSIENT ? 'transient' : 'request-scoped'} provider (or one that depends on a request-scoped provider); ` +
              `@Consume handlers need a singleton: move the handler to a provider of the default scope and inject what it needs there`,
          );
          continue;
        }
        const instance = wrapper.instance as object | undefined;
        if (!instance) continue;
        const methods = claimed.get(instance) ?? new Set<string>();
        if (methods.has(method)) {
          this.logger.warn(`${name} is consumed by another RabbitRetryModule already; not consuming it twice`);
          continue;
        }
        methods.add(method);
        claimed.set(instance, methods);
        // A @RabbitSubscribe's consume options are filled in when its options are checked; a `name` picks the module's `handlers`.
        for (const options of subscribe ? handlerConfigs(subscribe, this.options, (m) => this.info(`${name}: ${m}`)) : [undefined]) {
          found.push({ name, instance, method, consume: consume ?? { queue: queueOf(options) }, onFailure, subscribe: options, rpc: rpc !== undefined });
        }
      }
    }
    if (problems.length > 0) {
      for (const ref of found) claimed.get(ref.instance)?.delete(ref.method);
      throw new Error(`RabbitRetryModule cannot start:\n  - ${problems.join('\n  - ')}`);
    }
    return found;
  }

  /** The class prototype to scan; `undefined` for values, factories and aliases. */
  private prototypeOf(wrapper: InstanceWrapper): object | undefined {
    if (wrapper.isAlias || wrapper.isNotMetatype || !wrapper.metatype) return undefined;
    const proto = (wrapper.metatype as { prototype?: unknown }).prototype;
    return proto && typeof proto === 'object' ? proto : undefined;
  }

  /** The Nest module this explorer belongs to. */
  private ownModule(): NestModule | undefined {
    for (const m of this.modules.values()) {
      if (m.providers.get(RabbitRetryExplorer)?.instance === this) return m;
    }
    return undefined;
  }

  /**
   * Whether the provider's module can inject this module's client, or (when it
   * imports no RabbitRetryModule) a module that imports the provider's can.
   */
  private sees(wrapper: InstanceWrapper, mine: NestModule): boolean {
    const host = wrapper.host;
    if (mine.isGlobal || host === mine || host?.imports.has(mine) === true) return true;
    if (!host || [...host.imports].some((m) => m.providers.has(RabbitRetryExplorer))) return false;
    return [...this.modules.values()].some((m) => m.imports.has(host) && m.imports.has(mine));
  }

  /**
   * The handlers by consumer: the @RabbitRPC handlers of one queue share its
   * consumer, routed by routing key; so do the @RabbitSubscribe handlers of one
   * queue that each bind it to an exchange with keys of their own and consume it
   * alike. golevelup ran those as competing consumers, where a handler that could
   * not read a message requeued it for another; rabbit-retry never requeues, so
   * a message goes to the handler whose binding took it.
   */
  private byQueue(found: HandlerRef[]): HandlerRef[][] {
    const groups: HandlerRef[][] = [];
    const byKey = new Map<string, HandlerRef[]>();
    for (const ref of found) {
      const key = shareKey(ref);
      const shared = key === undefined ? undefined : byKey.get(key);
      if (shared) {
        shared.push(ref);
        continue;
      }
      const group = [ref];
      if (key !== undefined) byKey.set(key, group);
      groups.push(group);
    }
    return groups;
  }

  /**
   * Refuses a key of `@Consume` or `@OnFailure` that is not an option of
   * theirs, and maps `@RabbitSubscribe`'s options to a consumer (refusing
   * those that have no meaning here).
   */
  private check(ref: HandlerRef): void {
    if (ref.subscribe !== undefined) {
      const plan = subscribePlan(ref.subscribe, {
        deserializer: this.options.deserializer,
        where: ref.rpc ? '@RabbitRPC' : '@RabbitSubscribe',
        allowed: ref.rpc ? RPC_OPTIONS : undefined,
        handler: ref.name,
        serviceName: this.options.serviceName,
      });
      if (plan.own)
        this.info(
          `${ref.name} gives no queue, and exclusive: it consumes '${plan.consume.queue}', a queue of this instance's own, deleted when it closes`,
        );
      else if (plan.derived) this.info(`${ref.name} gives no queue: it consumes the durable queue '${plan.consume.queue}'`);
      ref.own = plan.own;
      ref.channel = plan.channel;
      ref.bindings = plan.bindings;
      ref.batch = plan.batch;
      if (ref.rpc) checkErrorBehavior(ref.subscribe as RabbitRPCOptions);
      if (ref.rpc && plan.batch) {
        throw new UnsupportedOptionError(
          'batchOptions',
          '`batchOptions` of @RabbitRPC has no meaning in rabbit-retry: each request is answered on its own',
        );
      }
      if (plan.onFailure !== undefined && ref.onFailure !== undefined) {
        throw new InvalidOptionsError('onFailure is given twice, in @RabbitSubscribe and in @OnFailure: keep one');
      }
      if (plan.onFailure !== undefined) checkOnFailureKeys('@RabbitSubscribe onFailure', plan.onFailure);
      ref.consume = plan.consume;
      ref.onFailure = plan.onFailure ?? ref.onFailure;
      ref.body = plan.body;
    } else {
      checkObject('@Consume options', ref.consume, 'an object such as { queue }');
      checkKeys('@Consume', ref.consume, CONSUME_HANDLER_OPTION_KEYS, CONSUME_HANDLER_HINTS);
    }
    if (ref.onFailure !== undefined) checkOnFailureKeys('@OnFailure', ref.onFailure);
  }

  /** Runs `f`, and puts the handler's name and queue in front of a rabbit-retry error it throws. */
  private named<T>(ref: HandlerRef, f: () => T): T {
    try {
      return f();
    } catch (err) {
      throw this.withName(ref, err);
    }
  }

  private withName(ref: HandlerRef, err: unknown): unknown {
    if (err instanceof RabbitRetryError) {
      err.message = `${ref.name} could not consume '${queueOf(ref.consume)}' (${err.code}): ${err.message}`;
    }
    return err;
  }

  /** Starts one consumer for `refs` (one handler, or the @RabbitRPC handlers of one queue). */
  private async start(refs: HandlerRef[]): Promise<void> {
    const ref = refs[0];
    const options: ConsumeOptions = {
      ...ref.consume,
      consumerTag: ref.consume.consumerTag ?? queueConsumerTag(this.options, ref.consume.queue),
      exchangeType: ref.consume.exchangeType ?? moduleExchangeType(this.options, ref.consume.exchange),
      prefetch: batchPrefetch(ref.consume.prefetch ?? prefetchOf(this.options, ref.channel), ref.batch),
      onFailure: mergeOnFailure(this.options.defaultOnFailure, ref.onFailure),
    };
    const runs = refs.map((r) => this.runner(r));
    let handler = runs[0];
    if (refs.length > 1 && ref.rpc) {
      options.routingKey = refs.flatMap((r) => keysOf(r.consume));
      const route = routeByKey(refs.map((r, i) => ({ keys: keysOf(r.consume), run: runs[i] })));
      handler = (msg, tx) => {
        const run = route(msg.routingKey);
        if (!run) throw new NoHandlerError(`no @RabbitRPC handler of '${ref.consume.queue}' takes routing key '${msg.routingKey}'`);
        return run(msg, tx);
      };
    } else if (refs.length > 1) {
      options.routingKey = [...new Set(refs.flatMap((r) => keysOf(r.consume)))];
      const pick = shareByKey(refs.map((r, i) => ({ keys: keysOf(r.consume), run: runs[i] })));
      handler = (msg, tx) => pick(msg.routingKey)(msg, tx);
    }
    let consumer: Consumer;
    try {
      consumer = await this.rr.consume(options, handler);
    } catch (err) {
      throw this.withName(ref, err);
    }
    this.follow(consumer);
    if (ref.own) this.ownQueues.push(options);
    for (const r of refs) this.consumers.push({ ref: r, consumer });
    this.registry.add(consumer);
    for (const r of refs) {
      try {
        await bindOthers(this.rr, consumer.queue, r.bindings ?? []);
      } catch (err) {
        throw this.withName(r, err);
      }
    }
    this.info(`${refs.map((r) => r.name).join(', ')} consume${refs.length > 1 ? '' : 's'} '${consumer.queue}' on ${this.rr.url}`);
  }

  /** The function that handles one message for `ref`: its body read, guards, interceptors and pipes applied, its value answered. */
  private runner(ref: HandlerRef): (msg: Message, tx?: InboxContext<unknown>) => Promise<void> {
    const invoke = this.contextCreator.create(
      ref.instance,
      (ref.instance as Record<string, (...args: unknown[]) => unknown>)[ref.method],
      ref.method,
      ARGS_METADATA,
      paramsFactory,
      undefined,
      undefined,
      // Exception filters would log every failure a second time and could swallow it; the failure path is retry or park.
      { guards: true, interceptors: true, filters: false },
      ref.subscribe === undefined ? RABBIT_RETRY_CONTEXT : RMQ_CONTEXT,
    );
    const read = ref.body ?? ((msg: Message) => msg.json());
    const subscriber = ref.subscribe !== undefined;
    const inbox = ref.consume.inbox !== undefined;
    if (!inbox && this.marksTx(ref)) {
      throw new InvalidOptionsError(`${ref.name}: @RabbitTx() needs an inbox: @Consume({ queue, inbox: { pool } })`);
    }
    const warn = (m: string) => {
      (this.options.logger ?? this.logger).warn(m);
    };
    const answerer = ref.rpc
      ? { rr: this.rr, serialize: this.options.serializer ?? defaultSerializer, options: ref.subscribe as RabbitRPCOptions, name: ref.name, warn }
      : undefined;
    if (ref.batch) {
      // golevelup's batch method: the bodies, the messages and their headers, each an array.
      return batching(
        ref.batch,
        read,
        async (bodies, msgs) => {
          const returned: unknown = await invoke(
            bodies,
            msgs,
            msgs.map((m) => m.headers),
          );
          checkReturned(returned, ref.name);
        },
        rawOf,
      );
    }
    return async (msg: Message, tx?: InboxContext<unknown>): Promise<void> => {
      let returned: unknown;
      try {
        // golevelup's handlers take the headers third; @Consume handlers the inbox's { tx } (or nothing).
        returned = await invoke(read(msg), subscriber ? rawOf(msg) : msg, inbox ? tx : msg.headers, tx);
      } catch (err) {
        // A guard's refusal will not change on the next attempt.
        const failure = isForbidden(err) ? new NonRetryableError(`${ref.name} refused the message: ${reasonOf(err)}`, { cause: err }) : err;
        if (answerer) return answerFailure(answerer, msg, failure);
        throw failure;
      }
      if (subscriber) checkReturned(returned, ref.name);
      if (answerer) return answer(answerer, msg, returned);
      if (subscriber && Boolean(returned)) {
        warn(`${ref.name} returned a value, which is dropped: Subscribe handlers should only return void (a @RabbitRPC handler answers with its value)`);
      }
    };
  }

  /** Whether a parameter of the handler has `@RabbitTx()`. */
  private marksTx(ref: HandlerRef): boolean {
    const args = (Reflect.getMetadata(ARGS_METADATA, ref.instance.constructor, ref.method) ?? {}) as Record<string, unknown>;
    return Object.keys(args).some((key) => key.startsWith(`${ArgType.Tx}:`));
  }

  private follow(consumer: Consumer): void {
    logMoves(consumer, this.logger);
  }
}
