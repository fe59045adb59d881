/**
 * golevelup's module options that shape handlers: `handlers` and `defaultHandler`
 * (options by name), `channels` (a prefetch by channel name), and the routing of
 * one queue's messages to the handler whose routing key matches.
 */
import type { Message } from '../message';
import type { ConsumeHandlerOptions, RabbitRetryModuleOptions } from './options';
import type { RabbitSubscribeOptions } from './subscribe';
import { matchesTopic } from '../messaging/topic';

/**
 * The options each consumer of a handler takes, as golevelup resolves them: with
 * no `name` (nor `defaultHandler`), the decorator's; with one the module's
 * `handlers` has, the decorator's completed by each of its entries (a list makes
 * one consumer each); with one it does not have, none (`log` says so).
 * @internal
 */
export function handlerConfigs(decorator: RabbitSubscribeOptions, module: RabbitRetryModuleOptions, log: (m: string) => void): RabbitSubscribeOptions[] {
  const key = decorator.name ?? module.defaultHandler;
  if (key === undefined || key === '') return [decorator];
  const entry = module.handlers && Object.prototype.hasOwnProperty.call(module.handlers, key) ? module.handlers[key] : undefined;
  if (entry === undefined) {
    log(`the module's handlers have no '${key}': it does not consume`);
    return [];
  }
  const { name: _name, ...own } = decorator;
  const list = (Array.isArray(entry) ? entry : [entry]) as readonly RabbitSubscribeOptions[];
  return list.map((config) => ({ ...own, ...config }));
}

/**
 * The prefetch of a handler that names `channel` (`queueOptions.channel`): that
 * channel's `prefetchCount`; for one the module does not list, or none, the
 * default channel's; else the module's `prefetch`.
 * @internal
 */
export function prefetchOf(module: RabbitRetryModuleOptions, channel: string | undefined): number | undefined {
  const channels = module.channels ?? {};
  const named = channel !== undefined && Object.prototype.hasOwnProperty.call(channels, channel) ? channels[channel] : undefined;
  const chosen = named ?? Object.values(channels).find((c) => c.default === true);
  return chosen?.prefetchCount ?? module.prefetch;
}

/** The binding keys of a consumer's options (the queue name when it gives none). @internal */
export function keysOf(consume: ConsumeHandlerOptions): string[] {
  const key = consume.routingKey;
  if (key === undefined) return [consume.queue];
  return typeof key === 'string' ? [key] : [...key];
}

/** A handler of one queue and its binding keys. */
interface Keyed<R> {
  keys: readonly string[];
  run: R;
}

/** The handlers whose keys take `routingKey`: those that include it, else those whose topic pattern matches it. */
function takersOf<R>(handlers: readonly Keyed<R>[], routingKey: string): readonly Keyed<R>[] {
  const exact = handlers.filter((h) => h.keys.includes(routingKey));
  return exact.length > 0 ? exact : handlers.filter((h) => h.keys.some((k) => matchesTopic(k, routingKey)));
}

/**
 * Picks the handler of a message for the @RabbitSubscribe handlers that share
 * one queue, which golevelup ran as competing consumers: one whose binding key
 * takes its routing key (exactly, else as a topic pattern), in turn when
 * several do; in turn among all when none does (a message sent to the queue
 * directly, as any of golevelup's consumers could have taken it).
 * @internal
 */
export function shareByKey<R>(handlers: readonly Keyed<R>[]): (routingKey: string) => R {
  let turn = 0;
  return (routingKey) => {
    const takers = takersOf(handlers, routingKey);
    const among = takers.length > 0 ? takers : handlers;
    return among[turn++ % among.length].run;
  };
}

/**
 * Picks the handler of a message by its routing key, as golevelup does for the
 * @RabbitRPC handlers of one queue: the first whose keys include it, else the
 * first whose topic pattern matches it.
 * @internal
 */
export function routeByKey<R extends (msg: Message, ...rest: never[]) => Promise<void>>(
  handlers: readonly Keyed<R>[],
): (routingKey: string) => R | undefined {
  return (routingKey) => takersOf(handlers, routingKey)[0]?.run;
}
