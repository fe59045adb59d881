/**
 * The inbox (`consume({ inbox })`) against the machine's PostgreSQL and
 * broker: the handler's effects and the message's id committed together,
 * duplicates acked without calling the handler, rollbacks on a throw or a
 * failed commit that send the message the failure path, messages without an
 * id, `inbox.key`, the retention's cleanup, the option checks and the
 * migrations. One database `rr_test_<random>` per run.
 */
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { Pool, type PoolClient } from 'pg';

import {
  type DuplicateEvent,
  InboxError,
  type Message,
  NonRetryableError,
  type ParkedEvent,
  type RetryEvent,
  parkedQueueName,
  retryQueueName,
} from '../lib';
import {
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  dropTestDatabase,
  pgUrl,
  psql,
  psqlRows,
  queueExists,
  testQueue,
  track,
  waitFor,
  waitForOne,
  withChannel,
} from './helpers';
import { createEffects, effectsOf, inboxIdsOf, settled } from './inbox-fixture';

let db = '';
let pool: Pool;

beforeAll(() => {
  db = createTestDatabase('inbox');
  createEffects(db);
  psql('CREATE TABLE parents (id text PRIMARY KEY)', db);
  psql('CREATE TABLE children (id text PRIMARY KEY, parent text NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)', db);
  pool = new Pool({ connectionString: pgUrl(db), max: 20 });
});

afterEach(cleanup);

afterAll(async () => {
  await pool.end();
  await closeAmqp();
  dropTestDatabase(db);
});

/** The duplicates counted for consumer `consumer`. */
function duplicatesOf(consumer: string): number {
  return Number(psql(`SELECT coalesce((SELECT n FROM rabbit_retry_inbox_duplicates WHERE consumer = '${consumer}'), 0)`, db));
}

/** Records the handler's effect: one row of `effects`, keyed by the message id, in `tx`. */
async function writeEffect(tx: PoolClient, queue: string, msg: Message, note = 'done'): Promise<void> {
  await tx.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, $3)', [msg.properties.messageId ?? msg.text(), queue, note]);
}

// Each test runs with each message in a transaction of its own (group 1), and with the deliveries handed over together sharing one.
describe.each([1, 10])('inbox over a node-postgres pool, group %i', (group) => {
  it('commits the effect and the id together, then acks', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const consumer = track(await rr.consume({ queue, inbox: { pool, group } }, async (msg, { tx }) => writeEffect(tx, queue, msg)));
    await rr.publish('', queue, { n: 1 }, { messageId: `${queue}-1` });
    await waitFor(() => effectsOf(db, queue).length === 1, 10_000, 'the effect');
    await settled(queue);
    expect(effectsOf(db, queue)).toEqual([{ id: `${queue}-1`, note: 'done' }]);
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-1`]);
    expect(consumer.stats()).toMatchObject({ acked: 1, duplicates: 0, failed: 0 });
  });

  it('handles a message published twice with one id once: the second copy is a duplicate, acked and counted', async () => {
    const reader = new (class extends MetricReader {
      protected async onShutdown(): Promise<void> {}
      protected async onForceFlush(): Promise<void> {}
    })();
    const provider = new MeterProvider({ readers: [reader] });
    const rr = await connectClient({ meterProvider: provider });
    const queue = testQueue();
    const name = `${queue}-orders`;
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, prefetch: 10, inbox: { pool, group, consumer: name } }, async (msg, { tx }) => {
        calls++;
        await writeEffect(tx, queue, msg);
      }),
    );
    const duplicates: DuplicateEvent[] = [];
    consumer.on('duplicate', (e) => duplicates.push(e));
    // Both copies are in flight at once: the second waits on the first's row lock, then sees its commit.
    await rr.publish('', queue, 'a', { messageId: `${queue}-twice` });
    await rr.publish('', queue, 'a', { messageId: `${queue}-twice` });
    await waitFor(() => duplicates.length === 1, 10_000, 'the duplicate event');
    await settled(queue);
    expect(calls).toBe(1);
    expect(effectsOf(db, queue)).toHaveLength(1);
    expect(duplicates).toEqual([{ queue, consumer: name, messageId: `${queue}-twice` }]);
    expect(duplicatesOf(name)).toBe(1);
    expect(consumer.stats()).toMatchObject({ acked: 2, duplicates: 1 });
    const { resourceMetrics } = await reader.collect();
    const counted = resourceMetrics.scopeMetrics.flatMap((m) => m.metrics).find((m) => m.descriptor.name === 'rabbit_retry.inbox.duplicates');
    expect(counted?.dataPoints).toMatchObject([{ attributes: { queue }, value: 1 }]);
    await provider.shutdown();
  });

  it('acks a redelivery of a message whose effect was committed, without calling the handler', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    // The topology, declared by a first start of the consumer.
    await (await rr.consume({ queue, inbox: { pool, group } }, () => undefined)).close();
    await rr.publish('', queue, 'x', { messageId: `${queue}-lost-ack` });
    // A consumer committed the effect and the id, and its ack was lost: the broker redelivers.
    await withChannel(async (ch) => {
      await waitFor(async () => (await ch.checkQueue(queue)).messageCount === 1, 5_000, 'the message');
      const m = await ch.get(queue, { noAck: false });
      expect(m).not.toBe(false);
      psql(`INSERT INTO rabbit_retry_inbox (consumer, message_id) VALUES ('${queue}', '${queue}-lost-ack')`, db);
      psql(`INSERT INTO effects (id, queue) VALUES ('${queue}-lost-ack', '${queue}')`, db);
      // The channel closes without an ack: the message goes back, redelivered.
    });
    let calls = 0;
    let redelivered: boolean | undefined;
    const consumer = track(
      await rr.consume({ queue, inbox: { pool, group } }, (msg) => {
        calls++;
        redelivered = msg.redelivered;
      }),
    );
    const seen: DuplicateEvent[] = [];
    consumer.on('duplicate', (e) => seen.push(e));
    await waitFor(() => seen.length === 1, 10_000, 'the duplicate');
    await settled(queue);
    expect(calls).toBe(0);
    expect(redelivered).toBeUndefined();
    expect(duplicatesOf(queue)).toBe(1);
    expect(effectsOf(db, queue)).toHaveLength(1);
  });

  it('rolls back what a throwing handler wrote; the retried copy is handled once', async () => {
    const rr = await connectClient();
    const queue = testQueue(['200ms']);
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['200ms'] }, inbox: { pool, group } }, async (msg, { tx }) => {
        calls++;
        await writeEffect(tx, queue, msg, `attempt ${msg.attempt}`);
        if (msg.attempt === 0) throw new Error('carrier down');
      }),
    );
    const retries: RetryEvent[] = [];
    consumer.on('retry', (e) => retries.push(e));
    await rr.publish('', queue, 'r', { messageId: `${queue}-r` });
    await waitFor(() => effectsOf(db, queue).length === 1, 10_000, 'the retried effect');
    await settled(queue);
    await settled(retryQueueName(queue, '200ms'));
    expect(retries).toMatchObject([{ queue, target: retryQueueName(queue, '200ms'), error: 'carrier down', messageId: `${queue}-r` }]);
    expect(calls).toBe(2);
    expect(effectsOf(db, queue)).toEqual([{ id: `${queue}-r`, note: 'attempt 1' }]);
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-r`]);
  });

  it('survives its PostgreSQL backend terminated while a handler runs: the process lives, the message is retried and handled once', async () => {
    const rr = await connectClient();
    const queue = testQueue(['200ms']);
    const app = `rr-inbox-${queue}`.slice(0, 63);
    const own = new Pool({ connectionString: pgUrl(db), max: 2, application_name: app });
    own.on('error', () => undefined); // idle clients are the pool's: this test is about the one in the handler
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    let calls = 0;
    try {
      const consumer = track(
        await rr.consume({ queue, onFailure: { delays: ['200ms'] }, inbox: { pool: own, group } }, async (msg, { tx }) => {
          calls++;
          if (calls === 1) await held; // the backend is terminated while this transaction is open and idle
          await writeEffect(tx, queue, msg, `attempt ${msg.attempt}`);
        }),
      );
      const retries: RetryEvent[] = [];
      consumer.on('retry', (e) => retries.push(e));
      await rr.publish('', queue, 't', { messageId: `${queue}-t` });
      await waitFor(() => calls === 1, 10_000, 'the first call');
      await waitFor(
        () =>
          Number(
            psql(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '${app}' AND state LIKE 'idle in transaction%'`),
          ) === 1,
        10_000,
        "the handler's backend terminated",
      );
      await new Promise((r) => setTimeout(r, 200)); // the client hears of it before the handler goes on
      release();
      await waitFor(() => effectsOf(db, queue).length === 1, 10_000, 'the retried effect');
      await settled(queue);
      await settled(retryQueueName(queue, '200ms'));
      expect(retries).toHaveLength(1);
      expect(retries[0]).toMatchObject({ queue, target: retryQueueName(queue, '200ms') });
      expect(retries[0].error).toMatch(/connection error/); // the handler's own query on the closed client
      expect(calls).toBe(2);
      expect(effectsOf(db, queue)).toEqual([{ id: `${queue}-t`, note: 'attempt 1' }]);
      expect(inboxIdsOf(db, queue)).toEqual([`${queue}-t`]);
    } finally {
      release();
      await own.end();
    }
  });

  it('parks on a NonRetryableError, with nothing committed', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    track(
      await rr.consume({ queue, inbox: { pool, group } }, async (msg, { tx }) => {
        await writeEffect(tx, queue, msg);
        throw new NonRetryableError('bad order');
      }),
    );
    await rr.publish('', queue, 'n', { messageId: `${queue}-n` });
    const parked = await waitForOne(parkedQueueName(queue));
    expect(parked.properties.messageId).toBe(`${queue}-n`);
    expect(parked.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-last-error': 'bad order' });
    expect(effectsOf(db, queue)).toEqual([]);
    expect(inboxIdsOf(db, queue)).toEqual([]);
  });

  it('rolls back and retries when the commit fails (a deferred constraint)', async () => {
    const rr = await connectClient();
    const queue = testQueue(['200ms']);
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['200ms'], retryable: () => false }, inbox: { pool, group } }, async (msg, { tx }) => {
        calls++;
        await writeEffect(tx, queue, msg);
        // The child's parent is checked at COMMIT: missing on the first attempt.
        if (msg.attempt > 0) await tx.query('INSERT INTO parents (id) VALUES ($1)', [`${queue}-parent`]);
        await tx.query('INSERT INTO children (id, parent) VALUES ($1, $2)', [`${queue}-child`, `${queue}-parent`]);
      }),
    );
    const retries: RetryEvent[] = [];
    consumer.on('retry', (e) => retries.push(e));
    await rr.publish('', queue, 'c', { messageId: `${queue}-c` });
    await waitFor(() => effectsOf(db, queue).length === 1, 10_000, 'the effect of the second attempt');
    await settled(queue);
    // An inbox failure is retryable whatever onFailure.retryable says.
    expect(retries).toHaveLength(1);
    expect(retries[0].error).toMatch(/^inbox '.*': the inbox's database failed \(.*foreign key.*\); nothing was committed/);
    expect(calls).toBe(2);
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-c`]);
    expect(psql(`SELECT count(*) FROM children WHERE id = '${queue}-child'`, db)).toBe('1');
  });

  it('parks a message without an id at once, with what to do, and calls no handler', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, inbox: { pool, group } }, () => {
        calls++;
      }),
    );
    const parkedEvents: ParkedEvent[] = [];
    consumer.on('parked', (e) => parkedEvents.push(e));
    await rr.publish('', queue, { orderId: 'o-1' });
    const parked = await waitForOne(parkedQueueName(queue));
    expect(JSON.parse(parked.content.toString())).toEqual({ orderId: 'o-1' });
    expect(parked.headers).toMatchObject({
      'retry-reason': 'non-retryable',
      'retry-last-error': 'inbox: the message has no message id; give inbox.key to key it on a field of yours',
    });
    expect(calls).toBe(0);
    // The event follows the broker's confirm of the parked copy, which can be read first.
    await waitFor(() => parkedEvents.length > 0, 5000, 'the parked event');
    expect(parkedEvents).toHaveLength(1);
    expect(parkedEvents[0]).toMatchObject({ queue, reason: 'non-retryable' });
  });

  it('keys messages with inbox.key', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const handled: string[] = [];
    const consumer = track(
      await rr.consume({ queue, inbox: { pool, group, key: (msg) => msg.json<{ orderId: string }>().orderId } }, (msg) => {
        handled.push(msg.json<{ orderId: string }>().orderId);
      }),
    );
    const seen: DuplicateEvent[] = [];
    consumer.on('duplicate', (e) => seen.push(e));
    await rr.publish('', queue, { orderId: 'o-7' });
    await rr.publish('', queue, { orderId: 'o-8' });
    await rr.publish('', queue, { orderId: 'o-7' });
    await waitFor(() => seen.length === 1 && handled.length === 2, 10_000, 'two handled, one duplicate');
    await settled(queue);
    expect(handled.sort()).toEqual(['o-7', 'o-8']);
    expect(seen).toEqual([{ queue, consumer: queue, messageId: 'o-7' }]);
    expect(inboxIdsOf(db, queue)).toEqual(['o-7', 'o-8']);
  });

  it('parks a message whose inbox.key throws or answers a Promise that rejects, costing only that message', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const handled: string[] = [];
    track(
      await rr.consume(
        {
          queue,
          inbox: {
            pool,
            group,
            key: (msg) => {
              const { orderId } = msg.json<{ orderId: string }>();
              if (orderId === 'throws') throw new Error('no key here');
              if (orderId === 'rejects') return Promise.reject(new Error('later')) as never;
              return orderId;
            },
          },
        },
        (msg) => {
          handled.push(msg.json<{ orderId: string }>().orderId);
        },
      ),
    );
    for (const orderId of ['throws', 'rejects', 'o-9']) await rr.publish('', queue, { orderId });
    await waitFor(() => handled.length === 1, 10_000, 'the good one handled');
    const parked = [await waitForOne(parkedQueueName(queue)), await waitForOne(parkedQueueName(queue))];
    expect(parked.map((m) => m.headers?.['retry-reason'])).toEqual(['non-retryable', 'non-retryable']);
    expect(String(parked[0].headers?.['retry-last-error'])).toMatch(/^inbox: inbox\.key threw/);
    expect(String(parked[1].headers?.['retry-last-error'])).toMatch(/^inbox: inbox\.key /);
    expect(handled).toEqual(['o-9']);
    expect(inboxIdsOf(db, queue)).toEqual(['o-9']);
  });

  it('deletes the ids older than the retention, its own consumer only, and stops with the consumer', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const other = `${queue}-other`;
    psql(
      `INSERT INTO rabbit_retry_inbox (consumer, message_id, handled_at) VALUES
        ('${queue}', 'old-1', now() - interval '8 days'), ('${queue}', 'old-2', now() - interval '7 days 1 minute'),
        ('${queue}', 'recent', now() - interval '6 days'), ('${other}', 'old-3', now() - interval '8 days')`,
      db,
    );
    const consumer = track(await rr.consume({ queue, inbox: { pool, group, cleanupEvery: '100ms' } }, () => undefined));
    await waitFor(() => inboxIdsOf(db, queue).length === 1, 10_000, 'the old ids deleted');
    expect(inboxIdsOf(db, queue)).toEqual(['recent']);
    expect(inboxIdsOf(db, other)).toEqual(['old-3']);
    await consumer.close();
    psql(`INSERT INTO rabbit_retry_inbox (consumer, message_id, handled_at) VALUES ('${queue}', 'old-4', now() - interval '8 days')`, db);
    // A cleanup runs every 100 ms while the consumer runs; closed, none runs.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(inboxIdsOf(db, queue)).toEqual(['old-4', 'recent']);
  });

  it('a database that fails at BEGIN sends the message the failure path as an InboxError', async () => {
    const rr = await connectClient();
    const queue = testQueue(['200ms']);
    let fail = true;
    const flaky = {
      connect: async () => {
        const client = await pool.connect();
        if (!fail) return client;
        fail = false;
        client.release();
        throw new Error('connection refused');
      },
    };
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['200ms'] }, inbox: { pool: flaky, group, migrate: false } }, () => {
        calls++;
      }),
    );
    const retries: RetryEvent[] = [];
    consumer.on('retry', (e) => retries.push(e));
    await rr.publish('', queue, 'f', { messageId: `${queue}-f` });
    await waitFor(() => calls === 1, 10_000, 'the handled retry');
    await settled(queue);
    expect(retries).toHaveLength(1);
    expect(retries[0].error).toContain('connection refused');
    expect(new InboxError('x').code).toBe('INBOX');
    expect(inboxIdsOf(db, queue)).toEqual([`${queue}-f`]);
  });
});

describe('inbox options', () => {
  const bad: [string, Record<string, unknown>, RegExp][] = [
    ['neither pool nor adapter', {}, /^inbox needs pool \(a node-postgres Pool\) or adapter/],
    [
      'both',
      { pool: { connect: () => undefined }, adapter: { transaction: () => undefined, query: () => undefined } },
      /^inbox takes pool or adapter, not both/,
    ],
    ['a pool that is not one', { pool: 'postgres://localhost' }, /^inbox\.pool must be a node-postgres Pool/],
    ['an adapter without query', { adapter: { transaction: () => undefined } }, /^inbox\.adapter must have .* it lacks query$/],
    ['a key that is not a function', { pool: { connect: () => undefined }, key: 'orderId' }, /^inbox\.key must be a function/],
    ['a bad retention', { pool: { connect: () => undefined }, retention: '7 days' }, /inbox\.retention/],
    ['an unknown key', { pool: { connect: () => undefined }, retension: '1h' }, /^`retension` is not an option of inbox; did you mean `retention`\?$/],
    ['a consumer that is empty', { pool: { connect: () => undefined }, consumer: '' }, /^inbox\.consumer must be a non-empty string/],
    [
      'a consumer name longer than the inbox takes',
      { pool: { connect: () => undefined }, consumer: 'c'.repeat(1001) },
      /^inbox\.consumer is 1001 bytes long in UTF-8, more than the 1000 the inbox takes$/,
    ],
    ['a consumer name with a NUL', { pool: { connect: () => undefined }, consumer: 'orders\u0000' }, /^inbox\.consumer holds a NUL character/],
    ['a group of 0', { pool: { connect: () => undefined }, group: 0 }, /^inbox\.group must be an integer from 1 to 50, got 0$/],
    ['a group of 51', { pool: { connect: () => undefined }, group: 51 }, /^inbox\.group must be an integer from 1 to 50, got 51$/],
    ['a group that is not an integer', { pool: { connect: () => undefined }, group: 2.5 }, /^inbox\.group must be an integer from 1 to 50, got 2\.5$/],
    [
      'a group over an adapter of another library',
      { adapter: { transaction: () => undefined, query: () => undefined }, group: 4 },
      /^inbox\.group needs a node-postgres pool, given as inbox\.pool or through pgAdapter\(pool\)/,
    ],
  ];

  it.each(bad)('refuses %s before declaring anything', async (_, inbox, message) => {
    const rr = await connectClient();
    const queue = testQueue();
    // @ts-expect-error -- the options are wrong on purpose
    await expect(rr.consume({ queue, inbox }, () => undefined)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringMatching(message),
    });
    expect(await queueExists(queue)).toBe(false);
  });
});

describe('inbox migrations', () => {
  it('makes the tables of tableSchema() once, recorded as the retry table records them', async () => {
    const fresh = createTestDatabase('inbox_mig');
    const freshPool = new Pool({ connectionString: pgUrl(fresh) });
    try {
      const rr = await connectClient();
      const queue = testQueue();
      // Two consumers on one pool start at once: one migrates, the other waits on the lock.
      await Promise.all([
        rr.consume({ queue, inbox: { pool: freshPool } }, () => undefined).then(track),
        rr.consume({ queue: testQueue(), inbox: { pool: freshPool } }, () => undefined).then(track),
      ]);
      expect(psqlRows('SELECT version FROM rabbit_retry_migrations ORDER BY version', fresh)).toEqual([1, 2, 3, 4, 5, 6].map((version) => ({ version })));
      for (const t of ['message_retries', 'rabbit_retry_inbox', 'rabbit_retry_inbox_duplicates', 'rabbit_retry_outbox']) {
        expect(psql(`SELECT to_regclass('${t}') IS NOT NULL`, fresh)).toBe('t');
      }
      // The retry table's own store finds them done.
      const withTable = await connectClient({ retryTable: { url: pgUrl(fresh), scheduler: false } });
      expect(await withTable.retryTable.stats()).toMatchObject({ rows: 0 });
      expect(psql('SELECT count(*) FROM rabbit_retry_migrations', fresh)).toBe('6');
    } finally {
      await cleanup();
      await freshPool.end();
      dropTestDatabase(fresh);
    }
  });
});
