import { RpcException } from '@nestjs/microservices';

import type { ConnectionError } from '../errors';
import { reasonOf } from '../support/error-text';

/** What Nest answers a caller with when the error is not an RpcException. @internal */
export const INTERNAL_ERROR_MESSAGE = 'Internal server error';

/** What Nest's RMQ transport answers a request whose pattern has no handler. @internal */
export const NO_MESSAGE_HANDLER = 'There is no matching message handler defined in the remote service.';

/**
 * A handler's error as Nest's exception filters handed it to the transport
 * (an object such as `{ status: 'error', message }`), as an Error for the
 * failure path: its `message` is the object's message, `error` the object.
 * Register `RabbitRetryExceptionFilter` to have the handler's own error here
 * instead (its class, message and stack).
 */
export class RpcHandlerError extends Error {
  /** What the exception filters gave the transport. */
  readonly error: unknown;

  constructor(error: unknown) {
    super(reasonOf(error));
    this.name = 'RpcHandlerError';
    this.error = error;
  }
}

/** Whether `error` is what Nest's default filter makes of an error that is not an RpcException. @internal */
export function isNestInternalError(error: unknown): boolean {
  try {
    return (
      error !== null &&
      typeof error === 'object' &&
      (error as { status?: unknown }).status === 'error' &&
      (error as { message?: unknown }).message === INTERNAL_ERROR_MESSAGE
    );
  } catch {
    return false;
  }
}

/**
 * The error the failure path records for what a handler's stream failed
 * with: an Error as it is (the handler's own, with `RabbitRetryExceptionFilter`),
 * anything else as an {@link RpcHandlerError}.
 * @internal
 */
export function failureOf(error: unknown): unknown {
  try {
    if (error instanceof Error) return error;
  } catch {
    // A proxy that refuses inspection: the failure path reads it safely.
    return error;
  }
  return new RpcHandlerError(error);
}

/**
 * What a caller is answered with for `error`, as Nest's default exception
 * filter would have made it: an RpcException's error (an object as it is, a
 * string as `{ status: 'error', message }`), `Internal server error` for any
 * other Error, and anything else (what a filter already made) as it is.
 * @internal
 */
export function answerOf(error: unknown): unknown {
  try {
    if (error instanceof RpcException) {
      const e = error.getError();
      return e !== null && typeof e === 'object' ? e : { status: 'error', message: e };
    }
    if (error instanceof Error) return { status: 'error', message: INTERNAL_ERROR_MESSAGE };
  } catch {
    return { status: 'error', message: INTERNAL_ERROR_MESSAGE };
  }
  return error;
}

/** The OS's codes of failed connections, as Node's sockets name them, by what the connection's error says. */
const OS_CODES: readonly (readonly [RegExp, string])[] = [
  [/connection refused/i, 'ECONNREFUSED'],
  [/could not be resolved|failed to lookup address/i, 'ENOTFOUND'],
  [/timed out/i, 'ETIMEDOUT'],
  [/connection reset/i, 'ECONNRESET'],
  [/no route to host/i, 'EHOSTUNREACH'],
  [/network is unreachable/i, 'ENETUNREACH'],
];

/**
 * What a `send` or `emit` of {@link RabbitRetryClient} fails with when it
 * could not connect, as Nest's RMQ client fails: `code` is the OS's code
 * (`ECONNREFUSED`, `ENOTFOUND`, `ETIMEDOUT`, `ECONNRESET`, `EHOSTUNREACH`,
 * `ENETUNREACH`), which Nest's handling and code written for `Transport.RMQ`
 * check, or `CONNECTION` when the failure was none of those (the broker
 * refused the user, say). rabbit-retry's own code is `rabbitRetryCode`, and
 * its {@link ConnectionError} the `cause`.
 */
export class RmqConnectionError extends Error {
  /** The OS's code of the failure, or `CONNECTION`. */
  readonly code: string;
  /** rabbit-retry's code: always `CONNECTION`. */
  readonly rabbitRetryCode = 'CONNECTION';
  /** The connection's error, as `RabbitRetry.connect` gave it. */
  declare readonly cause: ConnectionError;

  constructor(error: ConnectionError) {
    super(error.message, { cause: error });
    this.name = 'RmqConnectionError';
    this.code = OS_CODES.find(([said]) => said.test(error.message))?.[1] ?? 'CONNECTION';
  }
}
