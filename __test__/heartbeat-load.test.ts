/**
 * Connections keep their heartbeat while the addon's runtime is as busy as
 * the library can make it. lapin's I/O loop runs as a task of the addon's
 * runtime (vendor/lapin/PATCHED.md), so a socket read or a heartbeat could
 * wait behind other work of that runtime: republished 100 MB bodies,
 * failures with 300 KB stacks, the retry table draining and the outbox relay
 * publishing, all at once. Clients with a 1 s heartbeat (the broker closes a
 * connection it has heard nothing from for two intervals) must keep their
 * connections: no consumer reports `disconnected`, the broker lists each
 * connection under the process it had before the load, and a watched
 * consumer on a quiet client handles every probe sent to it during the load.
 *
 * RabbitMQ 4.x refuses bodies over 16 MiB by default (`max_message_size`),
 * and the client refuses them before they are sent: there the large bodies
 * are of 16 MiB.
 */
import { randomBytes } from 'node:crypto';

import { NonRetryableError, parkedQueueName, retryQueueName, type Consumer, type RabbitRetry } from '../lib';
import {
  brokerAtLeast,
  cleanup,
  closeAmqp,
  connectClient,
  connectionPid,
  createTestDatabase,
  dropTestDatabase,
  pgUrl,
  psql,
  queueDepth,
  testQueue,
  track,
  uniqueName,
  waitFor,
  withChannel,
} from './helpers';

jest.setTimeout(600_000);

const MB = 1_000_000;
const MiB = 1024 * 1024;
const STACKED = { count: 10_000, stackBytes: 300 * 1024 };
const TABLE_ROWS = 2_000;
const OUTBOX_ROWS = 5_000;

let db: string;
/** The large bodies: 100 MB, or 16 MiB where that is the broker's default limit. */
const BIG = { count: 3, bytes: 100 * MB };

beforeAll(async () => {
  db = createTestDatabase('heartbeat');
  if (await brokerAtLeast(4, 0)) BIG.bytes = 16 * MiB;
});

afterEach(cleanup);

afterAll(async () => {
  await closeAmqp();
  dropTestDatabase(db);
});

/** Counts the `disconnected` events of `consumer` into `into`. */
function watch(consumer: Consumer, label: string, into: string[]): Consumer {
  consumer.on('disconnected', (e) => into.push(`${label}: ${e.error}`));
  return track(consumer);
}

test('clients with a 1 s heartbeat keep their connections while the runtime republishes 100 MB bodies, parks 10,000 failures with 300 KB stacks, drains the retry table and relays the outbox', async () => {
  const watchedName = uniqueName('hb-watched');
  const loadedName = uniqueName('hb-loaded');
  const watched = await connectClient({ heartbeat: 1, connectionName: watchedName });
  const loaded: RabbitRetry = await connectClient({
    heartbeat: 1,
    connectionName: loadedName,
    retryTable: { url: pgUrl(db), ratePerSec: 2_000 },
    outbox: { url: pgUrl(db) },
  });
  const pids = { watched: await connectionPid(watchedName), loaded: await connectionPid(loadedName) };
  expect(pids.watched).toBeDefined();
  expect(pids.loaded).toBeDefined();
  const disconnects: string[] = [];

  // The quiet client: a consumer that only takes probes.
  const probeQueue = testQueue();
  const probesSeen = new Set<string>();
  let slowestProbeMs = 0;
  watch(
    await watched.consume({ queue: probeQueue }, (msg) => {
      const [id, sentAt] = msg.body.toString().split('@');
      probesSeen.add(id);
      slowestProbeMs = Math.max(slowestProbeMs, Date.now() - Number(sentAt));
    }),
    'probe',
    disconnects,
  );

  // 100 MB bodies: each handler throws, and its body is republished to a retry queue of 1 h.
  const bigQueue = testQueue(['1h']);
  let bigFailed = 0;
  watch(
    await loaded.consume({ queue: bigQueue, prefetch: 1, onFailure: { delays: ['1h'] } }, () => {
      bigFailed++;
      throw new Error('carrier 503');
    }),
    'big',
    disconnects,
  );

  // 10,000 failures whose errors carry 300 KB stacks: each parks at once, its stack cut to fit a frame.
  const stackQueue = testQueue();
  const stack = `Error: carrier 503\n${'    at handler (carrier.ts:1:1)\n'.repeat(Math.ceil(STACKED.stackBytes / 33))}`;
  watch(
    await loaded.consume({ queue: stackQueue, prefetch: 200 }, () => {
      const err = new NonRetryableError('carrier 503');
      err.stack = stack;
      throw err;
    }),
    'stacks',
    disconnects,
  );

  // The retry table: every message's first attempt waits in the table, due at once; the second is handled.
  const tableQueue = testQueue();
  const tableHandled = new Set<string>();
  watch(
    await loaded.consume(
      { queue: tableQueue, prefetch: 100, onFailure: { delays: [], table: { dependency: () => 'carrier', nextAttemptAt: () => new Date() } } },
      (msg) => {
        if (msg.attempt === 0) throw new Error('carrier 503');
        tableHandled.add(msg.properties.messageId ?? '');
      },
    ),
    'table',
    disconnects,
  );

  // The outbox's rows, relayed to a queue of their own.
  const outboxQueue = testQueue();
  await loaded.declareQueue(outboxQueue);

  // The load, all at once.
  const body = randomBytes(BIG.bytes);
  const bigPublishes = Array.from({ length: BIG.count }, (_, i) => loaded.publish('', bigQueue, body, { messageId: `big-${i}` }));
  const small = Buffer.from('{"orderId":48213}');
  const stackPublishes: Promise<void>[] = [];
  for (let i = 0; i < STACKED.count; i++) stackPublishes.push(loaded.publish('', stackQueue, small, { messageId: `s-${i}` }));
  const tablePublishes: Promise<void>[] = [];
  for (let i = 0; i < TABLE_ROWS; i++) tablePublishes.push(loaded.publish('', tableQueue, small, { messageId: `t-${i}` }));
  psql(
    `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties)
     SELECT '', '${outboxQueue}', convert_to('o' || i, 'UTF8'), jsonb_build_object('messageId', 'o' || i)
     FROM generate_series(1, ${OUTBOX_ROWS}) i`,
    db,
  );

  // Probes to the quiet client every 250 ms while the load runs, from this process's own client.
  let probesSent = 0;
  let loadDone = false;
  const began = Date.now();
  const probing = (async () => {
    while (!loadDone) {
      await watched.publish('', probeQueue, Buffer.from(`p-${probesSent}@${Date.now()}`));
      probesSent++;
      await new Promise((r) => setTimeout(r, 250));
    }
  })();

  await Promise.all([...bigPublishes, ...stackPublishes, ...tablePublishes]);
  const parkedName = parkedQueueName(stackQueue);
  await waitFor(
    async () => bigFailed >= BIG.count && (await queueDepth(retryQueueName(bigQueue, '1h'))) === BIG.count,
    300_000,
    'the big bodies in their retry queue',
    250,
  );
  await waitFor(async () => (await queueDepth(parkedName)) === STACKED.count, 300_000, 'every stacked failure parked', 250);
  await waitFor(() => tableHandled.size === TABLE_ROWS, 300_000, 'every table row handled', 250);
  await waitFor(async () => (await queueDepth(outboxQueue)) === OUTBOX_ROWS, 300_000, 'every outbox row relayed', 250);
  loadDone = true;
  await probing;
  await waitFor(() => probesSeen.size === probesSent, 60_000, 'every probe handled');
  // What a reader of the run wants to know: how long the load took, and the slowest probe's trip through it.
  console.info(
    `heartbeat under load: ${((Date.now() - began) / 1000).toFixed(1)} s of load, ${probesSent} probes, the slowest handled ${slowestProbeMs} ms after it was sent`,
  );

  // The load happened, and nothing of it was lost.
  expect(probesSent).toBeGreaterThan(4);
  expect(await queueDepth(retryQueueName(bigQueue, '1h'))).toBe(BIG.count);
  const parkedOne = await withChannel(async (ch) => {
    const m = await ch.get(parkedName, { noAck: false });
    if (m) ch.nack(m, false, true);
    return m;
  });
  expect(parkedOne && String(parkedOne.properties.headers?.['retry-error-stack'] ?? '')).not.toBe('');
  expect(Number(psql('SELECT count(*) FROM rabbit_retry_outbox', db))).toBe(0);

  // And every connection held through it.
  expect(disconnects).toEqual([]);
  expect(await connectionPid(watchedName)).toBe(pids.watched);
  expect(await connectionPid(loadedName)).toBe(pids.loaded);
  expect(probesSeen.size).toBe(probesSent);
});
