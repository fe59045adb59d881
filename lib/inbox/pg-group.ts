/**
 * A group of the inbox under savepoints: what runs a group again when its
 * first try (./pg-groups) could not keep each message's outcome its own.
 * Its deliveries share one transaction on one client of the pool; their
 * handlers run one after another, each under a savepoint of its own that
 * holds its key's record and its work. One simple query goes between two
 * handlers: the next savepoint, and the next key's
 * insert, which checks first that the transaction is still the group's and
 * unaborted (as the single transaction's check does before its `COMMIT`); the
 * last check goes with the `COMMIT`. A message then costs its handler's
 * statements and one round trip, and the group one `COMMIT`.
 *
 * What stays as without a group: one commit holds each message's work and
 * its key's record; a key recorded by a committed copy is a duplicate, never
 * handled; a handler that throws takes the failure path with its work rolled
 * back (to its savepoint; the others' stays), and one that broke the
 * transaction (a failed statement it went on from) is rolled back with its
 * verdict. A message is acked only once the `COMMIT` that holds it succeeded;
 * when it failed, or a handler ended the transaction itself, every message it
 * held is tried again, and a copy whose key did commit is then a duplicate.
 * Savepoints are not released: each nests in the one before, and rolling back
 * to the name takes the newest.
 */
import { type FenceResult, fence } from '../support/fence';
import { InboxError } from '../errors';
import type { PgClientLike, PgPoolLike, PgQueryResultLike } from '../sql/transaction';
import { databaseFailed, endedVerdict, refusalOf, sqlStateOf } from './outcome';
import { checkSql, countDuplicatesSql, insertKeySql, lastOf, verdictOf } from './pg-fast';
import { type TxUse, guardTx } from './tx-guard';

/** The savepoint of the message whose handler runs. */
const SAVEPOINT = 'rabbit_retry_inbox';
const ROLLBACK_TO = `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`;

/** SQLSTATEs of a savepoint's statement after a handler ended the transaction: no such savepoint, no transaction. */
const GONE = new Set(['3B001', '25P01']);

/** The most a group holds: each message's savepoint takes a subtransaction, and PostgreSQL keeps 64 per backend in shared memory. */
export const MAX_GROUP = 50;

/** One delivery waiting for its group. */
export interface GroupItem {
  /** Its key, checked. */
  key: string;
  /** Runs its handler (with its message and `this` bound) on `tx`. */
  run(tx: PgClientLike): unknown;
  /** Settles it: `true` when its work committed with its key, `false` when the key was recorded already (a duplicate). */
  resolve(fresh: boolean): void;
  /** Fails it: it takes the failure path with `err`. */
  reject(err: unknown): void;
}

/** What the groups of one inbox need of it. */
export interface GroupHost {
  /** The name the keys are kept under. */
  consumer: string;
  /** How long one handler of a group may run (`inbox.groupTimeout`) before its group gives up on it. */
  timeoutMs: number;
  /** A handler broke its transaction: a bug its author must hear of. */
  broke(err: InboxError): void;
}

/** What the previous message left: its handler resolved (checked by the next query), or threw (rolled back by it). */
type After = { kind: 'handled'; item: GroupItem } | { kind: 'threw'; item: GroupItem } | undefined;

/**
 * A client of `pool` for a group, its connection's failure told to `lost`
 * (unheard, a backend that ends while the client is out would end the
 * process); undefined when none came, and each item then failed.
 */
export async function groupClient(pool: PgPoolLike, items: GroupItem[], consumer: string, lost: (err: Error) => void): Promise<PgClientLike | undefined> {
  let client: PgClientLike;
  try {
    client = await pool.connect();
  } catch (err) {
    for (const item of items) item.reject(databaseFailed(consumer, err));
    return undefined;
  }
  client.on?.('error', lost);
  return client;
}

/**
 * Runs `item`'s handler on `client` through a guarded `tx` (./tx-guard),
 * bounded by `inbox.groupTimeout`: the messages behind it wait on it.
 * Whatever it throws or rejects with is its own failure, as it was. A
 * statement the guard refused is told to the consumer's owner.
 */
export async function runGuarded(client: PgClientLike, item: GroupItem, host: GroupHost): Promise<{ ran: FenceResult<unknown>; use: TxUse }> {
  const guard = guardTx(client, host.consumer);
  const ran = await fence('a handler of an inbox group', () => item.run(guard.tx), { timeoutMs: host.timeoutMs });
  guard.end();
  if (guard.use.refused) host.broke(guard.use.refused);
  return { ran, use: guard.use };
}

/** What the message of a handler that ran past `inbox.groupTimeout` gets: its group's transaction was abandoned. */
export function timedOut(host: GroupHost): InboxError {
  return new InboxError(
    `inbox '${host.consumer}': the handler did not settle within inbox.groupTimeout (${host.timeoutMs} ms), and its group's transaction was abandoned: nothing of it was committed, and the message will be tried again`,
  );
}

/** What a group's connection is closed with when a handler ran past `inbox.groupTimeout`. */
export function abandonedConnection(host: GroupHost): Error {
  return new Error(`abandoned: a handler ran longer than inbox.groupTimeout (${host.timeoutMs} ms)`);
}

/** A handler of the group did not settle within `inbox.groupTimeout`: the group gives up its transaction. */
class Abandoned extends Error {}

/** One group's transaction, on one client, each message under a savepoint of its own. @internal */
export class SavepointGroup {
  private client?: PgClientLike;
  /** The client's connection failed: the pool closes it rather than taking it back. */
  private broken?: Error;
  /** Deliveries whose work (or duplicate's count) the open transaction holds: settled by its `COMMIT`. */
  private held: { item: GroupItem; fresh: boolean }[] = [];
  /** Whether the group's transaction is open. */
  private open = false;
  /** Its id, once a key was recorded in it. */
  private txid?: string;
  private after: After;

  constructor(
    private readonly pool: PgPoolLike,
    private readonly items: GroupItem[],
    private readonly host: GroupHost,
    /** Hands deliveries not run yet to another group. */
    private readonly again: (items: GroupItem[]) => void,
  ) {}

  async run(): Promise<void> {
    const lost = (err: Error) => {
      this.broken = err;
    };
    this.client = await groupClient(this.pool, this.items, this.host.consumer, lost);
    if (!this.client) return;
    let next = 0;
    try {
      for (; next < this.items.length; next++) await this.handle(this.items[next]);
      await this.commit();
    } catch (err) {
      if (err instanceof Abandoned) {
        this.abandon(next);
        return;
      }
      // The database failed: nothing of the transaction is known to have committed, and each message not settled yet is tried again.
      const failed = databaseFailed(this.host.consumer, err);
      for (const h of this.held) h.item.reject(failed);
      if (this.after?.kind === 'handled') this.after.item.reject(failed);
      for (const item of this.items.slice(next)) item.reject(failed);
      if (this.open)
        await this.query('ROLLBACK').catch((rollback: unknown) => (this.broken = rollback instanceof Error ? rollback : new Error('ROLLBACK failed')));
    } finally {
      this.client.removeListener?.('error', lost);
      this.client.release(this.broken);
    }
  }

  /** Records `item`'s key (with what the previous message left to do), and runs its handler when the key was new. */
  private async handle(item: GroupItem): Promise<void> {
    const { consumer } = this.host;
    const record = () => `${this.open ? '' : 'BEGIN; '}SAVEPOINT ${SAVEPOINT}; ${insertKeySql(consumer, item.key, this.txid)}`;
    let recorded: PgQueryResultLike | undefined;
    try {
      recorded = await this.withAfter(record);
    } catch (err) {
      const refused = refusalOf(err, consumer);
      if (!refused) throw err;
      // The key's content: this message parks; the transaction goes on from before its savepoint.
      await this.query(ROLLBACK_TO);
      item.reject(refused);
      return;
    }
    // The insert returns the transaction's id as text when the key was new, no row when it was recorded already.
    const txid = (recorded?.rows[0] as { txid?: string } | undefined)?.txid;
    if (txid === undefined) {
      this.held.push({ item, fresh: false });
      return;
    }
    this.txid = txid;
    const { ran } = await runGuarded(this.client as PgClientLike, item, this.host);
    if (ran.ok) {
      this.after = { kind: 'handled', item };
      return;
    }
    if (ran.failure === 'timedOut') throw new Abandoned();
    // Its own failure path at once; its work goes back to its savepoint with the next query.
    item.reject(ran.error);
    this.after = { kind: 'threw', item };
  }

  /**
   * The handler of `items[index]` did not settle within the bound: the group's
   * connection is closed under it (nothing of the transaction commits), its
   * message and those the transaction held are tried again, and those not run
   * yet go to another group.
   */
  private abandon(index: number): void {
    const { timeoutMs } = this.host;
    this.broken = abandonedConnection(this.host);
    this.items[index].reject(timedOut(this.host));
    this.dropHeld(
      `the handler of another message of its group did not settle within inbox.groupTimeout (${timeoutMs} ms), and the transaction they shared was abandoned`,
    );
    this.again(this.items.slice(index + 1));
  }

  /** Checks the last handler's transaction, counts the duplicates, and commits; then settles every message the transaction held. */
  private async commit(): Promise<void> {
    const committed = await this.withAfter(() => {
      if (!this.open) return undefined;
      const duplicates = this.held.filter((h) => !h.fresh).length;
      const check = this.after?.kind === 'handled' && this.txid !== undefined ? `${checkSql(this.txid)}; ` : '';
      return `${check}${duplicates > 0 ? `${countDuplicatesSql(this.host.consumer, duplicates)}; ` : ''}COMMIT`;
    });
    if (!this.open) return;
    this.open = false;
    if (committed?.command !== 'COMMIT') {
      throw new Error(`COMMIT was answered with ${committed?.command ?? 'nothing'}: nothing is known to have been committed`);
    }
    const held = this.held;
    this.held = [];
    for (const h of held) h.item.resolve(h.fresh);
  }

  /**
   * Runs what `build` makes of the state (nothing when it makes nothing),
   * after what the previous message left: a handler that threw is rolled back
   * to its savepoint first, in the same query; one that resolved is checked by
   * the query's first statements. When that fails, the previous message is
   * settled by what was found, the transaction is brought back (or found
   * ended, and its messages tried again), and what `build` makes then runs.
   */
  private async withAfter(build: () => string | undefined): Promise<PgQueryResultLike | undefined> {
    const after = this.after;
    const run = async (prefix = '') => {
      const sql = build();
      this.after = undefined;
      if (sql === undefined) return prefix === '' ? undefined : this.query(prefix);
      const r = await this.query(`${prefix}${sql}`);
      this.open = true;
      return r;
    };
    if (after === undefined) return run();
    if (after.kind === 'threw') {
      try {
        return await run(`${ROLLBACK_TO}; `);
      } catch (err) {
        if (!GONE.has(sqlStateOf(err) ?? '')) throw err;
        // Its handler ended the transaction (a COMMIT or ROLLBACK through tx) before it threw.
        await this.ended();
        return run();
      }
    }
    try {
      const r = await run();
      this.held.push({ item: after.item, fresh: true });
      return r;
    } catch (err) {
      // The first statements (the savepoint, the check) fail when the handler broke the transaction or ended it.
      const code = sqlStateOf(err);
      const verdict = code === '25P01' ? endedVerdict(this.host.consumer, null) : verdictOf(err, this.host.consumer);
      if (!verdict) {
        // The transaction was whole; what failed came after, in a transaction that held this message too.
        this.held.push({ item: after.item, fresh: true });
        throw err;
      }
      this.host.broke(verdict);
      after.item.reject(verdict);
      if (code === '25P02') {
        // A statement of its handler failed and the handler went on: back to before its savepoint.
        await this.query(ROLLBACK_TO);
      } else {
        await this.ended();
      }
      return run();
    }
  }

  /** A handler ended the group's transaction: what it held may or may not have committed, so each of its messages is tried again. */
  private async ended(): Promise<void> {
    // A transaction the handler began after ending ours is none of this group's.
    await this.query('ROLLBACK');
    this.open = false;
    this.txid = undefined;
    this.dropHeld('the handler of another message of its group ended the transaction they shared (a COMMIT or ROLLBACK through tx)');
  }

  /** The transaction's outcome is not known (`why`): each message it held is tried again, and a copy whose key did commit is then a duplicate. */
  private dropHeld(why: string): void {
    const held = this.held;
    this.held = [];
    for (const h of held) h.item.reject(new InboxError(`inbox '${this.host.consumer}': ${why}; this message will be tried again`));
  }

  private async query(sql: string): Promise<PgQueryResultLike | undefined> {
    return lastOf(await (this.client as PgClientLike).query(sql));
  }
}
