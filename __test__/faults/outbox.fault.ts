/**
 * The outbox relay killed mid-batch: N rows in the outbox, a relay in a
 * child process SIGKILLed while it publishes, then a new relay. A consumer
 * with an inbox receives them, one effect row per message in its `tx`. Every
 * row is published (zero lost), no more than one batch twice (the batch the
 * kill rolled back), and each copy published twice is caught by the inbox:
 * every message's effect exactly once. The counts are printed.
 *
 * And refused rows among 2,000 good ones, with no crash: each refused row is
 * parked with its reason, every good row published exactly once, and the
 * relay goes on draining what comes after.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { Pool } from 'pg';

import { DEFAULT_DELAYS, RabbitRetry, parkedQueueName, retryQueueName } from '../../lib';
import { brokerVersion, closeAmqp, queueDepth, queueUnacked, withChannel } from '../helpers';
import { createTestDatabase, dropTestDatabase, pgUrl, psql, uniqueName, waitFor } from '../helpers';

const N = Number(process.env.FAULT_N ?? 5000);
const BATCH = 100;

jest.setTimeout(240_000);

/** Starts a relay child and waits until it is ready. */
async function startRelay(db: string): Promise<ReturnType<typeof spawn>> {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'relay-process.ts')], {
    env: { ...process.env, OUTBOX_URL: pgUrl(db), OUTBOX_BATCH: String(BATCH) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      if (chunk.includes('"ready"')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`the relay exited with ${String(code)} before it was ready`)));
  });
  return child;
}

const pending = (db: string) => Number(psql('SELECT count(*) FROM rabbit_retry_outbox WHERE parked_at IS NULL', db));

it('(outbox) SIGKILL of the relay mid-batch, then a new one: lost 0, at most one batch twice', async () => {
  const db = createTestDatabase('outbox_fault');
  const queue = uniqueName('rr-fault-outbox');
  try {
    // Connecting with the outbox makes its table.
    const setup = await RabbitRetry.connect({ outbox: { url: pgUrl(db), relay: false } });
    await withChannel(async (ch) => {
      await ch.assertQueue(queue, { durable: true });
    });
    psql(
      `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties)
       SELECT '', '${queue}', convert_to('m' || i, 'UTF8'), jsonb_build_object('messageId', 'm' || i) FROM generate_series(1, ${N}) i`,
      db,
    );
    // The receiving side: an inbox consumer whose effect is one row per message.
    psql('CREATE TABLE effects (id text NOT NULL)', db);
    const pool = new Pool({ connectionString: pgUrl(db), max: 12 });
    const receiver = await RabbitRetry.connect({});
    let calls = 0;
    await receiver.consume({ queue, inbox: { pool } }, async (msg, { tx }) => {
      calls++;
      await tx.query('INSERT INTO effects (id) VALUES ($1)', [msg.properties.messageId]);
    });
    const first = await startRelay(db);
    await waitFor(() => pending(db) < N - 1000, 60_000, 'the relay to publish 1000 rows', 20);
    const exited = new Promise<void>((r) => first.once('exit', () => r()));
    first.kill('SIGKILL');
    await exited;
    const leftAtKill = pending(db);
    expect(leftAtKill).toBeGreaterThan(0);
    const second = await startRelay(db);
    await waitFor(() => pending(db) === 0, 120_000, 'the new relay to empty the outbox', 100);
    second.kill('SIGTERM');
    await new Promise<void>((r) => second.once('exit', () => r()));
    const effects = () => Number(psql('SELECT count(DISTINCT id) FROM effects', db));
    await waitFor(
      async () => effects() === N && (await queueDepth(queue)) === 0 && (await queueUnacked(queue)) === 0,
      120_000,
      'every message handled',
      100,
    );
    await receiver.close();
    await pool.end();
    const lost = N - effects();
    const effectsTwice = Number(psql('SELECT count(*) - count(DISTINCT id) FROM effects', db));
    const twice = Number(psql('SELECT COALESCE(sum(n), 0) FROM rabbit_retry_inbox_duplicates', db));
    console.log(
      `fault outbox-sigkill: ${N} rows, ${leftAtKill} left at the kill, handled ${calls}, lost ${lost}, published twice ${twice} (each caught by the inbox), effects twice ${effectsTwice}`,
    );
    expect(lost).toBe(0);
    expect(effectsTwice).toBe(0);
    expect(twice).toBeLessThanOrEqual(BATCH);
    await setup.close();
  } finally {
    await withChannel(async (ch) => {
      for (const q of [queue, ...DEFAULT_DELAYS.map((d) => retryQueueName(queue, d)), parkedQueueName(queue)])
        await ch.deleteQueue(q).catch(() => undefined);
    }).catch(() => undefined);
    await closeAmqp();
    dropTestDatabase(db);
  }
});

it('(outbox) refused rows among 2,000, no crash: lost 0, sent twice 0, the relay still draining', async () => {
  const db = createTestDatabase('outbox_refused');
  const queue = uniqueName('rr-fault-outbox-refused');
  const GOOD = 2000;
  try {
    await withChannel(async (ch) => {
      await ch.assertQueue(queue, { durable: true });
    });
    const rr = await RabbitRetry.connect({ outbox: { url: pgUrl(db), batchSize: BATCH } });
    const [major] = await brokerVersion();
    const missing = uniqueName('rr-fault-missing');
    // What another writer may put in the table, every 40th row: properties the broker
    // refuses by closing the channel, a missing exchange, and (4.x) a body over 16 MiB.
    const refused: [string, string, string][] = [
      ['', queue, '{"userId": "rr-somebody-else"}'],
      ['', queue, '{"expiration": "-1"}'],
      ['', queue, '{"headers": {"CC": "audit"}}'],
      [missing, 'k', '{}'],
      ...(major < 4 ? [['', queue, '{"deliveryMode": 7}'] as [string, string, string]] : []),
    ];
    const array = (i: number) => `ARRAY[${refused.map((r) => `'${r[i]}'`).join(',')}]`;
    // In id order: m0, a refused row, m1 … m40, a refused row, …
    psql(
      `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties)
       SELECT exchange, routing_key, body, properties FROM (
         SELECT i * 2 AS o, '' AS exchange, '${queue}' AS routing_key, convert_to('m' || i, 'UTF8') AS body,
                jsonb_build_object('messageId', 'm' || i) AS properties
         FROM generate_series(0, ${GOOD - 1}) i
         UNION ALL
         SELECT i * 2 + 1, (${array(0)})[1 + (i / 40) % ${refused.length}], (${array(1)})[1 + (i / 40) % ${refused.length}],
                convert_to('bad', 'UTF8'), ((${array(2)})[1 + (i / 40) % ${refused.length}])::jsonb
         FROM generate_series(0, ${GOOD - 1}, 40) i
       ) t ORDER BY o`,
      db,
    );
    if (major >= 4) {
      psql(
        `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES ('', '${queue}', decode(repeat('00', ${17 * 1024 * 1024}), 'hex'), '{}')`,
        db,
      );
    }
    const badRows = Number(psql(`SELECT count(*) FROM rabbit_retry_outbox WHERE properties->>'messageId' IS NULL`, db));

    const seen = new Map<string, number>();
    const receiver = await RabbitRetry.connect({});
    await receiver.consume({ queue, prefetch: 100 }, (msg) => {
      const id = msg.properties.messageId ?? '(none)';
      seen.set(id, (seen.get(id) ?? 0) + 1);
    });
    await waitFor(async () => pending(db) === 0 && (await rr.outbox.stats()).parked === badRows, 120_000, 'the outbox drained', 100);
    await waitFor(async () => (await queueDepth(queue)) === 0 && (await queueUnacked(queue)) === 0, 60_000, 'every message received', 100);
    // The relay goes on: rows written after are published too.
    psql(`INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties) VALUES ('', '${queue}', 'after', '{"messageId": "after"}')`, db);
    await waitFor(() => seen.has('after'), 30_000, 'the row after');
    const parkedReasons = psql("SELECT string_agg(DISTINCT park_reason, ',') FROM rabbit_retry_outbox WHERE parked_at IS NOT NULL", db);
    const lost = Array.from({ length: GOOD }, (_, i) => `m${i}`).filter((id) => !seen.has(id)).length;
    const twice = [...seen.values()].filter((n) => n > 1).length;
    const strays = [...seen.keys()].filter((id) => !/^m\d+$/.test(id) && id !== 'after').length;
    console.log(
      `fault outbox-refused: ${GOOD} good rows, ${badRows} refused (${parkedReasons}), lost ${lost}, sent twice ${twice}, refused rows delivered ${strays}`,
    );
    expect(lost).toBe(0);
    expect(twice).toBe(0);
    expect(strays).toBe(0);
    await receiver.close();
    await rr.close();
  } finally {
    await withChannel(async (ch) => {
      await ch.deleteQueue(queue).catch(() => undefined);
      for (const q of [...DEFAULT_DELAYS.map((d) => retryQueueName(queue, d)), parkedQueueName(queue)]) await ch.deleteQueue(q).catch(() => undefined);
    }).catch(() => undefined);
    await closeAmqp();
    dropTestDatabase(db);
  }
});
