/**
 * The inbox over a node-postgres pool in three round trips a message, not
 * five: `BEGIN` and the key's insert go as one simple query, the handler's
 * statements as it sends them, then the check and `COMMIT` as one more.
 * node-postgres sends a query without parameters as one simple-query message;
 * PostgreSQL runs its statements in order, answers them in one round trip,
 * and runs none after the first that fails. So the check, which fails when
 * the transaction is aborted or is not the one that recorded the key, keeps
 * that `COMMIT` from running as surely as when it was a statement of its own.
 */
import { reasonOf } from '../support/error-text';
import { InboxError, type InboxRefusedError } from '../errors';
import type { PgClientLike, PgPoolLike, PgQueryResultLike } from '../sql/transaction';
import { abortedVerdict, endedVerdict, refusalOf, sqlStateOf } from './outcome';

/**
 * `s` as a string literal of PostgreSQL: an escape string (`E'…'`) with each
 * backslash and quote doubled, read the same whatever
 * `standard_conforming_strings` says. `s` holds no NUL (the inbox refuses
 * such a key before it gets here).
 */
export function literal(s: string): string {
  return `E'${s.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}

/**
 * Records the key: a row back (the transaction's id) when it was new. With
 * `txid`, only once {@link checkSql}'s condition holds (the transaction open
 * now is `txid`'s, unaborted), failing as the check does when it does not.
 */
export function insertKeySql(consumer: string, key: string, txid?: string): string {
  const row =
    txid === undefined ? `VALUES (${literal(consumer)}, ${literal(key)})` : `SELECT ${literal(consumer)}, ${literal(key)} WHERE ${checkExpr(txid)} = 0`;
  return `INSERT INTO rabbit_retry_inbox (consumer, message_id) ${row} ON CONFLICT DO NOTHING RETURNING txid_current()::text AS txid`;
}

/**
 * The first of the two keys of the transaction-level advisory locks a
 * group takes on its keys ("RRIB"); the second is {@link keyLock}'s hash.
 */
export const INBOX_LOCK_CLASS = 0x52524942;

/**
 * The second key of the advisory lock on `consumer`'s `key`: a 32-bit
 * FNV-1a hash of both (two keys that share it only wait on each other).
 */
export function keyLock(consumer: string, key: string): number {
  let h = 0x811c9dc5;
  const text = `${consumer}\u0000${key}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/**
 * Opens a group's transaction, locks its keys, gives it an id, and reads
 * which of `keys` are recorded already: the last statement answers one row,
 * `txid` (text) and `seen` (the recorded keys). The locks (one a key, taken
 * in the order of their hashes, so that two groups never wait on each other
 * in a circle) are held until the transaction ends: a copy of a key in
 * another group waits in its own first statement, and its read, a statement
 * after the wait, sees the first copy's commit or rollback.
 */
export function openGroupSql(consumer: string, keys: string[]): string {
  const locks = [...new Set(keys.map((k) => keyLock(consumer, k)))].sort((a, b) => a - b);
  return `BEGIN; SELECT pg_advisory_xact_lock(${INBOX_LOCK_CLASS}, h) FROM (VALUES ${locks.map((h) => `(${h})`).join(', ')}) AS v (h); SELECT txid_current()::text AS txid, ARRAY(SELECT message_id FROM rabbit_retry_inbox WHERE consumer = ${literal(consumer)} AND message_id IN (${keys.map(literal).join(', ')})) AS seen`;
}

/**
 * Records `keys` for `consumer` with the work of their handlers, once
 * {@link checkSql}'s condition holds for `txid` (failing as the check does when it
 * does not). A key recorded meanwhile by another transaction fails it (23505).
 */
export function insertKeysSql(consumer: string, keys: string[], txid: string): string {
  const rows = keys.map((k) => `(${literal(k)})`).join(', ');
  return `INSERT INTO rabbit_retry_inbox (consumer, message_id) SELECT ${literal(consumer)}, k FROM (VALUES ${rows}) AS v (k) WHERE ${checkExpr(txid)} = 0`;
}

/** Opens the transaction and records the key: its second result has a row (the transaction's id) when the key was new. */
export function recordSql(consumer: string, key: string): string {
  return `BEGIN; ${insertKeySql(consumer, key)}`;
}

/** Marks the error the check raises when the transaction is not the one that recorded the key. */
export const ENDED_MARK = 'rabbit-retry inbox check: ';

/**
 * The check, then `COMMIT`: the check fails (SQLSTATE 25P02) while the
 * transaction is aborted, and (22P02, with {@link ENDED_MARK} and the id it
 * found, or `none`) when the transaction open now is not `txid`'s; either
 * way the `COMMIT` after it is not run.
 */
export function commitSql(txid: string): string {
  return `${checkSql(txid)}; COMMIT`;
}

/** The check alone (see {@link commitSql}). */
export function checkSql(txid: string): string {
  return `SELECT ${checkExpr(txid)} AS ok`;
}

/** The check's expression: 0, or the error of {@link commitSql}. */
function checkExpr(txid: string): string {
  if (!/^[0-9]+$/.test(txid)) throw new Error(`not a transaction id: ${txid}`);
  return `CASE WHEN txid_current_if_assigned() = ${txid} THEN 0 ELSE ('${ENDED_MARK}' || coalesce(txid_current_if_assigned()::text, 'none'))::int END`;
}

/** Counts `n` duplicates for `consumer`. */
export function countDuplicatesSql(consumer: string, n: number): string {
  return `INSERT INTO rabbit_retry_inbox_duplicates AS d (consumer, n, last_at) VALUES (${literal(consumer)}, ${Math.trunc(n)}, now())
  ON CONFLICT (consumer) DO UPDATE SET n = d.n + excluded.n, last_at = now()`;
}

/** Counts a duplicate for `consumer`, then commits. */
export function duplicateSql(consumer: string): string {
  return `${countDuplicatesSql(consumer, 1)}; COMMIT`;
}

/** SQLSTATE of "invalid input syntax": the check's own error, with {@link ENDED_MARK}. */
const ENDED = '22P02';

/** The last result of a query that may hold several statements (node-postgres answers each one). */
export function lastOf(raw: PgQueryResultLike | PgQueryResultLike[]): PgQueryResultLike | undefined {
  return Array.isArray(raw) ? raw[raw.length - 1] : raw;
}

/** What the check's failure `err` says of the transaction: a verdict, or undefined when it is the database's own error (the COMMIT's). */
export function verdictOf(err: unknown, consumer: string): InboxError | undefined {
  const code = sqlStateOf(err);
  if (code === '25P02') return abortedVerdict(consumer, err);
  const text = reasonOf(err);
  const at = text.indexOf(ENDED_MARK);
  if (code !== ENDED || at < 0) return undefined;
  return endedVerdict(consumer, text.startsWith('none', at + ENDED_MARK.length) ? null : 'another');
}

/** How a message's transaction on a pool ended, when it did not commit. */
export interface PoolFailure {
  /** The handler's own error: the failure path takes it as it is. */
  failed?: { err: unknown };
  /** The database refused the key for what it holds: the message parks. */
  refused?: InboxRefusedError;
  /** The handler broke its transaction (a failed statement it went on from, or an end of its own): a bug its author must hear of. */
  broke?: InboxError;
}

/**
 * Runs `handler` on a client of `pool` in a transaction that records `key`
 * for `consumer`: resolves to `true` when the key was new and the transaction
 * committed with the handler's work, `false` when the key was recorded
 * already (the handler is not called; the duplicate is counted and
 * committed). Rejects with what failed: `failure` says whose error it is.
 */
export async function inPoolTransaction(
  pool: PgPoolLike,
  consumer: string,
  key: string,
  handler: (tx: PgClientLike) => unknown,
  failure: PoolFailure,
): Promise<boolean> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A backend that ends while the client is out is an `error` event on the client: unheard, it would end the process.
  const lost = (err: Error) => {
    broken = err;
  };
  client.on?.('error', lost);
  try {
    let recorded: PgQueryResultLike | undefined;
    try {
      recorded = lastOf(await client.query(recordSql(consumer, key)));
    } catch (err) {
      failure.refused = refusalOf(err, consumer);
      throw err;
    }
    const txid = recorded?.rows[0] as { txid?: unknown } | undefined;
    if (txid === undefined) {
      await client.query(duplicateSql(consumer));
      return false;
    }
    try {
      await handler(client);
    } catch (err) {
      failure.failed = { err };
      throw err;
    }
    let committed: PgQueryResultLike | undefined;
    try {
      committed = lastOf(await client.query(commitSql(String(txid.txid))));
    } catch (err) {
      failure.broke = verdictOf(err, consumer);
      throw err;
    }
    // PostgreSQL ends an aborted transaction's COMMIT as a ROLLBACK, without an error (the check ran first, so only a client that answers otherwise).
    if (committed?.command !== 'COMMIT') {
      throw new Error(`COMMIT was answered with ${committed?.command ?? 'nothing'}: nothing is known to have been committed`);
    }
    return true;
  } catch (err) {
    // After a failed COMMIT, or a check that found no transaction, the ROLLBACK only warns.
    await client.query('ROLLBACK').catch((rollback: unknown) => {
      broken = rollback instanceof Error ? rollback : new Error('ROLLBACK failed');
    });
    throw err;
  } finally {
    client.removeListener?.('error', lost);
    client.release(broken);
  }
}
