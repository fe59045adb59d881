/**
 * The retry table (`message_retries` in PostgreSQL) against the machine's
 * PostgreSQL and broker: the failure path into it, the scheduler, pause and
 * resume, pauseWhen, several schedulers, the rate bound, a killed scheduler,
 * migrations, the shape check, stats, the alert, the gauge and NestJS.
 *
 * One database `rr_test_<random>` per run (created in beforeAll, dropped in
 * afterAll), emptied after each test; the migration and shape tests make
 * databases of their own, dropped in afterAll too.
 */
import 'reflect-metadata';

import path from 'node:path';

import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { DataPointType, MeterProvider, type MetricData, MetricReader } from '@opentelemetry/sdk-metrics';

import {
  type ConnectOptions,
  type Message,
  NonRetryableError,
  type ParkedEvent,
  type PublishFailedEvent,
  RabbitRetry,
  type RetryTableAlert,
  type RetryTableOptions,
  type StoredEvent,
  parkedQueueName,
  retryQueueName,
  type Delay,
} from '../lib';
import { Consume, OnFailure, RabbitRetryModule } from '../lib/nestjs';
import {
  AMQP_URL,
  holdLock,
  type Script,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  drain,
  drainAll,
  dropTestDatabase,
  getOne,
  pgUrl,
  psql,
  psqlRows,
  queueDepth,
  queueExists,
  queueUnacked,
  sleep,
  startScript,
  testQueue,
  track,
  waitFor,
  waitForOne,
} from './helpers';

// ---------------------------------------------------------------------------
// Per run: the database; per test: what the test started.

let db = '';
let url = '';
const extraDatabases: string[] = [];
const scripts: Script[] = [];
const apps: TestingModule[] = [];
const providers: MeterProvider[] = [];

beforeAll(() => {
  db = createTestDatabase();
  url = pgUrl(db);
});

afterEach(async () => {
  for (const s of scripts.splice(0)) {
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    await s.exited;
  }
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
  for (const p of providers.splice(0)) await p.shutdown().catch(() => undefined);
  // Connections back (a test may have refused them), and an empty table for the next test.
  psql(`ALTER DATABASE ${db} ALLOW_CONNECTIONS true`);
  if (psql("SELECT to_regclass('message_retries') IS NOT NULL", db) === 't') psql('DELETE FROM message_retries', db);
});

afterAll(async () => {
  await closeAmqp();
  for (const d of [db, ...extraDatabases]) if (d) dropTestDatabase(d);
});

// ---------------------------------------------------------------------------
// Helpers of this file.

class CarrierDown extends Error {
  override name = 'CarrierDown';
}

/** A row as PostgreSQL holds it (next_attempt_at as epoch ms). */
interface DbRow {
  id: number;
  queue: string;
  attempt: number;
  next_attempt_ms: number | null;
  paused: boolean;
  dependency: string | null;
  tenant: string | null;
  last_error: string | null;
  error_name: string | null;
  message_id: string | null;
  correlation_id: string | null;
}

/** The rows of `message_retries` (of `queue` when given), by id. */
function dbRows(queue?: string): DbRow[] {
  const where = queue === undefined ? 'true' : `queue = '${queue.replace(/'/g, "''")}'`;
  return psqlRows<DbRow>(
    `SELECT id, queue, attempt, (extract(epoch FROM next_attempt_at) * 1000)::float8 AS next_attempt_ms, paused,
            dependency, tenant, last_error, error_name, message_id, correlation_id
     FROM message_retries WHERE ${where} ORDER BY id`,
    db,
  );
}

function rowCount(): number {
  return Number(psql('SELECT count(*) FROM message_retries', db));
}

/** A client with the run's retry table (this process runs a scheduler unless `scheduler: false`). */
function connectTable(table: Partial<RetryTableOptions> = {}, options: ConnectOptions = {}): Promise<RabbitRetry> {
  return connectClient({ ...options, retryTable: { url, ...table } });
}

/**
 * Stores `n` messages of `queue` as rows through the library: a consumer with
 * `delays: []` fails each, then it is closed (nobody consumes `queue` after).
 * Rows wait for a person (`nextAttemptAt` null) unless `next` says otherwise.
 */
async function storeRows(
  rr: RabbitRetry,
  queue: string,
  n: number,
  opts: { prefix?: string; dependency?: string; next?: () => Date | null } = {},
): Promise<string[]> {
  const consumer = track(
    await rr.consume(
      {
        queue,
        prefetch: 50,
        onFailure: { delays: [], table: { dependency: () => opts.dependency, nextAttemptAt: opts.next ?? (() => null) } },
      },
      async () => {
        throw new CarrierDown('carrier down');
      },
    ),
  );
  const ids = Array.from({ length: n }, (_, i) => `${opts.prefix ?? 'm'}-${i}`);
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(ids.slice(i, i + 50).map((id) => rr.publish('', queue, { id }, { messageId: id })));
  }
  await waitFor(() => consumer.stats().stored === n, 30_000, `${n} rows stored`);
  await consumer.close();
  expect(consumer.stats()).toMatchObject({ stored: n, publishFailed: 0, parked: 0 });
  return ids;
}

/** Starts a scheduler alone in a child process (killed after the test). */
function startScheduler(ratePerSec: number): Script {
  const s = startScript(path.join(__dirname, 'fixtures', 'table-scheduler.ts'), [url, String(ratePerSec)]);
  scripts.push(s);
  return s;
}

/** The last counts a scheduler child printed. */
function schedulerCounts(s: Script): { final: boolean; published: number; publishFailed: number } | undefined {
  const lines = s
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'));
  const last = lines[lines.length - 1];
  return last ? (JSON.parse(last) as { final: boolean; published: number; publishFailed: number }) : undefined;
}

async function waitReady(s: Script): Promise<void> {
  await waitFor(
    () => {
      if (s.child.exitCode !== null) throw new Error(`scheduler exited: ${s.stderr()}`);
      return s.stdout().includes('ready\n');
    },
    30_000,
    'a scheduler process to connect',
  );
}

/** Stops a scheduler child with SIGTERM; resolves to its final counts. */
async function stopScheduler(s: Script): Promise<{ published: number; publishFailed: number }> {
  s.child.kill('SIGTERM');
  const { code } = await s.exited;
  expect(code).toBe(0);
  const c = schedulerCounts(s);
  expect(c?.final).toBe(true);
  return { published: c?.published ?? -1, publishFailed: c?.publishFailed ?? -1 };
}

/** Message ids and how many times each came. */
function countIds(ids: (string | undefined)[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const id of ids) m.set(String(id), (m.get(String(id)) ?? 0) + 1);
  return m;
}

/** An in-memory OpenTelemetry reader: collect() returns what the instruments hold now. */
class TestReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

async function gauge(reader: TestReader, name: string): Promise<number | undefined> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  const m: MetricData | undefined = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((x) => x.descriptor.name === name);
  if (!m) return undefined;
  expect(m.dataPointType).toBe(DataPointType.GAUGE);
  return (m.dataPoints as { value: number }[])[0]?.value;
}

// ---------------------------------------------------------------------------

describe('the failure path into the table', () => {
  test('a failure past the delays becomes a row with its dependency, tenant, error, ids and due time; acked only once the row exists', async () => {
    const delays: Delay[] = ['200ms'];
    const queue = testQueue(delays);
    const rr = await connectTable({ scheduler: false });
    const due = new Date(Date.now() + 3_600_000);
    const attempts: number[] = [];
    const nextAttemptArgs: number[] = [];
    const consumer = track(
      await rr.consume(
        {
          queue,
          onFailure: {
            delays,
            table: {
              dependency: (err) => (err instanceof CarrierDown ? 'carrier' : undefined),
              tenant: (msg) => msg.headers.tenant as string | undefined,
              nextAttemptAt: (_err, attempt) => {
                nextAttemptArgs.push(attempt);
                return due;
              },
            },
          },
        },
        async (msg: Message) => {
          attempts.push(msg.attempt);
          throw new CarrierDown('carrier contract lapsed');
        },
      ),
    );
    // What the database and the broker held when the event fired.
    const atEvent: { event: StoredEvent; rows: DbRow[] }[] = [];
    consumer.on('stored', (event) => atEvent.push({ event, rows: dbRows(queue) }));

    await rr.publish('', queue, { orderId: 7 }, { messageId: 'order-7', correlationId: 'corr-7', headers: { tenant: 'acme' } });
    await waitFor(() => atEvent.length === 1, 10_000, "the 'stored' event");

    const { event, rows } = atEvent[0];
    expect(event).toMatchObject({ queue, messageId: 'order-7', attempt: 2, dependency: 'carrier', error: 'carrier contract lapsed' });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toEqual({
      id: event.rowId,
      queue,
      attempt: 2,
      next_attempt_ms: due.getTime(),
      paused: false,
      dependency: 'carrier',
      tenant: 'acme',
      last_error: 'carrier contract lapsed',
      error_name: 'CarrierDown',
      message_id: 'order-7',
      correlation_id: 'corr-7',
    });
    // Once through the retry queue (attempt 0, then 1), then the table with attempt 2.
    expect(attempts).toEqual([0, 1]);
    // The row's due time came from the call for attempt 2 (the callbacks also run, unused, on the retry-queue failure).
    expect(nextAttemptArgs[nextAttemptArgs.length - 1]).toBe(2);
    // Acked: nothing ready, nothing unacked, nothing parked or waiting in the retry queue.
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(await queueDepth(retryQueueName(queue, '200ms'))).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(consumer.stats()).toMatchObject({ failed: 2, retried: 1, stored: 1, parked: 0, publishFailed: 0 });

    const listed = await rr.retryTable.list({ dependency: 'carrier' });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({
      id: event.rowId,
      queue,
      attempt: 2,
      nextAttemptAt: due,
      paused: false,
      dependency: 'carrier',
      tenant: 'acme',
      lastError: 'carrier contract lapsed',
      errorName: 'CarrierDown',
      messageId: 'order-7',
      correlationId: 'corr-7',
    });

    // After close the broker gives back nothing: the message was acked, not left unacked.
    await consumer.close();
    expect(await queueDepth(queue)).toBe(0);
  });

  test('while the insert cannot commit (table locked) the message stays unacked; the ack follows the commit', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const stored: StoredEvent[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [], table: { dependency: () => 'carrier', nextAttemptAt: () => null } } }, async () => {
        throw new CarrierDown('carrier down');
      }),
    );
    consumer.on('stored', (e) => stored.push(e));
    // SHARE mode blocks INSERT (ROW EXCLUSIVE) but not reads.
    const lock = await holdLock(db, 'LOCK TABLE message_retries IN SHARE MODE');
    let released = false;
    try {
      await rr.publish('', queue, { orderId: 1 }, { messageId: 'locked-1' });
      await waitFor(() => consumer.stats().failed === 1, 10_000, 'the handler to fail');
      await sleep(500);
      expect(stored).toHaveLength(0);
      expect(dbRows(queue)).toHaveLength(0);
      expect(await queueUnacked(queue)).toBe(1);
      await lock.release();
      released = true;
    } finally {
      if (!released) await lock.release();
    }
    await waitFor(() => stored.length === 1, 10_000, "the 'stored' event after the commit");
    expect(dbRows(queue).map((r) => r.message_id)).toEqual(['locked-1']);
    await waitFor(async () => (await queueUnacked(queue)) === 0, 10_000, 'the ack');
    expect(await queueDepth(queue)).toBe(0);
  });

  test('delays: [] uses the table alone; nextAttemptAt returning null holds the row for a person', async () => {
    const queue = testQueue([]);
    const rr = await connectTable();
    const attempts: number[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [], table: { dependency: () => 'carrier', nextAttemptAt: () => null } } }, async (msg) => {
        attempts.push(msg.attempt);
        throw new CarrierDown('waiting for a new contract');
      }),
    );
    const stored: StoredEvent[] = [];
    consumer.on('stored', (e) => stored.push(e));
    await rr.publish('', queue, { orderId: 2 }, { messageId: 'held-1' });
    await waitFor(() => stored.length === 1, 10_000, "the 'stored' event");
    expect(attempts).toEqual([0]);
    const rows = dbRows(queue);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ attempt: 1, next_attempt_ms: null, paused: false, dependency: 'carrier', message_id: 'held-1' });
    expect(stored[0]).toMatchObject({ rowId: rows[0].id, attempt: 1, messageId: 'held-1' });
    // Held rows are never due: the scheduler of this process leaves it.
    await sleep(800);
    expect(dbRows(queue)).toHaveLength(1);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(consumer.stats()).toMatchObject({ failed: 1, stored: 1, retried: 0, parked: 0 });
    expect(await rr.retryTable.stats()).toMatchObject({ rows: 1, held: 1, due: 0, schedulerPublished: 0 });
  });

  test('without nextAttemptAt a row is due in one minute', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [], table: {} } }, async () => {
        throw new Error('later');
      }),
    );
    const before = Date.now();
    await rr.publish('', queue, 'x', { messageId: 'default-1' });
    await waitFor(() => consumer.stats().stored === 1, 10_000, 'a row');
    const after = Date.now();
    const [row] = dbRows(queue);
    expect(row.next_attempt_ms).not.toBeNull();
    expect(row.next_attempt_ms as number).toBeGreaterThanOrEqual(before + 60_000);
    expect(row.next_attempt_ms as number).toBeLessThanOrEqual(after + 60_000);
    expect(row).toMatchObject({ dependency: null, tenant: null, error_name: 'Error', last_error: 'later' });
  });

  test('non-retryable failures park at once; a message past table.maxAttempts parks as exhausted', async () => {
    const queue = testQueue([]);
    const rr = await connectTable(); // the scheduler publishes due rows back
    const attempts = new Map<string, number[]>();
    const consumer = track(
      await rr.consume(
        { queue, onFailure: { delays: [], table: { dependency: () => 'carrier', maxAttempts: 2, nextAttemptAt: () => new Date() } } },
        async (msg) => {
          const id = String(msg.properties.messageId);
          attempts.set(id, [...(attempts.get(id) ?? []), msg.attempt]);
          if (msg.headers.kind === 'invalid') throw new NonRetryableError('order has no address');
          throw new CarrierDown('carrier down');
        },
      ),
    );
    const parked: ParkedEvent[] = [];
    const stored: StoredEvent[] = [];
    consumer.on('parked', (e) => parked.push(e));
    consumer.on('stored', (e) => stored.push(e));

    await rr.publish('', queue, { orderId: 1 }, { messageId: 'invalid-1', headers: { kind: 'invalid' } });
    await rr.publish('', queue, { orderId: 2 }, { messageId: 'down-1' });
    await waitFor(() => parked.length === 2, 20_000, 'both messages parked');

    expect(attempts.get('invalid-1')).toEqual([0]);
    // Twice through the table (rows with attempt 1 and 2), then exhausted.
    expect(attempts.get('down-1')).toEqual([0, 1, 2]);
    expect(stored.map((e) => [e.messageId, e.attempt])).toEqual([
      ['down-1', 1],
      ['down-1', 2],
    ]);
    expect(parked.find((e) => e.messageId === 'invalid-1')).toMatchObject({ reason: 'non-retryable', attempt: 0 });
    expect(parked.find((e) => e.messageId === 'down-1')).toMatchObject({ reason: 'exhausted', attempt: 2 });
    expect(dbRows(queue)).toHaveLength(0);
    const inParked = await drain(parkedQueueName(queue));
    expect(inParked.map((m) => [m.properties.messageId, m.headers['retry-reason'], m.headers['retry-attempt']]).sort()).toEqual([
      ['down-1', 'exhausted', 2],
      ['invalid-1', 'non-retryable', 0],
    ]);
    expect(inParked.find((m) => m.properties.messageId === 'down-1')?.headers['retry-error-name']).toBe('CarrierDown');
    expect(await queueDepth(queue)).toBe(0);
  });

  test('a database that refuses at failure time: publishFailed (RETRY_TABLE), the message stays unacked, and nothing is lost', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const options = { queue, onFailure: { delays: [], table: { dependency: () => 'carrier', nextAttemptAt: () => null } } };
    const handler = async () => {
      throw new CarrierDown('carrier down');
    };
    const consumer = track(await rr.consume(options, handler));
    const failed: PublishFailedEvent[] = [];
    const stored: StoredEvent[] = [];
    consumer.on('publishFailed', (e) => failed.push(e));
    consumer.on('stored', (e) => stored.push(e));
    try {
      psql(`ALTER DATABASE ${db} ALLOW_CONNECTIONS false`);
      psql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${db}'`);
      await rr.publish('', queue, { orderId: 3 }, { messageId: 'refused-1' });
      await waitFor(() => failed.length === 1, 20_000, "the 'publishFailed' event");
      expect(stored).toHaveLength(0);
      expect(consumer.stats()).toMatchObject({ failed: 1, stored: 0, publishFailed: 1, parked: 0 });
      expect(await queueUnacked(queue)).toBe(1);
      expect(await queueDepth(parkedQueueName(queue))).toBe(0);
      // Closing the consumer gives the unacked message back to the work queue.
      await consumer.close();
      expect(await queueDepth(queue)).toBe(1);
    } finally {
      psql(`ALTER DATABASE ${db} ALLOW_CONNECTIONS true`);
    }
    // With the database back, a new consumer stores it.
    const again = track(await rr.consume(options, handler));
    const storedAgain: StoredEvent[] = [];
    again.on('stored', (e) => storedAgain.push(e));
    await waitFor(() => storedAgain.length === 1, 20_000, 'the row once the database is back');
    expect(dbRows(queue).map((r) => r.message_id)).toEqual(['refused-1']);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);

    // The event named the table and carried a typed error.
    expect(failed[0]).toMatchObject({ queue, messageId: 'refused-1', target: 'the retry table' });
    expect(failed[0].error.code).toBe('RETRY_TABLE');
  });
});

describe('batched intake', () => {
  test('200 failures at once become 200 rows in far fewer transactions, each original acked after its commit', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const commits = () => Number(psql(`SELECT xact_commit FROM pg_stat_database WHERE datname = '${db}'`));
    psql('SELECT pg_stat_clear_snapshot()', db);
    const before = commits();
    await storeRows(rr, queue, 200, { prefix: 'batch', dependency: 'batch' });
    // pg_stat_database is updated when a backend reports; give it a moment.
    await sleep(1200);
    const used = commits() - before;
    expect(rowCount()).toBeGreaterThanOrEqual(200);
    expect(used).toBeLessThan(150);
  }, 60_000);

  test('an error message with a NUL byte is stored (as U+FFFD) and does not fail the rows around it', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const consumer = track(
      await rr.consume({ queue, prefetch: 20, onFailure: { delays: [], table: { dependency: () => 'nul', nextAttemptAt: () => null } } }, async (msg) => {
        throw new Error(msg.json<{ i: number }>().i === 3 ? 'bad\u0000byte' : 'carrier down');
      }),
    );
    await Promise.all(Array.from({ length: 10 }, (_, i) => rr.publish('', queue, { i }, { messageId: `nul-${i}` })));
    await waitFor(() => consumer.stats().stored === 10, 20_000, 'ten rows');
    expect(consumer.stats().publishFailed).toBe(0);
    const rows = psqlRows<{ last_error: string }>(`SELECT last_error FROM message_retries WHERE message_id = 'nul-3'`, db);
    expect(rows[0].last_error).toBe('bad\ufffdbyte');
  });
});

describe('the scheduler', () => {
  test('a due row is published once to its work queue with body, message id, correlation id and headers kept and retry-attempt set; the row is deleted', async () => {
    const queue = testQueue([]);
    const rr = await connectTable();
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [], table: { dependency: () => 'carrier', nextAttemptAt: () => null } } }, async () => {
        throw new CarrierDown('carrier down');
      }),
    );
    const stored: StoredEvent[] = [];
    consumer.on('stored', (e) => stored.push(e));
    await rr.publish('', queue, { orderId: 42 }, { messageId: 'due-1', correlationId: 'corr-42', headers: { 'x-trace': 'abc' } });
    await waitFor(() => stored.length === 1, 10_000, 'a row');
    await consumer.close(); // nobody consumes the work queue: what the scheduler publishes stays there
    const rowId = stored[0].rowId;

    // retryNow on a held row (nextAttemptAt null) makes it due now.
    await sleep(600);
    expect(await queueDepth(queue)).toBe(0);
    expect(await rr.retryTable.retryNow(rowId)).toBe(true);
    const m = await waitForOne(queue, 10_000);
    expect(JSON.parse(m.content.toString('utf8'))).toEqual({ orderId: 42 });
    expect(m.properties.messageId).toBe('due-1');
    expect(m.properties.correlationId).toBe('corr-42');
    expect(m.properties.contentType).toBe('application/json');
    expect(m.headers['x-trace']).toBe('abc');
    expect(m.headers['retry-attempt']).toBe(1);
    expect(m.routingKey).toBe(queue);
    await waitFor(() => rowCount() === 0, 5000, 'the row deleted');
    // Once: nothing more comes.
    await sleep(1000);
    expect(await getOne(queue)).toBeNull();
    expect((await rr.retryTable.stats()).schedulerPublished).toBe(1);
    expect(await rr.retryTable.retryNow(rowId)).toBe(false);
  });

  test('due rows go back to the consumer once each (handler calls counted)', async () => {
    const queue = testQueue([]);
    const rr = await connectTable();
    const calls = new Map<string, number[]>();
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [], table: { nextAttemptAt: () => new Date() } } }, async (msg) => {
        const id = String(msg.properties.messageId);
        calls.set(id, [...(calls.get(id) ?? []), msg.attempt]);
        if (msg.attempt === 0) throw new CarrierDown('first try fails');
      }),
    );
    const ids = Array.from({ length: 10 }, (_, i) => `once-${i}`);
    for (const id of ids) await rr.publish('', queue, { id }, { messageId: id });
    await waitFor(() => consumer.stats().acked === 10, 20_000, '10 messages handled after the table');
    await sleep(1000);
    expect([...calls.keys()].sort()).toEqual([...ids].sort());
    for (const id of ids) expect(calls.get(id)).toEqual([0, 1]);
    expect(consumer.stats()).toMatchObject({ stored: 10, acked: 10, failed: 10, parked: 0 });
    expect(rowCount()).toBe(0);
    expect((await rr.retryTable.stats()).schedulerPublished).toBe(10);
  });

  test('paused rows (by dependency, tenant, errorName) are not published until resumed; resume makes them due now', async () => {
    const queue = testQueue([]);
    const rr = await connectTable();
    const rt = rr.retryTable;
    const consumer = track(
      await rr.consume(
        {
          queue,
          onFailure: {
            delays: [],
            table: {
              dependency: (_e, msg) => msg.headers.dep as string,
              tenant: (msg) => msg.headers.tenant as string,
              nextAttemptAt: (err) => ((err as Error).name === 'Later' ? new Date(Date.now() + 3_600_000) : null),
            },
          },
        },
        async (msg) => {
          const e = new Error('failed');
          e.name = String(msg.headers.errorName);
          throw e;
        },
      ),
    );
    const send = (messageId: string, headers: Record<string, string>) => rr.publish('', queue, { messageId }, { messageId, headers });
    await send('by-dep', { dep: 'carrier', tenant: 't1', errorName: 'Held' });
    await send('by-tenant', { dep: 'bank', tenant: 'acme', errorName: 'Later' });
    await send('by-error', { dep: 'bank', tenant: 't2', errorName: 'Throttled' });
    await waitFor(() => consumer.stats().stored === 3, 10_000, '3 rows');
    await consumer.close();

    await expect(rt.pause({})).rejects.toThrow(/dependency, tenant or errorName/);
    expect(await rt.pause({ dependency: 'carrier' })).toBe(1);
    expect(await rt.pause({ tenant: 'acme' })).toBe(1);
    expect(await rt.pause({ errorName: 'Throttled' })).toBe(1);
    expect(await rt.pause({ dependency: 'bank', tenant: 'nobody' })).toBe(0);
    // Two of them due (in the past) yet paused: the scheduler must leave them.
    psql(`UPDATE message_retries SET next_attempt_at = now() - interval '1 second' WHERE message_id IN ('by-dep', 'by-error')`, db);
    await sleep(1200);
    expect(await queueDepth(queue)).toBe(0);
    expect(
      dbRows(queue)
        .map((r) => [r.message_id, r.paused])
        .sort(),
    ).toEqual([
      ['by-dep', true],
      ['by-error', true],
      ['by-tenant', true],
    ]);
    expect(await rt.stats()).toMatchObject({ rows: 3, paused: 3, due: 0 });

    expect(await rt.resume({ dependency: 'carrier' })).toBe(1);
    expect((await waitForOne(queue)).properties.messageId).toBe('by-dep');
    // A row due in an hour: resume makes it due now.
    expect(await rt.resume({ tenant: 'acme' })).toBe(1);
    expect((await waitForOne(queue)).properties.messageId).toBe('by-tenant');
    expect(await rt.resume({ errorName: 'Throttled' })).toBe(1);
    expect((await waitForOne(queue)).properties.messageId).toBe('by-error');
    await waitFor(() => rowCount() === 0, 5000, 'the rows deleted');
    await sleep(500);
    expect(await queueDepth(queue)).toBe(0);
    expect((await rt.stats()).schedulerPublished).toBe(3);
  });

  test('a pause outlives its rows: rows stored later start paused, and a watch started later lifts a pause left by another', async () => {
    const queue = testQueue([]);
    const rr = await connectTable();
    const rt = rr.retryTable;
    expect(await rt.pause({ dependency: 'carrier' })).toBe(0);
    expect(await rt.isPaused({ dependency: 'carrier' })).toBe(true);
    // Stored after the pause, due at once: still not published.
    await storeRows(rr, queue, 3, { prefix: 'late', dependency: 'carrier', next: () => new Date(Date.now() - 1000) });
    expect(dbRows(queue).map((r) => r.paused)).toEqual([true, true, true]);
    await sleep(1000);
    expect(await queueDepth(queue)).toBe(0);
    // Rows of another dependency are not covered by the pause.
    await storeRows(rr, testQueue([]), 1, { prefix: 'other', dependency: 'bank', next: () => null });
    expect(
      dbRows()
        .filter((r) => r.message_id === 'other-0')
        .map((r) => r.paused),
    ).toEqual([false]);

    // A watch that starts while the carrier is healthy (another process paused it) lifts the pause.
    const changes: { paused: boolean; rows: number }[] = [];
    const watch = rt.pauseWhen('carrier', () => true, { every: '100ms', onChange: (e) => changes.push({ paused: e.paused, rows: e.rows }) });
    try {
      await waitFor(() => changes.length === 1, 10_000, 'the resume');
      expect(changes[0]).toEqual({ paused: false, rows: 3 });
      expect(await rt.isPaused({ dependency: 'carrier' })).toBe(false);
      await waitFor(async () => (await queueDepth(queue)) === 3, 10_000, 'the 3 rows drained');
      await sleep(500);
      expect(changes).toHaveLength(1); // healthy checks after that change nothing
    } finally {
      watch.stop();
    }
  });

  test('pauseWhen pauses after N failed checks, resumes when the check passes, and the scheduler drains the rows', async () => {
    const queue = testQueue([]);
    const rr = await connectTable();
    const rt = rr.retryTable;
    const ids = await storeRows(rr, queue, 5, { prefix: 'watch', dependency: 'carrier', next: () => new Date(Date.now() + 3_600_000) });
    let healthy = false;
    let checks = 0;
    const changes: { dependency: string; paused: boolean; rows: number; checks: number }[] = [];
    const watch = rt.pauseWhen(
      'carrier',
      () => {
        checks++;
        return healthy;
      },
      { every: '100ms', failuresBeforePause: 3, onChange: (e) => changes.push({ ...e, checks }) },
    );
    try {
      await waitFor(() => changes.length === 1, 10_000, 'the pause');
      expect(changes[0]).toEqual({ dependency: 'carrier', paused: true, rows: 5, checks: 3 });
      expect(watch.paused).toBe(true);
      expect(dbRows(queue).every((r) => r.paused)).toBe(true);
      // Due but paused: nothing goes out.
      psql("UPDATE message_retries SET next_attempt_at = now() - interval '1 second'", db);
      await sleep(1000);
      expect(await queueDepth(queue)).toBe(0);
      expect(changes).toHaveLength(1);

      healthy = true;
      await waitFor(() => changes.length === 2, 10_000, 'the resume');
      expect(changes[1]).toMatchObject({ dependency: 'carrier', paused: false, rows: 5 });
      expect(watch.paused).toBe(false);
      await waitFor(async () => (await queueDepth(queue)) === 5, 10_000, 'the 5 rows drained');
      await waitFor(() => rowCount() === 0, 5000, 'the rows deleted');
      const got = await drain(queue);
      expect(got.map((m) => m.properties.messageId as string).sort()).toEqual([...ids].sort());
    } finally {
      watch.stop();
    }
  });

  test('two schedulers in two processes publish every one of 300 rows exactly once, and both take part', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const ids = await storeRows(rr, queue, 300, { prefix: 'two', dependency: 'bulk' });
    const a = startScheduler(500);
    const b = startScheduler(500);
    await waitReady(a);
    await waitReady(b);
    expect(await rr.retryTable.resume({ dependency: 'bulk' })).toBe(300);
    await waitFor(() => rowCount() === 0, 30_000, 'the table drained');
    await waitFor(async () => (await queueDepth(queue)) >= 300, 10_000, '300 messages in the work queue');
    await sleep(500);
    const got = await drainAll(queue);
    const counts = countIds(got.map((m) => m.properties.messageId as string | undefined));
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
    expect(got).toHaveLength(300);
    const [ca, cb] = [await stopScheduler(a), await stopScheduler(b)];
    expect(ca.published + cb.published).toBe(300);
    expect(ca.published).toBeGreaterThan(0);
    expect(cb.published).toBeGreaterThan(0);
    expect(ca.publishFailed + cb.publishFailed).toBe(0);
  }, 90_000);

  test('the rate bound: 100 due rows at ratePerSec 50 take at least ~1.9 s to drain', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ ratePerSec: 50 });
    await storeRows(rr, queue, 100, { prefix: 'rate', dependency: 'rate' });
    const started = Date.now();
    expect(await rr.retryTable.resume({ dependency: 'rate' })).toBe(100);
    await waitFor(async () => (await queueDepth(queue)) >= 100, 20_000, '100 messages published', 20);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(1900);
    await waitFor(() => rowCount() === 0, 5000, 'the rows deleted');
    expect((await rr.retryTable.stats()).schedulerPublished).toBe(100);
    expect(await queueDepth(queue)).toBe(100);
  }, 60_000);

  test('two schedulers share one ratePerSec: together 100 rows at 50 a second take at least ~1.9 s, and both take part', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    await storeRows(rr, queue, 100, { prefix: 'shared', dependency: 'shared' });
    const a = startScheduler(50);
    const b = startScheduler(50);
    await waitReady(a);
    await waitReady(b);
    const started = Date.now();
    expect(await rr.retryTable.resume({ dependency: 'shared' })).toBe(100);
    await waitFor(async () => (await queueDepth(queue)) >= 100, 20_000, '100 messages published', 20);
    // Two schedulers with a rate of their own each would take ~1 s.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    const [ca, cb] = [await stopScheduler(a), await stopScheduler(b)];
    expect(ca.published + cb.published).toBe(100);
    expect(ca.published).toBeGreaterThan(0);
    expect(cb.published).toBeGreaterThan(0);
    expect(await rr.retryTable.rates()).toContainEqual({ dependency: null, ratePerSec: 50 });
  }, 60_000);

  test("a dependency's own rate holds its rows back while the others drain at the table's rate", async () => {
    const slowQueue = testQueue([]);
    const fastQueue = testQueue([]);
    const rr = await connectTable({ ratePerSec: 1000, dependencyRates: { 'slow-carrier': 10 } });
    await storeRows(rr, slowQueue, 20, { prefix: 'slow', dependency: 'slow-carrier' });
    await storeRows(rr, fastQueue, 100, { prefix: 'fast', dependency: 'fast-carrier' });
    expect(await rr.retryTable.rates()).toEqual(
      expect.arrayContaining([
        { dependency: null, ratePerSec: 1000 },
        { dependency: 'slow-carrier', ratePerSec: 10 },
      ]),
    );
    const started = Date.now();
    await rr.retryTable.resume({ dependency: 'slow-carrier' });
    await rr.retryTable.resume({ dependency: 'fast-carrier' });
    await waitFor(async () => (await queueDepth(fastQueue)) >= 100, 20_000, 'the fast rows', 20);
    const fastMs = Date.now() - started;
    await waitFor(async () => (await queueDepth(slowQueue)) >= 20, 20_000, 'the slow rows', 20);
    const slowMs = Date.now() - started;
    expect(fastMs).toBeLessThan(1500);
    // 20 rows at 10 a second: about 2 s.
    expect(slowMs).toBeGreaterThanOrEqual(1800);
    await rr.retryTable.setRate('slow-carrier', null);
    expect((await rr.retryTable.rates()).map((r) => r.dependency)).not.toContain('slow-carrier');
    await expect(rr.retryTable.setRate('slow-carrier', 0)).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
  }, 60_000);

  test('ratePerSecPerProcess limits this process within the shared rate', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ ratePerSec: 1000, ratePerSecPerProcess: 40 });
    await storeRows(rr, queue, 40, { prefix: 'local', dependency: 'local' });
    const started = Date.now();
    await rr.retryTable.resume({ dependency: 'local' });
    await waitFor(async () => (await queueDepth(queue)) >= 40, 20_000, '40 messages published', 20);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  }, 60_000);

  test('a scheduler killed mid-drain: a second one finishes, every row is published, at most one batch twice', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const ids = await storeRows(rr, queue, 200, { prefix: 'kill', dependency: 'kill' });
    const first = startScheduler(40);
    await waitReady(first);
    expect(await rr.retryTable.resume({ dependency: 'kill' })).toBe(200);
    await waitFor(() => (schedulerCounts(first)?.published ?? 0) >= 50, 20_000, 'the first scheduler to publish 50 rows');
    first.child.kill('SIGKILL');
    const { signal } = await first.exited;
    expect(signal).toBe('SIGKILL');
    const publishedBeforeKill = schedulerCounts(first)?.published ?? 0;
    expect(rowCount()).toBeGreaterThan(0);

    const second = startScheduler(500);
    await waitReady(second);
    await waitFor(() => rowCount() === 0, 30_000, 'the second scheduler to drain the table');
    await sleep(500);
    const got = await drainAll(queue);
    const counts = countIds(got.map((m) => m.properties.messageId as string | undefined));
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    const duplicates = [...counts.values()].reduce((n, c) => n + (c - 1), 0);
    console.log(
      `killed scheduler: ${publishedBeforeKill}+ rows published before SIGKILL, ${got.length} messages for ${ids.length} rows, ${duplicates} duplicate(s)`,
    );
    // A batch holds at most a tenth of a second of the rate: 4 rows at 40 a second.
    expect(duplicates).toBeLessThanOrEqual(4);
    const c2 = await stopScheduler(second);
    expect(c2.published).toBeGreaterThan(0);
  }, 90_000);
});

describe('migrations and the table shape', () => {
  test('migrations run once when 5 clients connect at once to a fresh database', async () => {
    const fresh = createTestDatabase('mig');
    extraDatabases.push(fresh);
    const clients = await Promise.all(
      Array.from({ length: 5 }, (_, i) => connectClient({ connectionName: `rr-mig-${i}`, retryTable: { url: pgUrl(fresh), scheduler: false } })),
    );
    expect(clients).toHaveLength(5);
    expect(psqlRows('SELECT version, count(*)::int AS n FROM rabbit_retry_migrations GROUP BY version ORDER BY version', fresh)).toEqual([
      { version: 1, n: 1 },
      { version: 2, n: 1 },
      { version: 3, n: 1 },
      { version: 4, n: 1 },
      { version: 5, n: 1 },
      { version: 6, n: 1 },
    ]);
    expect(psql("SELECT count(*) FROM pg_class WHERE relname = 'message_retries' AND relkind = 'r'", fresh)).toBe('1');
    for (const c of clients) expect(await c.retryTable.stats()).toMatchObject({ rows: 0 });
    // Connecting again changes nothing.
    await connectClient({ retryTable: { url: pgUrl(fresh), scheduler: false } });
    expect(psql('SELECT count(*) FROM rabbit_retry_migrations', fresh)).toBe('6');
  });

  test('a message_retries table of another shape is refused with RETRY_TABLE, naming the column', async () => {
    const fresh = createTestDatabase('shape');
    extraDatabases.push(fresh);
    psql(
      `CREATE TABLE message_retries (
         id bigserial PRIMARY KEY, queue text NOT NULL, body bytea NOT NULL, properties jsonb NOT NULL,
         attempt text NOT NULL, next_attempt_at timestamptz, paused boolean NOT NULL DEFAULT false,
         dependency text, tenant text, last_error text, error_name text, message_id text, correlation_id text,
         first_failed_at timestamptz NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
      fresh,
    );
    let error: unknown;
    try {
      const rr = await RabbitRetry.connect({ url: AMQP_URL, retryTable: { url: pgUrl(fresh) } });
      await rr.close();
    } catch (err) {
      error = err;
    }
    // Not instanceof: errors of the native addon come from another realm than Jest's.
    expect(error).toBeDefined();
    const e = error as Error & { code?: string };
    expect(typeof e.message).toBe('string');
    expect(e.message).toContain('message_retries');
    expect(e.message).toContain("'attempt'");
    expect(e.message).toMatch(/attempt' is text, not integer/);
    // The table is left as it was.
    expect(psql("SELECT data_type FROM information_schema.columns WHERE table_name = 'message_retries' AND column_name = 'attempt'", fresh)).toBe('text');
    expect(e.code).toBe('RETRY_TABLE');
  });
});

describe('stats, alert and gauge', () => {
  test('stats(): rows by dependency, paused, held, due and the oldest due age with no scheduler; list() filters; the alert fires once', async () => {
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false });
    const alerts: RetryTableAlert[] = [];
    const events: RetryTableAlert[] = [];
    const consumer = track(
      await rr.consume(
        {
          queue,
          alert: { oldestDueAboveMs: 500, every: '200ms', onTableAlert: (a) => alerts.push(a) },
          onFailure: {
            delays: [],
            table: {
              dependency: (_e, msg) => msg.headers.dep as string | undefined,
              nextAttemptAt: (err) => {
                const when = (err as Error).message;
                if (when === 'past') return new Date(Date.now() - 2000);
                if (when === 'later') return new Date(Date.now() + 3_600_000);
                return null;
              },
            },
          },
        },
        async (msg) => {
          throw new Error(String(msg.headers.when));
        },
      ),
    );
    consumer.on('tableAlert', (a) => events.push(a));
    const send = async (messageId: string, headers: Record<string, string>) => {
      await rr.publish('', queue, { messageId }, { messageId, headers });
      await waitFor(() => dbRows(queue).some((r) => r.message_id === messageId), 10_000, `row ${messageId}`);
    };
    await send('a', { dep: 'carrier', when: 'past' });
    await send('b', { dep: 'carrier', when: 'held' });
    await send('c', { dep: 'bank', when: 'held' });
    await send('d', { when: 'later' });
    expect(await rr.retryTable.pause({ dependency: 'bank' })).toBe(1);

    const s = await rr.retryTable.stats();
    expect(s).toMatchObject({ rows: 4, paused: 1, held: 2, due: 1, schedulerPublished: 0, schedulerPublishFailed: 0 });
    expect([...s.byDependency].sort((x, y) => String(x.dependency).localeCompare(String(y.dependency)))).toEqual([
      { dependency: 'bank', rows: 1 },
      { dependency: 'carrier', rows: 2 },
      { dependency: null, rows: 1 },
    ]);
    expect(s.oldestDueAgeMs).toBeGreaterThanOrEqual(1500);

    expect((await rr.retryTable.list({ dependency: 'carrier' })).map((r) => r.messageId)).toEqual(['a', 'b']);
    expect((await rr.retryTable.list({ due: true })).map((r) => r.messageId)).toEqual(['a']);
    expect((await rr.retryTable.list({ limit: 2 })).map((r) => r.messageId)).toEqual(['a', 'b']);
    const d = (await rr.retryTable.list({})).find((r) => r.messageId === 'd');
    expect(d).toMatchObject({ dependency: null, paused: false, lastError: 'later', errorName: 'Error' });

    await waitFor(() => alerts.length >= 1, 10_000, 'the table alert');
    expect(alerts[0]).toMatchObject({ queue, threshold: 500 });
    expect(alerts[0].oldestDueAgeMs).toBeGreaterThan(500);
    // Once per crossing: later checks (every 200 ms) stay quiet.
    await sleep(1200);
    expect(alerts).toHaveLength(1);
    expect(events).toHaveLength(1);
    // Still no scheduler: the row waits and grows older.
    expect((await rr.retryTable.stats()).oldestDueAgeMs).toBeGreaterThan(s.oldestDueAgeMs);
  });

  test('the rabbit_retry.table.oldest_due_age gauge reports the oldest due row', async () => {
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    providers.push(provider);
    const queue = testQueue([]);
    const rr = await connectTable({ scheduler: false }, { meterProvider: provider });
    expect(await gauge(reader, 'rabbit_retry.table.oldest_due_age')).toBe(0);
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [], table: { nextAttemptAt: () => new Date(Date.now() - 2000) } } }, async () => {
        throw new Error('down');
      }),
    );
    await rr.publish('', queue, 'x', { messageId: 'gauge-1' });
    await waitFor(() => consumer.stats().stored === 1, 10_000, 'a row');
    expect(await gauge(reader, 'rabbit_retry.table.oldest_due_age')).toBeGreaterThanOrEqual(1500);
  });
});

describe('NestJS', () => {
  test('@OnFailure({ delays: [], table: { dependency } }) with forRoot({ retryTable }) stores a row', async () => {
    const queue = testQueue([]);

    @Injectable()
    class Shipments {
      calls = 0;

      @Consume({ queue })
      @OnFailure({ delays: [], table: { dependency: () => 'carrier' } })
      async ship(): Promise<void> {
        this.calls++;
        throw new CarrierDown('carrier contract lapsed');
      }
    }

    const app = await Test.createTestingModule({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, retryTable: { url } })],
      providers: [Shipments],
    }).compile();
    apps.push(app);
    await app.init();
    const publisher = await connectClient();
    const before = Date.now();
    await publisher.publish('', queue, { orderId: 9 }, { messageId: 'nest-9' });
    await waitFor(() => dbRows(queue).length === 1, 10_000, 'a row from the NestJS handler');
    const [row] = dbRows(queue);
    expect(row).toMatchObject({
      queue,
      attempt: 1,
      dependency: 'carrier',
      message_id: 'nest-9',
      error_name: 'CarrierDown',
      last_error: 'carrier contract lapsed',
      paused: false,
    });
    expect(row.next_attempt_ms as number).toBeGreaterThanOrEqual(before + 60_000);
    expect(app.get(Shipments).calls).toBe(1);
    expect(await queueExists(parkedQueueName(queue))).toBe(true);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(await queueDepth(queue)).toBe(0);
  });
});
