/**
 * `npm run bench:table`: the retry table at scale, on a database of its own
 * (created and dropped here).
 *
 *  1. Intake: TABLE_ROWS (5,000) messages wait in a work queue; a consumer
 *     (prefetch TABLE_PREFETCH, 200) fails each into the table, its dependency
 *     paused. Rows a second from the consumer's start to the last commit.
 *  2. Drain: those rows resumed with the shared rate far above what a
 *     scheduler can do; rows a second until the table is empty.
 *  3. Rate: two schedulers in two processes sharing ratePerSec 100 drain
 *     1,000 due rows; the rate they hold together over the middle of the run.
 *  4. Kill: a scheduler at an unbounded rate is SIGKILLed mid-drain and a
 *     second finishes: rows lost, and duplicates against the batch bound.
 *  5. A million rows (40% held, 40% paused, 20% waiting, over 100
 *     dependencies and 1,000 tenants): the latency of stats(), of list() of
 *     one dependency, and of pause/resume of a dependency of 100 rows and of
 *     one of 10,000, median of 5, with the plan PostgreSQL chose for each.
 *
 * Env: TABLE_ROWS (5000), TABLE_PREFETCH (200), TABLE_MILLION (1000000),
 * PGHOST_TEST/PGPORT_TEST/PGUSER_TEST, AMQP_URL.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

import { RabbitRetry } from '../lib';
import { AMQP_URL, cleanupOnSignal, depth, envInt, fmt, median, remember, runBenchmark, sleep, table, uniqueName, deleteQueues } from './common';
import { benchDatabase } from './pg';

const ROWS = envInt('TABLE_ROWS', 5000);
const PREFETCH = envInt('TABLE_PREFETCH', 200);
const MILLION = envInt('TABLE_MILLION', 1_000_000);
const { db: DB, url: DB_URL, psql } = benchDatabase('table');
const UNBOUNDED = 1_000_000;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

const rowCount = () => Number(psql('SELECT count(*) FROM message_retries'));

interface SchedulerChild {
  proc: ChildProcess;
  out: () => string;
  counts: () => { published: number } | undefined;
}

function startScheduler(rate: number): SchedulerChild {
  const proc = spawn(
    process.execPath,
    ['-r', 'ts-node/register/transpile-only', path.join(__dirname, '..', '__test__', 'fixtures', 'table-scheduler.ts'), DB_URL, String(rate)],
    {
      env: { ...process.env, AMQP_URL },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  proc.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  const counts = () => {
    const lines = out.split('\n').filter((l) => l.startsWith('{'));
    const last = lines[lines.length - 1];
    return last ? (JSON.parse(last) as { published: number }) : undefined;
  };
  return { proc, out: () => out, counts };
}

async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 20): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Stores `n` rows through the library: a consumer fails each into the table, its dependency paused. */
async function intake(rr: RabbitRetry, queue: string, n: number, dependency: string): Promise<number> {
  await rr.retryTable.pause({ dependency });
  const pub = await RabbitRetry.connect({ url: AMQP_URL });
  // The queue and its topology exist before the messages wait in it.
  const declare = await pub.consume({ queue, onFailure: { delays: [] } }, async () => undefined);
  await declare.close();
  for (let i = 0; i < n; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, n - i) }, (_, k) => pub.publish('', queue, { order: i + k }, { messageId: `o-${i + k}` })));
  }
  await pub.close();
  await until('the messages in the queue', async () => (await depth(queue)) === n, 30_000);
  const started = performance.now();
  const consumer = await rr.consume(
    { queue, prefetch: PREFETCH, onFailure: { delays: [], table: { dependency: () => dependency, nextAttemptAt: () => new Date() } } },
    async () => {
      throw new Error('carrier down');
    },
  );
  await until(`${n} rows stored`, () => consumer.stats().stored === n, 120_000, 5);
  const ms = performance.now() - started;
  await consumer.close();
  return (n / ms) * 1000;
}

async function main(): Promise<void> {
  cleanupOnSignal();
  psql(`DROP DATABASE IF EXISTS ${DB}`, 'postgres');
  psql(`CREATE DATABASE ${DB}`, 'postgres');
  const queues: string[] = [];
  const children: ChildProcess[] = [];
  const rows: string[][] = [];
  const notes: string[] = [];
  try {
    // 1 and 2: intake, then an unbounded drain by this process's scheduler.
    const queue = uniqueName('bench-table');
    queues.push(queue, `${queue}.parked`);
    remember(queues);
    const rr = await RabbitRetry.connect({ url: AMQP_URL, retryTable: { url: DB_URL, ratePerSec: UNBOUNDED } });
    log(`intake: ${ROWS} failures into the table (prefetch ${PREFETCH})`);
    const intakeRate = await intake(rr, queue, ROWS, 'bench');
    rows.push(['intake: failures → committed rows', `${fmt(intakeRate, 0)} rows/s`, `${ROWS} rows, one consumer at prefetch ${PREFETCH}`]);
    log('drain: resumed at an unbounded rate');
    const started = performance.now();
    await rr.retryTable.resume({ dependency: 'bench' });
    await until('the table to drain', () => rowCount() === 0, 120_000, 10);
    const drainRate = (ROWS / (performance.now() - started)) * 1000;
    rows.push(['drain: rows published, confirmed and deleted', `${fmt(drainRate, 0)} rows/s`, `${ROWS} rows, one scheduler, ratePerSec ${UNBOUNDED}`]);
    await until('the messages in the work queue', async () => ((await depth(queue)) ?? 0) >= ROWS, 30_000);
    await rr.close();

    // 3: two schedulers sharing 100 a second.
    log('rate: two schedulers sharing ratePerSec 100, 1,000 due rows');
    const rateQueue = uniqueName('bench-table-rate');
    queues.push(rateQueue, `${rateQueue}.parked`);
    remember(queues);
    const rr2 = await RabbitRetry.connect({ url: AMQP_URL, retryTable: { url: DB_URL, ratePerSec: 100, scheduler: false } });
    await intake(rr2, rateQueue, 1000, 'rate');
    const a = startScheduler(100);
    const b = startScheduler(100);
    children.push(a.proc, b.proc);
    await until('the schedulers', () => a.out().includes('ready') && b.out().includes('ready'), 30_000);
    await rr2.retryTable.resume({ dependency: 'rate' });
    // Skip the first second, then count over the next five.
    await sleep(1000);
    const d0 = (await depth(rateQueue)) ?? 0;
    const t0 = performance.now();
    await sleep(5000);
    const d1 = (await depth(rateQueue)) ?? 0;
    const held = ((d1 - d0) / (performance.now() - t0)) * 1000;
    const [pa, pb] = [a.counts()?.published ?? 0, b.counts()?.published ?? 0];
    rows.push([
      'two schedulers sharing ratePerSec 100',
      `${fmt(held, 1)} rows/s (${fmt(((held - 100) / 100) * 100, 1)}%)`,
      `over 5 s; the two published ${pa} and ${pb} so far`,
    ]);
    a.proc.kill('SIGTERM');
    b.proc.kill('SIGTERM');
    await rr2.retryTable.pause({ dependency: 'rate' });
    psql("DELETE FROM message_retries WHERE dependency = 'rate'");

    // 4: a scheduler killed mid-drain at an unbounded rate.
    log('kill: a scheduler SIGKILLed mid-drain, a second finishes');
    const killQueue = uniqueName('bench-table-kill');
    queues.push(killQueue, `${killQueue}.parked`);
    remember(queues);
    await intake(rr2, killQueue, ROWS, 'kill');
    const k1 = startScheduler(UNBOUNDED);
    children.push(k1.proc);
    await until('the first scheduler', () => k1.out().includes('ready'), 30_000);
    await rr2.retryTable.resume({ dependency: 'kill' });
    await until('a third of the rows', () => (k1.counts()?.published ?? 0) >= ROWS / 3, 60_000, 5);
    k1.proc.kill('SIGKILL');
    await new Promise((r) => k1.proc.once('exit', r));
    const k2 = startScheduler(UNBOUNDED);
    children.push(k2.proc);
    await until('the table to drain', () => rowCount() === 0, 120_000);
    k2.proc.kill('SIGTERM');
    await sleep(500);
    const got = (await depth(killQueue)) ?? 0;
    rows.push([
      'scheduler SIGKILLed mid-drain',
      `${ROWS - Math.min(ROWS, got)} lost, ${Math.max(0, got - ROWS)} duplicated`,
      `${got} messages for ${ROWS} rows; a batch holds at most 500 rows`,
    ]);
    await rr2.close();

    // 5: a million rows.
    log(`${MILLION} rows: stats(), list() of one dependency, pause/resume of one dependency`);
    psql(`INSERT INTO message_retries (queue, body, properties, attempt, next_attempt_at, paused, dependency, tenant, last_error, error_name, message_id, first_failed_at)
          SELECT 'bench-million', '\\x7b7d'::bytea, '{}'::jsonb, 1,
                 CASE WHEN g % 10 < 4 THEN NULL WHEN g % 10 = 9 THEN now() - interval '1 minute' ELSE now() + interval '1 hour' END,
                 g % 10 BETWEEN 4 AND 7, CASE WHEN g <= 100 THEN 'dep-small' ELSE 'dep-' || (g % 100) END,
                 'tenant-' || (g % 1000), 'carrier down', 'Error', 'm-' || g,
                 now() - (g || ' seconds')::interval
          FROM generate_series(1, ${MILLION}) g`);
    psql('VACUUM ANALYZE message_retries');
    const rr3 = await RabbitRetry.connect({ url: AMQP_URL, retryTable: { url: DB_URL, scheduler: false } });
    const time = async (f: () => Promise<unknown>) => {
      const ms: number[] = [];
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        await f();
        ms.push(performance.now() - t);
      }
      return median(ms);
    };
    const stats = await rr3.retryTable.stats();
    const statsMs = await time(() => rr3.retryTable.stats());
    const listMs = await time(() => rr3.retryTable.list({ dependency: 'dep-42', limit: 100 }));
    const pauseMs = await time(async () => {
      await rr3.retryTable.pause({ dependency: 'dep-7' });
      await rr3.retryTable.resume({ dependency: 'dep-7' });
    });
    const smallMs = await time(async () => {
      await rr3.retryTable.pause({ dependency: 'dep-small' });
      await rr3.retryTable.resume({ dependency: 'dep-small' });
    });
    await rr3.close();
    rows.push([`stats() on ${stats.rows} rows`, `${fmt(statsMs, 1)} ms`, `median of 5; ${stats.paused} paused, ${stats.held} held, ${stats.due} due`]);
    rows.push(['list({ dependency, limit: 100 })', `${fmt(listMs, 1)} ms`, 'median of 5']);
    rows.push(['pause + resume of a dependency of 100 rows', `${fmt(smallMs, 1)} ms`, 'median of 5']);
    rows.push(['pause + resume of a dependency of 10,000 rows', `${fmt(pauseMs, 1)} ms`, 'median of 5: two updates of every row it holds']);
    const plan = (sql: string) =>
      psql(`EXPLAIN ${sql}`)
        .split('\n')
        .filter((l) => /Scan|Index/.test(l))
        .map((l) => l.trim().replace(/\s+\(cost=.*$/, ''))
        .join('; ');
    notes.push(`stats() counts: ${plan('SELECT sum(n) FROM rabbit_retry_counts')}`);
    notes.push(`stats() due rows: ${plan('SELECT count(*), min(next_attempt_at) FROM message_retries WHERE NOT paused AND next_attempt_at <= now()')}`);
    notes.push(`list(): ${plan("SELECT id FROM message_retries WHERE dependency = 'dep-42' ORDER BY first_failed_at, id LIMIT 100")}`);
    notes.push(`pause/resume: ${plan("UPDATE message_retries SET paused = true WHERE dependency = 'dep-7' AND NOT paused")}`);
    notes.push(
      `scheduler claim: ${plan('SELECT id FROM message_retries WHERE NOT paused AND next_attempt_at <= now() ORDER BY next_attempt_at, id LIMIT 500 FOR UPDATE SKIP LOCKED')}`,
    );
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await deleteQueues(queues).catch(() => undefined);
    psql(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`, 'postgres');
  }
  const out: string[] = [];
  out.push('');
  out.push(`### The retry table at scale (PostgreSQL ${psql('SHOW server_version', 'postgres')}, 2 cores, RabbitMQ and PostgreSQL local)`);
  out.push('');
  out.push(table(['', 'result', ''], rows));
  out.push('');
  out.push('Plans:');
  for (const n of notes) out.push(`- ${n}`);
  console.log(out.join('\n'));
}

runBenchmark(main);
