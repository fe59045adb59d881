/**
 * What rabbit-retry needs of the user's own database: a transaction adapter,
 * which any ORM or driver fits in a few lines, and the shapes of a
 * node-postgres pool and client, described here so that `pg` stays optional.
 */

/** The rows a statement returned, and how many rows it touched. */
export interface SqlResult {
  /** The rows returned (by a `SELECT`, or a statement with `RETURNING`); empty otherwise. */
  rows: Record<string, unknown>[];
  /** The rows inserted, updated, deleted or returned. */
  rowCount: number;
}

/**
 * A PostgreSQL transaction, as rabbit-retry runs its statements in it: the
 * inbox and the outbox's writer go through one. `pgAdapter(pool)` and
 * `typeormAdapter(dataSource)` are given; for another library, write the two
 * methods (see the inbox and outbox guide).
 *
 * @typeParam Tx - the library's own transaction handle (a pg client, a TypeORM
 * `EntityManager`, a Knex transaction, a Prisma transaction client): what the
 * handler receives as `tx`.
 */
export interface TransactionAdapter<Tx> {
  /**
   * Runs `work` in a transaction: begins it, commits when `work` resolves and
   * resolves to its result; rolls back when `work` rejects and rejects with
   * its error. Rejects when the commit fails.
   */
  transaction<T>(work: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Runs one statement in `tx`, with `$1`-style parameters. With no
   * parameters, `sql` may hold several statements (the migrations do).
   */
  query(tx: Tx, sql: string, params: readonly unknown[]): Promise<SqlResult>;
}

/** What a node-postgres `query` resolves to, as rabbit-retry reads it. */
export interface PgQueryResultLike {
  /** The rows returned. */
  rows: unknown[];
  /** The rows touched; `null` for a statement that touches none. */
  rowCount: number | null;
  /** The statement's command tag: `COMMIT`, or `ROLLBACK` for the `COMMIT` of an aborted transaction. */
  command?: string;
}

/** A node-postgres client taken from a pool (a `PoolClient`), as rabbit-retry uses it. */
export interface PgClientLike {
  /** Runs `text` with `$1`-style `values`. */
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  /** Gives the client back to its pool; with an error (or `true`), the pool closes it instead. */
  release(err?: Error | boolean): void;
  /** Listens for the client's `error` event (node-postgres's clients are event emitters). */
  on?(event: 'error', listener: (err: Error) => void): unknown;
  /** Stops listening. */
  removeListener?(event: 'error', listener: (err: Error) => void): unknown;
}

/** A node-postgres `Pool`, as rabbit-retry uses it. */
export interface PgPoolLike<C extends PgClientLike = PgClientLike> {
  /** Takes a client from the pool. */
  connect(): Promise<C>;
}

/** A pool whose `connect` also takes a callback, as node-postgres's `Pool` does. */
export interface PgPoolWithCallback<C> {
  /** Takes a client from the pool. */
  connect(): Promise<C>;
  /** Takes a client from the pool and gives it to `callback`. */
  connect(callback: never): void;
}

/**
 * The client a pool gives (`PoolClient` for a node-postgres `Pool`): the
 * handler's `tx` with `inbox: { pool }`. Read from the promise of `connect()`,
 * beside node-postgres's callback overload when there is one.
 */
export type PgClientOf<P> =
  P extends PgPoolWithCallback<infer C> ? (C extends PgClientLike ? C : P extends PgPoolLike<infer D> ? D : PgClientLike) : PgClientLike;
