/**
 * The user's own PostgreSQL, as the inbox and the outbox's writer reach it:
 * the adapters given (node-postgres, TypeORM), statements run in a
 * transaction whatever library opened it, and the migrations of
 * `tableSchema()` run through an adapter as the retry table's store runs them.
 */
import { reasonOf } from '../support/error-text';
import { binding } from '../native';
import type { PgClientLike, PgClientOf, PgPoolLike, PgQueryResultLike, SqlResult, TransactionAdapter } from './transaction';

export type { PgClientLike, PgClientOf, PgPoolLike, PgPoolWithCallback, PgQueryResultLike, SqlResult, TransactionAdapter } from './transaction';

/**
 * A {@link TransactionAdapter} over a node-postgres `Pool`: each transaction
 * takes a client, runs `BEGIN`, the work and `COMMIT` (or `ROLLBACK`), and
 * gives the client back; a client whose `ROLLBACK` failed is closed, not reused.
 * A `COMMIT` that PostgreSQL answers with `ROLLBACK` (the transaction was
 * aborted by a failed statement) rejects: nothing was committed.
 *
 * It also listens for the pool's `error` event, once per pool: node-postgres
 * emits it when an idle client's connection fails (a terminated backend, a
 * restarted server), and a pool that nobody listens to would end the process
 * with it. The pool has closed that client already; a consumer whose inbox
 * uses the pool reports the error, when nothing else listens.
 *
 * ```ts
 * import { Pool } from 'pg';
 * const adapter = pgAdapter(new Pool({ connectionString: process.env.DATABASE_URL }));
 * ```
 */
export function pgAdapter<P extends PgPoolLike>(pool: P): TransactionAdapter<PgClientOf<P>> {
  hearIdleErrors(pool);
  const adapter: TransactionAdapter<PgClientOf<P>> = {
    async transaction<T>(work: (tx: PgClientOf<P>) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      let broken: Error | undefined;
      // A backend that ends while the client is out (terminated, a network cut) is an `error` event
      // on the client, not on the pool: unheard, it would end the process. The client is closed instead.
      const lost = (err: Error) => {
        broken = err;
      };
      client.on?.('error', lost);
      try {
        await client.query('BEGIN');
        const result = await work(client as PgClientOf<P>);
        const committed = await client.query('COMMIT');
        // PostgreSQL ends an aborted transaction's COMMIT as a ROLLBACK, without an error.
        if (committed?.command === 'ROLLBACK') {
          throw new Error('COMMIT was answered with ROLLBACK: a statement of the transaction had failed, and nothing was committed');
        }
        return result;
      } catch (err) {
        // After a failed COMMIT the server has rolled back already: the ROLLBACK only warns.
        await client.query('ROLLBACK').catch((rollback: unknown) => {
          broken = rollback instanceof Error ? rollback : new Error('ROLLBACK failed');
        });
        throw err;
      } finally {
        client.removeListener?.('error', lost);
        client.release(broken);
      }
    },
    query: (tx, sql, params) => pgQuery(tx, sql, params),
  };
  adapterPools.set(adapter, pool);
  return adapter;
}

/** Who hears each pool's idle errors: the consumers whose inbox uses it, the first one told. */
const idleReporters = new WeakMap<object, Set<(err: Error) => void>>();
/** The pool of each adapter `pgAdapter` made. */
const adapterPools = new WeakMap<object, object>();

/** A pool as an event emitter, when it is one (node-postgres's is). */
interface PoolEmitter {
  on(event: 'error', listener: (err: unknown) => void): unknown;
  listenerCount?(event: 'error'): number;
}

/** Listens for `pool`'s `error` event, once per pool, so that an idle client's failure never ends the process. */
function hearIdleErrors(pool: object): void {
  if (idleReporters.has(pool)) return;
  const emitter = pool as PoolEmitter;
  const reporters = new Set<(err: Error) => void>();
  const listener = (err: unknown) => {
    try {
      // An application that listens too says what it wants said.
      if (typeof emitter.listenerCount === 'function' && emitter.listenerCount('error') > 1) return;
    } catch {
      // A pool whose listenerCount throws: reported below, as if nobody else listened.
    }
    const [first] = reporters;
    first?.(err instanceof Error ? err : new Error(reasonOf(err)));
  };
  try {
    if (typeof emitter.on !== 'function') return;
    emitter.on('error', listener);
    idleReporters.set(pool, reporters);
  } catch {
    // A pool-like object of the user's whose `on` throws: it has no idle errors of node-postgres's to hear.
  }
}

/** The pool of an adapter `pgAdapter` made; undefined for any other adapter. @internal */
export function poolOfAdapter(adapter: object): PgPoolLike | undefined {
  return adapterPools.get(adapter) as PgPoolLike | undefined;
}

/**
 * Tells `report` of the idle errors of `source`'s pool (a node-postgres pool,
 * or an adapter `pgAdapter` made) until the function it returns is called;
 * nothing for any other source. @internal
 */
export function reportIdleErrors(source: object, report: (err: Error) => void): () => void {
  const reporters = idleReporters.get(adapterPools.get(source) ?? source);
  if (!reporters) return () => undefined;
  reporters.add(report);
  return () => reporters.delete(report);
}

async function pgQuery(client: PgClientLike, sql: string, params: readonly unknown[]): Promise<SqlResult> {
  const raw = (await client.query(sql, [...params])) as PgQueryResultLike | PgQueryResultLike[];
  // Several statements (a migration) give one result each: the last one is the statement's.
  const r = Array.isArray(raw) ? raw[raw.length - 1] : raw;
  return { rows: (r?.rows ?? []) as Record<string, unknown>[], rowCount: r?.rowCount ?? r?.rows.length ?? 0 };
}

/** A TypeORM `EntityManager`, as rabbit-retry uses it. */
export interface TypeormManagerLike {
  /** Runs `sql` with `$1`-style `parameters` (on PostgreSQL). */
  query(sql: string, parameters?: unknown[]): Promise<unknown>;
}

/** A TypeORM `DataSource`, as rabbit-retry uses it. */
export interface TypeormDataSourceLike<M extends TypeormManagerLike> {
  /** Its manager: what a transaction's `EntityManager` is. */
  readonly manager: M;
  /** Runs `work` in a transaction with an `EntityManager` of its own. */
  transaction<T>(work: (manager: M) => Promise<T>): Promise<T>;
}

/**
 * A {@link TransactionAdapter} over a TypeORM `DataSource` on PostgreSQL:
 * `dataSource.transaction(manager => …)`, and `tx` is the transaction's
 * `EntityManager` (use `tx.getRepository(Order)`, `tx.save(...)`, `tx.query(...)`).
 */
export function typeormAdapter<M extends TypeormManagerLike>(dataSource: TypeormDataSourceLike<M>): TransactionAdapter<M> {
  return {
    transaction: (work) => dataSource.transaction(work),
    query: (tx, sql, params) => typeormQuery(tx, sql, params),
  };
}

/** A TypeORM query runner, which gives rows and affected counts apart when asked (`useStructuredResult`). */
interface StructuredRunner {
  query(sql: string, parameters: unknown[], useStructuredResult: true): Promise<{ records?: unknown[]; affected?: number | null }>;
}

function runnerOf(manager: object): StructuredRunner | undefined {
  const runner = (manager as { queryRunner?: unknown }).queryRunner;
  return typeof runner === 'object' && runner !== null && typeof (runner as { query?: unknown }).query === 'function'
    ? (runner as StructuredRunner)
    : undefined;
}

async function typeormQuery(manager: TypeormManagerLike, sql: string, params: readonly unknown[]): Promise<SqlResult> {
  const runner = runnerOf(manager);
  if (runner) {
    const r = await runner.query(sql, [...params], true);
    const rows = (r.records ?? []) as Record<string, unknown>[];
    return { rows, rowCount: r.affected ?? rows.length };
  }
  return resultOf(await manager.query(sql, [...params]));
}

/** What a `query(sql, params)` resolved to, read as rows: node-postgres's result, or TypeORM's rows. */
function resultOf(raw: unknown): SqlResult {
  if (Array.isArray(raw)) return { rows: raw as Record<string, unknown>[], rowCount: raw.length };
  if (typeof raw === 'object' && raw !== null && Array.isArray((raw as { rows?: unknown }).rows)) {
    const r = raw as { rows: Record<string, unknown>[]; rowCount?: number | null };
    return { rows: r.rows, rowCount: r.rowCount ?? r.rows.length };
  }
  return { rows: [], rowCount: 0 };
}

/** Anything with `query(sql, params)`: a node-postgres client, a TypeORM `EntityManager`. */
export interface QueryableLike {
  /** Runs `sql` with `$1`-style parameters. */
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

/**
 * A transaction a statement can be run in: a node-postgres client inside
 * `BEGIN` (the inbox's `tx` with `inbox: { pool }`), a TypeORM
 * `EntityManager` of a transaction, or any adapter's transaction as
 * `{ adapter, tx }`.
 */
export type TransactionLike = QueryableLike | AdapterTransaction;

/** A transaction of any {@link TransactionAdapter}, with its adapter. */
export interface AdapterTransaction {
  /** The adapter that opened it. */
  adapter: TransactionAdapter<unknown>;
  /** The transaction, as the adapter's `transaction` gave it. */
  tx: unknown;
}

/** Whether `v` is an `{ adapter, tx }` pair. */
function isAdapterPair(v: TransactionLike): v is AdapterTransaction {
  const adapter = (v as { adapter?: unknown }).adapter;
  return typeof adapter === 'object' && adapter !== null && typeof (adapter as { query?: unknown }).query === 'function' && 'tx' in v;
}

/** Whether `v` is a {@link TransactionLike}. @internal */
export function isTransactionLike(v: unknown): v is TransactionLike {
  if (typeof v !== 'object' || v === null) return false;
  return typeof (v as { query?: unknown }).query === 'function' || isAdapterPair(v as TransactionLike);
}

/** Runs one statement in `target`, whichever library's transaction it is. @internal */
export function queryIn(target: TransactionLike, sql: string, params: readonly unknown[]): Promise<SqlResult> {
  if (isAdapterPair(target)) return target.adapter.query(target.tx, sql, params);
  if (runnerOf(target)) return typeormQuery(target, sql, params);
  return target.query(sql, [...params]).then(resultOf);
}

/** The adapters whose migrations ran (or are running) in this process. */
const migrated = new WeakMap<object, Promise<void>>();

/**
 * Runs the migrations of `tableSchema()` that the database has not run yet,
 * through `adapter`, once per adapter per process: in one transaction under
 * the migrations' advisory lock, each recorded in `rabbit_retry_migrations`,
 * as the retry table's store runs them (a process of either kind finds the
 * other's done). A failed run is tried again on the next call.
 *
 * A consumer with an inbox runs it when it starts (unless `inbox.migrate` is
 * `false`); call it yourself, with `pgAdapter(pool)`, to make the tables at
 * deploy time, or before using the outbox's writer without an inbox.
 */
export function migrateTables<Tx>(adapter: TransactionAdapter<Tx>): Promise<void> {
  let done = migrated.get(adapter);
  if (!done) {
    done = runMigrations(adapter);
    migrated.set(adapter, done);
    done.catch(() => migrated.delete(adapter));
  }
  return done;
}

async function runMigrations<Tx>(adapter: TransactionAdapter<Tx>): Promise<void> {
  const { lock, migrations } = binding.tableSchema();
  await adapter.transaction(async (tx) => {
    // Two processes starting at once: one migrates, the other waits and finds it done.
    await adapter.query(tx, 'SELECT pg_advisory_xact_lock($1::bigint)', [lock]);
    await adapter.query(
      tx,
      'CREATE TABLE IF NOT EXISTS rabbit_retry_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
      [],
    );
    const applied = new Set((await adapter.query(tx, 'SELECT version FROM rabbit_retry_migrations', [])).rows.map((r) => Number(r.version)));
    const record = (version: number) => adapter.query(tx, 'INSERT INTO rabbit_retry_migrations (version) VALUES ($1)', [version]);
    for (const { version, sql } of migrations) {
      if (applied.has(version)) continue;
      if (version === 1) {
        const exists = await adapter.query(tx, "SELECT to_regclass('message_retries') IS NOT NULL AS exists", []);
        // A table made by someone else: the retry table's shape check says whether it fits.
        if (exists.rows[0]?.exists === true) {
          await record(version);
          continue;
        }
      }
      await adapter.query(tx, sql, []);
      await record(version);
    }
  });
}
