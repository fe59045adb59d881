/**
 * A key the inbox's database cannot keep as it is costs only its own message:
 * a message id with a NUL, a 10 KB key, a key with a lone surrogate (which
 * node-postgres would send as U+FFFD, so that two keys became one) are parked
 * at once as `inbox-refused`, before any transaction, and the queue's other
 * messages are handled. A refusal the checks before the transaction cannot
 * see (a character a LATIN1 database has no room for) parks at once too, and
 * an outage of the database stays a retry. A key the database can keep is
 * kept exactly as it is, quotes and backslashes too, whatever
 * `standard_conforming_strings` says. One database `rr_test_<random>` (and
 * one in LATIN1) per run.
 */
import { randomBytes } from 'node:crypto';

import { Pool } from 'pg';
import { DataSource } from 'typeorm';

import {
  type InboxAdapterOptions,
  type ParkedEvent,
  type RetryEvent,
  type TransactionAdapter,
  parkedQueueName,
  pgAdapter,
  retryQueueName,
  typeormAdapter,
} from '../lib';
import {
  cleanup,
  closeAmqp,
  connectClient,
  drain,
  createTestDatabase,
  dropTestDatabase,
  pgUrl,
  psql,
  queueDepth,
  testQueue,
  track,
  waitFor,
  withChannel,
} from './helpers';
import { createEffects, effectsOf, inboxIdsOf, settled } from './inbox-fixture';

let db = '';
let latin1 = '';
let pool: Pool;
let latin1Pool: Pool;
let latin1Source: DataSource;

beforeAll(async () => {
  db = createTestDatabase('inbox_refused');
  createEffects(db);
  // A database whose encoding has no room for most of Unicode.
  latin1 = `rr_test_${randomBytes(5).toString('hex')}_inbox_latin1`;
  psql(`CREATE DATABASE ${latin1} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
  createEffects(latin1);
  pool = new Pool({ connectionString: pgUrl(db) });
  latin1Pool = new Pool({ connectionString: pgUrl(latin1) });
  latin1Source = new DataSource({ type: 'postgres', url: pgUrl(latin1), entities: [] });
  await latin1Source.initialize();
});

afterEach(cleanup);

afterAll(async () => {
  await latin1Source.destroy();
  await latin1Pool.end();
  await pool.end();
  await closeAmqp();
  dropTestDatabase(db);
  dropTestDatabase(latin1);
});

/** Waits until `queue`'s parked queue holds `n` messages, then takes them all, in the order of their message ids. */
async function parkedOf(queue: string, n: number): Promise<Awaited<ReturnType<typeof drain>>> {
  await waitFor(async () => (await queueDepth(parkedQueueName(queue))) >= n, 10_000, `${n} parked`);
  return (await drain(parkedQueueName(queue))).sort((a, b) => String(a.properties.messageId).localeCompare(String(b.properties.messageId)));
}

/** A transaction a handler writes through: a pg client and a TypeORM EntityManager both run `query(sql, params)`. */
interface Queryable {
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

describe("keys the inbox's database cannot keep as they are", () => {
  it('parks a message id with a NUL at once, as inbox-refused, without calling the handler; the next message is handled', async () => {
    const rr = await connectClient();
    const queue = testQueue(['100ms']);
    const handled: string[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['100ms'] }, inbox: { pool } }, async (msg, { tx }) => {
        handled.push(msg.properties.messageId ?? '');
        await tx.query('INSERT INTO effects (id, queue) VALUES ($1, $2)', [msg.properties.messageId, queue]);
      }),
    );
    const retries: RetryEvent[] = [];
    consumer.on('retry', (e) => retries.push(e));
    // A producer of another library sets any bytes it likes.
    await withChannel(async (ch) => {
      ch.sendToQueue(queue, Buffer.from('{}'), { messageId: 'order\u00007', persistent: true });
      ch.sendToQueue(queue, Buffer.from('{}'), { messageId: `${queue}-ok`, persistent: true });
    });
    const [parked] = await parkedOf(queue, 1);
    await waitFor(() => handled.length === 1, 10_000, 'the good message');
    await settled(queue);
    expect(parked.properties.messageId).toBe('order\u00007');
    expect(parked.headers).toMatchObject({
      'retry-reason': 'inbox-refused',
      'retry-error-name': 'InboxRefusedError',
      'retry-last-error': `inbox '${queue}': the message's message id "order\\u00007" holds a NUL character (U+0000), which PostgreSQL's text cannot store; every attempt would be refused alike, so the message is parked`,
    });
    expect(retries).toEqual([]);
    expect(handled).toEqual([`${queue}-ok`]);
    expect(effectsOf(db, queue)).toEqual([{ id: `${queue}-ok`, note: null }]);
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-ok`]);
    expect(await queueDepth(retryQueueName(queue, '100ms'))).toBe(0);
  });

  it('parks a 10 KB key and keys with lone surrogates from inbox.key at once; two keys never become one; the good one is handled', async () => {
    const rr = await connectClient();
    const queue = testQueue(['100ms']);
    const handled: string[] = [];
    const consumer = track(
      await rr.consume(
        { queue, onFailure: { delays: ['100ms'] }, inbox: { pool, key: (msg) => msg.json<{ key: string }>().key } },
        async (msg, { tx }) => {
          const { key } = msg.json<{ key: string }>();
          handled.push(key);
          await tx.query('INSERT INTO effects (id, queue) VALUES ($1, $2)', [key, queue]);
        },
      ),
    );
    const parkedEvents: ParkedEvent[] = [];
    consumer.on('parked', (e) => parkedEvents.push(e));
    const long = Array.from({ length: 1000 }, (_, i) => `order-${i}`.padEnd(10, '.')).join('');
    // node-postgres sends each lone surrogate as U+FFFD: both would be the key '\uFFFD-a'.
    const keys = [long, '\ud800-a', '\udc00-a', 'order-7'];
    for (const [i, key] of keys.entries()) await rr.publish('', queue, { key }, { messageId: `${queue}-${i}` });
    const parked = await parkedOf(queue, 3);
    await waitFor(() => handled.length === 1, 10_000, 'the good message');
    await settled(queue);
    expect(Buffer.byteLength(long)).toBe(10_000);
    expect(parked.map((m) => m.properties.messageId)).toEqual([`${queue}-0`, `${queue}-1`, `${queue}-2`]);
    expect(parked.map((m) => m.headers['retry-reason'])).toEqual(['inbox-refused', 'inbox-refused', 'inbox-refused']);
    expect(parked.map((m) => m.headers['retry-error-name'])).toEqual(['InboxRefusedError', 'InboxRefusedError', 'InboxRefusedError']);
    const reasons = parked.map((m) => String(m.headers['retry-last-error']));
    expect(reasons[0]).toBe(
      `inbox '${queue}': the message's key (from inbox.key) "order-0...order-1...order-2...order-3..."… is 10000 bytes long in UTF-8, more than the 1000 the inbox takes; every attempt would be refused alike, so the message is parked`,
    );
    expect(reasons[1]).toMatch(/^inbox '[^']+': the message's key \(from inbox\.key\) "\\ud800-a" holds a lone UTF-16 surrogate, which has no UTF-8 form/);
    expect(reasons[2]).toMatch(/^inbox '[^']+': the message's key \(from inbox\.key\) "\\udc00-a" holds a lone UTF-16 surrogate/);
    expect(parkedEvents.map((e) => e.reason)).toEqual(['inbox-refused', 'inbox-refused', 'inbox-refused']);
    expect(handled).toEqual(['order-7']);
    expect(effectsOf(db, queue)).toEqual([{ id: 'order-7', note: null }]);
    expect(inboxIdsOf(db, queue)).toEqual(['order-7']);
    expect(consumer.stats()).toMatchObject({ duplicates: 0 });
    expect(await queueDepth(retryQueueName(queue, '100ms'))).toBe(0);
  });
});

describe('keys the database can keep', () => {
  const pools: [string, () => Pool][] = [
    ['a pool as it comes', () => pool],
    // Backslashes are escapes in a plain '…' literal under this setting.
    [
      'a pool whose sessions turn standard_conforming_strings off',
      () => new Pool({ connectionString: pgUrl(db), options: '-c standard_conforming_strings=off' }),
    ],
  ];

  it.each(pools)('are recorded as they are through %s, each handled once, its second copy a duplicate', async (_, poolOf) => {
    const own = poolOf();
    try {
      const rr = await connectClient();
      const queue = testQueue();
      const keys = ["o'brien", 'back\\slash', "\\'", "E'x'", '$$', `'); DELETE FROM effects; --`, '\u043a\u043b\u044e\u0447-\u2713', ' '];
      const handled: string[] = [];
      const consumer = track(
        await rr.consume({ queue, prefetch: 4, inbox: { pool: own, key: (msg) => msg.json<{ key: string }>().key } }, async (msg, { tx }) => {
          const { key } = msg.json<{ key: string }>();
          handled.push(key);
          // The effects' ids are unique across queues: each test's keys are its own.
          await tx.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, $3)', [`${queue}/${key}`, queue, key]);
        }),
      );
      for (const copy of [1, 2]) {
        for (const key of keys) await rr.publish('', queue, { key }, { messageId: `${queue}-${copy}-${key}` });
        await waitFor(() => consumer.stats().acked === copy * keys.length, 10_000, `copy ${copy} acked`);
      }
      await settled(queue);
      const sorted = [...keys].sort();
      expect([...handled].sort()).toEqual(sorted);
      const stored = await pool.query<{ message_id: string }>('SELECT message_id FROM rabbit_retry_inbox WHERE consumer = $1', [queue]);
      expect(stored.rows.map((r) => r.message_id).sort()).toEqual(sorted);
      const effects = await pool.query<{ note: string }>('SELECT note FROM effects WHERE queue = $1', [queue]);
      expect(effects.rows.map((r) => r.note).sort()).toEqual(sorted);
      expect(consumer.stats()).toMatchObject({ acked: 2 * keys.length, duplicates: keys.length, failed: 0 });
    } finally {
      if (own !== pool) await own.end();
    }
  });
});

describe("the database's own refusal of a key", () => {
  const latin1Sources: [string, () => InboxAdapterOptions<unknown>][] = [
    ['a node-postgres pool', () => ({ pool: latin1Pool }) as unknown as InboxAdapterOptions<unknown>],
    ['typeormAdapter(dataSource)', () => ({ adapter: typeormAdapter(latin1Source) })],
  ];

  it.each(latin1Sources)(
    "parks at once a key a LATIN1 database has no room for, through %s (SQLSTATE 22P05); the queue's other messages are handled",
    async (_, inboxOf) => {
      const rr = await connectClient();
      const queue = testQueue(['100ms']);
      const handled: string[] = [];
      const consumer = track(
        await rr.consume({ queue, onFailure: { delays: ['100ms'] }, inbox: inboxOf() }, async (msg, { tx }) => {
          handled.push(msg.properties.messageId ?? '');
          await (tx as Queryable).query('INSERT INTO effects (id, queue) VALUES ($1, $2)', [msg.properties.messageId, queue]);
        }),
      );
      const retries: RetryEvent[] = [];
      consumer.on('retry', (e) => retries.push(e));
      await rr.publish('', queue, 'x', { messageId: `${queue}-\u2713` });
      await rr.publish('', queue, 'x', { messageId: `${queue}-ok-\u00e9` });
      const [parked] = await parkedOf(queue, 1);
      await waitFor(() => handled.length === 1, 10_000, 'the good message');
      await settled(queue);
      expect(parked.properties.messageId).toBe(`${queue}-\u2713`);
      expect(parked.headers).toMatchObject({ 'retry-reason': 'inbox-refused', 'retry-error-name': 'InboxRefusedError' });
      expect(String(parked.headers['retry-last-error'])).toMatch(
        /^inbox '[^']+': the database refused the message's key \(SQLSTATE 22P05, a character the database's encoding has no equivalent for: .*has no equivalent in encoding "LATIN1"\); every attempt would be refused alike, so the message is parked$/,
      );
      expect(retries).toEqual([]);
      expect(handled).toEqual([`${queue}-ok-\u00e9`]);
      // Read through node-postgres, which converts from LATIN1 (psql here would not).
      const read = async (sql: string) => (await latin1Pool.query<{ id: string }>(sql, [queue])).rows.map((r) => r.id);
      expect(await read('SELECT message_id AS id FROM rabbit_retry_inbox WHERE consumer = $1')).toEqual([`${queue}-ok-\u00e9`]);
      expect(await read('SELECT id FROM effects WHERE queue = $1')).toEqual([`${queue}-ok-\u00e9`]);
    },
  );

  it.each([
    ['57P01', 'terminating connection due to administrator command'],
    ['08006', 'connection failure'],
    ['40001', 'could not serialize access due to concurrent update'],
    ['40P01', 'deadlock detected'],
  ])('keeps an outage of the record statement (SQLSTATE %s) a retry, not a refusal', async (code, text) => {
    const rr = await connectClient();
    const queue = testQueue(['100ms']);
    const inner = pgAdapter(pool);
    let fail = true;
    // The record statement fails once as the database would in an outage.
    const flaky: TransactionAdapter<unknown> = {
      transaction: (work) => inner.transaction(work),
      query: (tx, sql, params) => {
        if (fail && sql.startsWith('INSERT INTO rabbit_retry_inbox ')) {
          fail = false;
          return Promise.reject(Object.assign(new Error(text), { code }));
        }
        return inner.query(tx as never, sql, params);
      },
    };
    const handled: number[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['100ms'] }, inbox: { adapter: flaky } }, (msg) => {
        handled.push(msg.attempt);
      }),
    );
    const retries: RetryEvent[] = [];
    consumer.on('retry', (e) => retries.push(e));
    await rr.publish('', queue, 'o', { messageId: `${queue}-o` });
    await waitFor(() => handled.length === 1, 10_000, 'the retried message handled');
    await settled(queue);
    expect(retries).toHaveLength(1);
    expect(retries[0].error).toBe(`inbox '${queue}': the inbox's database failed (${text}); nothing was committed, and the message will be tried again`);
    expect(handled).toEqual([1]);
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-o`]);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });
});
