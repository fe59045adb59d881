/**
 * A row the retry table cannot store costs only its message: a value
 * PostgreSQL refuses (a NUL in text or jsonb, an indexed value over the size
 * of an index entry, a character the database's encoding lacks) parks that
 * message once with `retry-reason: table-refused`, naming the column and the
 * limit or quoting the database; the other rows of its batch are stored, and
 * nothing comes back to the handler.
 */

import { type Message, type ParkedEvent, type PublishFailedEvent, type StoredEvent, parkedQueueName } from '../lib';
import {
  holdLock,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  drainAll,
  dropTestDatabase,
  pgUrl,
  psql,
  psqlRows,
  queueDepth,
  queueUnacked,
  sleep,
  testQueue,
  track,
  uniqueName,
  waitFor,
} from './helpers';
import { amqpConnection } from './broker';

let db = '';
const extraDatabases: string[] = [];

beforeAll(() => {
  db = createTestDatabase();
});

afterEach(async () => {
  await cleanup();
});

afterAll(async () => {
  await closeAmqp();
  for (const d of [db, ...extraDatabases]) if (d) dropTestDatabase(d);
});

class CarrierDown extends Error {
  override name = 'CarrierDown';
}

interface Sent {
  key: string;
  dependency: string;
  messageId: string;
  appId?: string;
}

/** Publishes every message at once with amqplib (so that they share batches), each with its message id. */
async function publishAll(queue: string, messages: readonly Sent[]): Promise<void> {
  const ch = await (await amqpConnection()).createConfirmChannel();
  try {
    for (const m of messages)
      ch.sendToQueue(queue, Buffer.from(JSON.stringify({ key: m.key, dependency: m.dependency })), { messageId: m.messageId, appId: m.appId });
    await ch.waitForConfirms();
  } finally {
    await ch.close();
  }
}

/**
 * Consumes `queue` into the retry table of `database`, the dependency taken
 * from the message; counts the handler's calls by key.
 */
async function consumeIntoTable(database: string, queue: string) {
  const rr = await connectClient({ retryTable: { url: pgUrl(database), scheduler: false } });
  const calls = new Map<string, number>();
  const consumer = track(
    await rr.consume(
      {
        queue,
        prefetch: 100,
        onFailure: {
          delays: [],
          table: { dependency: (_err: unknown, msg: Message) => msg.json<{ dependency: string }>().dependency, nextAttemptAt: () => null },
        },
      },
      async (msg) => {
        const { key } = msg.json<{ key: string }>();
        calls.set(key, (calls.get(key) ?? 0) + 1);
        throw new CarrierDown(`carrier down for ${key}`);
      },
    ),
  );
  const parked: ParkedEvent[] = [];
  const stored: StoredEvent[] = [];
  const failed: PublishFailedEvent[] = [];
  consumer.on('parked', (e) => parked.push(e));
  consumer.on('stored', (e) => stored.push(e));
  consumer.on('publishFailed', (e) => failed.push(e));
  return { consumer, calls, parked, stored, failed };
}

/** The keys stored as rows in `database`. */
function storedKeys(database: string, queue: string): string[] {
  return psqlRows<{ message_id: string }>(`SELECT message_id FROM message_retries WHERE queue = '${queue}' ORDER BY message_id`, database).map(
    (r) => r.message_id,
  );
}

describe('the retry table: a row PostgreSQL refuses costs only its message', () => {
  test('poisonous rows among 41 failures (NUL in the dependency, an oversized dependency, NUL in the message id or a property) park once each as table-refused; the 37 others are stored; nothing comes back', async () => {
    const queue = testQueue([]);
    const good: Sent[] = Array.from({ length: 37 }, (_, i) => ({ key: `ok-${i}`, dependency: 'carrier', messageId: `ok-${i}` }));
    const poison: (Sent & { why: RegExp })[] = [
      { key: 'nul-dependency', dependency: 'carrier\u0000eu', messageId: 'nul-dependency', why: /column dependency holds a NUL character/ },
      {
        key: 'long-dependency',
        dependency: 'd'.repeat(3000),
        messageId: 'long-dependency',
        why: /column dependency is 3000 bytes, over the 2600 bytes of an indexed value/,
      },
      { key: 'nul-message-id', dependency: 'carrier', messageId: 'nul\u0000message-id', why: /column message_id holds a NUL character/ },
      {
        key: 'nul-app-id',
        dependency: 'carrier',
        messageId: 'nul-app-id',
        appId: 'shop\u0000',
        why: /column properties \(jsonb\): the property app_id holds a NUL character/,
      },
    ];
    const all = [...good.slice(0, 10), poison[0], ...good.slice(10, 20), poison[1], poison[3], ...good.slice(20, 30), poison[2], ...good.slice(30)];
    const { consumer, calls, parked, stored, failed } = await consumeIntoTable(db, queue);
    await publishAll(queue, all);

    await waitFor(() => stored.length + parked.length === 41, 20_000, '41 messages stored or parked');
    await waitFor(async () => (await queueUnacked(queue)) === 0 && (await queueDepth(parkedQueueName(queue))) === 4, 10_000, 'every message settled');
    // Longer than the 5 s after which a held delivery goes back to the broker.
    await sleep(6_000);

    for (const m of all) expect([m.key, calls.get(m.key)]).toEqual([m.key, 1]);
    expect(failed).toEqual([]);
    expect(storedKeys(db, queue)).toEqual(good.map((g) => g.messageId).sort());
    expect(consumer.stats()).toMatchObject({ stored: 37, parked: 4, publishFailed: 0 });
    expect(parked.map((p) => p.reason)).toEqual(Array(4).fill('table-refused'));

    const copies = await drainAll(parkedQueueName(queue));
    expect(copies).toHaveLength(4);
    for (const p of poison) {
      const copy = copies.find((c) => (JSON.parse(c.content.toString()) as { key: string }).key === p.key);
      expect(copy?.headers).toMatchObject({ 'retry-reason': 'table-refused', 'retry-attempt': 0, 'retry-error-name': 'CarrierDown' });
      const error = String(copy?.headers['retry-last-error']);
      expect(error).toMatch(/^the retry table cannot store this message: /);
      expect(error).toMatch(p.why);
      expect(error).toContain(`the handler's error: carrier down for ${p.key}`);
      // Parked as it came: the message id keeps its NUL.
      expect(copy?.properties.messageId).toBe(p.messageId);
    }
    expect(await queueDepth(queue)).toBe(0);
  }, 40_000);

  test('a selector, filter or rate PostgreSQL would refuse is INVALID_OPTIONS, naming it, before anything is sent', async () => {
    const rr = await connectClient({ retryTable: { url: pgUrl(db), scheduler: false } });
    const long = 'd'.repeat(3000);
    const refused: [() => Promise<unknown>, RegExp][] = [
      [() => rr.retryTable.pause({ dependency: 'carrier\u0000' }), /dependency holds a NUL character/],
      [() => rr.retryTable.pause({ tenant: long }), /tenant is 3000 bytes, over the 2600 bytes/],
      [() => rr.retryTable.pause({ dependency: 'd'.repeat(1500), tenant: 't'.repeat(1500) }), /the selector is 3000 bytes/],
      [() => rr.retryTable.resume({ errorName: 'E\u0000' }), /errorName holds a NUL character/],
      [() => rr.retryTable.list({ tenant: 'acme\u0000' }), /tenant holds a NUL character/],
      [() => rr.retryTable.setRate('carrier\u0000', 5), /dependency holds a NUL character/],
    ];
    for (const [call, why] of refused) await expect(call()).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringMatching(why) });
    await expect(rr.retryTable.list({ dependency: long })).resolves.toEqual([]);
    await expect(connectClient({ retryTable: { url: pgUrl(db), scheduler: false, dependencyRates: { 'carrier\u0000': 5 } } })).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
    });
  });

  test('a row the database itself refuses (a character its LATIN1 encoding lacks) parks alone with its message; the rest of its batch is stored', async () => {
    const latin1 = `rr_test_${uniqueName('x').slice(2).replace(/-/g, '')}_latin1`;
    psql(`CREATE DATABASE ${latin1} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
    extraDatabases.push(latin1);
    const queue = testQueue([]);
    const good: Sent[] = Array.from({ length: 30 }, (_, i) => ({ key: `ok-${i}`, dependency: i % 2 ? 'carrier' : 'Zürich', messageId: `ok-${i}` }));
    const bad: Sent = { key: 'truck', dependency: 'carrier \u{1F69A}', messageId: 'truck' };
    const all = [...good.slice(0, 15), bad, ...good.slice(15)];
    const { consumer, calls, parked, stored, failed } = await consumeIntoTable(latin1, queue);
    // While the table is locked the failures queue up: the bad row goes in one INSERT with good ones.
    const lock = await holdLock(latin1, 'LOCK TABLE message_retries IN SHARE MODE');
    try {
      await publishAll(queue, all);
      await waitFor(() => calls.size === 31, 10_000, 'the 31 handler calls');
      await sleep(300);
    } finally {
      await lock.release();
    }

    await waitFor(() => stored.length + parked.length === 31, 20_000, '31 messages stored or parked');
    await waitFor(async () => (await queueUnacked(queue)) === 0 && (await queueDepth(parkedQueueName(queue))) === 1, 10_000, 'every message settled');
    await sleep(6_000);

    for (const m of all) expect([m.key, calls.get(m.key)]).toEqual([m.key, 1]);
    expect(failed).toEqual([]);
    expect(storedKeys(latin1, queue)).toEqual(good.map((g) => g.messageId).sort());
    // ü (U+00FC), which LATIN1 has: stored as it is.
    expect(psql(`SELECT count(*) FROM message_retries WHERE dependency = 'Z' || chr(252) || 'rich'`, latin1)).toBe('15');
    expect(consumer.stats()).toMatchObject({ stored: 30, parked: 1, publishFailed: 0 });

    const copies = await drainAll(parkedQueueName(queue));
    expect(copies).toHaveLength(1);
    expect(copies[0].headers).toMatchObject({ 'retry-reason': 'table-refused', 'retry-attempt': 0 });
    expect(String(copies[0].headers['retry-last-error'])).toMatch(
      /^the retry table cannot store this message: PostgreSQL refused the row \(SQLSTATE 22P05\): character with byte sequence 0xf0 0x9f 0x9a 0x9a in encoding "UTF8" has no equivalent in encoding "LATIN1"; the handler's error: carrier down for truck$/,
    );
  }, 40_000);
});
