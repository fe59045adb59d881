/**
 * Every error rabbit-retry raises has a stable `code`, so callers can branch on
 * it without parsing messages, and a message that says what to do next.
 */

import type { NativeErrorCode } from './contract';

/** The codes only the TypeScript layer gives its errors; the others are the native layer's (`NATIVE_ERROR_CODES`). */
export const JS_ERROR_CODES = [
  'NON_RETRYABLE',
  'NO_HANDLER',
  'UNSUPPORTED_OPTION',
  'INBOX',
  'INBOX_REFUSED',
  'REQUEST_TIMEOUT',
  'REMOTE_ERROR',
  'NOT_PARKED',
  'AMBIGUOUS_MESSAGE_ID',
] as const;

/** The codes of rabbit-retry's errors: the native layer's and the TypeScript layer's own. */
export type ErrorCode = NativeErrorCode | (typeof JS_ERROR_CODES)[number];

/** The base class of rabbit-retry's errors. */
export class RabbitRetryError extends Error {
  /** A stable code for this kind of error. */
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/**
 * Throw this from a handler when another attempt cannot succeed (a missing
 * field, a failed validation): the message is parked at once with
 * `retry-reason: non-retryable`.
 */
export class NonRetryableError extends RabbitRetryError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('NON_RETRYABLE', message, options);
  }
}

/**
 * Throw this from a handler when nothing in the service handles the message
 * (a message type or pattern without a handler): the message is parked at
 * once with `retry-reason: no-handler`, whatever the delays, instead of being
 * dropped or retried.
 */
export class NoHandlerError extends RabbitRetryError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('NO_HANDLER', message, options);
  }
}

/**
 * An option another library takes (a `@RabbitSubscribe` option of
 * `@golevelup/nestjs-rabbitmq`, a `Transport.RMQ` option) that has no meaning
 * here, or a value of it that rabbit-retry cannot honour. Raised at start-up,
 * so that nothing it asked for is silently ignored; the message names the
 * option and what to do instead.
 */
export class UnsupportedOptionError extends RabbitRetryError {
  /** The option, as written: `queueOptions.channel`, `errorHandler`. */
  readonly option: string;

  constructor(option: string, message: string) {
    super('UNSUPPORTED_OPTION', message);
    this.option = option;
  }
}

/** A queue or exchange exists with other arguments than the consumer's options ask for. */
export class TopologyMismatchError extends RabbitRetryError {
  constructor(message: string) {
    super('TOPOLOGY_MISMATCH', message);
  }
}

/** A mandatory publish was returned: no queue was bound to its exchange and routing key. */
export class UnroutableError extends RabbitRetryError {
  constructor(message: string) {
    super('UNROUTABLE', message);
  }
}

/** The broker refused a publish with `basic.nack`. */
export class PublishNackedError extends RabbitRetryError {
  constructor(message: string) {
    super('PUBLISH_NACKED', message);
  }
}

/** A publish was not confirmed: its channel closed or the confirm timed out. */
export class PublishFailedError extends RabbitRetryError {
  constructor(message: string) {
    super('PUBLISH_FAILED', message);
  }
}

/** The broker could not be reached, or the connection was lost. */
export class ConnectionError extends RabbitRetryError {
  constructor(message: string) {
    super('CONNECTION', message);
  }
}

/**
 * The database of a consumer's inbox failed: the transaction could not begin,
 * record the message's id, or commit. Nothing the handler wrote was
 * committed, and the message goes the failure path as a retryable failure
 * (whatever `onFailure.retryable` says): it is never lost.
 */
export class InboxError extends RabbitRetryError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INBOX', message, options);
  }
}

/**
 * The database of a consumer's inbox refused the message's key for what it
 * holds (a NUL byte, a lone surrogate, more bytes than its index takes): every
 * other attempt would be refused alike, so the message parks at once with
 * `retry-reason: inbox-refused`, the refusal in `retry-last-error`.
 */
export class InboxRefusedError extends RabbitRetryError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INBOX_REFUSED', message, options);
  }
}

/**
 * The broker refused access (403 ACCESS_REFUSED): a queue or exchange name
 * with the reserved `amq.` prefix, a publish to an internal exchange, or a
 * permission the connection's user lacks. The message names what was refused.
 */
export class AccessRefusedError extends RabbitRetryError {
  constructor(message: string) {
    super('ACCESS_REFUSED', message);
  }
}

/**
 * Something a command named does not exist (404 NOT_FOUND): the exchange or
 * queue of a binding, say. A publish to a missing exchange rejects with
 * {@link UnroutableError} instead.
 */
export class NotFoundError extends RabbitRetryError {
  constructor(message: string) {
    super('NOT_FOUND', message);
  }
}

/**
 * The broker refused a command for what it holds (406 PRECONDITION_FAILED):
 * a property value it does not take, a message over its `max_message_size`.
 * The message gives the broker's own reason.
 */
export class PreconditionFailedError extends RabbitRetryError {
  constructor(message: string) {
    super('PRECONDITION_FAILED', message);
  }
}

/** No message of the parked queue has the id an edit named: nothing was edited. */
export class NotParkedError extends RabbitRetryError {
  constructor(message: string) {
    super('NOT_PARKED', message);
  }
}

/** Several messages of the parked queue have the id an edit named: nothing was edited. */
export class AmbiguousMessageIdError extends RabbitRetryError {
  constructor(message: string) {
    super('AMBIGUOUS_MESSAGE_ID', message);
  }
}

/** An option or argument is not valid; the message names it. */
export class InvalidOptionsError extends RabbitRetryError {
  constructor(message: string) {
    super('INVALID_OPTIONS', message);
  }
}

/** The client or consumer was used after `close()`. */
export class ClosedError extends RabbitRetryError {
  constructor(message: string) {
    super('CLOSED', message);
  }
}

/** The retry table's database refused, could not be reached, or holds a `message_retries` of another shape. */
export class RetryTableError extends RabbitRetryError {
  constructor(message: string) {
    super('RETRY_TABLE', message);
  }
}

/**
 * The broker refuses the reply to a request for what it holds (a `reply-to`
 * that is not an address it delivers to, a `user-id` or `expiration` it does
 * not take), or closed the reply's channel over it. The NestJS
 * microservices transport parks such a request with `retry-reason:
 * reply-refused`, the refusal in `retry-last-error`.
 */
export class ReplyRefusedError extends RabbitRetryError {
  constructor(message: string) {
    super('REPLY_REFUSED', message);
  }
}

/**
 * The broker cannot do what an option asks: `onFailure.brokerDelay` on a
 * RabbitMQ older than 4.3. Raised before anything is declared; the message
 * says what to use instead.
 */
export class BrokerUnsupportedError extends RabbitRetryError {
  constructor(message: string) {
    super('BROKER_UNSUPPORTED', message);
  }
}

/**
 * No reply to a request came within its timeout (`rr.request`,
 * `AmqpConnection.request`). The request may still be handled: a reply that
 * comes later is dropped.
 */
export class RequestTimeoutError extends RabbitRetryError {
  /** The timeout, in ms. */
  readonly timeoutMs: number;
  /** The exchange the request was published to. */
  readonly exchange: string;
  /** Its routing key. */
  readonly routingKey: string;

  constructor(timeoutMs: number, exchange: string, routingKey: string) {
    super('REQUEST_TIMEOUT', `no reply within ${timeoutMs} ms to the request to exchange '${exchange}' with routing key '${routingKey}'`);
    this.timeoutMs = timeoutMs;
    this.exchange = exchange;
    this.routingKey = routingKey;
  }
}

/**
 * The handler of a request failed, and answered with its error (`rr.request`):
 * `remoteName`, `message` and `remoteCode` are the handler's error's class,
 * message and `code`.
 */
export class RemoteError extends RabbitRetryError {
  /** The class of the handler's error (`Error`, `RpcException`, …). */
  readonly remoteName: string;
  /** The handler's error's `code` when it had a string one (`ECONNREFUSED`, `UNROUTABLE`, an application's own). */
  readonly remoteCode: string | undefined;

  constructor(remoteName: string, message: string, remoteCode?: string) {
    super('REMOTE_ERROR', message);
    this.remoteName = remoteName;
    this.remoteCode = remoteCode;
  }
}

/** The class of each code an error crossing from the native layer may carry: every native code has one. */
const byCode: Partial<Record<ErrorCode, new (message: string) => RabbitRetryError>> = {
  NON_RETRYABLE: NonRetryableError,
  TOPOLOGY_MISMATCH: TopologyMismatchError,
  UNROUTABLE: UnroutableError,
  PUBLISH_NACKED: PublishNackedError,
  PUBLISH_FAILED: PublishFailedError,
  CONNECTION: ConnectionError,
  INVALID_OPTIONS: InvalidOptionsError,
  CLOSED: ClosedError,
  RETRY_TABLE: RetryTableError,
  REPLY_REFUSED: ReplyRefusedError,
  BROKER_UNSUPPORTED: BrokerUnsupportedError,
  ACCESS_REFUSED: AccessRefusedError,
  NOT_FOUND: NotFoundError,
  PRECONDITION_FAILED: PreconditionFailedError,
} satisfies Record<NativeErrorCode, new (message: string) => RabbitRetryError> & Partial<Record<ErrorCode, new (message: string) => RabbitRetryError>>;

/**
 * Turns an error from the native layer (`[CODE] message`) into its typed class.
 * Anything else is returned as it is.
 * @internal
 */
export function fromNative(err: unknown): unknown {
  // Not `instanceof Error`: errors made by the native addon come from the main
  // realm, which is not the realm of a Jest test file or a vm context.
  const raw = typeof err === 'string' ? err : (err as { message?: unknown } | null)?.message;
  if (typeof raw !== 'string') return err;
  const message = raw;
  const m = /^\[([A-Z_]+)\] ([\s\S]*)$/.exec(message);
  if (!m) return err;
  const Ctor = byCode[m[1] as ErrorCode];
  return Ctor ? new Ctor(m[2]) : err;
}

/** Statuses napi-rs gives a value of the wrong type, and what was expected. */
const NAPI_EXPECTED: Record<string, string | undefined> = {
  InvalidArg: undefined,
  ObjectExpected: 'an object',
  StringExpected: 'a string',
  NameExpected: 'a string',
  FunctionExpected: 'a function',
  NumberExpected: 'a number',
  BooleanExpected: 'a boolean',
  ArrayExpected: 'an array',
  BigintExpected: 'a bigint',
  DateExpected: 'a Date',
  ArrayBufferExpected: 'a Buffer',
  DetachableArraybufferExpected: 'a Buffer',
};

/** The public option names of the native layer's fields, where they differ. */
const OPTION_NAMES: Record<string, string> = {
  urls: 'url',
  tlsCa: 'tls.ca',
  tlsCert: 'tls.certFile',
  tlsKey: 'tls.keyFile',
  retryTableUrl: 'retryTable.url',
  retryTableRatePerSec: 'retryTable.ratePerSec',
  retryTableRatePerSecPerProcess: 'retryTable.ratePerSecPerProcess',
  retryTableDependencyRates: 'retryTable.dependencyRates',
  retryTableScheduler: 'retryTable.scheduler',
  recoveryInitialDelayMs: 'recovery.initialDelayMs',
  recoveryMaxDelayMs: 'recovery.maxDelayMs',
  recoveryMaxAttempts: 'recovery.maxAttempts',
  recoveryStepTimeoutMs: 'recovery.stepTimeoutMs',
  tableMaxAttempts: 'onFailure.table.maxAttempts',
  delays: 'onFailure.delays',
  brokerDelayMin: 'onFailure.brokerDelay.min',
  brokerDelayMax: 'onFailure.brokerDelay.max',
  brokerDelayAttempts: 'onFailure.brokerDelay.attempts',
  kind: 'type',
};

/** What a Rust type named in a napi-rs message is, for a JavaScript caller. */
function expectedOfRustType(rust: string): string | undefined {
  if (/^(String|&str)$/.test(rust)) return 'a string';
  if (rust === 'bool') return 'a boolean';
  if (/^[iuf](8|16|32|64|size)$/.test(rust)) return 'a number';
  if (rust.startsWith('Vec')) return 'an array';
  return undefined;
}

/**
 * Turns a napi-rs conversion error (a value of the wrong type reached the
 * native layer) into an {@link InvalidOptionsError} naming the option and the
 * type it needs. napi-rs puts the value itself in its message, and a value can
 * hold a secret (a URL with its password), so the message is written anew and
 * the original is not kept as a cause. `undefined` for any other error.
 * @internal
 */
export function fromConversion(err: unknown): InvalidOptionsError | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  let message: unknown;
  let code: unknown;
  try {
    message = (err as { message?: unknown }).message;
    code = (err as { code?: unknown }).code;
  } catch {
    return undefined;
  }
  if (typeof message !== 'string' || message.startsWith('[')) return undefined;
  const byCode = typeof code === 'string' && Object.prototype.hasOwnProperty.call(NAPI_EXPECTED, code);
  const statusInText =
    /\b(StringExpected|NumberExpected|BooleanExpected|ObjectExpected|ArrayExpected|FunctionExpected|BigintExpected|DateExpected|NameExpected)\b/.exec(
      message,
    );
  const converting = /Failed to convert|into rust type|Missing field|Value is not instanceof/.test(message);
  if (!byCode && !statusInText && !converting) return undefined;
  const field = / on [A-Za-z_]\w*\.([A-Za-z_]\w*)\s*$/.exec(message)?.[1] ?? /Missing field `([A-Za-z_]\w*)`/.exec(message)?.[1];
  const name = field === undefined ? undefined : (OPTION_NAMES[field] ?? field);
  const rust = /into rust type `([^`]+)`/.exec(message)?.[1];
  const expected =
    (rust === undefined ? undefined : expectedOfRustType(rust)) ??
    (byCode ? NAPI_EXPECTED[code as string] : undefined) ??
    (statusInText ? NAPI_EXPECTED[statusInText[1]] : undefined);
  if (message.includes('Missing field') && name !== undefined) return new InvalidOptionsError(`${name} is required`);
  const what = name ?? 'an option or argument';
  return new InvalidOptionsError(
    `${what} has the wrong type${expected ? `: it must be ${expected}` : ''} (the value is not shown: it could hold a secret)`,
  );
}

/**
 * The typed error of a failed native call: a conversion error becomes an
 * {@link InvalidOptionsError} without the value, `[CODE] message` its class.
 * @internal
 */
export function fromNativeCall(err: unknown): unknown {
  return fromConversion(err) ?? fromNative(err);
}

/**
 * Awaits a native call and rethrows its error as a typed class. Pass the call
 * as a function, so that an argument napi-rs refuses (thrown before any
 * promise exists) is caught too.
 * @internal
 */
export async function native<T>(call: Promise<T> | (() => Promise<T>)): Promise<T> {
  try {
    return await (typeof call === 'function' ? call() : call);
  } catch (err) {
    throw fromNativeCall(err);
  }
}

/**
 * Runs a synchronous native call and rethrows its error as a typed class.
 * @internal
 */
export function nativeSync<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw fromNativeCall(err);
  }
}
