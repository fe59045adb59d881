/**
 * The report of a handler's failure for the native side: what was thrown
 * (a {@link NoHandlerError}, a {@link ReplyRefusedError}, an
 * {@link InboxRefusedError}, a {@link NonRetryableError}, or what the `retryable` predicate answers) and,
 * when the native side says the failure goes to the retry table, what the
 * `onFailure.table` callbacks say of the row. Where the message goes is the
 * native verdict's to decide (`src/retry/verdict.rs`), not this module's.
 */
import { InboxError, InboxRefusedError, NoHandlerError, NonRetryableError, ReplyRefusedError } from '../errors';
import type { Message } from '../message';
import type { FailureKind as ContractKind } from '../contract';
import type { NativeFailureInfo } from '../native';
import type { TableRouteOptions } from '../options';
import { BOOLEAN, type Expectation, type FenceResult, fenceSync } from '../support/fence';
import { errorInfo, reasonOf } from '../support/error-text';
import type { Log } from '../support/log';

/** A handler's failure as the native side takes it, without the delivery's id. */
export type FailureInfo = Omit<NativeFailureInfo, 'id'>;

/** What the handler threw, as the report names it. */
export type FailureKind = NativeFailureInfo['kind'];

/** The binding's kinds are the contract's (src/retry/verdict.rs), each way round, or this does not compile. @internal */
export const KINDS_AGREE: [FailureKind] extends [ContractKind] ? ([ContractKind] extends [FailureKind] ? true : never) : never = true;

function isNoHandler(err: unknown): boolean {
  try {
    return err instanceof NoHandlerError;
  } catch {
    return false;
  }
}

function isReplyRefused(err: unknown): boolean {
  try {
    return err instanceof ReplyRefusedError;
  } catch {
    return false;
  }
}

function isInboxFailure(err: unknown): boolean {
  try {
    return err instanceof InboxError;
  } catch {
    return false;
  }
}

function isInboxRefused(err: unknown): boolean {
  try {
    return err instanceof InboxRefusedError;
  } catch {
    return false;
  }
}

function isNonRetryable(err: unknown): boolean {
  try {
    return err instanceof NonRetryableError;
  } catch {
    return false;
  }
}

/** What the failure reports of one consumer need. */
export interface FailureReportOptions {
  /** The work queue, for log lines. */
  queue: string;
  /** The `onFailure.retryable` predicate, asked of errors that are none of the library's; without one, they are all retryable. */
  retryable?: (err: unknown, msg: Message) => boolean;
  /** `onFailure.stackOnRetry`: read the error's stack for a retried copy too, not only for one that parks or goes to the retry table. */
  stackOnRetry?: boolean;
  /** The `onFailure.table` callbacks, asked of failures the native side routes to the retry table. */
  table?: TableRouteOptions;
  /** Where warnings go. */
  log: Log;
}

/** Reports each handler failure to the native side, which decides where the message goes. */
export class FailureReporter {
  /** The unexpected answers (callback and kind of value) already warned about. */
  private readonly warned = new Set<string>();

  constructor(private readonly o: FailureReportOptions) {}

  /**
   * The failure to settle message `msg` with, after its handler threw `err`;
   * `bound` says where the native side routes a retryable failure of this
   * attempt: to the retry table, or to the parked queue (no retry is left).
   * The stack is read for a copy that parks or goes to the table, and for a
   * retried one only with `stackOnRetry`. Never throws.
   */
  failureOf(err: unknown, msg: Message, bound: { table?: true; parks?: true }): FailureInfo {
    try {
      const kind = this.kindOf(err, msg);
      const table = kind === 'retryable' && bound.table ? this.tableInfo(err, msg) : undefined;
      const withStack = kind !== 'retryable' || bound.table === true || bound.parks === true || this.o.stackOnRetry === true;
      const { name, message, stack } = errorInfo(err, withStack);
      // Built field by field: V8 copies a spread object on a slow path (about a microsecond a failure).
      return { name, message, stack, kind, table };
    } catch (internal) {
      const { name, message, stack } = errorInfo(err);
      const failure: FailureInfo = { name, message, stack, kind: 'non-retryable' };
      this.o.log('error', `rabbit-retry: reporting a failed message of '${this.o.queue}' failed (${reasonOf(internal)}); parking it`);
      return failure;
    }
  }

  /** What `err` is: one of the library's errors, or what the `retryable` predicate says of it. */
  private kindOf(err: unknown, msg: Message): FailureKind {
    if (isNoHandler(err)) return 'no-handler';
    if (isReplyRefused(err)) return 'reply-refused';
    if (isInboxRefused(err)) return 'inbox-refused';
    if (isNonRetryable(err)) return 'non-retryable';
    // The inbox's database failed, not the handler: another attempt may well succeed.
    if (isInboxFailure(err)) return 'retryable';
    return this.isRetryable(err, msg) ? 'retryable' : 'non-retryable';
  }

  /**
   * The `retryable` predicate's answer: `true`, or `false` for `false`, a
   * throw or anything that is not a boolean (the last with a warning, once
   * per kind of value).
   */
  private isRetryable(err: unknown, msg: Message): boolean {
    const retryable = this.o.retryable;
    if (!retryable) return true;
    const r = fenceSync('onFailure.retryable', () => retryable(err, msg), { expect: BOOLEAN });
    if (r.ok) return r.value;
    if (r.failure === 'unexpected') {
      this.warnOnce(
        `retryable:${r.kind ?? ''}`,
        `rabbit-retry: onFailure.retryable of queue '${this.o.queue}' returned ${r.kind ?? 'something else'}, not true or false; ` +
          'such messages are parked as non-retryable. Return a boolean, synchronously',
      );
    } else {
      this.o.log('warn', `rabbit-retry: ${r.problem}; parking the message of queue '${this.o.queue}'`);
    }
    return false;
  }

  /** Logs `line` the first time `key` comes up. */
  private warnOnce(key: string, line: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.o.log('warn', line);
  }

  /**
   * Where the row goes, the route being the retry table. A callback that
   * throws gives its default (with a warning each time); one that returns
   * what it should not gives its default too (with a warning once per kind
   * of value).
   */
  private tableInfo(err: unknown, msg: Message): { dependency?: string; tenant?: string; nextAttemptAtMs?: number } | undefined {
    const t = this.o.table;
    if (!t) return undefined;
    const call = <T>(name: string, f: () => unknown, expect: Expectation<T>, fallback: T): T => {
      const r: FenceResult<T> = fenceSync(`onFailure.table.${name}`, f, { expect });
      if (r.ok) return r.value;
      const line = `rabbit-retry: ${r.problem}; using its default for the messages of queue '${this.o.queue}'`;
      if (r.failure === 'unexpected') this.warnOnce(`table.${name}:${r.kind ?? ''}`, line);
      else this.o.log('warn', line);
      return fallback;
    };
    const dependency = t.dependency ? call('dependency', () => t.dependency?.(err, msg), NAME, undefined) : undefined;
    const tenant = t.tenant ? call('tenant', () => t.tenant?.(msg), NAME, undefined) : undefined;
    const fallback = Date.now() + 60_000;
    // `undefined` (nothing returned) waits for a person, as `null` does.
    const next = t.nextAttemptAt
      ? call<Date | null | undefined>('nextAttemptAt', () => t.nextAttemptAt?.(err, msg.attempt + 1), DUE, new Date(fallback))
      : new Date(fallback);
    return {
      dependency: dependency ?? undefined,
      tenant: tenant ?? undefined,
      nextAttemptAtMs: next === null || next === undefined ? undefined : next.getTime(),
    };
  }
}

/** What `onFailure.table.dependency` and `tenant` return: a string, or nothing. */
const NAME: Expectation<string | null | undefined> = {
  accepts: (v): v is string | null | undefined => typeof v === 'string' || v === undefined || v === null,
  words: 'a string or undefined',
};

/** What `onFailure.table.nextAttemptAt` returns: a valid Date, or nothing (`null`: wait for a person). */
const DUE: Expectation<Date | null | undefined> = {
  accepts: (v): v is Date | null | undefined => v === null || v === undefined || (v instanceof Date && !Number.isNaN(v.getTime())),
  words: 'a valid Date or null',
};
