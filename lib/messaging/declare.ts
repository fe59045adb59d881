/**
 * Declarations outside a consumer's topology: the exchanges and queues an
 * application lists up front, checked and put in the native layer's form.
 */
import { checkBoolean, checkObject, checkQueueArguments, checkString } from '../options/check';
import type { NativeDeclaration } from '../native';
import { checkKeys } from '../options/keys';
import type { OptionKeys, QueueArguments } from '../options';

/** How {@link RabbitRetry.declareExchange} and {@link RabbitRetry.declareQueue} declare. */
export interface DeclareOptions {
  /** Survives a broker restart. @default true */
  durable?: boolean;
  /** Deleted by the broker with its last binding (an exchange) or its last consumer (a queue). @default false */
  autoDelete?: boolean;
  /** Its arguments (`alternate-exchange`, `x-message-ttl`, …). */
  arguments?: QueueArguments;
  /**
   * Only check that it exists, creating nothing: a missing one fails with
   * `TOPOLOGY_MISMATCH`. @default false
   */
  passive?: boolean;
}

/** How {@link RabbitRetry.declareExchange} declares an exchange. */
export interface ExchangeDeclareOptions extends DeclareOptions {
  /** Only other exchanges publish to it (through exchange-to-exchange bindings). @default false */
  internal?: boolean;
}

/** How {@link RabbitRetry.declareQueue} declares a queue. */
export interface QueueDeclareOptions extends DeclareOptions {
  /** Only this connection uses it, and it goes with the connection. @default false */
  exclusive?: boolean;
}

const COMMON_KEYS = { durable: true, autoDelete: true, arguments: true, passive: true } satisfies OptionKeys<DeclareOptions>;

/** The keys of {@link ExchangeDeclareOptions}. @internal */
export const EXCHANGE_DECLARE_KEYS = { ...COMMON_KEYS, internal: true } satisfies OptionKeys<ExchangeDeclareOptions>;

/** The keys of {@link QueueDeclareOptions}. @internal */
export const QUEUE_DECLARE_KEYS = { ...COMMON_KEYS, exclusive: true } satisfies OptionKeys<QueueDeclareOptions>;

/**
 * Checks `options` (named `where` in errors, each key as `where.key`) and
 * puts them in the native layer's form; `private` is `internal` or `exclusive`.
 */
function nativeDeclaration(where: string, options: ExchangeDeclareOptions & QueueDeclareOptions, keys: Readonly<Record<string, true>>): NativeDeclaration {
  checkObject(where, options);
  checkKeys(where, options, keys);
  for (const key of ['durable', 'autoDelete', 'passive', 'internal', 'exclusive'] as const) checkBoolean(`${where}.${key}`, options[key]);
  checkQueueArguments(`${where}.arguments`, options.arguments);
  return {
    durable: options.durable ?? true,
    autoDelete: options.autoDelete ?? false,
    private: options.internal ?? options.exclusive ?? false,
    passive: options.passive ?? false,
    arguments: options.arguments === undefined ? undefined : JSON.stringify(options.arguments),
  };
}

/** An exchange's type and options, checked, in the native layer's form. @internal */
export function exchangeDeclaration(type: string, options: ExchangeDeclareOptions): NativeDeclaration {
  checkString('type', type, { optional: false, nonEmpty: true });
  return nativeDeclaration('exchange options', options, EXCHANGE_DECLARE_KEYS);
}

/** A queue's options, checked, in the native layer's form. @internal */
export function queueDeclaration(options: QueueDeclareOptions): NativeDeclaration {
  return nativeDeclaration('queue options', options, QUEUE_DECLARE_KEYS);
}

/** A binding's arguments, checked, as the JSON the native layer takes. @internal */
export function bindingArguments(args: QueueArguments | undefined): string | undefined {
  checkQueueArguments('args', args);
  return args === undefined ? undefined : JSON.stringify(args);
}
