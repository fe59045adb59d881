/**
 * The checks of `consume({ inbox })`: each refuses a bad option with an
 * {@link InvalidOptionsError} that names it, before anything is declared.
 */
import { checkBoolean, checkFunction, checkKeys, checkObject, checkString, kindOf, parseDelay } from '../options/check';
import type { Delay } from '../options/delay';
import { InvalidOptionsError } from '../errors';
import { DEFAULT_INBOX_CLEANUP_EVERY, DEFAULT_INBOX_GROUP_TIMEOUT, DEFAULT_INBOX_RETENTION, INBOX_OPTION_KEYS, type InboxOptions } from './options';
import { unfitText } from './key';
import { MAX_GROUP } from './pg-group';

/** The inbox's options once checked, with their defaults applied. */
export interface CheckedInbox {
  /** `inbox.pool` or `inbox.adapter`. */
  source: { pool: object } | { adapter: object };
  /** The name the ids are kept under. */
  consumer: string;
  key?: InboxOptions['key'];
  retentionMs: number;
  cleanupEveryMs: number;
  migrate: boolean;
  /** How many deliveries share a transaction (1: each its own). */
  group: number;
  /** How long one handler of a group may run. */
  groupTimeoutMs: number;
}

/** The methods `v` lacks of `names`. */
function missing(v: object, names: readonly string[]): string[] {
  return names.filter((n) => typeof (v as Record<string, unknown>)[n] !== 'function');
}

/** A delay option of at least 1 ms, in milliseconds. */
function delayMs(name: string, v: unknown, fallback: Delay): number {
  const { ms } = parseDelay((v ?? fallback) as Delay, name);
  if (ms < 1) throw new InvalidOptionsError(`${name} must be at least 1ms, got ${String(v)}`);
  return ms;
}

/** Checks `consume({ inbox })` of work queue `queue`. @internal */
export function checkInbox(inbox: unknown, queue: string): CheckedInbox {
  checkObject('inbox', inbox, 'an object such as { pool } or { adapter }');
  const o = inbox as Record<string, unknown>;
  checkKeys('inbox', o, INBOX_OPTION_KEYS);
  const { pool, adapter } = o;
  if ((pool === undefined) === (adapter === undefined)) {
    throw new InvalidOptionsError(
      pool === undefined
        ? 'inbox needs pool (a node-postgres Pool) or adapter (a TransactionAdapter, such as typeormAdapter(dataSource))'
        : 'inbox takes pool or adapter, not both',
    );
  }
  let source: CheckedInbox['source'];
  if (pool !== undefined) {
    if (typeof pool !== 'object' || pool === null || missing(pool, ['connect']).length > 0) {
      throw new InvalidOptionsError(`inbox.pool must be a node-postgres Pool (an object with connect()), got ${kindOf(pool)}`);
    }
    source = { pool };
  } else {
    if (typeof adapter !== 'object' || adapter === null) {
      throw new InvalidOptionsError(`inbox.adapter must be a TransactionAdapter (transaction and query methods), got ${kindOf(adapter)}`);
    }
    const lacks = missing(adapter, ['transaction', 'query']);
    if (lacks.length > 0) {
      throw new InvalidOptionsError(`inbox.adapter must have transaction(work) and query(tx, sql, params) methods; it lacks ${lacks.join(' and ')}`);
    }
    source = { adapter };
  }
  checkString('inbox.consumer', o.consumer, { nonEmpty: true });
  // The name is in every key's index row: one the database cannot keep would cost every message.
  const unfit = typeof o.consumer === 'string' ? unfitText(o.consumer) : undefined;
  if (unfit) throw new InvalidOptionsError(`inbox.consumer ${unfit}`);
  checkFunction('inbox.key', o.key, 'a function (msg) => string');
  checkBoolean('inbox.migrate', o.migrate);
  const group = o.group ?? 1;
  if (typeof group !== 'number' || !Number.isInteger(group) || group < 1 || group > MAX_GROUP) {
    throw new InvalidOptionsError(`inbox.group must be an integer from 1 to ${MAX_GROUP}, got ${kindOf(o.group)}`);
  }
  return {
    source,
    consumer: (o.consumer as string | undefined) ?? queue,
    key: o.key as InboxOptions['key'],
    retentionMs: delayMs('inbox.retention', o.retention, DEFAULT_INBOX_RETENTION),
    cleanupEveryMs: delayMs('inbox.cleanupEvery', o.cleanupEvery, DEFAULT_INBOX_CLEANUP_EVERY),
    migrate: o.migrate !== false,
    group,
    groupTimeoutMs: delayMs('inbox.groupTimeout', o.groupTimeout, DEFAULT_INBOX_GROUP_TIMEOUT),
  };
}
