/**
 * The inbox through a TypeORM DataSource and through NestJS's `@Consume`, and
 * the outbox's writer in a node-postgres, a TypeORM and an adapter's
 * transaction: the row is there once the transaction commits, and not after
 * a rollback. One database `rr_test_<random>` per run.
 */
import 'reflect-metadata';

import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Pool, type PoolClient } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';

import { type DuplicateEvent, type Message, RabbitRetry, pgAdapter, typeormAdapter } from '../lib';
import { Consume, RabbitMessage, RabbitPayload, RabbitRetryConsumers, RabbitRetryModule, RabbitTx } from '../lib/nestjs';
import { writeOutbox } from '../lib/outbox/write';
import { createEffects, effectsOf, settled } from './inbox-fixture';
import {
  AMQP_URL,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  dropTestDatabase,
  pgUrl,
  psql,
  psqlRows,
  testQueue,
  track,
  waitFor,
} from './helpers';

let db = '';
let pool: Pool;
let dataSource: DataSource;
const apps: TestingModule[] = [];

beforeAll(async () => {
  db = createTestDatabase('inbox_adapters');
  createEffects(db);
  pool = new Pool({ connectionString: pgUrl(db) });
  dataSource = new DataSource({ type: 'postgres', url: pgUrl(db), entities: [] });
  await dataSource.initialize();
});

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});

afterAll(async () => {
  await dataSource.destroy();
  await pool.end();
  await closeAmqp();
  dropTestDatabase(db);
});

describe('inbox through typeormAdapter', () => {
  it('commits the effect with the id in the EntityManager transaction, and skips a duplicate', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, inbox: { adapter: typeormAdapter(dataSource) } }, async (msg, { tx }) => {
        const manager: EntityManager = tx;
        calls++;
        await manager.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, $3)', [msg.properties.messageId, queue, 'typeorm']);
        if (msg.text() === 'fail') throw new Error('rolled back');
      }),
    );
    const seen: DuplicateEvent[] = [];
    consumer.on('duplicate', (e) => seen.push(e));
    await rr.publish('', queue, 'ok', { messageId: `${queue}-t1` });
    await rr.publish('', queue, 'ok', { messageId: `${queue}-t1` });
    await waitFor(() => seen.length === 1, 10_000, 'the duplicate');
    await settled(queue);
    expect(calls).toBe(1);
    expect(effectsOf(db, queue)).toEqual([{ id: `${queue}-t1`, note: 'typeorm' }]);
    expect(psql(`SELECT n FROM rabbit_retry_inbox_duplicates WHERE consumer = '${queue}'`, db)).toBe('1');
  });
});

describe('inbox with NestJS @Consume', () => {
  it('gives the method { tx } third, or where @RabbitTx() marks it', async () => {
    const plainQueue = testQueue();
    const markedQueue = testQueue();

    @Injectable()
    class Orders {
      calls = 0;

      @Consume({ queue: plainQueue, inbox: { pool } })
      async plain(body: { n: number }, msg: Message, { tx }: { tx: PoolClient }): Promise<void> {
        this.calls++;
        await tx.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, $3)', [msg.properties.messageId, plainQueue, `n=${body.n}`]);
      }

      @Consume({ queue: markedQueue, inbox: { adapter: pgAdapter(pool) } })
      async marked(@RabbitTx() tx: PoolClient, @RabbitPayload('n') n: number, @RabbitMessage() msg: Message): Promise<void> {
        this.calls++;
        await tx.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, $3)', [msg.properties.messageId, markedQueue, `n=${n}`]);
      }
    }

    const app = await Test.createTestingModule({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })],
      providers: [Orders],
    }).compile();
    apps.push(app);
    await app.init();
    const publisher = await connectClient();
    for (const queue of [plainQueue, markedQueue]) {
      await publisher.publish('', queue, { n: 5 }, { messageId: `${queue}-n` });
      await publisher.publish('', queue, { n: 5 }, { messageId: `${queue}-n` });
    }
    const consumers = app.get(RabbitRetryConsumers);
    await waitFor(() => [plainQueue, markedQueue].every((q) => consumers.get(q)?.stats().duplicates === 1), 10_000, 'a duplicate on each queue');
    await settled(plainQueue);
    await settled(markedQueue);
    expect(app.get(Orders).calls).toBe(2);
    expect(effectsOf(db, plainQueue)).toEqual([{ id: `${plainQueue}-n`, note: 'n=5' }]);
    expect(effectsOf(db, markedQueue)).toEqual([{ id: `${markedQueue}-n`, note: 'n=5' }]);
  });

  it('fails the bootstrap for @RabbitTx() on a method without an inbox', async () => {
    const queue = testQueue();

    @Injectable()
    class NoInbox {
      @Consume({ queue })
      handle(@RabbitTx() _tx: unknown): void {
        // Never called.
      }
    }

    const app = await Test.createTestingModule({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })],
      providers: [NoInbox],
    }).compile();
    apps.push(app);
    await expect(app.init()).rejects.toThrow('NoInbox.handle: @RabbitTx() needs an inbox');
  });
});

describe('the outbox writer', () => {
  /** The outbox rows routed with `key`, as the relay reads them. */
  function outboxRows(key: string): { exchange: string; body: string; properties: Record<string, unknown>; ordering_key: string | null }[] {
    return psqlRows(
      `SELECT exchange, convert_from(body, 'UTF8') AS body, properties, ordering_key FROM rabbit_retry_outbox WHERE routing_key = '${key}' ORDER BY id`,
      db,
    );
  }

  beforeAll(async () => {
    // The tables, made as the inbox makes them.
    const rr = await RabbitRetry.connect({ url: AMQP_URL });
    const queue = testQueue();
    await (await rr.consume({ queue, inbox: { pool } }, () => undefined)).close();
    await rr.close();
  });

  it('writes the row in a pg transaction: there after COMMIT, gone after ROLLBACK', async () => {
    const key = `pg-${Date.now()}`;
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await writeOutbox(
        client,
        'orders',
        key,
        { orderId: 1 },
        { messageId: 'm-1', headers: { tenant: 'a' }, timestamp: 1700000000, orderingKey: 'order-1' },
      );
      await client.query('COMMIT');
      await client.query('BEGIN');
      await writeOutbox(client, 'orders', key, 'rolled back');
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(outboxRows(key)).toEqual([
      {
        exchange: 'orders',
        body: '{"orderId":1}',
        properties: { messageId: 'm-1', contentType: 'application/json', deliveryMode: 2, timestamp: 1700000000, headers: { tenant: 'a' } },
        ordering_key: 'order-1',
      },
    ]);
  });

  it('writes the row in a TypeORM transaction and through { adapter, tx }', async () => {
    const key = `orm-${Date.now()}`;
    await dataSource.transaction((manager) => writeOutbox(manager, '', key, 'typeorm', { persistent: false, expiration: 5000 }));
    await expect(
      dataSource.transaction(async (manager) => {
        await writeOutbox(manager, '', key, 'lost');
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    const adapter = pgAdapter(pool);
    await adapter.transaction((tx) => writeOutbox({ adapter, tx }, '', key, Buffer.from([0x61, 0x62])));
    expect(outboxRows(key)).toEqual([
      { exchange: '', body: 'typeorm', properties: { contentType: 'text/plain', deliveryMode: 1, expiration: '5000' }, ordering_key: null },
      { exchange: '', body: 'ab', properties: { deliveryMode: 2 }, ordering_key: null },
    ]);
  });

  it('refuses bad options before writing', async () => {
    const client = await pool.connect();
    try {
      await expect(writeOutbox(client, '', 'k', 'x', { priority: 300 })).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
      await expect(writeOutbox({} as never, '', 'k', 'x')).rejects.toMatchObject({
        code: 'INVALID_OPTIONS',
        message: expect.stringMatching(/^tx must be a transaction/),
      });
    } finally {
      client.release();
    }
  });
});
