/**
 * The inbox acks a message only once its transaction committed the message's
 * id with the handler's work: a handler that swallows a failed statement (the
 * transaction is aborted, and PostgreSQL answers its COMMIT with ROLLBACK and
 * no error) or ends the transaction itself takes the failure path, through a
 * node-postgres pool, pgAdapter, TypeORM and an adapter of two methods written
 * as the guide shows; a savepoint used as meant still commits. And the guide's
 * "at least once unless parked": a message whose handler or commit keeps
 * failing is parked, never acked without its effect. One database
 * `rr_test_<random>` per run.
 */
import { Pool, type PoolClient } from 'pg';
import { DataSource } from 'typeorm';

import { type InboxAdapterOptions, type RetryEvent, type TransactionAdapter, parkedQueueName, pgAdapter, retryQueueName, typeormAdapter } from '../lib';
import {
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  drain,
  dropTestDatabase,
  pgUrl,
  psql,
  queueDepth,
  recordingLogger,
  testQueue,
  track,
  waitFor,
  waitForOne,
} from './helpers';
import { createEffects, effectsOf, inboxIdsOf, settled } from './inbox-fixture';

let db = '';
let pool: Pool;
let dataSource: DataSource;

beforeAll(async () => {
  db = createTestDatabase('inbox_outcome');
  createEffects(db);
  psql('CREATE TABLE parents (id text PRIMARY KEY)', db);
  psql('CREATE TABLE children (id text PRIMARY KEY, parent text NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)', db);
  pool = new Pool({ connectionString: pgUrl(db), max: 10 });
  dataSource = new DataSource({ type: 'postgres', url: pgUrl(db), entities: [] });
  await dataSource.initialize();
});

afterEach(cleanup);

afterAll(async () => {
  await dataSource.destroy();
  await pool.end();
  await closeAmqp();
  dropTestDatabase(db);
});

/** A transaction a handler writes through: a pg client and a TypeORM EntityManager both run `query(sql, params)`. */
interface Queryable {
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

/** An adapter as the guide's "other libraries" has users write it: BEGIN, the work, COMMIT, with no look at what COMMIT answered. */
function ownAdapter(): TransactionAdapter<PoolClient> {
  return {
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    async query(tx, sql, params) {
      const r = await tx.query(sql, [...params]);
      return { rows: r.rows, rowCount: r.rowCount ?? r.rows.length };
    },
  };
}

/** Each way to the database, as the inbox's option; its handler's `tx` is used through `query` alone. */
const sources: [string, () => InboxAdapterOptions<unknown>][] = [
  // One handler type for all: the pool's `tx` is a client, used as the others are.
  ['a node-postgres pool', () => ({ pool }) as unknown as InboxAdapterOptions<unknown>],
  ['pgAdapter(pool)', () => ({ adapter: pgAdapter(pool) })],
  ['typeormAdapter(dataSource)', () => ({ adapter: typeormAdapter(dataSource) })],
  ['an adapter of two methods of its own', () => ({ adapter: ownAdapter() })],
];

/** Writes the handler's effect for `id` in `tx`. */
function writeEffect(tx: Queryable, queue: string, id: string, note: string): Promise<unknown> {
  return tx.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, $3)', [id, queue, note]);
}

/** What a handler does to its transaction after writing its effect, and what the failure then says. */
const breaks: [string, (tx: Queryable, queue: string, id: string) => Promise<void>, RegExp][] = [
  [
    'swallows a failed statement and resolves',
    async (tx, queue, id) => {
      // The same row again: a unique violation, caught, and the handler goes on as if nothing happened.
      await writeEffect(tx, queue, id, 'again').catch(() => undefined);
    },
    /^inbox '[^']+': the handler's transaction was rolled back: a statement in it failed and the handler went on \(current transaction is aborted.*\); nothing was committed, and the message will be tried again$/,
  ],
  [
    'runs ROLLBACK itself and resolves',
    async (tx) => {
      await tx.query('ROLLBACK');
    },
    /^inbox '[^']+': the handler ended the transaction itself \(a COMMIT or ROLLBACK through tx\), so its work and the message's id were not committed together; the message will be tried again$/,
  ],
  [
    'runs ROLLBACK and BEGIN itself, writes its effect again and resolves',
    async (tx, queue, id) => {
      await tx.query('ROLLBACK');
      await tx.query('BEGIN');
      // Committed, this would be an effect without its message's id.
      await writeEffect(tx, queue, id, 'after a BEGIN of its own');
    },
    /^inbox '[^']+': the handler ended the transaction itself \(a COMMIT or ROLLBACK, then another BEGIN, through tx\), so its work and the message's id were not committed together; the message will be tried again$/,
  ],
];

describe.each(sources)('inbox through %s', (_, inboxOf) => {
  it.each(breaks)(
    'a handler that %s is not acked: retried, then parked as exhausted, with no effect and no id committed',
    async (_what, breakIt, said) => {
      const logger = recordingLogger();
      const rr = await connectClient({ logger });
      const queue = testQueue(['100ms']);
      const calls: string[] = [];
      const retries: RetryEvent[] = [];
      track(
        await rr.consume({ queue, onFailure: { delays: ['100ms'] }, inbox: inboxOf() }, async (msg, { tx }) => {
          const id = msg.properties.messageId ?? '';
          calls.push(id);
          await writeEffect(tx as Queryable, queue, id, `attempt ${msg.attempt}`);
          if (msg.text() === 'bad') await breakIt(tx as Queryable, queue, id);
        }),
      ).on('retry', (e) => retries.push(e));
      await rr.publish('', queue, 'bad', { messageId: `${queue}-bad` });
      await rr.publish('', queue, 'good', { messageId: `${queue}-good` });
      const parked = await waitForOne(parkedQueueName(queue));
      await settled(queue);
      await settled(retryQueueName(queue, '100ms'));
      expect(parked.properties.messageId).toBe(`${queue}-bad`);
      expect(parked.headers['retry-reason']).toBe('exhausted');
      expect(parked.headers['retry-error-name']).toBe('InboxError');
      expect(String(parked.headers['retry-last-error'])).toMatch(said);
      expect(retries).toHaveLength(1);
      expect(retries[0]).toMatchObject({ messageId: `${queue}-bad`, target: retryQueueName(queue, '100ms'), error: expect.stringMatching(said) });
      // Nothing lost: the good message's effect and id committed once, the bad one parked with neither.
      expect(calls.filter((id) => id === `${queue}-bad`)).toHaveLength(2);
      expect(effectsOf(db, queue)).toEqual([{ id: `${queue}-good`, note: 'attempt 0' }]);
      expect(inboxIdsOf(db, queue)).toEqual([`${queue}-good`]);
      expect(await queueDepth(parkedQueueName(queue))).toBe(0);
      // Each broken transaction is logged: a handler's bug its author must hear of.
      expect(logger.errors.filter((l) => said.test(l.replace(/^rabbit-retry: consumer of '[^']+': /, '')))).toHaveLength(2);
    },
  );

  it('a handler that recovers from a failed statement with a savepoint commits and is acked', async () => {
    const rr = await connectClient();
    const queue = testQueue(['100ms']);
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['100ms'] }, inbox: inboxOf() }, async (msg, { tx }) => {
        calls++;
        const q = tx as Queryable;
        const id = msg.properties.messageId ?? '';
        await writeEffect(q, queue, id, 'first');
        await q.query('SAVEPOINT again');
        const dup = await writeEffect(q, queue, id, 'again').then(
          () => false,
          () => true,
        );
        await q.query('ROLLBACK TO SAVEPOINT again');
        await q.query('UPDATE effects SET note = $2 WHERE id = $1', [id, dup ? 'recovered' : 'no failure']);
      }),
    );
    await rr.publish('', queue, 's', { messageId: `${queue}-s` });
    await waitFor(() => effectsOf(db, queue).length === 1, 10_000, 'the effect');
    await settled(queue);
    expect(effectsOf(db, queue)).toEqual([{ id: `${queue}-s`, note: 'recovered' }]);
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-s`]);
    expect(calls).toBe(1);
    expect(consumer.stats()).toMatchObject({ acked: 1, failed: 0 });
    expect(await queueDepth(retryQueueName(queue, '100ms'))).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });
});

describe('at least once unless parked', () => {
  it('a message whose handler or commit keeps failing is parked, never acked without its effect; the others commit their effect once', async () => {
    const rr = await connectClient({ logger: recordingLogger() });
    const queue = testQueue(['100ms']);
    const kinds = ['throws', 'commit-fails', 'swallows', 'commit-fails-once', 'ok'];
    const calls = new Map<string, number>();
    track(
      await rr.consume({ queue, prefetch: 5, onFailure: { delays: ['100ms'] }, inbox: { pool } }, async (msg, { tx }) => {
        const kind = msg.text();
        calls.set(kind, (calls.get(kind) ?? 0) + 1);
        await writeEffect(tx, queue, `${queue}-${kind}`, `attempt ${msg.attempt}`);
        if (kind === 'throws') throw new Error('carrier down');
        if (kind === 'swallows') await tx.query('SELECT 1 / 0').catch(() => undefined);
        if (kind === 'commit-fails' || (kind === 'commit-fails-once' && msg.attempt === 0)) {
          // A child without its parent: the deferred foreign key fails the COMMIT.
          await tx.query('INSERT INTO children (id, parent) VALUES ($1, $2)', [`${queue}-${kind}-child`, `${queue}-missing`]);
        }
      }),
    );
    for (const kind of kinds) await rr.publish('', queue, kind, { messageId: `${queue}-${kind}` });
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 3, 15_000, 'three parked');
    await settled(queue);
    await settled(retryQueueName(queue, '100ms'));
    const parked = await drain(parkedQueueName(queue));
    const parkedIds = parked.map((m) => m.properties.messageId as string).sort();
    const committed = effectsOf(db, queue).map((e) => e.id);
    expect(parkedIds).toEqual([`${queue}-commit-fails`, `${queue}-swallows`, `${queue}-throws`]);
    expect(parked.map((m) => m.headers['retry-reason'])).toEqual(['exhausted', 'exhausted', 'exhausted']);
    expect(effectsOf(db, queue)).toEqual([
      { id: `${queue}-commit-fails-once`, note: 'attempt 1' },
      { id: `${queue}-ok`, note: 'attempt 0' },
    ]);
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-commit-fails-once`, `${queue}-ok`]);
    // Every message is accounted for, once: its effect committed, or parked, never both, never neither.
    expect([...committed, ...parkedIds].sort()).toEqual(kinds.map((k) => `${queue}-${k}`).sort());
    expect(Object.fromEntries(calls)).toEqual({ throws: 2, 'commit-fails': 2, swallows: 2, 'commit-fails-once': 2, ok: 1 });
    expect(await queueDepth(queue)).toBe(0);
  });
});
