/**
 * `npm run bench:inbox-statements`: what each statement and round trip of the
 * inbox costs, without a broker, on a database of its own (created and
 * dropped here).
 *
 * One node-postgres client runs each way of writing one message's effect
 * STATEMENTS_N (3,000) times in a row, the ways alternating for
 * STATEMENTS_ROUNDS (3) rounds, and prints per message: the round trips, the
 * wall time, the client's CPU, and the CPU of the client's own PostgreSQL
 * backend (from /proc, so no extension is needed), median of the rounds, with
 * each way's ratios against `plain`, the handler's insert alone in a
 * transaction of its own. The ways:
 *  - plain: the effect's insert, autocommitted;
 *  - the inbox's statements one at a time, as it sent them before: BEGIN, the
 *    key's insert, the effect's insert, the check, COMMIT;
 *  - the same with one statement left out (which shows what it costs);
 *  - the way the inbox sends them now (lib/inbox/pg-fast.ts): BEGIN and the
 *    key's insert in one round trip, the effect's insert, the check and
 *    COMMIT in one round trip;
 *  - STATEMENTS_GROUP (8) messages in one transaction: their effects alone
 *    (BEGIN, the effects, COMMIT: what sharing a transaction costs at least),
 *    a group under savepoints (lib/inbox/pg-group.ts: a savepoint and the
 *    checked key's insert before each effect), and a group's first try
 *    (lib/inbox/pg-groups.ts: BEGIN with the keys' locks and read, the
 *    effects, the keys' insert with the check and COMMIT).
 *
 * Env: STATEMENTS_N, STATEMENTS_ROUNDS, STATEMENTS_GROUP, PGHOST_TEST/PGPORT_TEST/PGUSER_TEST.
 */
import { readFileSync } from 'node:fs';

import { Client, Pool } from 'pg';

import { migrateTables, pgAdapter } from '../lib';
import { checkSql, commitSql, insertKeySql, insertKeysSql, openGroupSql, recordSql } from '../lib/inbox/pg-fast';
import { envInt, fmt, median, table } from './common';
import { benchDatabase } from './pg';

const N = envInt('STATEMENTS_N', 3_000);
const ROUNDS = envInt('STATEMENTS_ROUNDS', 3);
const GROUP = envInt('STATEMENTS_GROUP', 8);
const { db: DB, url: DB_URL, psql } = benchDatabase('inbox_statements');

const RECORD = 'INSERT INTO rabbit_retry_inbox (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING txid_current()::text AS txid';
const CHECK = 'SELECT txid_current_if_assigned()::text AS txid';
const EFFECT = 'INSERT INTO bench_effects (id) VALUES ($1)';

/** The statements of one message (or of a group: `ids` holds each message's id) on `c`. */
type Way = (c: Client, ids: string[]) => Promise<void>;

/** The last result of a simple query of several statements. */
function last(r: unknown): { rows: Record<string, unknown>[] } {
  return (Array.isArray(r) ? r[r.length - 1] : r) as { rows: Record<string, unknown>[] };
}

/** Each way: its name, its round trips a message, how many messages a call of it writes, and the call. */
const ways: [string, string, number, Way][] = [
  [
    'plain: effect, autocommit',
    '1',
    1,
    async (c, [id]) => {
      await c.query(EFFECT, [id]);
    },
  ],
  [
    'BEGIN, effect, COMMIT',
    '3',
    1,
    async (c, [id]) => {
      await c.query('BEGIN');
      await c.query(EFFECT, [id]);
      await c.query('COMMIT');
    },
  ],
  [
    'BEGIN, key, effect, COMMIT',
    '4',
    1,
    async (c, [id]) => {
      await c.query('BEGIN');
      await c.query(RECORD, ['bench', id]);
      await c.query(EFFECT, [id]);
      await c.query('COMMIT');
    },
  ],
  [
    'BEGIN, effect, check, COMMIT',
    '4',
    1,
    async (c, [id]) => {
      await c.query('BEGIN');
      await c.query(EFFECT, [id]);
      await c.query(CHECK);
      await c.query('COMMIT');
    },
  ],
  [
    'before: BEGIN, key, effect, check, COMMIT',
    '5',
    1,
    async (c, [id]) => {
      await c.query('BEGIN');
      await c.query(RECORD, ['bench', id]);
      await c.query(EFFECT, [id]);
      await c.query(CHECK);
      await c.query('COMMIT');
    },
  ],
  [
    'now: BEGIN+key, effect, check+COMMIT',
    '3',
    1,
    async (c, [id]) => {
      const r = (await c.query(recordSql('bench', id))) as unknown as { rows: { txid: string }[] }[];
      await c.query(EFFECT, [id]);
      await c.query(commitSql(r[1].rows[0].txid));
    },
  ],
  [
    `group of ${GROUP}: BEGIN, effects, COMMIT`,
    `1 + 2/${GROUP}`,
    GROUP,
    async (c, ids) => {
      await c.query('BEGIN');
      for (const id of ids) await c.query(EFFECT, [id]);
      await c.query('COMMIT');
    },
  ],
  [
    `group of ${GROUP} under savepoints: SAVEPOINT+key, effect; check+COMMIT`,
    `2 + 1/${GROUP}`,
    GROUP,
    async (c, ids) => {
      let txid: string | undefined;
      for (const id of ids) {
        const r = last(await c.query(`${txid === undefined ? 'BEGIN; ' : ''}SAVEPOINT s; ${insertKeySql('bench', id, txid)}`));
        txid = String(r.rows[0].txid);
        await c.query(EFFECT, [id]);
      }
      await c.query(`${checkSql(String(txid))}; COMMIT`);
    },
  ],
  [
    `now, group of ${GROUP}: BEGIN+locks+keys read, effects, keys+check+COMMIT`,
    `1 + 2/${GROUP}`,
    GROUP,
    async (c, ids) => {
      const r = last(await c.query(openGroupSql('bench', ids)));
      for (const id of ids) await c.query(EFFECT, [id]);
      await c.query(`${insertKeysSql('bench', ids, String(r.rows[0].txid))}; COMMIT`);
    },
  ],
];

/** CPU seconds of the backend `pid`. */
function backendCpuS(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

interface Sample {
  wallUs: number;
  clientUs: number;
  backendUs: number;
}

async function measure(c: Client, backend: number, size: number, way: Way, tag: string): Promise<Sample> {
  const cpu0 = process.cpuUsage();
  const b0 = backendCpuS(backend);
  const t0 = performance.now();
  for (let i = 0; i < N; i += size)
    await way(
      c,
      Array.from({ length: Math.min(size, N - i) }, (_, k) => `${tag}-${i + k}`),
    );
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { wallUs: (wall * 1000) / N, clientUs: (cpu.user + cpu.system) / N, backendUs: ((backendCpuS(backend) - b0) * 1e6) / N };
}

async function main(): Promise<void> {
  psql(`CREATE DATABASE ${DB}`, 'postgres');
  const pool = new Pool({ connectionString: DB_URL, max: 1 });
  const c = new Client({ connectionString: DB_URL });
  try {
    await migrateTables(pgAdapter(pool));
    await pool.end();
    psql('CREATE TABLE bench_effects (id text NOT NULL)');
    await c.connect();
    const backend = Number((await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    const samples: Sample[][] = ways.map(() => []);
    for (let r = 0; r < ROUNDS; r++) {
      const order = ways.map((_, i) => i);
      if (r % 2 === 1) order.reverse();
      for (const i of order) {
        samples[i].push(await measure(c, backend, ways[i][2], ways[i][3], `r${r}-w${i}`));
        await c.query('TRUNCATE bench_effects, rabbit_retry_inbox');
        await c.query('VACUUM ANALYZE rabbit_retry_inbox');
      }
    }
    const med = (i: number, k: keyof Sample) => median(samples[i].map((s) => s[k]));
    const rows = ways.map(([name, trips], i) => [
      name,
      trips,
      `${fmt(med(i, 'wallUs'), 0)} (${fmt(med(i, 'wallUs') / med(0, 'wallUs'))}x)`,
      `${fmt(med(i, 'clientUs'), 0)} (${fmt(med(i, 'clientUs') / med(0, 'clientUs'))}x)`,
      `${fmt(med(i, 'backendUs'), 0)} (${fmt(med(i, 'backendUs') / med(0, 'backendUs'))}x)`,
    ]);
    console.log(`inbox statements: ${N} messages in a row on one connection, median of ${ROUNDS} alternating rounds; µs per message (x plain)`);
    console.log(table(['statements', 'round trips', 'wall', 'client CPU', 'backend CPU'], rows));
  } finally {
    await c.end().catch(() => undefined);
    psql(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`, 'postgres');
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
