/**
 * golevelup's module topology: the `exchanges`, `queues` and
 * `exchangeBindings` a RabbitRetryModule declares when it connects, before
 * any handler consumes, and its `connectionInitOptions`.
 */
import type { RabbitRetry } from '../client';
import { checkBoolean, checkKeys, checkObject, checkQueueArguments, checkString, checkWhole } from '../options/check';
import { EXCHANGE_DECLARE_KEYS, type ExchangeDeclareOptions, QUEUE_DECLARE_KEYS, type QueueDeclareOptions } from '../messaging/declare';
import { InvalidOptionsError, UnsupportedOptionError } from '../errors';
import type { ConsumeOptions, OptionKeys, QueueArguments } from '../options';

/** An exchange of the module's `exchanges`, as golevelup's `RabbitMQExchangeConfig`. */
export interface RabbitRetryExchangeConfig {
  /** The exchange. */
  name: string;
  /** `topic`, `direct`, `fanout`, `headers`, or a plugin's (`x-delayed-message`). @default 'topic' */
  type?: string;
  /** `false`: only check that it exists (the start fails with `TOPOLOGY_MISMATCH` when it does not). @default true */
  createExchangeIfNotExists?: boolean;
  /** How it is declared (durable unless `durable: false`). */
  options?: RabbitRetryExchangeOptions;
}

/** golevelup's (amqplib's) exchange options. */
export interface RabbitRetryExchangeOptions extends ExchangeDeclareOptions {
  /** Where the exchange sends what it cannot route (the `alternate-exchange` argument). */
  alternateExchange?: string;
}

/** A queue of the module's `queues`, as golevelup's `RabbitMQQueueConfig`: declared, and bound when it names an exchange. */
export interface RabbitRetryQueueConfig {
  /** The queue. */
  name: string;
  /** `false`: only check that it exists. @default true */
  createQueueIfNotExists?: boolean;
  /** How it is declared (durable unless `durable: false`). A handler that consumes it needs the queue durable, not exclusive nor auto-deleted. */
  options?: QueueDeclareOptions;
  /** An exchange (declared before, by `exchanges` or otherwise) to bind it to. */
  exchange?: string;
  /** The binding key, or several. @default '' */
  routingKey?: string | readonly string[];
  /** The tag of the handlers that consume this queue, unless theirs (`queueOptions.consumerOptions.consumerTag`) says otherwise. */
  consumerTag?: string;
}

/** An exchange-to-exchange binding of the module's `exchangeBindings`. */
export interface RabbitRetryExchangeBinding {
  /** What `source` routes with a matching key goes to this exchange too. */
  destination: string;
  /** The exchange bound from. */
  source: string;
  /** The binding key. */
  pattern: string;
  /** The binding's arguments (a headers exchange's match). */
  args?: QueueArguments;
}

/** golevelup's `connectionInitOptions`, as far as they have a meaning: the connection is made when the module starts. */
export interface RabbitRetryConnectionInitOptions {
  /** Only `true` (the default): the module starts once connected. */
  wait?: boolean;
  /** Only `true` (the default): a connection that cannot be made fails the start. */
  reject?: boolean;
  /** ms to wait for the broker, for `connectTimeoutMs` (which wins when both are given). */
  timeout?: number;
}

const EXCHANGE_KEYS = { name: true, type: true, createExchangeIfNotExists: true, options: true } satisfies OptionKeys<RabbitRetryExchangeConfig>;
const QUEUE_KEYS = {
  name: true,
  createQueueIfNotExists: true,
  options: true,
  exchange: true,
  routingKey: true,
  consumerTag: true,
} satisfies OptionKeys<RabbitRetryQueueConfig>;
const BINDING_KEYS = { destination: true, source: true, pattern: true, args: true } satisfies OptionKeys<RabbitRetryExchangeBinding>;
const INIT_KEYS = { wait: true, reject: true, timeout: true } satisfies OptionKeys<RabbitRetryConnectionInitOptions>;

/** The parts of the module options this file reads. */
interface TopologyOptions {
  exchanges?: readonly RabbitRetryExchangeConfig[];
  queues?: readonly RabbitRetryQueueConfig[];
  exchangeBindings?: readonly RabbitRetryExchangeBinding[];
  connectionInitOptions?: RabbitRetryConnectionInitOptions;
}

function checkList(name: string, v: unknown): readonly unknown[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new InvalidOptionsError(`${name} must be a list, got ${typeof v}`);
  return v;
}

function checkEntry(name: string, v: unknown, keys: Readonly<Record<string, true>>, what: string): Record<string, unknown> {
  checkObject(name, v, what);
  checkKeys(name, v as object, keys);
  return v as Record<string, unknown>;
}

/**
 * Checks the module's `exchanges`, `queues`, `exchangeBindings` and
 * `connectionInitOptions`: `INVALID_OPTIONS` names the key
 * (`exchanges[1].type`), `UNSUPPORTED_OPTION` a value with no meaning here.
 * @internal
 */
export function checkTopology(o: TopologyOptions): void {
  checkList('exchanges', o.exchanges).forEach((v, i) => {
    const e = checkEntry(`exchanges[${i}]`, v, EXCHANGE_KEYS, "an object such as { name, type: 'topic' }");
    checkString(`exchanges[${i}].name`, e.name, { optional: false, nonEmpty: true });
    checkString(`exchanges[${i}].type`, e.type, { nonEmpty: true });
    checkBoolean(`exchanges[${i}].createExchangeIfNotExists`, e.createExchangeIfNotExists);
    if (e.options !== undefined) exchangeOptions(`exchanges[${i}].options`, e.options as RabbitRetryExchangeOptions | undefined);
  });
  checkList('queues', o.queues).forEach((v, i) => {
    const q = checkEntry(`queues[${i}]`, v, QUEUE_KEYS, 'an object such as { name, exchange, routingKey }');
    checkString(`queues[${i}].name`, q.name, { optional: false, nonEmpty: true });
    checkBoolean(`queues[${i}].createQueueIfNotExists`, q.createQueueIfNotExists);
    checkString(`queues[${i}].exchange`, q.exchange, { nonEmpty: true });
    for (const key of Array.isArray(q.routingKey) ? (q.routingKey as unknown[]) : [q.routingKey]) checkString(`queues[${i}].routingKey`, key);
    checkString(`queues[${i}].consumerTag`, q.consumerTag, { nonEmpty: true });
    if (q.options !== undefined) {
      checkObject(`queues[${i}].options`, q.options);
      checkKeys(`queues[${i}].options`, q.options as object, QUEUE_DECLARE_KEYS);
    }
  });
  checkList('exchangeBindings', o.exchangeBindings).forEach((v, i) => {
    const b = checkEntry(`exchangeBindings[${i}]`, v, BINDING_KEYS, "an object such as { destination, source, pattern: '#' }");
    for (const key of ['destination', 'source'] as const) checkString(`exchangeBindings[${i}].${key}`, b[key], { optional: false, nonEmpty: true });
    checkString(`exchangeBindings[${i}].pattern`, b.pattern, { optional: false });
    checkQueueArguments(`exchangeBindings[${i}].args`, b.args);
  });
  const init = o.connectionInitOptions;
  if (init === undefined) return;
  checkEntry('connectionInitOptions', init, INIT_KEYS, 'an object such as { timeout: 10000 }');
  checkBoolean('connectionInitOptions.wait', init.wait);
  checkBoolean('connectionInitOptions.reject', init.reject);
  checkWhole('connectionInitOptions.timeout', init.timeout, 1, 0xffffffff, 'a whole number of milliseconds of at least 1');
  for (const key of ['wait', 'reject'] as const) {
    if (init[key] === false) {
      throw new UnsupportedOptionError(
        `connectionInitOptions.${key}`,
        `\`connectionInitOptions.${key}: false\` is not supported: the module connects when it starts, and a connection that cannot be made (within \`timeout\`) fails the start; consumers recover by themselves afterwards`,
      );
    }
  }
}

/** golevelup's exchange options in rabbit-retry's form: `alternateExchange` is the `alternate-exchange` argument. */
function exchangeOptions(name: string, options: RabbitRetryExchangeOptions | undefined): ExchangeDeclareOptions {
  checkObject(name, options);
  const { alternateExchange, ...rest } = options ?? {};
  checkKeys(name, rest, EXCHANGE_DECLARE_KEYS);
  checkString(`${name}.alternateExchange`, alternateExchange, { nonEmpty: true });
  if (alternateExchange === undefined) return rest;
  return { ...rest, arguments: { ...rest.arguments, 'alternate-exchange': alternateExchange } };
}

/**
 * Declares the module's exchanges, then its queues (each bound to its
 * exchange with each key), then its exchange bindings, in the order given;
 * the first refusal fails the start.
 * @internal
 */
export async function declareTopology(rr: RabbitRetry, o: TopologyOptions): Promise<void> {
  for (const [i, e] of (o.exchanges ?? []).entries()) {
    const options = e.options === undefined ? {} : exchangeOptions(`exchanges[${i}].options`, e.options);
    if (e.createExchangeIfNotExists === false) options.passive = true;
    await rr.declareExchange(e.name, e.type ?? 'topic', options);
  }
  for (const q of o.queues ?? []) {
    const options: QueueDeclareOptions = { ...q.options };
    if (q.createQueueIfNotExists === false) options.passive = true;
    await rr.declareQueue(q.name, options);
    if (q.exchange === undefined) continue;
    const keys = q.routingKey === undefined ? [''] : typeof q.routingKey === 'string' ? [q.routingKey] : q.routingKey;
    for (const key of keys) await rr.bindQueue(q.name, q.exchange, key);
  }
  for (const b of o.exchangeBindings ?? []) await rr.bindExchange(b.destination, b.source, b.pattern, b.args);
}

/**
 * The type the module's `exchanges` give `exchange`, for a handler that names
 * it without `exchangeType` (a consumer declares one of the four built-in types).
 * @internal
 */
export function moduleExchangeType(o: TopologyOptions, exchange: string | undefined): ConsumeOptions['exchangeType'] {
  const listed = o.exchanges?.find((e) => e.name === exchange);
  if (listed === undefined) return undefined;
  const type = listed.type ?? 'topic';
  return type === 'direct' || type === 'fanout' || type === 'headers' || type === 'topic' ? type : undefined;
}

/** The `consumerTag` the module's `queues` give the handlers of `queue`. @internal */
export function queueConsumerTag(o: TopologyOptions, queue: string): string | undefined {
  return o.queues?.find((q) => q.name === queue)?.consumerTag;
}
