/**
 * The second act: the carrier down for "ninety minutes" (scaled to 12 s), and
 * the same 40 orders sent to two services side by side.
 *
 *   A  retry queues only (1s, 2s, 3s): the orders run out of retries and
 *      park; when the carrier is back an operator replays the parked queue
 *      with no rate bound, and every order hits the carrier in one burst.
 *   B  one retry queue, then the retry table in PostgreSQL: a health check
 *      (`retryTable.pauseWhen`) pauses the carrier's rows while it is down
 *      and resumes them when it turns green; the scheduler drains them at
 *      10 a second.
 *
 * Run by main.ts after act one (ACT=2 runs it alone). Needs PostgreSQL at
 * PG_URL (default postgres://postgres@127.0.0.1:5432/postgres) and psql: it
 * creates the database rabbit_retry_demo there, a new one each run (one an
 * earlier run left is dropped first), and the library creates its table.
 * Removes its queues, exchange and database at the end unless KEEP_QUEUES=1.
 */
import 'reflect-metadata';

import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';

import { type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

import { DEFAULT_URL, RabbitRetry, type Consumer, type DependencyWatch } from '../../lib';
import { RABBIT_RETRY, RabbitRetryConsumers } from '../../lib/nestjs';
import { QueuesOnlyModule, RetryTableModule } from './act-two.module';
import {
  A_DELAYS,
  B_DELAYS,
  B_DUE_IN_MS,
  CHECK_EVERY,
  DEADLINE_MS,
  DEMO_DATABASE,
  DEPENDENCY,
  FAILURES_BEFORE_PAUSE,
  FIRST_ORDER,
  ORDER_COUNT,
  OUTAGE_MS,
  OrderBook,
  OutageCarrier,
  PREFETCH,
  PUBLISH_EVERY_MS,
  TABLE_RATE_PER_SEC,
  TOPOLOGY_2 as T,
  type Where,
  orderIdOf,
  say,
  secs,
  startClock,
  waitFor,
} from './act-two.story';
import { sampleOrder } from './story';

const AMQP_URL = process.env.AMQP_URL ?? DEFAULT_URL;
const KEEP_QUEUES = process.env.KEEP_QUEUES === '1';
const NEST_LOGS = process.env.NEST_LOGS === '1';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

// ---------------------------------------------------------------- database

interface Database {
  /** The server's maintenance database (PG_URL), where the demo's database is created. */
  admin: string;
  /** The demo's database, for `retryTable.url`. */
  url: string;
  /** `url` without its password. */
  safe: string;
}

function database(): Database {
  const admin = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const u = new URL(admin);
  u.pathname = `/${DEMO_DATABASE}`;
  const url = u.toString();
  if (u.password) u.password = '***';
  return { admin, url, safe: u.toString() };
}

/** Runs one statement with psql; errors carry psql's message, never the URL. */
function psql(url: string, sql: string): string {
  try {
    return execFileSync('psql', [url, '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 15_000,
    }).trim();
  } catch (err) {
    const e = err as { code?: string; stderr?: string };
    if (e.code === 'ENOENT') throw new Error('psql is not installed; act two needs it to create its database');
    throw new Error((e.stderr ?? message(err)).trim().replace(/^(psql: )?/, 'psql: '));
  }
}

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/**
 * The run that created the demo's database (its comment), '' for none, or
 * `undefined` when there is no such database.
 */
function databaseOwner(db: Database): string | undefined {
  const row = psql(
    db.admin,
    `SELECT 'run:' || coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname = ${quote(DEMO_DATABASE)}`,
  );
  return row.startsWith('run:') ? row.slice('run:'.length) : undefined;
}

/**
 * Drops the demo's database when it exists, its open connections too; with
 * `owner`, only when that run created it. True when it dropped one.
 */
function dropDatabase(db: Database, owner?: string): boolean {
  const createdBy = databaseOwner(db);
  if (createdBy === undefined || (owner !== undefined && createdBy !== owner)) return false;
  try {
    psql(db.admin, `DROP DATABASE IF EXISTS ${DEMO_DATABASE} WITH (FORCE)`);
  } catch {
    // PostgreSQL before 13 has no FORCE.
    psql(db.admin, `DROP DATABASE IF EXISTS ${DEMO_DATABASE}`);
  }
  return true;
}

/** Drops the demo's database at PG_URL's server when this run created it; true when it did. For tidy.ts. */
export function dropDemoDatabase(): boolean {
  return dropDatabase(database(), T.prefix);
}

/**
 * Creates the demo's database, a new one marked as this run's: an earlier
 * run's is dropped first. True when there was one.
 */
function freshDatabase(db: Database): boolean {
  const dropped = dropDatabase(db);
  psql(db.admin, `CREATE DATABASE ${DEMO_DATABASE}`);
  psql(db.admin, `COMMENT ON DATABASE ${DEMO_DATABASE} IS ${quote(T.prefix)}`);
  return dropped;
}

// ---------------------------------------------------------------- the act

interface Measured {
  duringOutage: number;
  parked: number;
  moved: number;
  peak: number;
  pace: number;
  drainMs?: number;
  pausedPeak?: number;
}

function follow(consumer: Consumer, book: OrderBook): void {
  const to = (where: Where) => (e: { messageId?: string }) => book.moved(orderIdOf(e.messageId), where);
  consumer.on('retry', to('retry'));
  consumer.on('parked', to('parked'));
  consumer.on('stored', to('table'));
  consumer.on('publishFailed', (e) => say('-', `${consumer.queue}: could not move ${e.messageId ?? '?'} to ${e.target}: ${e.error.message}`));
  consumer.on('error', (err) => say('-', `${consumer.queue}: consumer error: ${err.message}`));
}

function consumerOf(app: INestApplicationContext, queue: string): Consumer {
  const c = app.get(RabbitRetryConsumers).get(queue);
  if (!c) throw new Error(`the application does not consume ${queue}`);
  return c;
}

function printHeader(db: Database, replaced: boolean): void {
  console.log(`act two   the carrier down for "ninety minutes", scaled to ${OUTAGE_MS / 1000} s; ${ORDER_COUNT} orders, one every ${PUBLISH_EVERY_MS} ms`);
  console.log(`exchange  ${T.exchange} (topic) -> the work queues of two services, prefetch ${PREFETCH} each`);
  console.log(`A         ${T.a.queue}: retry queues ${A_DELAYS.join(', ')}, then parked;`);
  console.log(`          when the carrier is back, an operator replays the parked queue with no rate bound`);
  console.log(
    `B         ${T.b.queue}: retry queue ${B_DELAYS.join(', ')}, then the retry table (dependency '${DEPENDENCY}', due in ${B_DUE_IN_MS / 1000} s);`,
  );
  console.log(
    `          pauseWhen('${DEPENDENCY}') checks its health every ${CHECK_EVERY}, pauses after ${FAILURES_BEFORE_PAUSE} failures; the scheduler drains ${TABLE_RATE_PER_SEC}/s`,
  );
  console.log(`table     message_retries in ${db.safe}, a new database${replaced ? ` (an earlier run's ${DEMO_DATABASE} was dropped)` : ''}`);
  console.log();
}

function pad(cells: string[]): string {
  return `${cells[0].padEnd(40)}${cells[1].padEnd(24)}${cells[2]}`;
}

function printSideBySide(a: Measured, b: Measured, lost: [number, number]): void {
  const ms = (v: number | undefined) => (v === undefined ? 'n/a' : secs(v));
  console.log();
  console.log(pad(['', 'A: retry queues only', 'B: retry table']));
  console.log(pad(['carrier calls during the outage', String(a.duringOutage), String(b.duringOutage)]));
  console.log(pad(['parked when the carrier came back', String(a.parked), String(b.parked)]));
  console.log(pad(['rows paused at the peak', '-', String(b.pausedPeak ?? 0)]));
  console.log(pad(['replayed / drained', `${a.moved} replayed, one burst`, `${b.moved} drained, ${TABLE_RATE_PER_SEC}/s`]));
  console.log(pad(['peak carrier calls/s after recovery', String(a.peak), String(b.peak)]));
  console.log(pad(['pace of the drain, calls/s', a.pace.toFixed(1), b.pace.toFixed(1)]));
  console.log(pad(['time to drain', ms(a.drainMs), ms(b.drainMs)]));
  console.log(pad(['lost', String(lost[0]), String(lost[1])]));
  console.log(
    `peak: the most carrier calls in any one second (a pace of ${TABLE_RATE_PER_SEC}/s puts ${TABLE_RATE_PER_SEC} or ${TABLE_RATE_PER_SEC + 1} there, by a few ms of jitter);`,
  );
  console.log('pace: the calls after recovery over the time from the first to the last;');
  console.log('time to drain: from the replay (A) or the health check turning green (B) to the last order rated');
}

/** Ready messages per queue, with the applications closed so that nothing is unacked. */
async function depthsOf(rr: RabbitRetry, queues: string[]): Promise<number> {
  let n = 0;
  for (const q of queues) n += (await rr.queueInfo(q))?.messages ?? 0;
  return n;
}

/** Removes the act's queues, exchange and database; false when something could not be removed. */
async function tidy(db: Database): Promise<boolean> {
  if (KEEP_QUEUES) {
    console.log(`kept      the queues of ${T.prefix} and the database ${DEMO_DATABASE}; KEEP_QUEUES=1`);
    return true;
  }
  const queues = [T.a.queue, ...T.a.retryQueues, T.a.parkedQueue, T.b.queue, ...T.b.retryQueues, T.b.parkedQueue];
  let ok = true;
  try {
    const rr = await RabbitRetry.connect({ url: AMQP_URL, connectionName: 'rabbit-retry-nest-demo-act2-tidy' });
    try {
      for (const q of queues) await rr.deleteQueue(q);
      await rr.deleteExchange(T.exchange);
    } finally {
      await rr.close();
    }
    console.log(`removed   ${T.exchange} and its ${queues.length} queues`);
  } catch (err) {
    ok = false;
    console.error(`could not remove act two's queues (${message(err)}); their names start with ${T.prefix}`);
  }
  try {
    if (dropDatabase(db, T.prefix)) console.log(`removed   the database ${DEMO_DATABASE}, with the retry table`);
  } catch (err) {
    ok = false;
    console.error(`could not drop the database ${DEMO_DATABASE} (${message(err)})`);
  }
  return ok;
}

/** Runs act two; resolves to the exit code. */
export async function runActTwo(): Promise<number> {
  const db = database();
  let replaced: boolean;
  try {
    replaced = freshDatabase(db);
  } catch (err) {
    throw new Error(`it needs PostgreSQL (bash scripts/postgres.sh starts one; PG_URL says where): ${message(err)}`);
  }
  printHeader(db, replaced);

  const carrierA = new OutageCarrier();
  const carrierB = new OutageCarrier();
  const bookA = new OrderBook();
  const bookB = new OrderBook();
  const apps: INestApplicationContext[] = [];
  let watch: DependencyWatch | undefined;
  let code = 1;
  try {
    const options = { logger: NEST_LOGS ? undefined : false, abortOnError: false } as const;
    const appA = await NestFactory.createApplicationContext(QueuesOnlyModule.register(carrierA, bookA), options);
    apps.push(appA);
    const appB = await NestFactory.createApplicationContext(RetryTableModule.register(carrierB, bookB, db.url), options);
    apps.push(appB);
    const rrA = appA.get<RabbitRetry>(RABBIT_RETRY);
    const rrB = appB.get<RabbitRetry>(RABBIT_RETRY);
    follow(consumerOf(appA, T.a.queue), bookA);
    follow(consumerOf(appB, T.b.queue), bookB);

    // The outage starts now.
    const t0 = Date.now();
    const deadline = t0 + DEADLINE_MS;
    startClock(t0);
    carrierA.start(t0, OUTAGE_MS);
    carrierB.start(t0, OUTAGE_MS);
    const recoversAt = carrierA.recoversAt;

    let pausedAt: number | undefined;
    let resumedAt: number | undefined;
    let resumedRows = 0;
    watch = rrB.retryTable.pauseWhen(DEPENDENCY, () => carrierB.healthy(), {
      every: CHECK_EVERY,
      failuresBeforePause: FAILURES_BEFORE_PAUSE,
      onChange: (e) => {
        if (e.paused) {
          pausedAt = Date.now();
          say(
            'B',
            `health check failed ${FAILURES_BEFORE_PAUSE} times in a row: '${e.dependency}' paused (${e.rows} rows yet; later ones are paused as they arrive)`,
          );
        } else {
          resumedAt = Date.now();
          resumedRows = e.rows;
        }
      },
    });

    // The shop publishes; every order goes to both services.
    for (let i = 0; i < ORDER_COUNT; i++) {
      if (i > 0) await sleep(PUBLISH_EVERY_MS);
      const orderId = FIRST_ORDER + i;
      bookA.published(orderId);
      bookB.published(orderId);
      await rrA.publish(T.exchange, T.routingKey, sampleOrder(orderId), {
        messageId: `order-${orderId}`,
        correlationId: randomUUID(),
        type: 'shipment.requested',
        appId: 'rabbit-retry-nest-demo',
      });
    }
    say('-', `${ORDER_COUNT} orders published to both services while the carrier answers 503`);

    const a: Measured = { duringOutage: 0, parked: 0, moved: 0, peak: 0, pace: 0 };
    const b: Measured = { duringOutage: 0, parked: 0, moved: 0, peak: 0, pace: 0, pausedPeak: 0 };

    const recovery = async () => {
      await waitFor(() => Date.now() >= recoversAt, deadline, 20);
      a.duringOutage = carrierA.callsDuringOutage;
      b.duringOutage = carrierB.callsDuringOutage;
      a.parked = bookA.count('parked');
      b.parked = bookB.count('parked');
      say('-', `the carrier is back; calls during the outage: A ${a.duringOutage}, B ${b.duringOutage}`, recoversAt);
    };

    const sideA = async (): Promise<boolean> => {
      if (await waitFor(() => bookA.count('parked') === ORDER_COUNT, deadline)) {
        say(
          'A',
          `retries ${A_DELAYS.join(', ')} used up: all ${ORDER_COUNT} parked, ${carrierA.calls} carrier calls, every one a 503`,
          bookA.lastAt('parked'),
        );
      }
      // The operator looks as often as B's health check does, and replays at once.
      await waitFor(() => carrierA.healthy(), deadline, 500);
      const parked = rrA.parked(T.a.queue);
      const replayedAt = Date.now();
      const r = await parked.replay({ ratePerSec: 1_000_000 });
      a.moved = r.replayed;
      say('A', `operator replays the parked queue with no rate bound: ${r.replayed} orders back on the work queue in ${r.durationMs} ms`, replayedAt);
      const drained = await waitFor(() => bookA.count('done') === ORDER_COUNT, deadline);
      const last = bookA.lastAt('done');
      a.drainMs = last - replayedAt;
      a.peak = carrierA.peakPerSecond(recoversAt);
      a.pace = carrierA.paceAfter(recoversAt);
      say(
        'A',
        `${bookA.count('done')} rated ${secs(a.drainMs)} after the replay, at ${a.pace.toFixed(0)} calls/s: ${a.peak} carrier calls in one second`,
        last,
      );
      return drained;
    };

    const sideB = async (): Promise<boolean> => {
      if (await waitFor(() => bookB.count('table') === ORDER_COUNT, deadline)) {
        say(
          'B',
          `all ${ORDER_COUNT} orders wait in the retry table after ${B_DELAYS.length + 1} attempts each; ${carrierB.calls} carrier calls`,
          bookB.lastAt('table'),
        );
      }
      // How many of our rows are paused, until the health check turns green.
      while (resumedAt === undefined && Date.now() < deadline) {
        const rows = await rrB.retryTable.list({ dependency: DEPENDENCY, limit: 1000 });
        const paused = rows.filter((r) => r.queue === T.b.queue && r.paused).length;
        b.pausedPeak = Math.max(b.pausedPeak ?? 0, paused);
        await sleep(250);
      }
      if (resumedAt === undefined) return false;
      const greenAt = resumedAt;
      say(
        'B',
        `health check green: ${resumedRows} rows resumed (${b.pausedPeak} were paused at the peak); the scheduler drains them at ${TABLE_RATE_PER_SEC}/s`,
        greenAt,
      );
      const drained = await waitFor(() => bookB.count('done') === ORDER_COUNT, deadline);
      const last = bookB.lastAt('done');
      b.drainMs = last - greenAt;
      b.peak = carrierB.peakPerSecond(recoversAt);
      b.pace = carrierB.paceAfter(recoversAt);
      b.moved = Number((await rrB.retryTable.stats()).schedulerPublished);
      say(
        'B',
        `${bookB.count('done')} rated ${secs(b.drainMs)} after the health check turned green, at ${b.pace.toFixed(1)} calls/s: at most ${b.peak} in one second`,
        last,
      );
      return drained;
    };

    const [, drainedA, drainedB] = await Promise.all([recovery(), sideA(), sideB()]);
    if (pausedAt === undefined) say('B', 'the health check never paused the carrier');
    watch.stop();
    watch = undefined;

    // Close the services (in-flight handlers finish), then count what is where.
    while (apps.length > 0) await apps.pop()?.close();
    const rr = await RabbitRetry.connect({ url: AMQP_URL, connectionName: 'rabbit-retry-nest-demo-act2-check' });
    let accounting: { done: number; parked: number; waiting: number; rows: number; lost: number }[];
    try {
      const count = async (book: OrderBook, queue: string, retryQueues: string[], parkedQueue: string) => {
        const done = book.count('done');
        const parked = await depthsOf(rr, [parkedQueue]);
        const waiting = await depthsOf(rr, [queue, ...retryQueues]);
        const rows = Number(psql(db.url, `SELECT count(*) FROM message_retries WHERE queue = ${quote(queue)}`));
        return { done, parked, waiting, rows, lost: book.size - done - parked - waiting - rows };
      };
      accounting = [await count(bookA, T.a.queue, T.a.retryQueues, T.a.parkedQueue), await count(bookB, T.b.queue, T.b.retryQueues, T.b.parkedQueue)];
    } finally {
      await rr.close();
    }
    printSideBySide(a, b, [accounting[0].lost, accounting[1].lost]);
    console.log();
    (['A', 'B'] as const).forEach((side, i) => {
      const x = accounting[i];
      const rows = side === 'B' ? ` + ${x.rows} rows in the table` : '';
      console.log(`${side}  ${ORDER_COUNT} published = ${x.done} done + ${x.parked} parked + ${x.waiting} in queues${rows}, ${x.lost} lost`);
    });
    const settled = drainedA && drainedB && accounting.every((x) => x.lost === 0 && x.done === ORDER_COUNT);
    console.log(
      settled
        ? `every order accounted for on both sides: ${ORDER_COUNT} rated by A and by B, 0 lost`
        : `NOT every order settled within ${DEADLINE_MS / 1000} s`,
    );
    code = settled ? 0 : 1;
  } catch (err) {
    console.error(`act two failed: ${message(err)}`);
    code = 1;
  } finally {
    watch?.stop();
    for (const app of apps) await app.close().catch(() => undefined);
    if (!(await tidy(db))) code = 1;
  }
  return code;
}

if (require.main === module) {
  runActTwo().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(`act two failed: ${message(err)}`);
      process.exitCode = 1;
    },
  );
}
