/**
 * `npm run bench:inbox`: what the inbox costs a handler, on a database of its
 * own (created and dropped here).
 *
 * The same handler, one row inserted per message, runs in three ways over
 * INBOX_N (10,000) persistent 1 KiB messages, prefetch INBOX_PREFETCH (50),
 * in turn for INBOX_ROUNDS (3) rounds:
 *  - plain: `pool.query(INSERT …)` on the user's pool, its own transaction,
 *    and no record of the message (a redelivery would insert again);
 *  - inbox: `inbox: { pool }`, the insert through the `tx` the inbox opens,
 *    with the message's id recorded in the same transaction;
 *  - inbox, group: `inbox: { pool, group: INBOX_GROUP }` (10): the deliveries
 *    handed over together share a transaction, up to that many.
 * Each prints messages a second, client CPU and PostgreSQL CPU per message
 * (every `postgres` process on this machine), median of the rounds, and the
 * inbox's ratios against plain.
 *
 * Env: INBOX_N, INBOX_PREFETCH, INBOX_ROUNDS, INBOX_GROUP, PGHOST_TEST/PGPORT_TEST/PGUSER_TEST, AMQP_URL.
 */
import { readdirSync, readFileSync } from 'node:fs';

import { Pool } from 'pg';

import { RabbitRetry } from '../lib';
import { AMQP_URL, Publisher, declareWorkQueue, envInt, fmt, median, runBenchmark, sleep, table, uniqueName, deleteQueues } from './common';
import { benchDatabase } from './pg';

const N = envInt('INBOX_N', 10_000);
const PREFETCH = envInt('INBOX_PREFETCH', 50);
const ROUNDS = envInt('INBOX_ROUNDS', 3);
const GROUP = envInt('INBOX_GROUP', 10);
const { db: DB, url: DB_URL, psql } = benchDatabase('inbox');

/** CPU seconds of every `postgres` process on this machine (the server and its backends). */
function postgresCpuS(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!name.startsWith('postgres')) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // gone
    }
  }
  return ticks / 100;
}

interface Sample {
  msgsPerS: number;
  clientUs: number;
  postgresUs: number;
}

const MODES = ['plain', 'inbox', 'inbox, group'] as const;
type Mode = (typeof MODES)[number];

async function round(rr: RabbitRetry, pool: Pool, publisher: Publisher, mode: Mode): Promise<Sample> {
  const queue = uniqueName(`bench-inbox-${mode.replace(', ', '-')}`);
  await declareWorkQueue(queue);
  await publisher.publishRange(queue, 0, N);
  psql('TRUNCATE bench_effects');
  let done = 0;
  let finished: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (finished = resolve));
  const count = () => {
    if (++done === N) finished();
  };
  const cpu0 = process.cpuUsage();
  const pg0 = postgresCpuS();
  const t0 = performance.now();
  const consumer =
    mode !== 'plain'
      ? await rr.consume({ queue, prefetch: PREFETCH, inbox: { pool, group: mode === 'inbox' ? 1 : GROUP } }, async (msg, { tx }) => {
          await tx.query('INSERT INTO bench_effects (id) VALUES ($1)', [msg.properties.messageId]);
          count();
        })
      : await rr.consume({ queue, prefetch: PREFETCH }, async (msg) => {
          await pool.query('INSERT INTO bench_effects (id) VALUES ($1)', [msg.properties.messageId]);
          count();
        });
  await all;
  const s = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const pgS = postgresCpuS() - pg0;
  await consumer.close();
  await deleteQueues([queue]);
  const effects = Number(psql('SELECT count(*) FROM bench_effects'));
  if (effects !== N) throw new Error(`${mode}: ${effects} effects for ${N} messages`);
  return { msgsPerS: N / s, clientUs: (cpu.user + cpu.system) / N, postgresUs: (pgS * 1e6) / N };
}

async function main(): Promise<void> {
  psql(`CREATE DATABASE ${DB}`, 'postgres');
  const pool = new Pool({ connectionString: DB_URL, max: PREFETCH + 2 });
  const rr = await RabbitRetry.connect({ url: AMQP_URL });
  const publisher = await Publisher.open();
  try {
    psql('CREATE TABLE bench_effects (id text NOT NULL)');
    const samples: Record<Mode, Sample[]> = { plain: [], inbox: [], 'inbox, group': [] };
    for (let r = 0; r < ROUNDS; r++) {
      // Each round starts with another of the three.
      for (const mode of MODES.map((_, i) => MODES[(i + r) % MODES.length])) {
        const s = await round(rr, pool, publisher, mode);
        samples[mode].push(s);
        process.stderr.write(
          `round ${r + 1} ${mode}: ${fmt(s.msgsPerS, 0)} msgs/s, client ${fmt(s.clientUs, 1)} µs/msg, postgres ${fmt(s.postgresUs, 1)} µs/msg\n`,
        );
        await sleep(500);
      }
    }
    const med = (mode: Mode, k: keyof Sample) => median(samples[mode].map((s) => s[k]));
    const rows = MODES.map((mode) => [
      mode === 'inbox, group' ? `inbox, group ${GROUP}` : mode,
      fmt(med(mode, 'msgsPerS'), 0),
      fmt(med(mode, 'clientUs'), 1),
      fmt(med(mode, 'postgresUs'), 1),
    ]);
    for (const mode of ['inbox', 'inbox, group'] as const) {
      rows.push([
        `${mode === 'inbox' ? 'inbox' : `inbox, group ${GROUP}`} / plain`,
        `${fmt(med(mode, 'msgsPerS') / med('plain', 'msgsPerS'))}x`,
        `${fmt(med(mode, 'clientUs') / med('plain', 'clientUs'))}x`,
        `${fmt(med(mode, 'postgresUs') / med('plain', 'postgresUs'))}x`,
      ]);
    }
    console.log(`inbox: ${N} persistent 1 KiB messages, prefetch ${PREFETCH}, one row inserted per message, median of ${ROUNDS} rounds in turn`);
    console.log(table(['handler', 'msgs/s', 'client CPU µs/msg', 'PostgreSQL CPU µs/msg'], rows));
  } finally {
    await publisher.close();
    await rr.close();
    await pool.end();
    psql(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`, 'postgres');
  }
}

runBenchmark(main);
