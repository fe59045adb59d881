/**
 * The fence around every callback a user hands rabbit-retry: `retryable`,
 * the retry table callbacks, a circuit's `check`, `pauseWhen`'s check and
 * `onChange`, the alert callbacks, the logger, the consumers' event
 * listeners, and the serializers and deserializers of the NestJS side.
 *
 * Every call of such a callback goes through {@link fenceSync} (callbacks
 * that must answer at once) or {@link fence} (callbacks that may answer
 * with a Promise, within a bound). Neither throws nor rejects, whatever the
 * callback throws, rejects with or returns: an Error whose getters throw, a
 * Proxy whose every trap throws, an object without a prototype, a Symbol, a
 * BigInt or `undefined`. A callback that does not answer within the bound
 * counts as failed then, and its late answer is dropped; a Promise nobody
 * awaits has its rejection caught, so nothing becomes an unhandled
 * rejection. What it ended with is a {@link FenceResult}, whose `problem`
 * says in words what went wrong (reading the thrown value through
 * {@link reasonOf}, and naming a returned value with {@link resultKind}).
 * @internal
 */
import { reasonOf } from './error-text';

/**
 * How long an async callback may take unless its own option says otherwise:
 * 5 seconds. (A circuit's `check` has `probeEvery`, a `pauseWhen` check its
 * `every`.)
 */
export const DEFAULT_CALLBACK_TIMEOUT_MS = 5_000;

/** What a fenced callback must answer with, and how a warning says so. */
export interface Expectation<T> {
  /** Whether `value` is what the callback should answer with; called inside the fence (a throw counts as no). */
  readonly accepts: (value: unknown) => value is T;
  /** What it should answer with, in words, for a warning: `true or false`. */
  readonly words: string;
}

/** `true` or `false`, nothing else. */
export const BOOLEAN: Expectation<boolean> = {
  accepts: (v): v is boolean => v === true || v === false,
  words: 'true or false',
};

/** Any answer: for callbacks whose answer is not used (a logger, a listener, `onChange`). */
export const ANY: Expectation<unknown> = {
  accepts: (_v): _v is unknown => true,
  words: 'anything',
};

/** An object (not `null`). */
export const OBJECT: Expectation<object> = {
  accepts: (v): v is object => v !== null && typeof v === 'object',
  words: 'an object',
};

/** How a fenced call went wrong. */
export type FenceFailure = 'threw' | 'rejected' | 'timedOut' | 'unexpected';

/** What a fenced call ended with: its answer, or what went wrong. */
export type FenceResult<T> =
  | {
      readonly ok: true;
      /** The callback's answer (awaited, with {@link fence}). */
      readonly value: T;
    }
  | {
      readonly ok: false;
      /** `threw`, `rejected`, `timedOut` (no answer within the bound) or `unexpected` (an answer the expectation refused). */
      readonly failure: FenceFailure;
      /** What it threw or rejected with (`threw`, `rejected`), as it was. */
      readonly error?: unknown;
      /** What it answered with (`unexpected`), as it was. */
      readonly value?: unknown;
      /** What it answered with, in words (`unexpected`): see {@link resultKind}. */
      readonly kind?: string;
      /** What went wrong, in words, starting with the callback's name: `onFailure.retryable threw (…)`. */
      readonly problem: string;
    };

/** Options of {@link fenceSync}. */
export interface FenceSyncOptions<T> {
  /** What the callback must return. @default {@link ANY} */
  readonly expect?: Expectation<T>;
  /**
   * Told, later, when the callback returned a Promise (which is never
   * awaited) and it rejected; without it the rejection is dropped quietly.
   */
  readonly onLateRejection?: (problem: string) => void;
}

/** Options of {@link fence}. */
export interface FenceOptions<T> {
  /** What the callback must answer with (a Promise is awaited first). @default {@link ANY} */
  readonly expect?: Expectation<T>;
  /** Milliseconds to wait for the answer; `Infinity` waits for ever. @default {@link DEFAULT_CALLBACK_TIMEOUT_MS} */
  readonly timeoutMs?: number;
  /**
   * Whether the wait keeps the process alive: `false` for the checks of a
   * background timer (a circuit's, a `pauseWhen` watch's), which must not
   * hold a process that is otherwise done. @default true
   */
  readonly keepAlive?: boolean;
}

/** Whether `v` has a `then` method; a getter or trap that throws makes it not one. Never throws. */
export function isThenable(v: unknown): v is PromiseLike<unknown> {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return false;
  try {
    return typeof (v as { then?: unknown }).then === 'function';
  } catch {
    return false;
  }
}

/**
 * What a value is, in words, for a warning: `undefined`, `a number (1)`,
 * `a string`, `a Promise (an async function?)`, `an object with a null
 * prototype`, `an object that cannot be inspected (a Proxy?)`. Reads as
 * little of the value as it can, and never throws.
 */
export function resultKind(v: unknown): string {
  try {
    if (v === undefined) return 'undefined';
    if (v === null) return 'null';
    if (isThenable(v)) return 'a Promise (an async function?)';
    switch (typeof v) {
      case 'boolean':
        return v ? 'true' : 'false';
      case 'number':
        return `a number (${String(v)})`;
      case 'string':
        return 'a string';
      case 'bigint':
        return `a bigint (${String(v)})`;
      case 'symbol':
        return 'a symbol';
      case 'function':
        return 'a function';
    }
    let proto: unknown;
    try {
      proto = Object.getPrototypeOf(v);
      if (Array.isArray(v)) return 'an array';
    } catch {
      return 'an object that cannot be inspected (a Proxy?)';
    }
    if (proto === null) return 'an object with a null prototype';
    if (proto === Date.prototype) return 'a Date';
    return 'an object';
  } catch {
    return 'a value that cannot be described';
  }
}

function threw<T>(name: string, failure: 'threw' | 'rejected', error: unknown): FenceResult<T> {
  return { ok: false, failure, error, problem: `${name} ${failure} (${reasonOf(error)})` };
}

/** The answer `value` checked against `expect`. */
function checked<T>(name: string, value: unknown, expect: Expectation<T>): FenceResult<T> {
  let accepted = false;
  try {
    accepted = expect.accepts(value);
  } catch {
    // An answer the check cannot read is not what was expected.
  }
  if (accepted) return { ok: true, value: value as T };
  const kind = resultKind(value);
  return { ok: false, failure: 'unexpected', value, kind, problem: `${name} returned ${kind}, not ${expect.words}` };
}

/**
 * Catches the rejection of `v` when it is a Promise nobody awaits (reading
 * and calling its `then` inside a Promise of our own, so that neither can throw).
 */
function absorb(v: unknown, name: string, onLateRejection?: (problem: string) => void): void {
  if (!isThenable(v)) return;
  new Promise<unknown>((resolve) => resolve(v)).then(undefined, (e: unknown) => {
    if (!onLateRejection) return;
    try {
      onLateRejection(`${name} returned a Promise that rejected (${reasonOf(e)})`);
    } catch {
      // Nowhere left to say it.
    }
  });
}

/**
 * Calls `call` (a callback that must answer at once: its Promise, if it
 * returns one, is not awaited) and returns what it ended with. Never throws:
 * a throw of any value is `threw`; an answer `expect` refuses is
 * `unexpected`; a returned Promise that rejects later is caught (and told to
 * `onLateRejection`). `name` starts each `problem`: `onFailure.retryable`.
 */
export function fenceSync<T = unknown>(name: string, call: () => unknown, options: FenceSyncOptions<T> = {}): FenceResult<T> {
  const expect = options.expect ?? (ANY as Expectation<T>);
  let value: unknown;
  try {
    value = call();
  } catch (e) {
    return threw(name, 'threw', e);
  }
  absorb(value, name, options.onLateRejection);
  return checked(name, value, expect);
}

/**
 * Calls `call`, awaits its answer for at most `timeoutMs`, and resolves to
 * what it ended with. Never rejects: a throw is `threw`, a rejection of any
 * value `rejected`, no answer within the bound `timedOut` (the answer that
 * comes later is dropped, a rejection caught), an answer `expect` refuses
 * `unexpected`. Until the answer or the bound, the process stays alive
 * (unless `keepAlive` is false).
 */
export function fence<T = unknown>(name: string, call: () => unknown, options: FenceOptions<T> = {}): Promise<FenceResult<T>> {
  const expect = options.expect ?? (ANY as Expectation<T>);
  const timeoutMs = options.timeoutMs ?? DEFAULT_CALLBACK_TIMEOUT_MS;
  let returned: unknown;
  try {
    returned = call();
  } catch (e) {
    return Promise.resolve(threw<T>(name, 'threw', e));
  }
  return new Promise<FenceResult<T>>((settle) => {
    let timer: NodeJS.Timeout | undefined;
    if (Number.isFinite(timeoutMs)) {
      timer = setTimeout(() => settle({ ok: false, failure: 'timedOut', problem: `${name} did not answer within ${timeoutMs} ms` }), timeoutMs);
      // By default a process awaiting a fenced call waits for it (at most the bound), rather than ending mid-await.
      if (options.keepAlive === false) timer.unref();
    }
    // Our own Promise reads and calls a thenable's `then`: a getter or a `then` that throws rejects it.
    new Promise<unknown>((resolve) => resolve(returned)).then(
      (value) => {
        clearTimeout(timer);
        settle(checked(name, value, expect));
      },
      (e: unknown) => {
        clearTimeout(timer);
        settle(threw(name, 'rejected', e));
      },
    );
  });
}
