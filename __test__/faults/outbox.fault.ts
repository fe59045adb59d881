/**
 * The outbox relay killed mid-batch: N rows in the outbox, a relay in a
 * child process SIGKILLed while it publishes, then a new relay. A consumer
 * with an inbox receives them, one effect row per message in its `tx`. Every
 * row is published (zero lost), no more than one batch twice (the batch the
 * kill rolled back), and each copy published twice is caught by the inbox:
 * every message's effect exactly once. The counts are printed.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { Pool } from 'pg';

import { DEFAULT_DELAYS, RabbitRetry, parkedQueueName, retryQueueName } from '../../lib';
import { closeAmqp, queueDepth, queueUnacked, withChannel } from '../helpers';
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
