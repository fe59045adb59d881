/**
 * `@RabbitSubscribe`, with the options of `@golevelup/nestjs-rabbitmq`'s
 * decorator, mapped to rabbit-retry's topology; `onFailure` added. An
 * option that has no meaning here fails the bootstrap with
 * `UNSUPPORTED_OPTION`, naming it, rather than being ignored.
 */
import { SetMetadata } from '@nestjs/common';

import { InvalidOptionsError, NonRetryableError, UnsupportedOptionError } from '../errors';
import { reasonOf } from '../support/error-text';
import { fenceSync } from '../support/fence';
import type { RabbitRetry } from '../client';
import type { Message } from '../message';
import { type ForeignOption, checkBoolean, checkFunction, checkKeys, checkObject, checkString, foreignOptions, refuseAll } from '../options/check';
import type { ConsumeOptions, OnFailureOptions, OptionKeys, QueueArguments } from '../options';
import { RABBIT_SUBSCRIBE_METADATA } from './constants';
import type { ConsumeHandlerOptions } from './options';
import type { MessageDeserializer } from './serialize';
import { type BatchPlan, type RabbitSubscribeBatchOptions, batchPlan } from './batch';
import { ownQueueArguments, ownQueueName } from './own-queue';

/**
 * The queue options of {@link RabbitSubscribe}, as golevelup (and amqplib's
 * `assertQueue`) name them. The work queue is always durable: a retry queue
 * dead-letters back to it. Without `queue`, `exclusive: true` (or
 * `autoDelete: true`) gives the handler a queue of this instance's own.
 */
export interface RabbitSubscribeQueueOptions {
  /** Only `true` (the default): the work queue outlives the connection. */
  durable?: boolean;
  /**
   * `true`, on a handler without `queue`: it consumes a queue of this instance's own,
   * `<serviceName>.<exchange>.<routingKey>.<Class>.<method>.<8 hex digits>` (a new one at
   * every start), so that every instance gets every message, as golevelup's exclusive
   * queue. It is durable with `x-expires` (5 minutes, unless `expires` says otherwise), has
   * its own retry and parked queues, and is deleted with its retry queues (and the messages
   * waiting in them) when the application closes; the parked queue stays while it holds
   * messages. An instance that stops without closing leaves its queue to the broker, which
   * deletes it 5 minutes later with the messages in it; its retry and parked queues stay.
   * With `queue`, refused (`UNSUPPORTED_OPTION`): a named queue is shared by the service's
   * instances. @default false
   */
  exclusive?: boolean;
  /** As `exclusive` (golevelup's auto-deleted queue: one instance's, gone when it stops consuming). @default false */
  autoDelete?: boolean;
  /** Queue arguments (`x-max-length`, …); `x-queue-type` becomes `queueType`. */
  arguments?: QueueArguments;
  /** `x-message-ttl`. */
  messageTtl?: number;
  /** `x-expires`. */
  expires?: number;
  /** `x-dead-letter-exchange`: where the broker dead-letters what expires or overflows (never a handler's failure). */
  deadLetterExchange?: string;
  /** `x-dead-letter-routing-key`. */
  deadLetterRoutingKey?: string;
  /** `x-max-length`. */
  maxLength?: number;
  /** `x-max-priority`. */
  maxPriority?: number;
  /** Refused at start-up: the binding is made without arguments. */
  bindQueueArguments?: unknown;
  /** A channel of the module's `channels`: the handler takes its `prefetchCount` (every consumer has a channel of its own). */
  channel?: string;
  /** The consumer's tag; its other options are refused at start-up. */
  consumerOptions?: RabbitSubscribeConsumerOptions;
}

/** golevelup's (amqplib's) consumer options: only `consumerTag` has a meaning here, the consumer being rabbit-retry's, acks and all. */
export interface RabbitSubscribeConsumerOptions {
  /** The consumer's tag, over the one the module's `queues` give its queue. @default one the broker makes */
  consumerTag?: string;
  /** Refused at start-up: rabbit-retry acks each message after its handler. */
  noAck?: unknown;
  /** Refused at start-up. */
  noLocal?: unknown;
  /** Refused at start-up: a work queue is shared. */
  exclusive?: unknown;
  /** Refused at start-up. */
  priority?: unknown;
  /** Refused at start-up. */
  arguments?: unknown;
}

/** The keys of {@link RabbitSubscribeQueueOptions}. */
const QUEUE_OPTION_KEYS = {
  durable: true,
  exclusive: true,
  autoDelete: true,
  arguments: true,
  messageTtl: true,
  expires: true,
  deadLetterExchange: true,
  deadLetterRoutingKey: true,
  maxLength: true,
  maxPriority: true,
  bindQueueArguments: true,
  channel: true,
  consumerOptions: true,
} satisfies OptionKeys<RabbitSubscribeQueueOptions>;

/** Queue options that have no meaning here, and what to do instead. */
const REFUSED_QUEUE_OPTIONS: Readonly<Record<string, string>> = {
  bindQueueArguments: 'the queue is bound without arguments; bind with arguments (a headers exchange) outside rabbit-retry',
};

/** The keys of {@link RabbitSubscribeConsumerOptions}. */
const CONSUMER_OPTION_KEYS = {
  consumerTag: true,
  noAck: true,
  noLocal: true,
  exclusive: true,
  priority: true,
  arguments: true,
} satisfies OptionKeys<RabbitSubscribeConsumerOptions>;

/** `queueOptions.consumerOptions` other than `consumerTag`, which have no meaning here. */
const REFUSED_CONSUMER_OPTIONS: Readonly<Record<string, string>> = {
  noAck: "the consumer is rabbit-retry's: it acks each message after its handler",
  noLocal: 'RabbitMQ ignores it',
  exclusive: 'a work queue is shared by every instance of the service; give each its own queue instead',
  priority: 'consumers of a queue share its messages alike',
  arguments: 'the consumer takes no arguments of yours (`consumerTimeoutMs` sets x-consumer-timeout)',
};

/** The queue options that are queue arguments, by their argument name. */
const ARGUMENT_OF: Readonly<Record<string, string>> = {
  messageTtl: 'x-message-ttl',
  expires: 'x-expires',
  deadLetterExchange: 'x-dead-letter-exchange',
  deadLetterRoutingKey: 'x-dead-letter-routing-key',
  maxLength: 'x-max-length',
  maxPriority: 'x-max-priority',
};

/**
 * What {@link RabbitSubscribe} takes: the options a `@golevelup/nestjs-rabbitmq`
 * `@RabbitSubscribe` handler already has, plus `onFailure` (and `prefetch`,
 * `exchangeType`, `queueType`). The options golevelup has that mean nothing
 * here are listed too, so existing code compiles; each fails the bootstrap
 * with `UNSUPPORTED_OPTION`, naming it.
 */
export interface RabbitSubscribeOptions {
  /**
   * The work queue; its retry and parked queues are named after it. Without one
   * (golevelup's server-named queue), a durable queue named
   * `<serviceName>.<exchange>.<routingKey>.<Class>.<method>`, the same at every start
   * (`serviceName`: the module's, `app` by default).
   */
  queue?: string;
  /** An exchange to declare and bind the queue to (a topic exchange unless `exchangeType` says otherwise). */
  exchange?: string;
  /** The binding key, or several (each a binding to `exchange`). @default the queue name */
  routingKey?: string | readonly string[];
  /** How the work queue is declared. */
  queueOptions?: RabbitSubscribeQueueOptions;
  /** `false` consumes a queue that exists as it is, never declaring it (`assertQueue: false`). @default true */
  createQueueIfNotExists?: boolean;
  /** A body that is not JSON reaches the handler as text instead of being parked as `non-retryable`. @default false */
  allowNonJsonMessages?: boolean;
  /**
   * Turns the body into the handler's first argument, instead of JSON. A
   * deserializer that throws parks the message as `non-retryable` (unless
   * `allowNonJsonMessages`: then the handler gets the text).
   */
  deserializer?: (body: Buffer, msg: Message) => unknown;
  /** What to do when the handler throws: the retry delays, and which errors are worth another attempt. */
  onFailure?: OnFailureOptions;
  /** Handlers in flight at most. @default the module's `prefetch`, else 10 */
  prefetch?: number;
  /** The exchange's type. @default 'topic' */
  exchangeType?: ConsumeOptions['exchangeType'];
  /** The queue type of the work, retry and parked queues. @default 'classic' */
  queueType?: ConsumeOptions['queueType'];
  /** The key of the module's `handlers` whose options (one set, or a list: one consumer each) complete these. */
  name?: string;
  /** The `name` of the RabbitRetryModule that consumes for this handler. @default the module that the handler's module sees */
  connection?: string;
  /** More bindings: to `exchange` (the first binding's, when `exchange` is not given), and to other exchanges, which must exist. */
  bindings?: readonly RabbitSubscribeBinding[];
  /** Refused at start-up: failures take the failure path; see `onFailure`. */
  errorBehavior?: unknown;
  /** Refused at start-up: failures take the failure path; see `onFailure`. */
  errorHandler?: unknown;
  /** Refused at start-up: a queue that exists with other arguments fails with TOPOLOGY_MISMATCH, naming the option that matches. */
  assertQueueErrorHandler?: unknown;
  /** Refused at start-up: a subscriber sends no replies. */
  usePersistentReplyTo?: unknown;
  /**
   * The method takes up to `size` messages at once (its arguments: the bodies,
   * the messages and their headers, as arrays), called when that many arrived or
   * `timeout` ms after the last one. Resolving acks them all; throwing (or a
   * {@link Nack}) sends each message of the batch the failure path on its own.
   */
  batchOptions?: RabbitSubscribeBatchOptions;
}

/** One of golevelup's `bindings`. */
export interface RabbitSubscribeBinding {
  /** The exchange. The handler's `exchange` (or, without one, the first binding's) is declared; another must exist (the module's `exchanges`). */
  exchange: string;
  /** The binding key. */
  routingKey: string;
}

/** The keys of {@link RabbitSubscribeOptions}. */
const SUBSCRIBE_OPTION_KEYS = {
  queue: true,
  exchange: true,
  routingKey: true,
  queueOptions: true,
  createQueueIfNotExists: true,
  allowNonJsonMessages: true,
  deserializer: true,
  onFailure: true,
  prefetch: true,
  exchangeType: true,
  queueType: true,
  name: true,
  connection: true,
  bindings: true,
  errorBehavior: true,
  errorHandler: true,
  assertQueueErrorHandler: true,
  usePersistentReplyTo: true,
  batchOptions: true,
} satisfies OptionKeys<RabbitSubscribeOptions>;

/** golevelup's options that have no meaning here, and what to do instead. */
const REFUSED_OPTIONS: Readonly<Record<string, string>> = {
  errorBehavior: 'a handler that throws takes the failure path (retry queues, then the parked queue), never a requeue: set `onFailure` or @OnFailure',
  errorHandler:
    "a handler that throws takes the failure path (retry queues, then the parked queue): set `onFailure` or @OnFailure, and follow the consumer's `retry` and `parked` events through RabbitRetryConsumers",
  assertQueueErrorHandler:
    'a queue that exists with other arguments fails the bootstrap with TOPOLOGY_MISMATCH, naming the option that matches; set `queueOptions.arguments` to match, or `createQueueIfNotExists: false`',
  usePersistentReplyTo: 'a subscriber sends no replies (a @RabbitRPC handler does)',
};

/**
 * Consumes `options.queue` with this provider method once the application
 * bootstraps, as `@golevelup/nestjs-rabbitmq`'s decorator of the same name
 * does, with rabbit-retry's failure path: a handler that throws retries
 * through the retry queues and parks, never requeues. The method receives
 * the parsed body, the {@link Message} and its headers; resolve to ack,
 * throw to retry or park, or return a {@link Nack}.
 *
 * ```ts
 * @RabbitSubscribe({ exchange: 'exchange1', routingKey: 'subscribe-route', queue: 'subscribe-queue', onFailure: { delays: ['5s', '1m'] } })
 * async pubSubHandler(msg: {}) {}
 * ```
 *
 * Combines with {@link OnFailure} (not with `onFailure` given here too), not
 * with {@link Consume}.
 */
export function RabbitSubscribe(options: RabbitSubscribeOptions): MethodDecorator {
  return SetMetadata(RABBIT_SUBSCRIBE_METADATA, options);
}

/**
 * Returned by a {@link RabbitSubscribe} handler, as golevelup's `Nack`: the
 * message failed. `new Nack(true)` sends it to the next retry queue (it is
 * never requeued at once); `new Nack()` parks it as `non-retryable`.
 */
export class Nack {
  readonly #requeue: boolean;

  constructor(requeue = false) {
    this.#requeue = requeue;
  }

  /** Whether the message is worth another attempt. */
  get requeue(): boolean {
    return this.#requeue;
  }
}

/** What a `@RabbitSubscribe` method becomes: its consumer's options and how its body is read. @internal */
export interface SubscribePlan {
  consume: ConsumeHandlerOptions;
  onFailure?: OnFailureOptions;
  body: (msg: Message) => unknown;
  /** `queueOptions.channel`: the module's channel whose prefetch it takes. */
  channel?: string;
  /** `bindings` to exchanges other than the consumer's own, made once it consumes. */
  bindings: readonly RabbitSubscribeBinding[];
  /** `batchOptions`: the method takes its messages in batches. */
  batch?: BatchPlan;
  /** Whether the queue's name was derived (the handler gives none). */
  derived: boolean;
  /** Whether the queue is this instance's own (`exclusive` or `autoDelete` without `queue`): deleted when the instance closes. */
  own: boolean;
}

/** What the module gives every {@link subscribePlan}. @internal */
export interface PlanContext {
  /** The module's deserializer, for handlers without their own. */
  deserializer?: MessageDeserializer;
  /** The decorator, for messages. @default '@RabbitSubscribe' */
  where?: string;
  /** Options the decorator takes beyond @RabbitSubscribe's (`errorHandler` of @RabbitRPC). */
  allowed?: ReadonlySet<string>;
  /** `Class.method` of the handler: the last part of a queue name derived for a handler without `queue`. */
  handler?: string;
  /** The module's `serviceName`: the first part of a derived queue name. @default 'app' */
  serviceName?: string;
}

/**
 * The durable queue of a handler without `queue`:
 * `<serviceName>.<exchange>.<routingKey>.<Class>.<method>` (empty parts left
 * out, several routing keys joined by `,`), the same at every start.
 * @internal
 */
export function derivedQueue(serviceName: string | undefined, exchange: string | undefined, keys: readonly string[], handler: string): string {
  return [serviceName ?? 'app', exchange ?? '', keys.join(','), handler].filter((p) => p !== '').join('.');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Refuses a queue option whose value asks for what the work queue cannot be. */
function requireValue(option: string, value: unknown, allowed: boolean, why: string): void {
  if (value !== undefined && value !== allowed) {
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the caller's value as written, whatever its type
    throw new UnsupportedOptionError(`queueOptions.${option}`, `\`queueOptions.${option}: ${String(value)}\` is not supported: ${why}`);
  }
}

/**
 * Maps `@RabbitSubscribe` options to a consumer: throws an
 * {@link UnsupportedOptionError} for an option with no meaning here, an
 * {@link InvalidOptionsError} for a wrong one.
 * @internal
 */
export function subscribePlan(options: RabbitSubscribeOptions, context: PlanContext = {}): SubscribePlan {
  const where = context.where ?? '@RabbitSubscribe';
  checkObject(`${where} options`, options, 'an object such as { exchange, routingKey, queue }');
  const allowed = context.allowed ?? new Set<string>();
  checkKeys(where, options, { ...SUBSCRIBE_OPTION_KEYS, ...Object.fromEntries([...allowed].map((k) => [k, true])) });
  const o = options;
  const refused: ForeignOption[] = foreignOptions(where, o, REFUSED_OPTIONS).filter((f) => !allowed.has(f.option));
  const q = o.queueOptions;
  if (isRecord(q)) refused.push(...foreignOptions(where, q, REFUSED_QUEUE_OPTIONS, 'queueOptions.'));
  const consumerOptions: unknown = isRecord(q) ? q.consumerOptions : undefined;
  if (isRecord(consumerOptions)) refused.push(...foreignOptions(where, consumerOptions, REFUSED_CONSUMER_OPTIONS, 'queueOptions.consumerOptions.'));
  refuseAll(where, refused);
  const batch = batchPlan(where, o.batchOptions);
  const { exchange, keys: bindingKeys, others } = bindingKeysOf(o);
  checkString('queue', o.queue);
  checkString('exchange', exchange);
  const keys = [...(Array.isArray(o.routingKey) ? (o.routingKey as unknown[]) : o.routingKey === undefined ? [] : [o.routingKey]), ...bindingKeys];
  for (const key of keys) checkString('routingKey', key);
  const derived = o.queue === undefined || o.queue === '';
  if (derived && context.handler === undefined) {
    throw new InvalidOptionsError(`${where} needs a queue: rabbit-retry's retry and parked queues are named after it`);
  }
  if (derived && exchange === undefined) {
    throw new InvalidOptionsError(`${where} without a queue needs an exchange: its queue is named after it and bound to it`);
  }
  const own = derived && isRecord(q) && (q.exclusive === true || q.autoDelete === true);
  if (own && o.createQueueIfNotExists === false) {
    throw new InvalidOptionsError(
      `${where}: queueOptions.exclusive (or autoDelete) without \`queue\` declares a queue of this instance's own; createQueueIfNotExists: false has nothing to check: give \`queue\` to consume a queue that exists`,
    );
  }
  const base = derived ? derivedQueue(context.serviceName, exchange, keys as string[], context.handler as string) : (o.queue as string);
  const queue = own ? ownQueueName(base) : base;
  const routingKey = keys.length === 0 ? undefined : keys.length === 1 ? (keys[0] as string) : (keys as string[]);
  checkBoolean('createQueueIfNotExists', o.createQueueIfNotExists);
  checkBoolean('allowNonJsonMessages', o.allowNonJsonMessages);
  checkFunction('deserializer', o.deserializer, 'a function (body, msg) => value');

  let queueArguments: Record<string, string | number | boolean> | undefined;
  let queueType = o.queueType;
  if (q !== undefined) {
    checkObject('queueOptions', q, 'an object such as { arguments }');
    checkKeys(`${where} queueOptions`, q, QUEUE_OPTION_KEYS);
    checkString('queueOptions.channel', q.channel);
    if (q.consumerOptions !== undefined) {
      checkObject('queueOptions.consumerOptions', q.consumerOptions, 'an object such as { consumerTag }');
      checkKeys(`${where} queueOptions.consumerOptions`, q.consumerOptions, CONSUMER_OPTION_KEYS);
      checkString('queueOptions.consumerOptions.consumerTag', q.consumerOptions.consumerTag, { nonEmpty: true });
    }
    requireValue('durable', q.durable, true, 'the work queue is durable, as its retry queues dead-letter back to it');
    checkBoolean('queueOptions.exclusive', q.exclusive);
    checkBoolean('queueOptions.autoDelete', q.autoDelete);
    const namedWhy =
      'a named queue is durable and shared by every instance of the service, as its retry queues dead-letter back to it; ' +
      "for a queue of this instance's own, deleted when the application closes, leave out `queue`: " +
      "{ exchange, routingKey, queueOptions: { exclusive: true } } consumes '<serviceName>.<exchange>.<routingKey>.<Class>.<method>.<8 hex digits>'";
    if (!derived) {
      requireValue('exclusive', q.exclusive, false, namedWhy);
      requireValue('autoDelete', q.autoDelete, false, namedWhy);
    }
    const args: Record<string, string | number | boolean> = {};
    if (q.arguments !== undefined) {
      if (!isRecord(q.arguments)) throw new InvalidOptionsError('queueOptions.arguments must be an object of argument names to values');
      Object.assign(args, q.arguments);
    }
    for (const [option, argument] of Object.entries(ARGUMENT_OF)) {
      const v = (q as Record<string, unknown>)[option];
      if (v !== undefined) args[argument] = v as string | number;
    }
    const type = args['x-queue-type'];
    if (type !== undefined) {
      delete args['x-queue-type'];
      if (type !== 'classic' && type !== 'quorum') {
        throw new UnsupportedOptionError(
          'queueOptions.arguments.x-queue-type',
          `\`x-queue-type\` '${String(type)}' is not supported: rabbit-retry consumes classic and quorum queues`,
        );
      }
      if (queueType !== undefined && queueType !== type) {
        throw new InvalidOptionsError(`queueType '${queueType}' and queueOptions.arguments['x-queue-type'] '${type}' disagree: give one`);
      }
      queueType = type;
    }
    if (Object.keys(args).length > 0) queueArguments = args;
  }
  if (own) queueArguments = ownQueueArguments(queueArguments);

  const consume: ConsumeHandlerOptions = { queue };
  if (exchange !== undefined) consume.exchange = exchange;
  if (o.exchangeType !== undefined) consume.exchangeType = o.exchangeType;
  // A derived queue is bound with the keys given, `''` included (a fanout's), never by its own name.
  if (routingKey !== undefined) consume.routingKey = routingKey;
  else if (derived) consume.routingKey = '';
  if (o.prefetch !== undefined) consume.prefetch = o.prefetch;
  if (queueType !== undefined) consume.queueType = queueType;
  if (queueArguments !== undefined) consume.queueArguments = queueArguments;
  if (o.createQueueIfNotExists === false) consume.assertQueue = false;
  const consumerTag = q?.consumerOptions?.consumerTag;
  if (consumerTag !== undefined) consume.consumerTag = consumerTag;

  const deserializer = o.deserializer ?? context.deserializer;
  const lenient = o.allowNonJsonMessages === true;
  // As golevelup reads a body, the empty one included: through the deserializer (JSON by default); with
  // allowNonJsonMessages, a body it cannot read (an empty one too) reaches the handler as its text; without,
  // the message parks (golevelup's deserializer throws at an empty body as at any other it cannot read).
  const body = (msg: Message): unknown => {
    if (deserializer) {
      // Fenced: whatever it throws parks the message (or gives the handler the text); a Promise it returns goes to the handler.
      const r = fenceSync(`the deserializer of ${where}`, () => deserializer(msg.body, msg));
      if (r.ok) return r.value;
      if (lenient) return msg.text();
      throw new NonRetryableError(`the deserializer could not read the message: ${reasonOf(r.error)}`, { cause: r.error });
    }
    if (!lenient) return msg.json();
    try {
      return JSON.parse(msg.text()) as unknown;
    } catch {
      return msg.text();
    }
  };
  return { consume, onFailure: o.onFailure, body, channel: q?.channel, bindings: others, batch, derived, own };
}

/**
 * golevelup's `bindings`, split: the keys of those to the consumer's exchange
 * (`exchange`, else the first binding's), which the consumer binds, and the
 * bindings to other exchanges.
 */
function bindingKeysOf(o: RabbitSubscribeOptions): { exchange?: string; keys: string[]; others: RabbitSubscribeBinding[] } {
  const given: unknown = o.bindings;
  if (given === undefined) return { exchange: o.exchange, keys: [], others: [] };
  if (!Array.isArray(given)) throw new InvalidOptionsError('bindings must be a list of { exchange, routingKey }');
  (given as unknown[]).forEach((b, i) => {
    checkObject(`bindings[${i}]`, b, 'an object such as { exchange, routingKey }');
    checkKeys(`bindings[${i}]`, b as object, { exchange: true, routingKey: true });
    checkString(`bindings[${i}].exchange`, (b as RabbitSubscribeBinding).exchange, { optional: false, nonEmpty: true });
    checkString(`bindings[${i}].routingKey`, (b as RabbitSubscribeBinding).routingKey, { optional: false });
  });
  const bindings = given as readonly RabbitSubscribeBinding[];
  const exchange = o.exchange ?? bindings[0]?.exchange;
  const own = bindings.filter((b) => b.exchange === exchange);
  return { exchange, keys: own.map((b) => b.routingKey), others: bindings.filter((b) => b.exchange !== exchange) };
}

/**
 * Binds `queue` to the exchanges of golevelup's `bindings` other than its
 * consumer's own (which must exist), once the consumer made the queue.
 * @internal
 */
export async function bindOthers(rr: Pick<RabbitRetry, 'bindQueue'>, queue: string, bindings: readonly RabbitSubscribeBinding[]): Promise<void> {
  for (const b of bindings) await rr.bindQueue(queue, b.exchange, b.routingKey);
}

/**
 * What a handler's return value means: a {@link Nack} fails the message
 * (retry or park); anything else acks it.
 * @internal
 */
export function checkReturned(value: unknown, name: string): void {
  if (!(value instanceof Nack)) return;
  if (value.requeue) throw new Error(`${name} returned new Nack(true): the message goes to the next retry queue`);
  throw new NonRetryableError(`${name} returned new Nack(): the message is parked`);
}
