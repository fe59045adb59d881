/**
 * The outbox's relay against the machine's PostgreSQL and broker: committed
 * rows published with their properties and deleted, rolled-back rows never,
 * rows that cannot be delivered parked with their reason, two relays sharing
 * a backlog (unordered and ordered), a lost broker connection, stats, parked
 * rows put back and deleted, and the options' checks.
 *
 * One database `rr_test_<random>` for the file; each test writes to queues
 * of its own, and the outbox is emptied after each.
 */
import { Pool } from 'pg';

import { InvalidOptionsError, type OutboxOptions, type RabbitRetry } from '../lib';
import { run } from '../lib/cli';
import {
  cleanup,
  closeAmqp,
  closeOwnConnection,
  connectClient,
  createTestDatabase,
  drainAll,
  durableQueue,
  dropTestDatabase,
  pgUrl,
  psql,
  queueDepth,
  testExchange,
  testQueue,
  track,
  uniqueName,
  waitFor,
  withChannel,
} from './helpers';

let db: string;

beforeAll(() => {
  db = createTestDatabase('outbox');
});

afterEach(async () => {
  await cleanup();
  psql('DELETE FROM rabbit_retry_outbox', db);
});

afterAll(async () => {
  await closeAmqp();
  dropTestDatabase(db);
});

/** A client with an outbox in the test database (its relay on unless told). */
function connectOutbox(outbox: Partial<OutboxOptions> = {}, connectionName?: string): Promise<RabbitRetry> {
  return connectClient({ outbox: { url: pgUrl(db), ...outbox }, connectionName });
}

/** Writes `n` rows for `queue` (bodies `m1`…`mN`, message ids alike; ordering keys `k0`…`k<keys-1>` when `keys` is given). */
function writeRows(queue: string, n: number, keys?: number): void {
  const key = keys === undefined ? 'NULL' : `'k' || (i % ${keys})`;
  psql(
    `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, ordering_key)
     SELECT '', '${queue}', convert_to('m' || i, 'UTF8'), jsonb_build_object('messageId', 'm' || i), ${key}
     FROM generate_series(1, ${n}) i`,
    db,
  );
}

function rowsLeft(): number {
  return Number(psql('SELECT count(*) FROM rabbit_retry_outbox WHERE parked_at IS NULL', db));
}

/** Waits until the outbox has no pending row. */
async function outboxEmpty(timeoutMs = 30_000): Promise<void> {
  await waitFor(() => rowsLeft() === 0, timeoutMs, 'the outbox to be empty', 100);
}

/** The bodies of the messages in `queue`, in queue order. */
async function bodies(queue: string): Promise<string[]> {
  return (await drainAll(queue)).map((m) => m.content.toString());
}

describe('the relay', () => {
  it('publishes committed rows in id order, with their properties, and deletes them', async () => {
    const rr = await connectOutbox();
    const q = await durableQueue();
    psql(
      `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES
       ('', '${q}', convert_to('{"order":1}', 'UTF8'), '{"messageId":"order-1","contentType":"application/json","type":"order.placed","timestamp":1700000000,"headers":{"tenant":"acme","n":3}}')`,
      db,
    );
    writeRows(q, 40);
    await outboxEmpty();
    const got = await drainAll(q);
    expect(got.map((m) => m.content.toString())).toEqual(['{"order":1}', ...Array.from({ length: 40 }, (_, i) => `m${i + 1}`)]);
    const first = got[0];
    expect(first.properties).toMatchObject({
      messageId: 'order-1',
      contentType: 'application/json',
      type: 'order.placed',
      timestamp: 1700000000,
      deliveryMode: 2,
    });
    expect(first.headers).toEqual({ tenant: 'acme', n: 3 });
    expect(psql('SELECT count(*) FROM rabbit_retry_outbox', db)).toBe('0');
    const stats = await rr.outbox.stats();
    expect(stats).toMatchObject({ pending: 0, parked: 0, oldestPendingAgeMs: 0, published: 41, parkedByRelay: 0 });
  });

  it('never publishes a row whose transaction rolled back', async () => {
    await connectOutbox();
    const q = await durableQueue();
    psql(
      `BEGIN;
       INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES ('', '${q}', 'rolled back', '{}');
       ROLLBACK;
       INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES ('', '${q}', 'committed', '{}');`,
      db,
    );
    await outboxEmpty();
    expect(await bodies(q)).toEqual(['committed']);
  });

  it('parks what cannot be delivered, with its reason, and keeps publishing the rest', async () => {
    const rr = await connectOutbox();
    const q = await durableQueue();
    const unbound = testExchange();
    await withChannel(async (ch) => {
      await ch.assertExchange(unbound, 'direct', { durable: false, autoDelete: false });
    });
    const missing = uniqueName('rr-test-missing');
    psql(
      `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES
       ('${unbound}', 'nowhere', 'unroutable', '{}'),
       ('${missing}', 'x', 'no exchange', '{}'),
       ('', '${q}', 'bad properties', '{"priority": 300}'),
       ('', '${q}', 'unknown property', '{"message_id": "m"}'),
       ('', '${q}', 'fine', '{}')`,
      db,
    );
    await waitFor(async () => (await rr.outbox.stats()).parked === 4 && rowsLeft() === 0, 30_000, 'four rows parked');
    writeRows(q, 3);
    await outboxEmpty();
    expect((await bodies(q)).sort()).toEqual(['fine', 'm1', 'm2', 'm3']);
    const parked = await rr.outbox.listParked();
    expect(parked.map((p) => [p.exchange, p.parkReason])).toEqual([
      [unbound, 'unroutable'],
      [missing, 'exchange-not-found'],
      ['', 'invalid-properties'],
      ['', 'invalid-properties'],
    ]);
    expect(parked[0].lastError).toContain('no queue is bound');
    expect(parked[1].lastError).toContain(`no exchange '${missing}'`);
    expect(parked[2].lastError).toContain('priority');
    expect(parked[3].lastError).toContain('unknown field');
    expect((await rr.outbox.stats()).parkedByRelay).toBe(4);

    // Bound now: the unroutable row goes when put back; the others are deleted.
    await withChannel(async (ch) => {
      await ch.bindQueue(q, unbound, 'nowhere');
    });
    expect(await rr.outbox.retryParked([parked[0].id])).toBe(1);
    await outboxEmpty();
    expect(await bodies(q)).toEqual(['unroutable']);
    expect(await rr.outbox.deleteParked(parked.slice(1).map((p) => p.id))).toBe(3);
    expect(await rr.outbox.stats()).toMatchObject({ pending: 0, parked: 0 });
  });

  it('shares a backlog between two relays: each message published once', async () => {
    const q = await durableQueue();
    const writer = await connectOutbox({ relay: false });
    writeRows(q, 2000);
    expect((await writer.outbox.stats()).pending).toBe(2000);
    const [a, b] = await Promise.all([connectOutbox({ batchSize: 100 }), connectOutbox({ batchSize: 100 })]);
    await outboxEmpty();
    const got = await bodies(q);
    expect(got).toHaveLength(2000);
    expect(new Set(got).size).toBe(2000);
    const [sa, sb] = await Promise.all([a.outbox.stats(), b.outbox.stats()]);
    expect(sa.published + sb.published).toBe(2000);
  });

  it('ordered: keeps each key in id order across two relays', async () => {
    const q = await durableQueue();
    await connectOutbox({ relay: false });
    writeRows(q, 1000, 10);
    await Promise.all([connectOutbox({ ordered: true, batchSize: 50 }), connectOutbox({ ordered: true, batchSize: 50 })]);
    await outboxEmpty();
    const got = await bodies(q);
    expect(new Set(got).size).toBe(1000);
    expect(got).toHaveLength(1000);
    const lastOfKey = new Map<number, number>();
    for (const body of got) {
      const i = Number(body.slice(1));
      const key = i % 10;
      expect(i).toBeGreaterThan(lastOfKey.get(key) ?? 0);
      lastOfKey.set(key, i);
    }
  });

  it('ordered: a parked row leaves its key, and the rows after it are published in order', async () => {
    const q = await durableQueue();
    await connectOutbox({ ordered: true });
    psql(
      `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, ordering_key) VALUES
       ('', '${q}', 'a1', '{}', 'a'), ('', '${q}', 'a2', '{"priority": 999}', 'a'), ('', '${q}', 'a3', '{}', 'a'), ('', '${q}', 'a4', '{}', 'a')`,
      db,
    );
    await outboxEmpty();
    expect(await bodies(q)).toEqual(['a1', 'a3', 'a4']);
  });

  it('loses nothing when the broker closes its connection mid-run', async () => {
    const name = uniqueName('rr-test-relay');
    const q = await durableQueue();
    const rr = await connectOutbox({ relay: false });
    writeRows(q, 3000);
    const relay = await connectOutbox({ batchSize: 100 }, name);
    await waitFor(async () => (await relay.outbox.stats()).published > 300, 30_000, 'the relay to start publishing');
    await closeOwnConnection(name);
    await outboxEmpty(60_000);
    const got = await bodies(q);
    expect(new Set(got).size).toBe(3000);
    // At least once: a batch whose confirms the closed connection lost is published again.
    expect(got.length - 3000).toBeLessThanOrEqual(100);
    expect((await rr.outbox.stats()).pending).toBe(0);
  });

  it('says how old the oldest waiting row is, and close() stops the relay', async () => {
    const q = await durableQueue();
    const rr = await connectOutbox({ relay: false });
    writeRows(q, 5);
    psql("UPDATE rabbit_retry_outbox SET created_at = now() - interval '1 minute'", db);
    const stats = await rr.outbox.stats();
    expect(stats.pending).toBe(5);
    expect(stats.oldestPendingAgeMs).toBeGreaterThanOrEqual(60_000);
    const relay = await connectOutbox();
    await outboxEmpty();
    await relay.close();
    writeRows(q, 2);
    expect((await bodies(q)).length).toBe(5);
    expect(rowsLeft()).toBe(2);
  });
});

describe('rr.outbox.publish from an inbox handler', () => {
  it('publishes what a handler wrote in its tx once the tx commits, with the effect; a throw publishes nothing', async () => {
    const rr = await connectOutbox();
    const pool = new Pool({ connectionString: pgUrl(db), max: 4 });
    psql('CREATE TABLE IF NOT EXISTS paid (id text PRIMARY KEY)', db);
    try {
      const queue = testQueue(['200ms']);
      const out = await durableQueue();
      let calls = 0;
      track(
        await rr.consume({ queue, onFailure: { delays: ['200ms'] }, inbox: { pool } }, async (msg, { tx }) => {
          calls++;
          const { id } = msg.json<{ id: string }>();
          await tx.query('INSERT INTO paid (id) VALUES ($1)', [id]);
          await rr.outbox.publish(tx, '', out, { shipment: id, attempt: msg.attempt }, { messageId: `ship-${id}`, headers: { tenant: 'acme' } });
          // The first attempt's effect and outgoing message roll back together.
          if (msg.attempt === 0) throw new Error('carrier down');
        }),
      );
      await rr.publish('', queue, { id: `${queue}-1` }, { messageId: `${queue}-1` });
      await waitFor(() => calls === 2, 10_000, 'the retried call');
      await outboxEmpty();
      await waitFor(async () => (await queueDepth(out)) === 1, 10_000, 'the outgoing message');
      const got = await drainAll(out);
      expect(got.map((m) => m.content.toString())).toEqual([JSON.stringify({ shipment: `${queue}-1`, attempt: 1 })]);
      expect(got[0].properties).toMatchObject({ messageId: `ship-${queue}-1`, contentType: 'application/json', deliveryMode: 2 });
      expect(got[0].headers).toEqual({ tenant: 'acme' });
      expect(psql(`SELECT count(*) FROM paid WHERE id = '${queue}-1'`, db)).toBe('1');
    } finally {
      await pool.end();
    }
  });

  it('refuses what is not a transaction, and a body publish would refuse, before writing anything', async () => {
    const rr = await connectOutbox({ relay: false });
    await expect(rr.outbox.publish({} as never, '', 'q', 'x')).rejects.toBeInstanceOf(InvalidOptionsError);
    const pool = new Pool({ connectionString: pgUrl(db), max: 1 });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const cycle: Record<string, unknown> = {};
      cycle.self = cycle;
      await expect(rr.outbox.publish(client, '', 'q', cycle)).rejects.toBeInstanceOf(InvalidOptionsError);
      await client.query('COMMIT');
    } finally {
      client.release();
      await pool.end();
    }
    expect(psql('SELECT count(*) FROM rabbit_retry_outbox', db)).toBe('0');
  });
});

describe('rabbit-retry outbox status', () => {
  it('prints the pending and parked rows, the oldest age, and the inbox duplicates per consumer', async () => {
    const q = await durableQueue();
    await connectOutbox({ relay: false });
    writeRows(q, 3);
    psql("UPDATE rabbit_retry_outbox SET parked_at = now(), park_reason = 'unroutable' WHERE id = (SELECT min(id) FROM rabbit_retry_outbox)", db);
    psql("INSERT INTO rabbit_retry_inbox_duplicates (consumer, n) VALUES ('billing', 7) ON CONFLICT (consumer) DO UPDATE SET n = 7", db);
    const out: string[] = [];
    const io = { out: (t: string) => out.push(t), err: (t: string) => out.push(t), env: {}, isTTY: false };
    expect(await run(['outbox', 'status', '--db', pgUrl(db)], io)).toBe(0);
    const text = out.join('\n');
    expect(text).toContain('outbox: pending 2, parked 1');
    expect(text).toMatch(/billing\s+7/);
    out.length = 0;
    expect(await run(['--json', 'outbox', 'status', '--db', pgUrl(db)], io)).toBe(0);
    const json = JSON.parse(out.join('')) as { pending: number; parked: number; inboxDuplicates: { consumer: string; duplicates: number }[] };
    expect(json).toMatchObject({ pending: 2, parked: 1, inboxDuplicates: [{ consumer: 'billing', duplicates: 7 }] });
    psql('DELETE FROM rabbit_retry_inbox_duplicates', db);
  });
});

describe('the outbox options', () => {
  it.each([
    [{ url: '' }, 'outbox.url'],
    [{ url: 'postgres://x', batchSize: 0 }, 'outbox.batchSize'],
    [{ url: 'postgres://x', pollIntervalMs: 0.5 }, 'outbox.pollIntervalMs'],
    [{ url: 'postgres://x', ordered: 'yes' }, 'outbox.ordered'],
    [{ url: 'postgres://x', relays: 2 }, 'relays'],
  ])('refuses %j', async (outbox, named) => {
    const err = await connectClient({ outbox: outbox as OutboxOptions }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toContain(named);
  });

  it('rr.outbox without the option says how to get one', async () => {
    const rr = await connectClient();
    expect(() => rr.outbox).toThrow(InvalidOptionsError);
  });
});
