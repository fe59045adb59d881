/**
 * A consumer's inbox: each delivery's handler runs in a transaction of the
 * user's PostgreSQL that first records the message's key in
 * `rabbit_retry_inbox`. A key already there (committed by an earlier copy)
 * makes the delivery a duplicate: counted, acked, never handled. A copy
 * whose first is still in flight waits on the first's row lock, then sees
 * its commit or its rollback: so a message's effects are committed once.
 * The delivery is acked only once the transaction is known to have committed
 * the key with the handler's work (see ./outcome). Over a node-postgres pool
 * (given as `pool`, or through `pgAdapter`) the inbox's statements go in two
 * round trips, not four (see ./pg-fast); over any other adapter, one statement
 * at a time through its `query`.
 */
import { reasonOf } from '../support/error-text';
import { type Expectation, fenceSync } from '../support/fence';
import { InboxError, InboxRefusedError, InvalidOptionsError, NonRetryableError } from '../errors';
import type { InboxHandler } from './options';
import type { Message } from '../message';
import { type PgPoolLike, type TransactionAdapter, migrateTables, pgAdapter, poolOfAdapter, reportIdleErrors } from '../sql';
import { type CheckedInbox, checkInbox } from './check';
import { refusedKey } from './key';
import { RECORD, databaseFailed, outcomeOf, refusalOf } from './outcome';
import { type PoolFailure, inPoolTransaction } from './pg-fast';
import { InboxGroups } from './pg-groups';

export { checkInbox } from './check';

const COUNT_DUPLICATE = `INSERT INTO rabbit_retry_inbox_duplicates AS d (consumer, n, last_at) VALUES ($1, 1, now())
  ON CONFLICT (consumer) DO UPDATE SET n = d.n + 1, last_at = now()`;
/** How many handled ids one cleanup statement deletes. */
export const CLEANUP_BATCH = 1000;
const CLEANUP = `DELETE FROM rabbit_retry_inbox WHERE ctid IN (
  SELECT ctid FROM rabbit_retry_inbox WHERE consumer = $1 AND handled_at < now() - $2::interval LIMIT ${CLEANUP_BATCH})
  RETURNING 1`;

/** What `inbox.key` must answer with. */
const KEY: Expectation<string> = { accepts: (v): v is string => typeof v === 'string' && v !== '', words: 'a non-empty string' };

/** The adapter made for each pool given as `inbox.pool`: one per pool, so its migrations run once. */
const poolAdapters = new WeakMap<object, TransactionAdapter<unknown>>();

function adapterOf(source: CheckedInbox['source']): TransactionAdapter<unknown> {
  if ('adapter' in source) return source.adapter as TransactionAdapter<unknown>;
  let adapter = poolAdapters.get(source.pool);
  if (!adapter) poolAdapters.set(source.pool, (adapter = pgAdapter(source.pool as PgPoolLike) as TransactionAdapter<unknown>));
  return adapter;
}

/** What an inbox tells its consumer. */
export interface InboxHost {
  /** A delivery of `messageId` was a duplicate: acked without calling the handler. */
  duplicate(messageId: string): void;
  /**
   * Something the consumer's owner must hear of, beside the failure path: a
   * failed cleanup (tried again at the next interval), a handler that broke
   * its transaction, an idle connection of the pool that failed.
   */
  fail(err: Error): void;
}

/** The inbox of one consumer. @internal */
export class Inbox {
  private readonly o: CheckedInbox;
  private readonly adapter: TransactionAdapter<unknown>;
  /** The node-postgres pool behind the source, when the inbox knows it is one: its transactions take the short way. */
  private readonly pool?: PgPoolLike;
  // An ES private field: printing or serialising the consumer never meets a timer's circular internals.
  #timer?: NodeJS.Timeout;
  /** The cleanup running now. */
  #cleaning?: Promise<number>;
  /** Stops telling the consumer of its pool's idle connections' errors. */
  #unhear?: () => void;
  private stopped = false;
  /** The consumer, once it started. */
  private host?: InboxHost;

  /** Checks `inbox`, the option of the consumer of `queue`; throws an {@link InvalidOptionsError} naming a bad key. */
  constructor(inbox: unknown, queue: string) {
    this.o = checkInbox(inbox, queue);
    this.adapter = adapterOf(this.o.source);
    const { source } = this.o;
    this.pool = 'pool' in source ? (source.pool as PgPoolLike) : poolOfAdapter(source.adapter);
    if (this.o.group > 1 && !this.pool) {
      throw new InvalidOptionsError(
        "inbox.group needs a node-postgres pool, given as inbox.pool or through pgAdapter(pool): another adapter's transactions cannot be shared between messages",
      );
    }
  }

  /** The name the ids are kept under. */
  get consumer(): string {
    return this.o.consumer;
  }

  /** Creates the tables (unless `migrate: false`); rejects with an {@link InboxError} when the database fails. */
  async prepare(): Promise<void> {
    if (!this.o.migrate) return;
    try {
      await migrateTables(this.adapter);
    } catch (err) {
      throw new InboxError(`inbox '${this.o.consumer}': creating the inbox's tables failed: ${reasonOf(err)}`, { cause: err });
    }
  }

  /**
   * The consumer's handler: `handler` in a transaction that records the
   * message's key. It resolves (and the message is acked) only when that
   * transaction committed the key with the handler's work, or found the key
   * recorded; anything else rejects and takes the failure path.
   */
  wrap(handler: InboxHandler<unknown>): (this: unknown, msg: Message) => Promise<void> {
    if (this.pool && this.o.group > 1) return this.wrapGroups(this.pool, this.o.group, handler);
    if (this.pool) return this.wrapPool(this.pool, handler);
    const { adapter } = this;
    const { consumer } = this.o;
    const keyOf = (msg: Message) => this.keyOf(msg);
    const duplicate = (key: string) => this.host?.duplicate(key);
    const report = (err: InboxError) => this.host?.fail(err);
    return async function inboxed(this: unknown, msg: Message): Promise<void> {
      const key = keyOf(msg);
      let seen = false;
      let failed: { err: unknown } | undefined;
      // What the inbox found wrong with the transaction, whatever error the adapter rejects with after it.
      let verdict: InboxError | InboxRefusedError | undefined;
      try {
        await adapter.transaction(async (tx) => {
          let recorded;
          try {
            recorded = await adapter.query(tx, RECORD, [consumer, key]);
          } catch (err) {
            verdict = refusalOf(err, consumer);
            throw err;
          }
          if (recorded.rows.length === 0) {
            seen = true;
            await adapter.query(tx, COUNT_DUPLICATE, [consumer]);
            return;
          }
          try {
            // `this` is the consumer, as for a handler without an inbox.
            await Reflect.apply(handler, this, [msg, { tx }]);
          } catch (err) {
            failed = { err };
            throw err;
          }
          verdict = await outcomeOf(adapter, tx, recorded.rows[0]?.txid, consumer);
          if (verdict) {
            // A handler that swallowed a failed statement or ended the transaction has a bug its author must hear of.
            report(verdict);
            throw verdict;
          }
        });
      } catch (err) {
        // The handler's own error takes the failure path as it would without an inbox.
        if (failed) throw failed.err;
        if (verdict) throw verdict;
        throw databaseFailed(consumer, err);
      }
      if (seen) duplicate(key);
    };
  }

  /** {@link wrap} over a node-postgres pool: the same outcomes, in fewer round trips. */
  private wrapPool(pool: PgPoolLike, handler: InboxHandler<unknown>): (this: unknown, msg: Message) => Promise<void> {
    const { consumer } = this.o;
    const keyOf = (msg: Message) => this.keyOf(msg);
    const duplicate = (key: string) => this.host?.duplicate(key);
    const report = (err: InboxError) => this.host?.fail(err);
    return async function inboxed(this: unknown, msg: Message): Promise<void> {
      const key = keyOf(msg);
      const failure: PoolFailure = {};
      let fresh: boolean;
      try {
        // `this` is the consumer, as for a handler without an inbox.
        fresh = await inPoolTransaction(pool, consumer, key, (tx) => Reflect.apply(handler, this, [msg, { tx }]), failure);
      } catch (err) {
        if (failure.failed) throw failure.failed.err;
        if (failure.refused) throw failure.refused;
        if (failure.broke) {
          report(failure.broke);
          throw failure.broke;
        }
        throw databaseFailed(consumer, err);
      }
      if (!fresh) duplicate(key);
    };
  }

  /** {@link wrap} with `inbox.group`: the deliveries handed over together share a transaction (see ./pg-group). */
  private wrapGroups(pool: PgPoolLike, max: number, handler: InboxHandler<unknown>): (this: unknown, msg: Message) => Promise<void> {
    const consumer = this.o.consumer;
    const groups = new InboxGroups(pool, max, { consumer, timeoutMs: this.o.groupTimeoutMs, broke: (err) => this.host?.fail(err) });
    const keyOf = (msg: Message) => this.keyOf(msg);
    const duplicate = (key: string) => this.host?.duplicate(key);
    return function inboxed(this: unknown, msg: Message): Promise<void> {
      const key = keyOf(msg);
      return new Promise<void>((resolve, reject) => {
        groups.add({
          key,
          // `this` is the consumer, as for a handler without an inbox.
          run: (tx) => Reflect.apply(handler, this, [msg, { tx }]),
          resolve: (fresh) => {
            if (!fresh) duplicate(key);
            resolve();
          },
          reject,
        });
      });
    };
  }

  /**
   * The message's key: `inbox.key`'s answer, or its `messageId`. A message
   * without one cannot be kept from a second handling; one whose key the
   * database cannot keep as it is parks at once.
   */
  private keyOf(msg: Message): string {
    const keyFn = this.o.key;
    if (!keyFn) {
      const id = msg.properties.messageId;
      if (id === undefined || id === '') {
        throw new NonRetryableError('inbox: the message has no message id; give inbox.key to key it on a field of yours');
      }
      const refused = refusedKey(id, this.o.consumer, 'messageId');
      if (refused) throw refused;
      return id;
    }
    // A key that throws, answers a Promise (rejecting later or not) or anything but a string would fail every attempt the same way.
    const r = fenceSync('inbox.key', () => keyFn(msg), { expect: KEY });
    if (!r.ok) throw new NonRetryableError(`inbox: ${r.problem}`, r.failure === 'threw' ? { cause: r.error } : undefined);
    const refused = refusedKey(r.value, this.o.consumer, 'inbox.key');
    if (refused) throw refused;
    return r.value;
  }

  /**
   * The consumer started: it hears of duplicates, of failed cleanups and of
   * its pool's idle connections that failed from now on, and the ids older
   * than the retention are deleted every `cleanupEvery` until {@link stop}.
   */
  start(host: InboxHost): void {
    this.host = host;
    if (this.#timer || this.stopped) return;
    const { source, consumer } = this.o;
    this.#unhear = reportIdleErrors('pool' in source ? source.pool : source.adapter, (err) =>
      host.fail(
        new InboxError(
          `inbox '${consumer}': an idle connection of the inbox's pool failed (${reasonOf(err)}); the pool closed it, and the next transaction takes another`,
          { cause: err },
        ),
      ),
    );
    this.#timer = setInterval(() => void this.cleanup(), this.o.cleanupEveryMs);
    this.#timer.unref();
  }

  /** Deletes the ids older than the retention, in batches; resolves to how many. Never rejects: a failure goes to the consumer's `error`. */
  cleanup(): Promise<number> {
    if (this.#cleaning) return Promise.resolve(0);
    const cleaning = this.clean();
    this.#cleaning = cleaning;
    void cleaning.finally(() => (this.#cleaning = undefined));
    return cleaning;
  }

  private async clean(): Promise<number> {
    let deleted = 0;
    try {
      const age = `${this.o.retentionMs} milliseconds`;
      for (;;) {
        const r = await this.adapter.transaction((tx) => this.adapter.query(tx, CLEANUP, [this.o.consumer, age]));
        // Counted by the rows returned: every adapter returns rows, not every one counts a DELETE.
        deleted += r.rows.length;
        if (r.rows.length < CLEANUP_BATCH || this.stopped) break;
      }
    } catch (err) {
      if (!this.stopped) {
        this.host?.fail(
          new InboxError(`inbox '${this.o.consumer}': deleting handled ids older than the retention failed: ${reasonOf(err)}`, { cause: err }),
        );
      }
    }
    return deleted;
  }

  /** Stops the cleanup; resolves when a cleanup already running has ended (it deletes no batch after this one). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.#unhear?.();
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#cleaning;
  }
}
