/**
 * The retry table's scheduler stops on request, mid-drain, against the
 * machine's PostgreSQL and broker: waiting for a token of a slow rate (the
 * table's or a dependency's), waiting on confirms that do not come, and in a
 * process stopped with SIGTERM. What it had not moved stays in the table, due
 * as before; nothing is lost, and nothing it deleted is published twice.
 *
 * One database `rr_test_<random>` per run (created in beforeAll, dropped in
 * afterAll), emptied after each test.
 */
import path from 'node:path';

import { type CloseResult, RabbitRetry, type RetryTableOptions } from '../lib';
import { freezeProxy, type FreezeProxy } from './fixtures/freeze-proxy';
import {
  holdLock,
  type Script,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  drainAll,
  dropTestDatabase,
  pgUrl,
  psql,
  psqlRows,
  recordingLogger,
  sleep,
  startScript,
  testQueue,
  track,
  waitFor,
} from './helpers';

let db = '';
let url = '';
const scripts: Script[] = [];
const proxies: FreezeProxy[] = [];

beforeAll(() => {
  db = createTestDatabase();
  url = pgUrl(db);
});

afterEach(async () => {
  for (const s of scripts.splice(0)) {
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    await s.exited;
  }
  await cleanup();
  for (const p of proxies.splice(0)) await p.close();
  if (psql("SELECT to_regclass('message_retries') IS NOT NULL", db) === 't') {
    psql('DELETE FROM message_retries', db);
    psql('DELETE FROM rabbit_retry_rates', db);
  }
});

afterAll(async () => {
  await closeAmqp();
  if (db) dropTestDatabase(db);
});

/** A row as the table holds it after the stop. */
interface LeftRow {
  message_id: string;
  next_attempt_ms: number | null;
  last_error: string | null;
  paused: boolean;
}

function leftRows(queue: string): LeftRow[] {
  return psqlRows<LeftRow>(
    `SELECT message_id, (extract(epoch FROM next_attempt_at) * 1000)::float8 AS next_attempt_ms, last_error, paused
     FROM message_retries WHERE queue = '${queue}' ORDER BY id`,
    db,
  );
}

/**
 * Stores `n` messages of `queue` as held rows of dependency `dependency`
 * (a consumer with `delays: []` fails each, then it is closed), with a client
 * that runs no scheduler; resolves to that client and the message ids.
 */
async function storeHeldRows(queue: string, n: number, dependency: string): Promise<{ rr: RabbitRetry; ids: string[] }> {
  const rr = await connectClient({ retryTable: { url, scheduler: false } });
  const consumer = track(
    await rr.consume({ queue, prefetch: 50, onFailure: { delays: [], table: { dependency: () => dependency, nextAttemptAt: () => null } } }, async () => {
      throw new Error('carrier down');
    }),
  );
  const ids = Array.from({ length: n }, (_, i) => `${dependency}-${i}`);
  await Promise.all(ids.map((id) => rr.publish('', queue, { id }, { messageId: id })));
  await waitFor(() => consumer.stats().stored === n, 30_000, `${n} rows stored`);
  await consumer.close();
  return { rr, ids };
}

/**
 * What the stop left: every message in the work queue came from a row that
 * is gone, exactly once; every other row is still in the table, due as it
 * was (not marked as a failed publish); together they are all the rows.
 */
async function checkNothingLostOrDoubled(queue: string, ids: string[]): Promise<{ published: string[]; left: LeftRow[] }> {
  const got = await drainAll(queue, 500);
  const published = got.map((m) => String(m.properties.messageId));
  const counts = new Map<string, number>();
  for (const id of published) counts.set(id, (counts.get(id) ?? 0) + 1);
  expect([...counts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  const left = leftRows(queue);
  const leftIds = new Set(left.map((r) => r.message_id));
  expect(published.filter((id) => leftIds.has(id))).toEqual([]);
  expect(published.length + left.length).toBe(ids.length);
  expect([...published, ...leftIds].sort()).toEqual([...ids].sort());
  for (const r of left) {
    expect(r.paused).toBe(false);
    expect(r.next_attempt_ms).not.toBeNull();
    expect(r.next_attempt_ms ?? Infinity).toBeLessThanOrEqual(Date.now());
    expect(r.last_error).toBe('carrier down');
  }
  return { published, left };
}

/** Connects a scheduler at `table`'s rates, resumes the held rows, and closes it `afterMs` later; resolves to the close's result, time and warnings. */
async function closeMidDrain(
  holder: RabbitRetry,
  dependency: string,
  table: Partial<RetryTableOptions>,
  afterMs: number,
): Promise<{ result: CloseResult; closeMs: number; warnings: string[] }> {
  const logger = recordingLogger();
  const rr = await connectClient({ logger, retryTable: { url, ...table } });
  expect(await holder.retryTable.resume({ dependency })).toBeGreaterThan(0);
  await sleep(afterMs);
  const started = Date.now();
  const result = await rr.close();
  const closeMs = Date.now() - started;
  return { result, closeMs, warnings: logger.warnings };
}

describe('the scheduler stops on request, mid-drain', () => {
  test('waiting for a token of a rate of 1 a second: close() resolves within about a second, and the rows it had not published stay due', async () => {
    const queue = testQueue([]);
    const { rr: holder, ids } = await storeHeldRows(queue, 20, 'slow-table');
    const { result, closeMs, warnings } = await closeMidDrain(holder, 'slow-table', { ratePerSec: 1 }, 2000);
    process.stdout.write(`table rate 1/s: close() took ${closeMs} ms; ${JSON.stringify(result)}\n`);
    expect(closeMs).toBeLessThan(3000);
    const { published, left } = await checkNothingLostOrDoubled(queue, ids);
    expect(published.length).toBeGreaterThanOrEqual(1);
    expect(left.length).toBeGreaterThan(10);
    expect(result.retryTable).toEqual({ published: published.length, unconfirmed: 0, due: left.length });
    expect(warnings).toEqual([
      `rabbit-retry: the retry table's scheduler stopped mid-drain: ${published.length} row(s) published, ${left.length} due row(s) left in the table for the next scheduler`,
    ]);
  }, 60_000);

  test("waiting for a token of a dependency's own rate of 1 a second: the same", async () => {
    const queue = testQueue([]);
    const { rr: holder, ids } = await storeHeldRows(queue, 20, 'slow-carrier');
    const { result, closeMs, warnings } = await closeMidDrain(holder, 'slow-carrier', { ratePerSec: 1000, dependencyRates: { 'slow-carrier': 1 } }, 2000);
    process.stdout.write(`dependency rate 1/s: close() took ${closeMs} ms; ${JSON.stringify(result)}\n`);
    expect(closeMs).toBeLessThan(3000);
    const { published, left } = await checkNothingLostOrDoubled(queue, ids);
    expect(published.length).toBeGreaterThanOrEqual(1);
    expect(left.length).toBeGreaterThan(10);
    expect(result.retryTable).toEqual({ published: published.length, unconfirmed: 0, due: left.length });
    expect(warnings).toHaveLength(1);
  }, 60_000);

  test('waiting on the database (its rates locked by another session): close() does not wait for it', async () => {
    const queue = testQueue([]);
    const { rr: holder, ids } = await storeHeldRows(queue, 20, 'locked-rates');
    const rr = await connectClient({ logger: recordingLogger(), retryTable: { url, ratePerSec: 1000 } });
    await waitFor(() => psql("SELECT count(*) FROM rabbit_retry_rates WHERE bucket = ''", db) === '1', 10_000, 'the scheduler to start');
    const lock = await holdLock(db, 'LOCK TABLE rabbit_retry_rates IN ACCESS EXCLUSIVE MODE');
    let closeMs = -1;
    let result: CloseResult | undefined;
    try {
      expect(await holder.retryTable.resume({ dependency: 'locked-rates' })).toBe(20);
      // The scheduler now waits for a token, behind the lock.
      await sleep(1500);
      const started = Date.now();
      const closing = rr.close().then((r) => {
        closeMs = Date.now() - started;
        result = r;
      });
      await Promise.race([closing, sleep(5000)]);
      process.stdout.write(`rates locked: close() took ${closeMs < 0 ? 'more than 5000' : closeMs} ms; ${JSON.stringify(result)}\n`);
    } finally {
      await lock.release();
    }
    expect(closeMs).toBeGreaterThanOrEqual(0);
    expect(closeMs).toBeLessThan(3000);
    const { published, left } = await checkNothingLostOrDoubled(queue, ids);
    expect(published).toEqual([]);
    expect(left).toHaveLength(20);
    expect(result?.retryTable?.published).toBe(0);
    expect(result?.retryTable?.unconfirmed).toBe(0);
    // The statement the stop cut short left with its connection: the count of due rows did not wait behind it.
    expect(result?.retryTable?.due).toBe(20);
  }, 60_000);

  test('waiting on confirms that never come: close() waits about a second for them, then leaves their rows as they were', async () => {
    const queue = testQueue([]);
    const { rr: holder, ids } = await storeHeldRows(queue, 20, 'no-confirm');
    const proxy = await freezeProxy();
    proxies.push(proxy);
    // The scheduler's connection goes through the proxy, which stops passing its
    // bytes to the broker once it is connected: its publishes never arrive, and
    // no confirm comes back (closing the proxy later drops what it held).
    const logger = recordingLogger();
    const rr = await connectClient({
      url: `amqp://guest:guest@127.0.0.1:${proxy.port}`,
      logger,
      connectTimeoutMs: 1000,
      retryTable: { url, ratePerSec: 1000 },
    });
    await waitFor(() => psql("SELECT count(*) FROM rabbit_retry_rates WHERE bucket = ''", db) === '1', 10_000, 'the scheduler to start');
    proxy.freeze({ toBroker: true, toClient: false });
    expect(await holder.retryTable.resume({ dependency: 'no-confirm' })).toBe(20);
    // The batch is claimed (its rows locked) and published, its confirms awaited.
    await waitFor(
      () =>
        Number(
          psql(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'message_retries' AND l.mode = 'RowShareLock' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            db,
          ),
        ) > 0,
      10_000,
      'a batch claimed',
    );
    await sleep(1000);
    const started = Date.now();
    const result = await rr.close();
    const closeMs = Date.now() - started;
    process.stdout.write(`no confirms: close() took ${closeMs} ms; ${JSON.stringify(result)}\n`);
    // About a second for the confirms, and at most connectTimeoutMs for the frozen connection's close.
    expect(closeMs).toBeLessThan(4000);
    await proxy.close();
    const { published, left } = await checkNothingLostOrDoubled(queue, ids);
    expect(published).toEqual([]);
    expect(left).toHaveLength(20);
    expect(result.retryTable?.published).toBe(0);
    expect(result.retryTable?.unconfirmed).toBeGreaterThan(0);
    expect(result.retryTable?.due).toBe(20);
    expect(logger.warnings).toEqual([
      `rabbit-retry: the retry table's scheduler stopped mid-drain: 0 row(s) published, 20 due row(s) left in the table for the next scheduler; ${result.retryTable?.unconfirmed} of them were sent without a confirm, and will be published again`,
    ]);
  }, 90_000);

  test('a process that closes on SIGTERM exits within about a second, its rows published once or left due', async () => {
    const queue = testQueue([]);
    const { rr: holder, ids } = await storeHeldRows(queue, 20, 'sigterm');
    const s = startScript(path.join(__dirname, 'fixtures', 'table-scheduler.ts'), [url, '1']);
    scripts.push(s);
    await waitFor(
      () => {
        if (s.child.exitCode !== null) throw new Error(`scheduler exited: ${s.stderr()}`);
        return s.stdout().includes('ready\n');
      },
      30_000,
      'a scheduler process to connect',
    );
    expect(await holder.retryTable.resume({ dependency: 'sigterm' })).toBe(20);
    await sleep(2000);
    const started = Date.now();
    s.child.kill('SIGTERM');
    const { code } = await s.exited;
    const exitMs = Date.now() - started;
    process.stdout.write(`SIGTERM at rate 1/s: the process exited ${exitMs} ms later\n`);
    expect(code).toBe(0);
    expect(exitMs).toBeLessThan(3000);
    const lines = s
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    const last = JSON.parse(lines[lines.length - 1] ?? '{}') as { final?: boolean; published?: number };
    expect(last.final).toBe(true);
    const { published } = await checkNothingLostOrDoubled(queue, ids);
    expect(published.length).toBe(last.published);
  }, 60_000);
});
