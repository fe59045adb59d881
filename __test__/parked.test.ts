import {
  InvalidOptionsError,
  type Message,
  NonRetryableError,
  type ParkedFilter,
  type ParkedMessage,
  type ReplayProgress,
  UnroutableError,
  parkedQueueName,
} from '../lib';
import {
  type GotMessage,
  type ParkedSeed,
  cleanup,
  closeAmqp,
  connectClient,
  drain,
  extraQueue,
  queueDepth,
  seedParked,
  sleep,
  testExchange,
  testQueue,
  track,
  waitFor,
  withChannel,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const ids = (ms: readonly ParkedMessage[]) => ms.map((m) => m.properties.messageId);
const gotIds = (ms: readonly GotMessage[]) => ms.map((m) => m.properties.messageId);
const retryOnly = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => k.startsWith('retry-')));
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `n` seeds m0..m(n-1) with correlation ids c0..c(n-1) and body { i }. */
function numbered(n: number, extra: (i: number) => Partial<ParkedSeed> = () => ({})): ParkedSeed[] {
  return Array.from({ length: n }, (_, i) => ({ body: { i }, messageId: `m${i}`, correlationId: `c${i}`, ...extra(i) }));
}

/**
 * Runs a real consumer with `delays: []` whose handler throws for every
 * message, and waits until all `bodies` are parked. The consumer is closed.
 */
async function parkWithConsumer(queue: string, bodies: { id: string; nonRetryable?: boolean }[]): Promise<void> {
  const rr = await connectClient();
  const consumer = track(
    await rr.consume({ queue, onFailure: { delays: [] } }, async function rateShipment(msg: Message) {
      const { id, nonRetryable } = msg.json<{ id: string; nonRetryable?: boolean }>();
      if (nonRetryable) throw new NonRetryableError(`order ${id} has no address`);
      throw new Error(`carrier timeout for ${id}`);
    }),
  );
  for (const b of bodies) {
    await rr.publish('', queue, b, { messageId: b.id, correlationId: `corr-${b.id}`, headers: { tenant: 'acme' } });
  }
  await waitFor(() => consumer.stats().parked === bodies.length, 10_000, `${bodies.length} parked messages`);
  await consumer.close();
  await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === bodies.length, 5000, 'the parked depth');
}

describe('count()', () => {
  it('is 0 when the parked queue does not exist', async () => {
    const rr = await connectClient();
    expect(await rr.parked(testQueue()).count()).toBe(0);
  });

  it('counts the messages a real consumer parked', async () => {
    const queue = testQueue();
    await parkWithConsumer(queue, [{ id: 'o1' }, { id: 'o2' }, { id: 'o3', nonRetryable: true }]);
    const rr = await connectClient();
    expect(await rr.parked(queue).count()).toBe(3);
    expect(await queueDepth(queue)).toBe(0);
  });
});

describe('peek()', () => {
  it('returns body, properties and every retry-* header the consumer wrote, and leaves every message parked', async () => {
    const queue = testQueue();
    await parkWithConsumer(queue, [{ id: 'o1' }, { id: 'o2', nonRetryable: true }]);
    const rr = await connectClient();
    const parked = rr.parked(queue);

    const before = await parked.count();
    const first = await parked.peek({ limit: 10 });
    expect(before).toBe(2);
    expect(await parked.count()).toBe(2);
    expect(ids(first)).toEqual(['o1', 'o2']);

    const [a, b] = first;
    expect(a.json()).toEqual({ id: 'o1' });
    expect(a.properties.messageId).toBe('o1');
    expect(a.properties.correlationId).toBe('corr-o1');
    expect(a.properties.contentType).toBe('application/json');
    expect(a.headers.tenant).toBe('acme');
    expect(a.reason).toBe('exhausted');
    expect(a.errorName).toBe('Error');
    expect(a.errorMessage).toBe('carrier timeout for o1');
    expect(a.errorStack).toEqual(expect.stringContaining('rateShipment'));
    expect(a.failedAt).toBeInstanceOf(Date);
    expect(Number.isNaN(a.failedAt?.getTime())).toBe(false);
    expect(b.reason).toBe('non-retryable');
    expect(b.errorName).toBe('NonRetryableError');
    expect(b.errorMessage).toBe('order o2 has no address');

    // What amqplib sees in the parked queue is exactly what peek returned.
    const raw = await drain(parkedQueueName(queue));
    expect(gotIds(raw)).toEqual(['o1', 'o2']);
    for (const [i, m] of raw.entries()) {
      const want = retryOnly(m.headers);
      for (const key of [
        'retry-attempt',
        'retry-reason',
        'retry-error-name',
        'retry-last-error',
        'retry-error-stack',
        'retry-failed-at',
        'retry-first-failed-at',
        'retry-original-exchange',
        'retry-original-routing-key',
        'retry-queue',
      ]) {
        expect(want).toHaveProperty([key]);
      }
      expect(first[i].retryHeaders).toEqual(want);
      expect(first[i].body.equals(m.content)).toBe(true);
    }
  });

  it('a second peek returns the same messages in the same order, marked redelivered, and the count does not change', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(12));
    const rr = await connectClient();
    const parked = rr.parked(queue);

    const before = await parked.count();
    const first = await parked.peek({ limit: 100 });
    const middle = await parked.count();
    const second = await parked.peek({ limit: 100 });
    const after = await parked.count();

    expect([before, middle, after]).toEqual([12, 12, 12]);
    expect(ids(first)).toEqual(numbered(12).map((s) => s.messageId));
    expect(ids(second)).toEqual(ids(first));
    expect(second.every((m) => m.redelivered)).toBe(true);
    expect(await queueDepth(queue)).toBe(0);
  });

  it('limit returns the first N and leaves all of them parked', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(10));
    const rr = await connectClient();
    const parked = rr.parked(queue);
    const got = await parked.peek({ limit: 3 });
    expect(ids(got)).toEqual(['m0', 'm1', 'm2']);
    expect(got.map((m) => m.json())).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(got.map((m) => m.properties.correlationId)).toEqual(['c0', 'c1', 'c2']);
    expect(got.map((m) => m.headers['retry-attempt'])).toEqual([2, 2, 2]);
    expect(await parked.count()).toBe(10);
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(numbered(10).map((s) => s.messageId));
  });

  it('rejects a bad limit with INVALID_OPTIONS and a missing parked queue with an error naming it', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(1));
    const rr = await connectClient();
    await expect(rr.parked(queue).peek({ limit: 0 })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(rr.parked(queue).peek({ limit: 1.5 })).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('limit') });
    const missing = testQueue();
    await expect(rr.parked(missing).peek()).rejects.toThrow(parkedQueueName(missing));
    expect(await rr.parked(queue).count()).toBe(1);
  });
});

describe('filters', () => {
  // m0..m7, each with a known reason, error name, error message and tenant.
  const seeds: ParkedSeed[] = [
    { messageId: 'm0', reason: 'exhausted', errorName: 'Error', errorMessage: 'carrier timeout after 30s', headers: { tenant: 'acme', priorityClass: 1 } },
    {
      messageId: 'm1',
      reason: 'non-retryable',
      errorName: 'ValidationError',
      errorMessage: 'missing field sku',
      headers: { tenant: 'acme', priorityClass: 3 },
    },
    {
      messageId: 'm2',
      reason: 'exhausted',
      errorName: 'TimeoutError',
      errorMessage: 'stock service timeout',
      headers: { tenant: 'globex', priorityClass: 3 },
    },
    {
      messageId: 'm3',
      reason: 'non-retryable',
      errorName: 'ValidationError',
      errorMessage: 'bad date 2024-13-01',
      headers: { tenant: 'globex', urgent: true },
    },
    { messageId: 'm4', reason: 'exhausted', errorName: 'Error', errorMessage: 'HTTP 503 from carrier', headers: { tenant: 'initech' } },
    { messageId: 'm5', reason: 'non-retryable', errorName: 'NonRetryableError', errorMessage: 'the message body is not valid JSON', headers: {} },
    { messageId: 'm6', reason: 'exhausted', errorName: 'Error', errorMessage: 'carrier TIMEOUT', headers: { tenant: 'acme', urgent: false } },
    { messageId: 'm7', reason: 'poison', errorName: 'Error', errorMessage: 'carrier timeout after 10s', headers: { tenant: 'acme' } },
  ].map((s, i) => ({ ...s, body: { i }, correlationId: `c${i}` }));
  const all = seeds.map((s) => s.messageId);

  const cases: [string, ParkedFilter, string[]][] = [
    ['reason', { reason: 'non-retryable' }, ['m1', 'm3', 'm5']],
    ['reason list', { reason: ['exhausted', 'poison'] }, ['m0', 'm2', 'm4', 'm6', 'm7']],
    ['errorName (exact)', { errorName: 'ValidationError' }, ['m1', 'm3']],
    ['errorName does not match a prefix', { errorName: 'Valid' }, []],
    ['errorMessage substring (case-sensitive)', { errorMessage: 'timeout' }, ['m0', 'm2', 'm7']],
    ['a string header', { headers: { tenant: 'globex' } }, ['m2', 'm3']],
    ['a number header given as a number', { headers: { priorityClass: 3 } }, ['m1', 'm2']],
    ['a number header given as text', { headers: { priorityClass: '3' } }, ['m1', 'm2']],
    ['a boolean header', { headers: { urgent: false } }, ['m6']],
    ['two headers (both must match)', { headers: { tenant: 'acme', priorityClass: 3 } }, ['m1']],
    ['a header no message has', { headers: { region: 'eu' } }, []],
    ['where', { where: (m) => m.json<{ i: number }>().i % 3 === 0 }, ['m0', 'm3', 'm6']],
    ['reason + errorMessage + header', { reason: 'exhausted', errorMessage: 'carrier', headers: { tenant: 'acme' } }, ['m0', 'm6']],
  ];

  it.each(cases)('peek by %s selects exactly the right messages and leaves all parked', async (_label, filter, expected) => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const rr = await connectClient();
    const parked = rr.parked(queue);
    const got = await parked.peek({ limit: 100, filter });
    expect(ids(got)).toEqual(expected);
    expect(await parked.count()).toBe(seeds.length);
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(all);
  });

  it('peek limit counts selected messages, not scanned ones', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const rr = await connectClient();
    const got = await rr.parked(queue).peek({ limit: 2, filter: { reason: 'exhausted' } });
    expect(ids(got)).toEqual(['m0', 'm2']);
    expect(await rr.parked(queue).count()).toBe(seeds.length);
  });

  it('replay with a filter moves exactly the selected messages; the rest stay parked in order', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const rr = await connectClient();
    const result = await rr.parked(queue).replay({ ratePerSec: 1000, filter: { errorName: 'Error', errorMessage: 'carrier' } });
    expect(result).toMatchObject({ replayed: 4, skipped: 4 });
    await waitFor(async () => (await queueDepth(queue)) === 4, 5000, '4 messages in the work queue');
    expect(gotIds(await drain(queue))).toEqual(['m0', 'm4', 'm6', 'm7']);
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 4, 5000, '4 messages still parked');
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(['m1', 'm2', 'm3', 'm5']);
  });

  it('replay with a where filter and a header filter leaves the unselected parked', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const rr = await connectClient();
    const result = await rr.parked(queue).replay({
      ratePerSec: 1000,
      filter: { headers: { tenant: 'acme' }, where: (m) => m.reason !== 'poison' },
    });
    expect(result).toMatchObject({ replayed: 3, skipped: 5 });
    expect(gotIds(await drain(queue))).toEqual(['m0', 'm1', 'm6']);
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 5, 5000, '5 messages still parked');
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(['m2', 'm3', 'm4', 'm5', 'm7']);
  });
});

describe('replay()', () => {
  it('replays 200 messages at 100/s in no less than ~1.9 s, to the work queue with attempts reset and ids kept', async () => {
    const queue = testQueue();
    const n = 200;
    await seedParked(
      queue,
      numbered(n, () => ({ attempt: 3, headers: { tenant: 'acme' } })),
    );
    const rr = await connectClient();
    const progress: (ReplayProgress & { at: number })[] = [];

    const t0 = Date.now();
    const result = await rr.parked(queue).replay({ ratePerSec: 100, onProgress: (p) => progress.push({ ...p, at: Date.now() }) });
    const elapsed = Date.now() - t0;

    expect(result.replayed).toBe(n);
    expect(result.skipped).toBe(0);
    expect(elapsed).toBeGreaterThanOrEqual(1900);
    expect(result.durationMs).toBeGreaterThanOrEqual(1900);
    // No burst: the k-th message went out no earlier than (k-1)/100 s after the start (with 15 ms of slack).
    for (const [k, p] of progress.entries()) expect(p.at - t0).toBeGreaterThanOrEqual(k * 10 - 15);

    // Progress after each message: 1..200 of 200.
    expect(progress.map((p) => p.replayed)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(progress.every((p) => p.total === n && p.skipped === 0)).toBe(true);

    expect(await rr.parked(queue).count()).toBe(0);
    await waitFor(async () => (await queueDepth(queue)) === n, 5000, `${n} messages in the work queue`);
    const t1 = Date.now();
    const moved = await drain(queue);
    expect(gotIds(moved)).toEqual(numbered(n).map((s) => s.messageId));
    for (const [i, m] of moved.entries()) {
      expect(m.properties.correlationId).toBe(`c${i}`);
      expect(JSON.parse(m.content.toString('utf8'))).toEqual({ i });
      expect(m.headers['retry-attempt']).toBe(0);
      expect(m.headers.tenant).toBe('acme');
      const replayedAt = m.headers['retry-replayed-at'];
      expect(replayedAt).toMatch(ISO_8601);
      expect(Date.parse(replayedAt as string)).toBeGreaterThanOrEqual(t0 - 1000);
      expect(Date.parse(replayedAt as string)).toBeLessThanOrEqual(t1 + 1000);
      // The error that parked it is still there for whoever looks next.
      expect(m.headers['retry-last-error']).toBe('boom');
    }
  });

  it('a replayed message is handled again by a running consumer with attempt 0 (look, fix, replay)', async () => {
    const queue = testQueue();
    await parkWithConsumer(queue, [{ id: 'o1' }, { id: 'o2' }, { id: 'o3', nonRetryable: true }]);
    const rr = await connectClient();
    const seen: { id?: string; attempt: number; correlationId?: string; replayedAt: unknown }[] = [];
    track(
      await rr.consume({ queue, onFailure: { delays: [] } }, async (msg) => {
        seen.push({
          id: msg.properties.messageId,
          attempt: msg.attempt,
          correlationId: msg.properties.correlationId,
          replayedAt: msg.headers['retry-replayed-at'],
        });
      }),
    );
    const result = await rr.parked(queue).replay({ ratePerSec: 50 });
    expect(result).toMatchObject({ replayed: 3, skipped: 0 });
    await waitFor(() => seen.length === 3, 10_000, 'the replayed messages handled');
    await sleep(300);
    expect(seen.map((s) => s.id)).toEqual(['o1', 'o2', 'o3']);
    expect(seen.map((s) => s.correlationId)).toEqual(['corr-o1', 'corr-o2', 'corr-o3']);
    expect(seen.every((s) => s.attempt === 0 && typeof s.replayedAt === 'string')).toBe(true);
    expect(await rr.parked(queue).count()).toBe(0);
    expect(await queueDepth(queue)).toBe(0);
  });

  it('limit replays the first N; the rest stay parked in order', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(10));
    const rr = await connectClient();
    const progress: ReplayProgress[] = [];
    const result = await rr.parked(queue).replay({ limit: 4, ratePerSec: 1000, onProgress: (p) => progress.push(p) });
    expect(result).toMatchObject({ replayed: 4, skipped: 0 });
    expect(progress).toEqual([1, 2, 3, 4].map((replayed) => ({ replayed, skipped: 0, total: 4 })));
    expect(gotIds(await drain(queue))).toEqual(['m0', 'm1', 'm2', 'm3']);
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 6, 5000, '6 messages still parked');
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(['m4', 'm5', 'm6', 'm7', 'm8', 'm9']);
  });

  it('limit with a filter counts replayed messages; skipped ones stay parked', async () => {
    const queue = testQueue();
    await seedParked(
      queue,
      numbered(10, (i) => ({ reason: i % 2 === 0 ? 'exhausted' : 'non-retryable' })),
    );
    const rr = await connectClient();
    const result = await rr.parked(queue).replay({ limit: 2, ratePerSec: 1000, filter: { reason: 'non-retryable' } });
    expect(result).toMatchObject({ replayed: 2, skipped: 2 });
    expect(gotIds(await drain(queue))).toEqual(['m1', 'm3']);
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 8, 5000, '8 messages still parked');
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(['m0', 'm2', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9']);
  });

  it('to: another queue through the default exchange; the work queue gets nothing', async () => {
    const queue = testQueue();
    const other = extraQueue();
    await withChannel((ch) => ch.assertQueue(other, { durable: true }));
    await seedParked(queue, numbered(5));
    const rr = await connectClient();
    const result = await rr.parked(queue).replay({ ratePerSec: 1000, to: { exchange: '', routingKey: other } });
    expect(result.replayed).toBe(5);
    await waitFor(async () => (await queueDepth(other)) === 5, 5000, '5 messages in the other queue');
    const moved = await drain(other);
    expect(gotIds(moved)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    expect(moved.map((m) => m.headers['retry-attempt'])).toEqual([0, 0, 0, 0, 0]);
    expect(moved.map((m) => m.properties.correlationId)).toEqual(['c0', 'c1', 'c2', 'c3', 'c4']);
    expect(await queueDepth(queue)).toBe(0);
    expect(await rr.parked(queue).count()).toBe(0);
  });

  it('to: an exchange and routing key', async () => {
    const queue = testQueue();
    const other = extraQueue();
    const exchange = testExchange();
    await withChannel(async (ch) => {
      await ch.assertExchange(exchange, 'direct', { durable: false });
      await ch.assertQueue(other, { durable: true });
      await ch.bindQueue(other, exchange, 'orders.replayed');
    });
    await seedParked(queue, numbered(3));
    const rr = await connectClient();
    const result = await rr.parked(queue).replay({ ratePerSec: 1000, to: { exchange, routingKey: 'orders.replayed' } });
    expect(result.replayed).toBe(3);
    await waitFor(async () => (await queueDepth(other)) === 3, 5000, '3 messages in the bound queue');
    const moved = await drain(other);
    expect(gotIds(moved)).toEqual(['m0', 'm1', 'm2']);
    expect(moved.every((m) => m.exchange === exchange && m.routingKey === 'orders.replayed')).toBe(true);
    expect(await queueDepth(queue)).toBe(0);
  });

  it('loses nothing when the work queue is deleted mid-replay: rejects UNROUTABLE naming the queue, the rest stay parked', async () => {
    const queue = testQueue();
    const n = 40;
    await seedParked(queue, numbered(n));
    const rr = await connectClient();
    let replayed = 0;
    const replaying = rr
      .parked(queue)
      .replay({ ratePerSec: 20, onProgress: (p) => (replayed = p.replayed) })
      .then(
        () => new Error('replay resolved'),
        (e: unknown) => e,
      );
    await sleep(500);
    // What the deletion throws away is what was replayed (and acked from the parked queue) before it.
    const deleted = await withChannel((ch) => ch.deleteQueue(queue));
    const err = await replaying;

    expect(err).toBeInstanceOf(UnroutableError);
    expect(err).toMatchObject({ code: 'UNROUTABLE' });
    const message = (err as Error).message;
    // Names the work queue itself, not only '<queue>.parked'.
    expect(message).toMatch(new RegExp(`${escapeRe(queue)}(?!\\.parked)`));
    expect(message).toContain(`after ${replayed} message`);

    expect(replayed).toBeGreaterThan(0);
    expect(replayed).toBeLessThan(n);
    // The one publish in flight at the deletion may be counted by it and returned to the
    // replay (it stays parked), or confirmed to the replay and then dropped with the queue
    // (the operator deleted it); either way replayed + parked == n below: none is lost.
    expect(Math.abs(deleted.messageCount - replayed)).toBeLessThanOrEqual(1);
    await waitFor(async () => (await rr.parked(queue).count()) + replayed >= n, 5000, 'the held messages back in the parked queue').catch(() => undefined);
    const parked = await rr.parked(queue).count();
    expect(replayed + parked).toBe(n);
    // The ones still parked are exactly the ones not replayed, in order.
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(
      numbered(n)
        .slice(replayed)
        .map((s) => s.messageId),
    );
  });

  it('to a missing exchange: rejects UNROUTABLE naming it, every message stays parked, and a later replay works', async () => {
    const queue = testQueue();
    const missing = testExchange();
    await seedParked(queue, numbered(5));
    const rr = await connectClient();
    const err = await rr
      .parked(queue)
      .replay({ ratePerSec: 1000, to: { exchange: missing, routingKey: 'k' } })
      .then(
        () => new Error('replay resolved'),
        (e: unknown) => e,
      );
    expect(err).toMatchObject({ code: 'UNROUTABLE' });
    expect((err as Error).message).toContain(missing);
    await waitFor(async () => (await rr.parked(queue).count()) === 5, 5000, 'all 5 back in the parked queue');
    expect(await rr.parked(queue).replay({ ratePerSec: 1000 })).toMatchObject({ replayed: 5 });
    expect(gotIds(await drain(queue))).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
  });

  it('while the consumer still fails, each message is replayed once: no more than the depth at the start (total)', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    let calls = 0;
    // Still broken for the first 15 calls, fixed after: bounds the test if replay loops.
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [] } }, async () => {
        calls++;
        if (calls <= 15) throw new Error('still broken');
      }),
    );
    for (let i = 0; i < 5; i++) await rr.publish('', queue, { i }, { messageId: `m${i}` });
    await waitFor(() => consumer.stats().parked === 5, 10_000, '5 parked');
    await waitFor(async () => (await rr.parked(queue).count()) === 5, 5000, 'the parked depth');

    const progress: ReplayProgress[] = [];
    const result = await rr.parked(queue).replay({ ratePerSec: 50, onProgress: (p) => progress.push(p) });
    expect(progress[0].total).toBe(5);
    // Messages that failed again and parked again during the replay are not replayed again.
    expect(result.replayed).toBe(5);
    expect(progress.every((p) => p.replayed <= p.total)).toBe(true);
  });

  it('rejects bad options with INVALID_OPTIONS and moves nothing', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(2));
    const rr = await connectClient();
    for (const bad of [{ ratePerSec: 0 }, { ratePerSec: -5 }, { ratePerSec: Number.NaN }, { limit: 0 }, { limit: 2.5 }]) {
      await expect(rr.parked(queue).replay(bad)).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
    }
    expect(await rr.parked(queue).count()).toBe(2);
    expect(await queueDepth(queue)).toBe(0);
  });

  it('an empty parked queue replays nothing', async () => {
    const queue = testQueue();
    await seedParked(queue, []);
    const rr = await connectClient();
    expect(await rr.parked(queue).replay()).toMatchObject({ replayed: 0, skipped: 0 });
  });
});

describe('purge()', () => {
  it('returns how many it deleted and empties the parked queue, leaving the work queue alone', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(7));
    await withChannel(async (ch) => {
      ch.sendToQueue(queue, Buffer.from('{}'), { messageId: 'work-1' });
    });
    await waitFor(async () => (await queueDepth(queue)) === 1, 5000, 'the work message');
    const rr = await connectClient();
    expect(await rr.parked(queue).purge()).toBe(7);
    expect(await rr.parked(queue).count()).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(await queueDepth(queue)).toBe(1);
    expect(await rr.parked(queue).purge()).toBe(0);
  });

  it('purging messages a real consumer parked', async () => {
    const queue = testQueue();
    await parkWithConsumer(queue, [{ id: 'o1' }, { id: 'o2', nonRetryable: true }]);
    const rr = await connectClient();
    expect(await rr.parked(queue).purge()).toBe(2);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });

  it('resolves to 0 when the parked queue does not exist', async () => {
    const rr = await connectClient();
    expect(await rr.parked(testQueue()).purge()).toBe(0);
    expect(await rr.parked(testQueue()).purge({ filter: { reason: 'exhausted' } })).toBe(0);
  });

  it('with a filter deletes only the selected messages, up to limit, reporting each; the others stay parked in their order', async () => {
    const queue = testQueue();
    await seedParked(
      queue,
      numbered(10, (i) => (i % 3 === 0 ? { reason: 'non-retryable', errorName: 'NonRetryableError' } : {})),
    );
    const rr = await connectClient();
    const progress: { purged: number; skipped: number }[] = [];
    const purged = await rr.parked(queue).purge({ filter: { reason: 'non-retryable' }, limit: 3, onProgress: (p) => progress.push(p) });
    expect(purged).toBe(3);
    expect(progress).toEqual([
      { purged: 1, skipped: 0 },
      { purged: 2, skipped: 2 },
      { purged: 3, skipped: 4 },
    ]);
    expect(ids(await rr.parked(queue).peek({ limit: 100 }))).toEqual(['m1', 'm2', 'm4', 'm5', 'm7', 'm8', 'm9']);
    expect(await rr.parked(queue).purge({ filter: { errorName: 'NonRetryableError' } })).toBe(1);
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(['m1', 'm2', 'm4', 'm5', 'm7', 'm8']);
    expect(await queueDepth(queue)).toBe(0);
  });

  it('with a limit alone deletes the first N', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(5));
    const rr = await connectClient();
    expect(await rr.parked(queue).purge({ limit: 2 })).toBe(2);
    expect(gotIds(await drain(parkedQueueName(queue)))).toEqual(['m2', 'm3', 'm4']);
  });

  it('rejects bad options with INVALID_OPTIONS and deletes nothing', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(2));
    const rr = await connectClient();
    for (const bad of [{ limit: 0 }, { limit: 1.5 }, { filter: { reson: 'x' } }, { lmit: 1 }] as never[]) {
      await expect(rr.parked(queue).purge(bad)).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
    }
    expect(await rr.parked(queue).count()).toBe(2);
  });
});
