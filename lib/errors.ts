/**
 * Every error rabbit-retry raises has a stable `code`, so callers can branch on
 * it without parsing messages, and a message that says what to do next.
 */

/** The codes of rabbit-retry's errors. */
export type ErrorCode =
  | 'NON_RETRYABLE'
  | 'TOPOLOGY_MISMATCH'
  | 'UNROUTABLE'
  | 'PUBLISH_NACKED'
  | 'PUBLISH_FAILED'
  | 'CONNECTION'
  | 'INVALID_OPTIONS'
  | 'CLOSED'
  | 'RETRY_TABLE';

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

const byCode: Record<string, new (message: string) => RabbitRetryError> = {
  NON_RETRYABLE: NonRetryableError,
  TOPOLOGY_MISMATCH: TopologyMismatchError,
  UNROUTABLE: UnroutableError,
  PUBLISH_NACKED: PublishNackedError,
  PUBLISH_FAILED: PublishFailedError,
  CONNECTION: ConnectionError,
  INVALID_OPTIONS: InvalidOptionsError,
  CLOSED: ClosedError,
  RETRY_TABLE: RetryTableError,
};

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
  const Ctor = byCode[m[1]];
  return Ctor ? new Ctor(m[2]) : err;
}

/**
 * Awaits a native call and rethrows its error as a typed class.
 * @internal
 */
export async function native<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw fromNative(err);
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
    throw fromNative(err);
  }
}
