/**
 * The options of a consumer's inbox (`consume({ inbox })`): where its
 * transaction comes from, what keys a message, how long handled ids are kept;
 * and the types of an inbox handler.
 */
import type { Delay } from '../options/delay';
import type { Message } from '../message';
import type { PgPoolLike, TransactionAdapter } from '../sql/transaction';

/** What the inbox's options share, whichever way they reach the database. */
export interface InboxCommonOptions {
  /**
   * The name the handled ids are kept under (`rabbit_retry_inbox.consumer`).
   * Two consumers that do different work with the same messages need two
   * names; the processes of one consumer share one. At most 1,000 UTF-8
   * bytes, without a NUL or a lone surrogate: it is in every key's index row.
   * @default the queue name
   */
  consumer?: string;
  /**
   * What keys a message, when its AMQP `messageId` does not (or is not set):
   * a field of the body, say. It must give the same string for every copy of
   * one message (redeliveries, retries, a publisher's second send). Without
   * it, a message with no `messageId` is parked at once as `non-retryable`.
   * A key (or `messageId`) with a NUL or a lone surrogate, or longer than
   * 1,000 UTF-8 bytes, parks its message at once as `inbox-refused`.
   * @default the message's `messageId`
   */
  key?: (msg: Message) => string;
  /**
   * How long a handled id is kept: a copy of a message that comes later than
   * this is handled again. A delay such as `'168h'`, or milliseconds.
   * @default '168h' (7 days)
   */
  retention?: Delay;
  /** How often this consumer deletes the ids older than `retention`, in batches of 1,000. @default '1m' */
  cleanupEvery?: Delay;
  /**
   * How many deliveries handed over together share one transaction. Their
   * handlers then run one after another on one client of the pool: the keys
   * are read with the `BEGIN` and written with the `COMMIT`, so a message
   * costs its handler's statements, and the group two round trips. A handler
   * that throws before writing costs only its own message; one that throws
   * after writing, or goes on after a failed statement, rolls back the
   * group's transaction, and the others run again under savepoints (a
   * handler is then called twice; its work still commits once), as do the
   * next 10 groups. `tx` refuses statements that would end the shared
   * transaction (`COMMIT`, `ROLLBACK`, `BEGIN`, …) and `release()`. A failed `COMMIT` tries each message of the
   * group again. Handlers of a group do not run at once: a handler that
   * waits on something slow holds up the group behind it. Needs a
   * node-postgres pool (`pool`, or `pgAdapter(pool)`). 1 to 50.
   * @default 1 (each message in a transaction of its own, handlers at once)
   */
  group?: number;
  /**
   * How long one handler of a group may run (with `group` above 1): the
   * messages behind it wait on it. Past it, the group's connection is closed
   * under the handler (nothing of its transaction commits), its message is
   * tried again with an `InboxError`, and so are the others of its group.
   * A delay such as `'30s'`, or milliseconds.
   * @default '30s'
   */
  groupTimeout?: Delay;
  /**
   * Whether to create the inbox's tables (the migrations of `tableSchema()`,
   * once per process, under an advisory lock) when the consumer starts. Set
   * it to `false` when the tables are made by your own migrations.
   * @default true
   */
  migrate?: boolean;
}

/** An inbox over a node-postgres pool: the handler's `tx` is a client of it, inside `BEGIN`. */
export interface InboxPoolOptions<P extends PgPoolLike = PgPoolLike> extends InboxCommonOptions {
  /** A node-postgres `Pool` (or anything with `connect()` giving a client with `query` and `release`). */
  pool: P;
  /** Not with `pool`. */
  adapter?: never;
}

/** An inbox over any database library, through a {@link TransactionAdapter}: the handler's `tx` is its transaction. */
export interface InboxAdapterOptions<Tx> extends InboxCommonOptions {
  /** The adapter: `pgAdapter(pool)`, `typeormAdapter(dataSource)`, or one of your own. */
  adapter: TransactionAdapter<Tx>;
  /** Not with `adapter`. */
  pool?: never;
}

/**
 * A consumer's inbox: each message's handler runs in a transaction of your
 * PostgreSQL database that also records the message's id, so that a message
 * whose effects were committed is never handled again (see the inbox guide).
 */
export type InboxOptions = InboxPoolOptions | InboxAdapterOptions<unknown>;

/** The keys of {@link InboxOptions}. @internal */
export const INBOX_OPTION_KEYS = {
  pool: true,
  adapter: true,
  consumer: true,
  key: true,
  retention: true,
  cleanupEvery: true,
  migrate: true,
  group: true,
  groupTimeout: true,
} satisfies Record<keyof (InboxPoolOptions & InboxAdapterOptions<unknown>), true>;

/** What an inbox handler receives beside the message. */
export interface InboxContext<Tx> {
  /** The transaction the message's id is recorded in: write the handler's effects in it. */
  tx: Tx;
}

/**
 * A handler of a consumer with an inbox: resolve to commit and ack, throw to
 * roll back and retry or park. A handler that resolves after a statement of
 * `tx` failed, or after ending the transaction itself, is not acked: its
 * message is retried with an `InboxError`.
 */
export type InboxHandler<Tx> = (msg: Message, ctx: InboxContext<Tx>) => unknown;

/** How long handled ids are kept by default: 7 days. */
export const DEFAULT_INBOX_RETENTION: Delay = '168h';

/** How long one handler of a group may run by default. */
export const DEFAULT_INBOX_GROUP_TIMEOUT: Delay = '30s';

/** How often the ids older than the retention are deleted by default. */
export const DEFAULT_INBOX_CLEANUP_EVERY: Delay = '1m';
