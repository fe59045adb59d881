/**
 * The outbox, one row one outcome, against the machine's PostgreSQL and
 * broker: `rr.outbox.publish` refuses, before its `INSERT`, what the database
 * or the broker would refuse, and leaves the caller's transaction usable;
 * rows the broker would refuse that reach the table another way are parked
 * with their reason, never sent, and the relay goes on with the rows behind
 * them, each good row published once.
 */
import { Pool } from 'pg';

import type { RabbitRetry } from '../lib';
import {
  brokerVersion,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  drainAll,
  durableQueue,
  dropTestDatabase,
  pgUrl,
  psql,
  psqlRows,
  uniqueName,
  waitFor,
} from './helpers';

let db: string;
let pool: Pool;

beforeAll(() => {
  db = createTestDatabase('outbox_refusals');
  pool = new Pool({ connectionString: pgUrl(db), max: 2 });
  pool.on('error', () => undefined);
});

afterEach(async () => {
  await cleanup();
  psql('DELETE FROM rabbit_retry_outbox', db);
});

afterAll(async () => {
  await pool.end();
  await closeAmqp();
  dropTestDatabase(db);
});

function connectOutbox(relay = true): Promise<RabbitRetry> {
  return connectClient({ outbox: { url: pgUrl(db), relay } });
}

function pending(): number {
  return Number(psql('SELECT count(*) FROM rabbit_retry_outbox WHERE parked_at IS NULL', db));
}

describe('rr.outbox.publish refuses before writing, and the transaction stays usable', () => {
  it('what the broker or PostgreSQL would refuse is coded; a good row written after it in the same transaction commits', async () => {
    const rr = await connectOutbox(false);
    const q = await durableQueue();
    const [major] = await brokerVersion();
    const max = major >= 4 ? 16 * 1024 * 1024 : 128 * 1024 * 1024;
    const client = await pool.connect();
    const refusals: [string, string, RegExp][] = [];
    try {
      await client.query('BEGIN');
      const attempt = async (what: string, write: () => Promise<void>, why: RegExp) => {
        const err = (await write().catch((e: unknown) => e)) as { code?: string; message?: string } | undefined;
        refusals.push([what, err?.code ?? 'written', why]);
        if (err?.message !== undefined) expect(err.message).toMatch(why);
      };
      await attempt('another user', () => rr.outbox.publish(client, '', q, 'x', { userId: 'rr-somebody-else' }), /user-id/);
      await attempt('a negative expiration', () => rr.outbox.publish(client, '', q, 'x', { expiration: '-1' }), /expiration '-1'/);
      await attempt('a CC header that is no array', () => rr.outbox.publish(client, '', q, 'x', { headers: { CC: 'audit' } }), /'CC' header/);
      await attempt('a body over max_message_size', () => rr.outbox.publish(client, '', q, Buffer.alloc(max + 1)), /max_message_size/);
      await attempt('a 10 KB ordering key', () => rr.outbox.publish(client, '', q, 'x', { orderingKey: 'k'.repeat(10_000) }), /orderingKey/);
      await attempt('a NUL in a property', () => rr.outbox.publish(client, '', q, 'x', { messageId: 'a\u0000b' }), /NUL/);
      await attempt('a NUL in a header', () => rr.outbox.publish(client, '', q, 'x', { headers: { note: 'a\u0000b' } }), /NUL/);
      await attempt('a NUL in the routing key', () => rr.outbox.publish(client, '', 'q\u0000', 'x'), /NUL/);
      await rr.outbox.publish(client, '', q, 'good', { messageId: 'good' });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(refusals.map(([what, code]) => [what, code])).toEqual([
      ['another user', 'PRECONDITION_FAILED'],
      ['a negative expiration', 'PRECONDITION_FAILED'],
      ['a CC header that is no array', 'PRECONDITION_FAILED'],
      ['a body over max_message_size', 'PRECONDITION_FAILED'],
      ['a 10 KB ordering key', 'INVALID_OPTIONS'],
      ['a NUL in a property', 'INVALID_OPTIONS'],
      ['a NUL in a header', 'INVALID_OPTIONS'],
      ['a NUL in the routing key', 'INVALID_OPTIONS'],
    ]);
    expect(psql('SELECT count(*) FROM rabbit_retry_outbox', db)).toBe('1');
  });
});

describe('the relay: one row, one outcome', () => {
  it('rows the broker would refuse are parked with their reason, never sent; every good row around them is published once', async () => {
    const rr = await connectOutbox();
    const q = await durableQueue();
    const [major] = await brokerVersion();
    const missing = uniqueName('rr-test-missing');
    // Written as another writer would: straight into the table, among 100 good rows.
    const bad = [
      ['other-user', '', q, `'{"userId": "rr-somebody-else"}'`],
      ['negative-expiration', '', q, `'{"expiration": "-1"}'`],
      ['cc-not-an-array', '', q, `'{"headers": {"CC": "audit"}}'`],
      ['missing-exchange', missing, 'k', `'{}'`],
      ...(major < 4 ? [['delivery-mode-7', '', q, `'{"deliveryMode": 7}'`]] : []),
    ];
    const values = [
      ...Array.from({ length: 100 }, (_, i) => `('', '${q}', convert_to('g${i}', 'UTF8'), '{"messageId": "g${i}"}')`),
      ...bad.map(([id, ex, key, props]) => `('${ex}', '${key}', convert_to('${id}', 'UTF8'), ${props})`),
    ];
    // Shuffled, so bad rows sit among good ones in every batch.
    values.sort(() => Math.random() - 0.5);
    psql(`INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES ${values.join(',')}`, db);
    if (major >= 4) {
      psql(
        `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES ('', '${q}', decode(repeat('00', ${17 * 1024 * 1024}), 'hex'), '{}')`,
        db,
      );
    }
    const expectedParked = bad.length + (major >= 4 ? 1 : 0);
    await waitFor(async () => pending() === 0 && (await rr.outbox.stats()).parked === expectedParked, 60_000, 'the outbox drained', 200);
    const got = await drainAll(q);
    const ids = got.map((m) => m.properties.messageId as string);
    expect(ids.sort()).toEqual(Array.from({ length: 100 }, (_, i) => `g${i}`).sort());
    expect(new Set(ids).size).toBe(100);
    const parked = psqlRows<{ body: string; park_reason: string }>(
      `SELECT CASE WHEN length(body) < 100 THEN convert_from(body, 'UTF8') ELSE 'large' END AS body, park_reason
       FROM rabbit_retry_outbox WHERE parked_at IS NOT NULL`,
      db,
    );
    const reasons = Object.fromEntries(parked.map((p) => [p.body, p.park_reason]));
    expect(reasons).toMatchObject({
      'other-user': 'invalid-properties',
      'negative-expiration': 'invalid-properties',
      'cc-not-an-array': 'invalid-properties',
      'missing-exchange': 'exchange-not-found',
    });
    if (major < 4) expect(reasons['delivery-mode-7']).toBe('invalid-properties');
    if (major >= 4) expect(reasons.large).toBe('too-large');
    // The relay goes on.
    psql(`INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES ('', '${q}', 'after', '{}')`, db);
    await waitFor(() => pending() === 0, 30_000, 'the row after');
    expect((await drainAll(q)).map((m) => m.content.toString())).toEqual(['after']);
  });
});
