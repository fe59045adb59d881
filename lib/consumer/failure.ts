/**
 * Where a failed message goes: the `retryable` predicate's verdict and, past
 * the delays, the retry table row the `onFailure.table` callbacks describe;
 * a {@link NoHandlerError} parks at once as `no-handler`.
 */
import { NoHandlerError, NonRetryableError } from '../errors';
import type { Message } from '../message';
import type { NativeFailureInfo } from '../native';
import type { TableRouteOptions } from '../options';
import { errorInfo, reasonOf } from './error-text';
import type { Log } from './log';

/** A handler's failure as the native side takes it, without the delivery's id. */
export type FailureInfo = Omit<NativeFailureInfo, 'id'>;

/** What a `retryable` predicate returned, in words, for a warning. */
function resultKind(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (isThenable(v)) return 'a Promise (an async function?)';
  switch (typeof v) {
    case 'number':
      return `a number (${String(v)})`;
    case 'string':
      return 'a string';
    case 'function':
      return 'a function';
    case 'bigint':
      return 'a bigint';
    case 'symbol':
      return 'a symbol';
    default:
      return 'an object';
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return false;
  try {
    return typeof (v as { then?: unknown }).then === 'function';
  } catch {
    return false;
  }
}

function isNoHandler(err: unknown): boolean {
  try {
    return err instanceof NoHandlerError;
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

/** The failure routing of one consumer. */
export interface FailureRouteOptions {
  /** The work queue, for log lines. */
  queue: string;
  retryable: (err: unknown, msg: Message) => boolean;
  table?: TableRouteOptions;
  log: Log;
}

/** Decides, for each handler failure, what the native side is told: retry (and where) or park. */
export class FailureRoute {
  /** Kinds of non-boolean `retryable` results already warned about. */
  private readonly warnedResults = new Set<string>();

  constructor(private readonly o: FailureRouteOptions) {}

  /**
   * The failure to settle message `msg` with, after its handler threw `err`;
   * `tableBound` says whether the native side routes a retryable failure of
   * this attempt to the retry table. Never throws.
   */
  failureOf(err: unknown, msg: Message, tableBound: boolean): FailureInfo {
    try {
      // Nothing handles the message: it parks at once, whatever the delays and the predicate say.
      if (isNoHandler(err)) return { ...errorInfo(err), retryable: false, park: 'no-handler' };
      const retryable = this.isRetryable(err, msg);
      const table = retryable && tableBound ? this.tableInfo(err, msg) : undefined;
      return { ...errorInfo(err), retryable, table };
    } catch (internal) {
      const failure = { ...errorInfo(err), retryable: false };
      this.o.log('error', `rabbit-retry: deciding where a failed message of '${this.o.queue}' goes failed (${reasonOf(internal)}); parking it`);
      return failure;
    }
  }

  /**
   * The `retryable` predicate's verdict: `true` retries; `false`, a throw or
   * anything that is not a boolean parks (the last with a warning).
   */
  private isRetryable(err: unknown, msg: Message): boolean {
    if (isNonRetryable(err)) return false;
    let result: unknown;
    try {
      result = this.o.retryable(err, msg);
    } catch (predicateErr) {
      this.o.log('warn', `rabbit-retry: onFailure.retryable threw (${reasonOf(predicateErr)}); parking the message of queue '${this.o.queue}'`);
      return false;
    }
    if (result === true || result === false) return result;
    if (isThenable(result)) {
      // Not awaited; its rejection must not become an unhandled one.
      try {
        result.then(undefined, () => undefined);
      } catch {
        // A thenable whose then throws: nothing to wait for either way.
      }
    }
    const kind = resultKind(result);
    if (!this.warnedResults.has(kind)) {
      this.warnedResults.add(kind);
      this.o.log(
        'warn',
        `rabbit-retry: onFailure.retryable of queue '${this.o.queue}' returned ${kind}, not true or false; ` +
          'such messages are parked as non-retryable. Return a boolean, synchronously',
      );
    }
    return false;
  }

  /** Where the row goes, the route being the retry table; callbacks that throw fall back to defaults. */
  private tableInfo(err: unknown, msg: Message): { dependency?: string; tenant?: string; nextAttemptAtMs?: number } | undefined {
    const t = this.o.table;
    if (!t) return undefined;
    const call = <T>(name: string, f: () => T, fallback: T): T => {
      try {
        return f();
      } catch (e) {
        this.o.log('warn', `rabbit-retry: onFailure.table.${name} threw (${reasonOf(e)}); using its default`);
        return fallback;
      }
    };
    const dependency = t.dependency ? call('dependency', () => t.dependency?.(err, msg), undefined) : undefined;
    const tenant = t.tenant ? call('tenant', () => t.tenant?.(msg), undefined) : undefined;
    const fallback = new Date(Date.now() + 60_000);
    const next = t.nextAttemptAt ? call<Date | null>('nextAttemptAt', () => t.nextAttemptAt?.(err, msg.attempt + 1) ?? null, fallback) : fallback;
    let nextAttemptAtMs: number | undefined;
    if (next === null) nextAttemptAtMs = undefined; // waits for a person
    else if (next instanceof Date && !Number.isNaN(next.getTime())) nextAttemptAtMs = next.getTime();
    else nextAttemptAtMs = fallback.getTime();
    return {
      dependency: typeof dependency === 'string' ? dependency : undefined,
      tenant: typeof tenant === 'string' ? tenant : undefined,
      nextAttemptAtMs,
    };
  }
}
