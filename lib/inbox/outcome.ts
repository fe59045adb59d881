/**
 * What the inbox reads of its transaction instead of assuming it: the record
 * statement returns the transaction's id, and after the handler resolves one
 * check statement, still inside the transaction, says whether that same
 * transaction is open and unaborted. PostgreSQL answers the `COMMIT` of an
 * aborted transaction with `ROLLBACK` and no error, and a handler can end the
 * transaction through `tx` itself; neither may end in an ack. The check works
 * through any adapter, since it reads the database, not a driver's result.
 * Also here: which database errors of the record statement are the key's
 * content (the message parks) and which are an outage (it is retried).
 */
import { reasonOf } from '../support/error-text';
import { InboxError, InboxRefusedError } from '../errors';
import type { TransactionAdapter } from '../sql';

/** Records the key; a row back (with the transaction's id) means it was new, none that it was recorded already. */
export const RECORD =
  'INSERT INTO rabbit_retry_inbox (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING txid_current()::text AS txid';

/**
 * The transaction's id if one is assigned: the record's transaction's while it
 * is open; null once it ended (a new transaction has no id before it writes),
 * another id once it was replaced; 25P02 while it is aborted. A savepoint the
 * handler rolled back to leaves the transaction and its id as they were.
 */
const CHECK = 'SELECT txid_current_if_assigned()::text AS txid';

/** SQLSTATE of "current transaction is aborted, commands ignored until end of transaction block". */
const ABORTED = '25P02';

/**
 * SQLSTATEs the record statement gets for what the key holds, whatever the
 * database's state: every attempt would get them again.
 */
const REFUSALS: Readonly<Record<string, string>> = {
  '22000': 'data exception',
  '22001': 'longer than its column takes',
  '22021': 'a character the database cannot store',
  '22P05': "a character the database's encoding has no equivalent for",
  '54000': "more than the inbox's index takes",
};

/** The SQLSTATE of a database error: node-postgres's `code`, TypeORM's (its `driverError`'s), Prisma's `meta.code`, or a cause's. */
export function sqlStateOf(err: unknown): string | undefined {
  const SQLSTATE = /^[0-9A-Z]{5}$/;
  let e = err;
  // A few levels: a library's error around the driver's.
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    try {
      const o = e as { code?: unknown; driverError?: { code?: unknown }; meta?: { code?: unknown }; cause?: unknown };
      for (const code of [o.code, o.driverError?.code, o.meta?.code]) {
        if (typeof code === 'string' && SQLSTATE.test(code)) return code;
      }
      e = o.cause;
    } catch {
      return undefined; // an error whose getters throw says nothing of the database
    }
  }
  return undefined;
}

/** The record statement failed with `err`: an {@link InboxRefusedError} when the key's content is what was refused. */
export function refusalOf(err: unknown, consumer: string): InboxRefusedError | undefined {
  const code = sqlStateOf(err);
  if (code === undefined || !(code in REFUSALS)) return undefined;
  return new InboxRefusedError(
    `inbox '${consumer}': the database refused the message's key (SQLSTATE ${code}, ${REFUSALS[code]}: ${reasonOf(err)}); every attempt would be refused alike, so the message is parked`,
    { cause: err },
  );
}

/**
 * After the handler resolved, in its transaction `tx`: undefined when the
 * transaction that recorded the key as `txid` is still open and unaborted (its
 * commit then commits the key and the handler's work together), else the
 * {@link InboxError} that says what the handler did to it. Rejects with the
 * database's error when the check itself cannot run (an outage).
 */
export async function outcomeOf<Tx>(adapter: TransactionAdapter<Tx>, tx: Tx, txid: unknown, consumer: string): Promise<InboxError | undefined> {
  let now: unknown;
  try {
    now = (await adapter.query(tx, CHECK, [])).rows[0]?.txid;
  } catch (err) {
    if (sqlStateOf(err) !== ABORTED) throw err;
    return abortedVerdict(consumer, err);
  }
  if (typeof txid === 'string' && now === txid) return undefined;
  return endedVerdict(consumer, now === null || now === undefined ? null : 'another');
}

/** What a message gets when the inbox's database failed with `err` (an outage, a failed `COMMIT`): it is tried again. */
export function databaseFailed(consumer: string, err: unknown): InboxError {
  return new InboxError(
    `inbox '${consumer}': the inbox's database failed (${reasonOf(err)}); nothing was committed, and the message will be tried again`,
    { cause: err },
  );
}

/** The verdict on a transaction that the check `err` (SQLSTATE 25P02) found aborted. */
export function abortedVerdict(consumer: string, err: unknown): InboxError {
  return new InboxError(
    `inbox '${consumer}': the handler's transaction was rolled back: a statement in it failed and the handler went on (${reasonOf(err)}); nothing was committed, and the message will be tried again`,
    { cause: err },
  );
}

/** The verdict on a transaction the handler ended: the check found none open (`null`), or `another`. */
export function endedVerdict(consumer: string, now: null | 'another'): InboxError {
  const how = now === null ? 'a COMMIT or ROLLBACK through tx' : 'a COMMIT or ROLLBACK, then another BEGIN, through tx';
  return new InboxError(
    `inbox '${consumer}': the handler ended the transaction itself (${how}), so its work and the message's id were not committed together; the message will be tried again`,
  );
}
