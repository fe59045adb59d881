/**
 * The inbox's groups (`inbox.group`, over a node-postgres pool): deliveries
 * handed to the handler together, up to `group` of them, share one
 * transaction on one client of the pool, and their handlers run one after
 * another on it.
 *
 * A group is first tried in as few round trips as its handlers allow: one
 * query opens the transaction, takes an advisory lock on each key (a copy in
 * another group waits there for this one's outcome) and reads which keys
 * are recorded already (a duplicate's handler is not called), the handlers'
 * statements go as they send them, and one query records the keys of the handled messages, checks
 * that the transaction is still the group's and unaborted, counts the
 * duplicates and commits. A message then costs its handler's statements, and
 * the group two round trips.
 *
 * Without a savepoint between two handlers, a handler's failure is not its
 * message's alone once it wrote in the transaction. So when a handler throws
 * after sending a statement, or goes on after one failed, or when the last
 * query fails (a check, a key committed meanwhile by another copy), the
 * transaction is rolled back and the group's other messages are run again
 * under savepoints (./pg-group), where each message's outcome is its own: a
 * handler is called at most twice for one delivery, and a message's work is
 * committed once, with its key. A handler that throws before sending a
 * statement costs nothing of the others: there is nothing of its to roll back.
 * After such a rollback, the consumer's next groups (SAVEPOINT_SPELL of them)
 * run under savepoints from the start: while failures come often, they cost
 * their own messages only.
 *
 * Each handler's `tx` is guarded (./tx-guard): a statement that would end the
 * shared transaction is refused before it is sent, so no key is ever
 * committed without its handler's work. The keys go in with the `COMMIT`, not
 * before the handlers: even a transaction ended by a way the guard cannot see
 * commits no key without its work (its handlers are then run again).
 */
import { InboxError } from '../errors';
import type { PgClientLike, PgPoolLike, PgQueryResultLike } from '../sql/transaction';
import { abortedVerdict, databaseFailed, sqlStateOf } from './outcome';
import { checkSql, countDuplicatesSql, insertKeysSql, lastOf, openGroupSql, verdictOf } from './pg-fast';
import { type GroupHost, type GroupItem, SavepointGroup, abandonedConnection, groupClient, runGuarded, timedOut } from './pg-group';

/**
 * How many groups run under savepoints after a first try had to be rolled
 * back: while failures come often, each costs its message alone, and no
 * handler is called twice for them.
 */
export const SAVEPOINT_SPELL = 10;

/** Gathers the deliveries handed over together into groups, and runs each group on a client of its own. @internal */
export class InboxGroups {
  #pending: GroupItem[] = [];
  #scheduled = false;
  /** Groups still to run under savepoints (see {@link SAVEPOINT_SPELL}). */
  #underSavepoints = 0;

  constructor(
    private readonly pool: PgPoolLike,
    private readonly max: number,
    private readonly host: GroupHost,
  ) {}

  /**
   * Adds a delivery: it joins those handed over before the event loop's next
   * check phase (`setImmediate`), so that the batches the consumer hands over
   * one after another in one turn share a group.
   */
  add(item: GroupItem): void {
    this.#pending.push(item);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.#scheduled = false;
    const items = this.#pending;
    this.#pending = [];
    const again = (rest: GroupItem[]) => {
      for (const item of rest) this.add(item);
    };
    const rolledBack = (rest: GroupItem[]) => {
      this.#underSavepoints = SAVEPOINT_SPELL;
      return new SavepointGroup(this.pool, rest, this.host, again).run();
    };
    for (let i = 0; i < items.length; i += this.max) {
      const group = items.slice(i, i + this.max);
      if (this.#underSavepoints > 0) {
        this.#underSavepoints--;
        void new SavepointGroup(this.pool, group, this.host, again).run();
      } else {
        void new FirstTry(this.pool, group, this.host, again, rolledBack).run();
      }
    }
  }
}

/** Whether `err` is a key of the group recorded meanwhile by another transaction (a unique violation in the inbox's table). */
function isKeyConflict(err: unknown): boolean {
  return sqlStateOf(err) === '23505' && (err as { table?: unknown }).table === 'rabbit_retry_inbox';
}

/** The group's transaction cannot go on as it is: it is rolled back, and these run again under savepoints. */
class RunAgain extends Error {
  constructor(readonly items: GroupItem[]) {
    super('run again under savepoints');
  }
}

/** A group's first try: one transaction, the keys recorded with the `COMMIT`. */
class FirstTry {
  private client?: PgClientLike;
  /** The client's connection failed, or was given up: the pool closes it rather than taking it back. */
  private broken?: Error;
  private open = false;

  constructor(
    private readonly pool: PgPoolLike,
    private readonly items: GroupItem[],
    private readonly host: GroupHost,
    /** Hands deliveries to another group. */
    private readonly again: (items: GroupItem[]) => void,
    /** Runs deliveries under savepoints, each on its own. */
    private readonly underSavepoints: (items: GroupItem[]) => Promise<void>,
  ) {}

  async run(): Promise<void> {
    // A second copy of a key in one group waits for the first's outcome, in a group after this one.
    const keys = new Set<string>();
    const mine: GroupItem[] = [];
    const later: GroupItem[] = [];
    for (const item of this.items) {
      if (keys.has(item.key)) later.push(item);
      else {
        keys.add(item.key);
        mine.push(item);
      }
    }
    const lost = (err: Error) => {
      this.broken = err;
    };
    this.client = await groupClient(this.pool, this.items, this.host.consumer, lost);
    if (!this.client) return;
    let rerun: GroupItem[] | undefined;
    try {
      await this.attempt(mine);
    } catch (err) {
      if (err instanceof RunAgain && this.broken === undefined) rerun = err.items;
      else {
        const failed = databaseFailed(this.host.consumer, err instanceof RunAgain ? this.broken : err);
        for (const item of err instanceof RunAgain ? err.items : mine) item.reject(failed);
      }
      if (this.open && this.broken === undefined) {
        await this.query('ROLLBACK').catch((rollback: unknown) => (this.broken = rollback instanceof Error ? rollback : new Error('ROLLBACK failed')));
      }
    } finally {
      this.client.removeListener?.('error', lost);
      this.client.release(this.broken);
    }
    if (rerun !== undefined && rerun.length > 0) await this.underSavepoints(rerun);
    if (later.length > 0) this.again(later);
  }

  /**
   * Runs the group's handlers in one transaction and commits it. Settles each
   * message whose outcome is known; throws {@link RunAgain} with those to run
   * again under savepoints, or the database's error (every message not
   * settled then fails with it).
   */
  private async attempt(mine: GroupItem[]): Promise<void> {
    const { consumer } = this.host;
    let opened: PgQueryResultLike | undefined;
    // Open from here on: whatever the first query did, a ROLLBACK ends it.
    this.open = true;
    try {
      opened = await this.query(
        openGroupSql(
          consumer,
          mine.map((i) => i.key),
        ),
      );
    } catch (err) {
      // A key the database refuses, or a table it cannot read: under savepoints, each message gets its own outcome.
      if (sqlStateOf(err) !== undefined) throw new RunAgain(mine);
      throw err;
    }
    const row = opened?.rows[0] as { txid?: unknown; seen?: unknown } | undefined;
    const txid = String(row?.txid);
    const seen = new Set(Array.isArray(row?.seen) ? (row.seen as unknown[]).map(String) : []);
    const duplicates = mine.filter((i) => seen.has(i.key));
    const fresh = mine.filter((i) => !seen.has(i.key));
    const handled: GroupItem[] = [];
    const client = this.client as PgClientLike;
    for (let k = 0; k < fresh.length; k++) {
      const item = fresh[k];
      const others = () => [...handled, ...fresh.slice(k + 1), ...duplicates];
      const { ran, use } = await runGuarded(client, item, this.host);
      if (!ran.ok && ran.failure === 'timedOut') {
        // Its connection is closed under it: nothing of the transaction commits, and the others run in another group.
        this.broken = abandonedConnection(this.host);
        this.open = false;
        item.reject(timedOut(this.host));
        this.again(others());
        return;
      }
      // The transaction was aborted before its turn, by a statement of another handler's: whose it was, savepoints will tell.
      const brokeBefore = !use.failed && (use.abortedBefore || (!ran.ok && sqlStateOf(ran.error) === '25P02'));
      if (brokeBefore) throw new RunAgain([item, ...others()]);
      if (!ran.ok) {
        item.reject(ran.error);
        // Nothing of its in the transaction: the others go on.
        if (use.sent === 0) continue;
        throw new RunAgain(others());
      }
      if (use.failed) {
        const verdict = abortedVerdict(consumer, use.failure);
        this.host.broke(verdict);
        item.reject(verdict);
        throw new RunAgain(others());
      }
      if (use.refused) {
        const verdict = new InboxError(`${use.refused.message}; the handler went on, and the message will be tried again`, { cause: use.refused });
        item.reject(verdict);
        throw new RunAgain(others());
      }
      handled.push(item);
    }
    const record =
      handled.length > 0
        ? insertKeysSql(
            consumer,
            handled.map((i) => i.key),
            txid,
          )
        : checkSql(txid);
    const count = duplicates.length > 0 ? `${countDuplicatesSql(consumer, duplicates.length)}; ` : '';
    let committed: PgQueryResultLike | undefined;
    try {
      committed = await this.query(`${record}; ${count}COMMIT`);
    } catch (err) {
      // An aborted or ended transaction (the check), or a key committed meanwhile by another copy: whose it was, savepoints will tell.
      if (verdictOf(err, consumer) !== undefined || isKeyConflict(err)) throw new RunAgain([...handled, ...duplicates]);
      // The COMMIT's own failure (a deferred constraint, a serialization failure): every message is tried again.
      throw err;
    }
    this.open = false;
    if (committed?.command !== 'COMMIT') {
      throw new Error(`COMMIT was answered with ${committed?.command ?? 'nothing'}: nothing is known to have been committed`);
    }
    for (const item of handled) item.resolve(true);
    for (const item of duplicates) item.resolve(false);
  }

  private async query(sql: string): Promise<PgQueryResultLike | undefined> {
    return lastOf(await (this.client as PgClientLike).query(sql));
  }
}
