/**
 * `npm run bench:outbox`: the outbox relay's throughput, on a database of its
 * own (created and dropped here). OUTBOX_ROWS (20,000) rows of 1 KiB are
 * written into `rabbit_retry_outbox` for a durable queue, persistent; then
 * one client with a relay (batch OUTBOX_BATCH, 200) connects, and the rows
 * a second from its connect to the empty outbox are printed, with the
 * messages counted in the queue. OUTBOX_ORDERED=1 runs the relay ordered
 * (OUTBOX_KEYS keys, 100).
 *
 * Env: OUTBOX_ROWS, OUTBOX_BATCH, OUTBOX_ORDERED, OUTBOX_KEYS,
 * PGHOST_TEST/PGPORT_TEST/PGUSER_TEST, AMQP_URL.
 */

import { RabbitRetry } from '../lib';
import { AMQP_URL, declareWorkQueue, depth, envInt, fmt, runBenchmark, sleep, uniqueName } from './common';
import { benchDatabase } from './pg';

const ROWS = envInt('OUTBOX_ROWS', 20_000);
const BATCH = envInt('OUTBOX_BATCH', 200);
const ORDERED = process.env.OUTBOX_ORDERED === '1';
const KEYS = envInt('OUTBOX_KEYS', 100);
const { db: DB, url: DB_URL, psql } = benchDatabase('outbox');

const pending = () => Number(psql('SELECT count(*) FROM rabbit_retry_outbox WHERE parked_at IS NULL'));

async function main(): Promise<void> {
  psql(`CREATE DATABASE ${DB}`, 'postgres');
  const queue = uniqueName('rr-bench-outbox');
  try {
    await declareWorkQueue(queue);
    const setup = await RabbitRetry.connect({ url: AMQP_URL, outbox: { url: DB_URL, relay: false } });
    await setup.close();
    const key = ORDERED ? `'k' || (i % ${KEYS})` : 'NULL';
    psql(
      `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, ordering_key)
       SELECT '', '${queue}', convert_to(rpad('m' || i, 1024, 'x'), 'UTF8'), jsonb_build_object('messageId', 'm' || i, 'deliveryMode', 2), ${key}
       FROM generate_series(1, ${ROWS}) i`,
    );
    psql('VACUUM ANALYZE rabbit_retry_outbox');
    const started = process.hrtime.bigint();
    const relay = await RabbitRetry.connect({ url: AMQP_URL, outbox: { url: DB_URL, batchSize: BATCH, ordered: ORDERED } });
    while (pending() > 0) await sleep(20);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const stats = await relay.outbox.stats();
    await relay.close();
    let inQueue = await depth(queue);
    for (let i = 0; i < 50 && inQueue !== stats.published; i++) {
      await sleep(100);
      inQueue = await depth(queue);
    }
    console.log(
      `outbox relay: ${ROWS} rows of 1 KiB, persistent, to a durable queue, batch ${BATCH}${ORDERED ? `, ordered over ${KEYS} keys` : ''}: ` +
        `${fmt(ROWS / seconds, 0)} msgs/s (${fmt(seconds)} s); published ${stats.published}, in the queue ${inQueue ?? '?'} (target ≥ 2,000/s)`,
    );
  } finally {
    psql(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`, 'postgres');
  }
}

runBenchmark(main);
