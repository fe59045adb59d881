/**
 * A parked message as the operators' calls read it (its `retry-*` headers read
 * out), the filter that selects parked messages, and the messages a parked
 * session takes from the broker.
 */
import { InvalidOptionsError, native } from '../errors';
import { Message } from '../message';
import { deliveriesOf, partsOf } from '../wire';
import { type NativeParkedSession, HEADERS } from '../native';
import { checkKeys, checkObject } from '../options/check';
import { BOOLEAN, fenceSync } from '../support/fence';
import type { OptionKeys } from '../options';

/**
 * Selects parked messages. Every field given must match; a message no filter
 * selects stays parked.
 */
export interface ParkedFilter {
  /** `retry-reason` is this value, or one of these (`exhausted`, `non-retryable`, ...). */
  reason?: string | string[];
  /** `retry-error-name` is exactly this. */
  errorName?: string;
  /** `retry-last-error` contains this text. */
  errorMessage?: string;
  /** Each of these headers has this value (compared as text). */
  headers?: Record<string, string | number | boolean>;
  /**
   * Any other test: `true` selects, `false` leaves the message parked,
   * decided synchronously. What it throws ends the call with that error;
   * any other answer (a Promise, a truthy string) ends it with
   * `INVALID_OPTIONS`, naming what came back.
   */
  where?: (msg: ParkedMessage) => boolean;
}

/** The keys of {@link ParkedFilter}. */
const PARKED_FILTER_KEYS = {
  reason: true,
  errorName: true,
  errorMessage: true,
  headers: true,
  where: true,
} satisfies OptionKeys<ParkedFilter>;

/** A parked message: a {@link Message} with its `retry-*` headers read out. */
export class ParkedMessage extends Message {
  /** `retry-reason`: `exhausted`, `non-retryable`, ... */
  get reason(): string | undefined {
    return str(this.headers[HEADERS.reason]);
  }
  /** `retry-error-name`. */
  get errorName(): string | undefined {
    return str(this.headers[HEADERS.errorName]);
  }
  /** `retry-last-error`. */
  get errorMessage(): string | undefined {
    return str(this.headers[HEADERS.lastError]);
  }
  /** `retry-error-stack`. */
  get errorStack(): string | undefined {
    return str(this.headers[HEADERS.errorStack]);
  }
  /** `retry-failed-at`, as a Date. */
  get failedAt(): Date | undefined {
    const s = str(this.headers[HEADERS.failedAt]);
    return s === undefined ? undefined : new Date(s);
  }
  /** Every `retry-*` header. */
  get retryHeaders(): Record<string, unknown> {
    return Object.fromEntries(Object.entries(this.headers).filter(([k]) => k.startsWith('retry-')));
  }
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** Whether `filter` selects `m`. @internal */
export function selects(filter: ParkedFilter | undefined, m: ParkedMessage): boolean {
  if (!filter) return true;
  if (filter.reason !== undefined) {
    const reasons = Array.isArray(filter.reason) ? filter.reason : [filter.reason];
    if (m.reason === undefined || !reasons.includes(m.reason)) return false;
  }
  if (filter.errorName !== undefined && m.errorName !== filter.errorName) return false;
  if (filter.errorMessage !== undefined && !(m.errorMessage ?? '').includes(filter.errorMessage)) return false;
  if (filter.headers) {
    for (const [k, v] of Object.entries(filter.headers)) {
      const actual = m.headers[k];
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a header of any type matches by its text
      if (actual === undefined || actual === null || String(actual) !== String(v)) return false;
    }
  }
  return filter.where ? whereSelects(filter.where, m) : true;
}

/**
 * `where(m)`, fenced: what it throws ends the call that asked (as it was
 * thrown); an answer other than `true` or `false` (a Promise from an async
 * function, a truthy string) ends it with an {@link InvalidOptionsError}
 * naming what came back, before that message is touched.
 */
function whereSelects(where: (msg: ParkedMessage) => boolean, m: ParkedMessage): boolean {
  const r = fenceSync('filter.where', () => where(m), { expect: BOOLEAN });
  if (r.ok) return r.value;
  if (r.failure === 'threw') throw r.error;
  throw new InvalidOptionsError(`${r.problem}: it must decide synchronously`);
}

/** Checks that the `filter` of `method` is an object of known keys. @internal */
export function checkFilter(method: string, filter: unknown): void {
  if (filter === undefined) return;
  checkObject(`${method} filter`, filter, 'an object such as { reason }');
  checkKeys(`${method} filter`, filter as object, PARKED_FILTER_KEYS);
}

/** Messages a parked session takes from the broker in one call, at most. */
const TAKE_AT_ONCE = 100;

/**
 * The messages session `s` takes, one by one, while `room()` (read before
 * each) is above zero; each call to the broker takes at most `room()` of
 * them, and at most {@link TAKE_AT_ONCE}. Ends when the queue is empty.
 * @internal
 */
export async function* taken(s: NativeParkedSession, room: () => number): AsyncGenerator<{ id: number; message: ParkedMessage }> {
  for (;;) {
    const want = room();
    if (want <= 0) return;
    const { batch } = await native(() => s.get(Math.min(want, TAKE_AT_ONCE)));
    const held = deliveriesOf(batch);
    if (held.length === 0) return;
    for (const d of held) {
      if (room() <= 0) return;
      yield { id: d.id, message: new ParkedMessage(partsOf(d, batch)) };
    }
  }
}
