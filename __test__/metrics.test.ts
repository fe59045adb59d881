import { metrics as otelMetrics } from '@opentelemetry/api';
import { DataPointType, type Histogram, MeterProvider, type MetricData, MetricReader } from '@opentelemetry/sdk-metrics';

import {
  type ConsumeOptions,
  type Handler,
  type Message,
  NonRetryableError,
  type ParkedAlert,
  type ParkedEvent,
  type PublishFailedEvent,
  type RetryEvent,
  parkedQueueName,
  retryQueueName,
  type Delay,
} from '../lib';
import {
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  deleteQueue,
  dropTestDatabase,
  extraQueue,
  pgUrl,
  psql,
  queueDepth,
  seedParked,
  sleep,
  testQueue,
  track,
  waitFor,
  withChannel,
} from './helpers';

/** An in-memory reader: collect() returns what the instruments hold now (cumulative). */
class TestReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const providers: MeterProvider[] = [];

function meterProvider(): { provider: MeterProvider; reader: TestReader } {
  const reader = new TestReader();
  const provider = new MeterProvider({ readers: [reader] });
  providers.push(provider);
  return { provider, reader };
}

afterEach(async () => {
  await cleanup();
  for (const p of providers.splice(0)) await p.shutdown().catch(() => undefined);
  otelMetrics.disable();
});
afterAll(closeAmqp);

async function collect(reader: TestReader): Promise<MetricData[]> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
}

function metric(all: MetricData[], name: string): MetricData | undefined {
  return all.find((m) => m.descriptor.name === name);
}

/** The sum of a counter's points whose attributes include `attrs`. */
function counter(all: MetricData[], name: string, attrs: Record<string, string> = {}): number {
  const m = metric(all, name);
  if (!m) return 0;
  expect(m.dataPointType).toBe(DataPointType.SUM);
  return (m.dataPoints as { attributes: Record<string, unknown>; value: number }[])
    .filter((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v))
    .reduce((n, p) => n + p.value, 0);
}

/** Per value of attribute `key`, a counter's sum. */
function counterBy(all: MetricData[], name: string, key: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of (metric(all, name)?.dataPoints ?? []) as { attributes: Record<string, unknown>; value: number }[]) {
    const k = String(p.attributes[key]);
    out[k] = (out[k] ?? 0) + p.value;
  }
  return out;
}

function histogram(all: MetricData[], name: string, attrs: Record<string, string> = {}): { count: number; sum: number; max: number } {
  const m = metric(all, name);
  if (!m) return { count: 0, sum: 0, max: 0 };
  expect(m.dataPointType).toBe(DataPointType.HISTOGRAM);
  const points = (m.dataPoints as { attributes: Record<string, unknown>; value: Histogram }[]).filter((p) =>
    Object.entries(attrs).every(([k, v]) => p.attributes[k] === v),
  );
  return {
    count: points.reduce((n, p) => n + p.value.count, 0),
    sum: points.reduce((n, p) => n + (p.value.sum ?? 0), 0),
    max: Math.max(0, ...points.map((p) => p.value.max ?? 0)),
  };
}

function gauge(all: MetricData[], name: string, attrs: Record<string, string> = {}): number[] {
  const m = metric(all, name);
  if (!m) return [];
  expect(m.dataPointType).toBe(DataPointType.GAUGE);
  return (m.dataPoints as { attributes: Record<string, unknown>; value: number }[])
    .filter((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v))
    .map((p) => p.value);
}

type Kind = 'ok' | 'flaky' | 'stubborn' | 'bad' | 'last';

/**
 * ok: succeeds. flaky: fails on attempt 0, succeeds on attempt 1.
 * stubborn: always fails (200ms, then waits in the 1m retry queue).
 * bad: NonRetryableError (parks at once). last: published with retry-attempt 2
 * and fails, so it parks as exhausted.
 */
const handler: Handler = async (msg: Message) => {
  const { kind } = msg.json<{ kind: Kind }>();
  await sleep(2);
  if (kind === 'ok') return;
  if (kind === 'flaky' && msg.attempt >= 1) return;
  if (kind === 'bad') throw new NonRetryableError('order has no address');
  throw new Error(`${kind} failed at attempt ${msg.attempt}`);
};

const MIX: Record<Kind, number> = { ok: 3, flaky: 2, stubborn: 2, bad: 3, last: 1 };

describe('OpenTelemetry metrics', () => {
  it("the circuit's state gauge and its opened counter follow the circuit", async () => {
    const queue = testQueue(['10s']);
    const { provider, reader } = meterProvider();
    const rr = await connectClient({ meterProvider: provider });
    let down = true;
    const consumer = track(
      await rr.consume(
        { queue, prefetch: 1, onFailure: { delays: ['10s'], circuit: { openAfter: { failures: 2, within: '10s' }, probeEvery: '200ms' } } },
        async () => {
          if (down) throw new Error('carrier 503');
        },
      ),
    );
    const closed: unknown[] = [];
    consumer.on('circuitClosed', (e) => closed.push(e));
    expect(gauge(await collect(reader), 'rabbit_retry.circuit.state', { queue, dependency: queue })).toEqual([0]);
    for (let i = 0; i < 4; i++) await rr.publish('', queue, { i });
    await waitFor(() => consumer.health().circuit?.state !== 'closed', 10_000, 'the circuit to open');
    const open = await collect(reader);
    expect(gauge(open, 'rabbit_retry.circuit.state', { queue })[0]).toBeGreaterThanOrEqual(1);
    expect(counter(open, 'rabbit_retry.circuit.opened', { queue, dependency: queue })).toBeGreaterThanOrEqual(1);
    down = false;
    await waitFor(() => closed.length === 1, 10_000, 'the circuit to close');
    expect(gauge(await collect(reader), 'rabbit_retry.circuit.state', { queue })).toEqual([0]);
  });

  it('counters, the duration histogram and the parked-depth gauge match what happened and consumer.stats()', async () => {
    const delays: Delay[] = ['200ms', '1m'];
    const queue = testQueue(delays);
    const { provider, reader } = meterProvider();
    const rr = await connectClient({ meterProvider: provider });
    const consumer = track(await rr.consume({ queue, onFailure: { delays } }, handler));
    const retries: RetryEvent[] = [];
    const parkedEvents: ParkedEvent[] = [];
    consumer.on('retry', (e) => retries.push(e));
    consumer.on('parked', (e) => parkedEvents.push(e));

    let n = 0;
    for (const [kind, count] of Object.entries(MIX) as [Kind, number][]) {
      for (let i = 0; i < count; i++) {
        await rr.publish('', queue, { kind }, { messageId: `${kind}-${n++}`, headers: kind === 'last' ? { 'retry-attempt': 2 } : {} });
      }
    }

    // acked: 3 ok + 2 flaky on their second attempt. retried: flaky and stubborn to 200ms (4),
    // stubborn to 1m (2). parked: 3 non-retryable + 1 exhausted.
    await waitFor(
      () => {
        const s = consumer.stats();
        return s.acked === 5 && s.retried === 6 && s.parked === 4;
      },
      15_000,
      'every message settled',
    );
    await waitFor(
      async () => (await queueDepth(retryQueueName(queue, '1m'))) === 2 && (await queueDepth(parkedQueueName(queue))) === 4,
      5000,
      'the queue depths',
    );
    await sleep(300);

    const stats = consumer.stats();
    expect(stats).toMatchObject({
      queue,
      state: 'connected',
      inFlight: 0,
      acked: 5,
      failed: 10,
      retried: 6,
      retriedByDelay: { '200ms': 4, '1m': 2 },
      parked: 4,
      parkedByReason: { 'non-retryable': 3, exhausted: 1 },
      publishFailed: 0,
    });
    expect(stats.handlerMs.count).toBe(15);
    expect(stats.handlerMs.max).toBeGreaterThanOrEqual(1);
    expect(stats.handlerMs.total).toBeGreaterThanOrEqual(15);
    expect(retries).toHaveLength(6);
    expect(parkedEvents).toHaveLength(4);
    expect(parkedEvents.filter((e) => e.reason === 'exhausted').map((e) => e.messageId)).toEqual(['last-10']);

    const all = await collect(reader);
    expect(counter(all, 'rabbit_retry.messages.acked', { queue })).toBe(5);
    expect(counter(all, 'rabbit_retry.messages.retried', { queue })).toBe(6);
    expect(counterBy(all, 'rabbit_retry.messages.retried', 'delay')).toEqual({ '200ms': 4, '1m': 2 });
    expect(counter(all, 'rabbit_retry.messages.parked', { queue })).toBe(4);
    expect(counterBy(all, 'rabbit_retry.messages.parked', 'reason')).toEqual({ 'non-retryable': 3, exhausted: 1 });
    expect(counter(all, 'rabbit_retry.republish.failed')).toBe(0);

    const h = histogram(all, 'rabbit_retry.handler.duration', { queue });
    expect(h.count).toBe(15);
    expect(h.count).toBe(stats.handlerMs.count);
    expect(histogram(all, 'rabbit_retry.handler.duration', { outcome: 'success' }).count).toBe(5);
    expect(histogram(all, 'rabbit_retry.handler.duration', { outcome: 'failure' }).count).toBe(10);
    expect(h.sum).toBeCloseTo(stats.handlerMs.total, 3);
    expect(h.max).toBeCloseTo(stats.handlerMs.max, 3);

    expect(gauge(all, 'rabbit_retry.parked.depth', { queue })).toEqual([4]);
    expect(gauge(all, 'rabbit_retry.parked.depth', { queue })).toEqual([await rr.parked(queue).count()]);

    // The gauge follows the queue: purge, and the next collection reads 0.
    await rr.parked(queue).purge();
    expect(gauge(await collect(reader), 'rabbit_retry.parked.depth', { queue })).toEqual([0]);
  });

  it('a failed republish is counted in rabbit_retry.republish.failed and stats().publishFailed, and the message is not lost', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const retryQueue = retryQueueName(queue, '1m');
    const { provider, reader } = meterProvider();
    const rr = await connectClient({ meterProvider: provider });
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays }, recovery: { initialDelayMs: 50, maxDelayMs: 200 } }, async () => {
        calls++;
        throw new Error('carrier down');
      }),
    );
    const failedEvents: PublishFailedEvent[] = [];
    consumer.on('publishFailed', (e) => failedEvents.push(e));
    consumer.on('error', () => undefined);
    consumer.on('disconnected', () => undefined);

    // Someone deletes the retry queue by hand.
    await deleteQueue(retryQueue);
    await rr.publish('', queue, { orderId: 1 }, { messageId: 'order-1' });

    // The republish to the missing retry queue fails; the consumer declares its topology again,
    // the broker redelivers the message, and the second republish routes.
    await waitFor(() => consumer.stats().retried === 1, 15_000, 'the message retried after the failed republish');
    await waitFor(async () => (await queueDepth(retryQueue)) === 1, 5000, 'the message in the re-declared retry queue');
    await sleep(300);

    const stats = consumer.stats();
    expect(stats.publishFailed).toBe(1);
    expect(stats.retried).toBe(1);
    expect(stats.failed).toBe(2);
    expect(calls).toBe(2);
    expect(failedEvents).toHaveLength(1);
    expect(failedEvents[0]).toMatchObject({ queue, target: retryQueue, messageId: 'order-1' });
    expect(failedEvents[0].error.code).toBe('UNROUTABLE');

    const all = await collect(reader);
    expect(counter(all, 'rabbit_retry.republish.failed', { queue })).toBe(1);
    expect(counter(all, 'rabbit_retry.republish.failed', { queue })).toBe(stats.publishFailed);
    expect(counter(all, 'rabbit_retry.messages.retried', { queue, delay: '1m' })).toBe(1);
    expect(histogram(all, 'rabbit_retry.handler.duration', { queue }).count).toBe(2);

    // Nothing lost: one copy, waiting in the retry queue; none in Q or Q.parked.
    expect(await queueDepth(retryQueue)).toBe(1);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });

  it('without a meterProvider and without a global provider, consuming works and stats() still counts', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const errors: Error[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays } }, async (msg) => {
        if (msg.json<{ fail: boolean }>().fail) throw new Error('nope');
      }),
    );
    consumer.on('error', (e) => errors.push(e));
    await rr.publish('', queue, { fail: false });
    await rr.publish('', queue, { fail: true });
    await waitFor(() => consumer.stats().acked === 1 && consumer.stats().retried === 1, 10_000, 'both settled');
    expect(consumer.stats()).toMatchObject({ acked: 1, retried: 1, failed: 1, parked: 0, publishFailed: 0 });
    expect(errors).toEqual([]);
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(1);
  });

  it('without @opentelemetry/api installed, consuming works and stats() still counts', async () => {
    // A global provider is set, but the library cannot load the API, so it must record nothing there.
    const { provider, reader } = meterProvider();
    otelMetrics.setGlobalMeterProvider(provider);
    jest.doMock('@opentelemetry/api', () => {
      throw new Error("Cannot find module '@opentelemetry/api'");
    });
    try {
      const delays: Delay[] = [];
      const queue = testQueue(delays);
      const rr = await connectClient();
      const consumer = track(
        await rr.consume({ queue, onFailure: { delays }, alert: { parkedAbove: 0, every: '100ms' } }, async (msg) => {
          if (msg.json<{ fail: boolean }>().fail) throw new Error('nope');
        }),
      );
      const alerts: ParkedAlert[] = [];
      consumer.on('alert', (a) => alerts.push(a));
      await rr.publish('', queue, { fail: false });
      await rr.publish('', queue, { fail: true });
      await waitFor(() => consumer.stats().acked === 1 && consumer.stats().parked === 1, 10_000, 'both settled');
      expect(await queueDepth(parkedQueueName(queue))).toBe(1);
      // The alert does not depend on OpenTelemetry.
      await waitFor(() => alerts.length === 1, 5000, 'the alert');
      expect(consumer.stats()).toMatchObject({ acked: 1, parked: 1, failed: 1 });
      expect(metric(await collect(reader), 'rabbit_retry.messages.acked')).toBeUndefined();
    } finally {
      jest.dontMock('@opentelemetry/api');
    }
  });

  it('uses the global meter provider of @opentelemetry/api when none is passed', async () => {
    const delays: Delay[] = [];
    const queue = testQueue(delays);
    const { provider, reader } = meterProvider();
    expect(otelMetrics.setGlobalMeterProvider(provider)).toBe(true);
    const rr = await connectClient();
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays } }, async (msg) => {
        if (msg.json<{ fail: boolean }>().fail) throw new Error('nope');
      }),
    );
    await rr.publish('', queue, { fail: false });
    await rr.publish('', queue, { fail: true });
    await waitFor(() => consumer.stats().acked === 1 && consumer.stats().parked === 1, 10_000, 'both settled');
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 1, 5000, 'the parked message');
    const all = await collect(reader);
    expect(counter(all, 'rabbit_retry.messages.acked', { queue })).toBe(1);
    expect(counter(all, 'rabbit_retry.messages.parked', { queue, reason: 'exhausted' })).toBe(1);
    expect(gauge(all, 'rabbit_retry.parked.depth', { queue })).toEqual([1]);
  });
});

describe("the outbox's metrics", () => {
  it('the depth, parked and oldest-age gauges read the outbox; the published counter counts what the relay published', async () => {
    const db = createTestDatabase('metrics');
    try {
      const queue = extraQueue();
      await withChannel(async (ch) => {
        await ch.assertQueue(queue, { durable: true });
      });
      const writer = meterProvider();
      await connectClient({ meterProvider: writer.provider, outbox: { url: pgUrl(db), relay: false } });
      psql(
        `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, created_at)
         SELECT '', '${queue}', convert_to('m' || i, 'UTF8'), jsonb_build_object('messageId', 'm' || i), now() - interval '1 minute'
         FROM generate_series(1, 3) i`,
        db,
      );
      const backlog = await collect(writer.reader);
      expect(gauge(backlog, 'rabbit_retry.outbox.depth')).toEqual([3]);
      expect(gauge(backlog, 'rabbit_retry.outbox.parked')).toEqual([0]);
      expect(gauge(backlog, 'rabbit_retry.outbox.oldest_age')[0]).toBeGreaterThanOrEqual(60_000);
      expect(counter(backlog, 'rabbit_retry.outbox.published')).toBe(0);

      const relay = meterProvider();
      const rr = await connectClient({ meterProvider: relay.provider, outbox: { url: pgUrl(db) } });
      await waitFor(async () => (await rr.outbox.stats()).published === 3, 20_000, 'three rows published');
      await waitFor(async () => (await queueDepth(queue)) === 3, 5000, 'three messages in the queue');
      const published = await collect(relay.reader);
      expect(counter(published, 'rabbit_retry.outbox.published')).toBe(3);
      expect(counter(published, 'rabbit_retry.outbox.parked_by_relay')).toBe(0);
      expect(gauge(published, 'rabbit_retry.outbox.depth')).toEqual([0]);
      expect(gauge(published, 'rabbit_retry.outbox.oldest_age')).toEqual([0]);
    } finally {
      await cleanup();
      dropTestDatabase(db);
    }
  });
});

describe('the parked alert', () => {
  async function alerting(queue: string, parkedAbove: number) {
    const alerts: ParkedAlert[] = [];
    const events: ParkedAlert[] = [];
    const rr = await connectClient();
    const options: ConsumeOptions = {
      queue,
      onFailure: { delays: [] },
      alert: { parkedAbove, every: '200ms', onAlert: (a) => alerts.push(a) },
    };
    const consumer = track(
      await rr.consume(options, async () => {
        throw new Error('carrier down');
      }),
    );
    consumer.on('alert', (a) => events.push(a));
    let sent = 0;
    const park = async (k: number, expectedDepth: number) => {
      for (let i = 0; i < k; i++) await rr.publish('', queue, { i: sent }, { messageId: `m${sent++}` });
      await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === expectedDepth, 10_000, `${expectedDepth} parked`);
    };
    return { rr, consumer, alerts, events, park };
  }

  it('fires once when the depth rises above N, not on every check, and again after it fell to N or below and rose again', async () => {
    const queue = testQueue();
    const { rr, alerts, events, park } = await alerting(queue, 2);

    await park(2, 2);
    await sleep(700); // 3+ checks at depth == N
    expect(alerts).toEqual([]);

    await park(1, 3);
    await waitFor(() => alerts.length >= 1, 5000, 'the first alert');
    expect(alerts[0]).toEqual({ queue, parkedQueue: parkedQueueName(queue), depth: 3, threshold: 2 });

    await park(2, 5);
    await sleep(1000); // 5 checks, still above N
    expect(alerts).toHaveLength(1);

    expect(await rr.parked(queue).purge()).toBe(5);
    await sleep(600); // checks see 0
    expect(alerts).toHaveLength(1);

    await park(3, 3);
    await waitFor(() => alerts.length >= 2, 5000, 'the second alert');
    await sleep(1000);
    expect(alerts).toHaveLength(2);
    expect(alerts[1]).toMatchObject({ depth: 3, threshold: 2 });
    expect(events).toEqual(alerts);
  });

  it('a depth back at exactly N (not below) re-arms it', async () => {
    const queue = testQueue();
    const elsewhere = extraQueue();
    await withChannel((ch) => ch.assertQueue(elsewhere, { durable: true }));
    const { rr, alerts, park } = await alerting(queue, 1);
    await park(2, 2);
    await waitFor(() => alerts.length === 1, 5000, 'the first alert');
    // Move one away: the depth is now N (1), not above it.
    expect((await rr.parked(queue).replay({ limit: 1, ratePerSec: 1000, to: { exchange: '', routingKey: elsewhere } })).replayed).toBe(1);
    expect(await queueDepth(parkedQueueName(queue))).toBe(1);
    await sleep(600);
    expect(alerts).toHaveLength(1);
    await park(1, 2);
    await waitFor(() => alerts.length === 2, 5000, 'the second alert');
    await sleep(600);
    expect(alerts).toHaveLength(2);
    expect(alerts[1]).toMatchObject({ depth: 2, threshold: 1 });
  });

  it('fires at start when the parked queue is already above N', async () => {
    const queue = testQueue();
    await seedParked(
      queue,
      Array.from({ length: 4 }, (_, i) => ({ messageId: `old-${i}` })),
    );
    const { alerts } = await alerting(queue, 3);
    await waitFor(() => alerts.length === 1, 5000, 'the alert');
    await sleep(800);
    expect(alerts).toEqual([{ queue, parkedQueue: parkedQueueName(queue), depth: 4, threshold: 3 }]);
  });

  it('an onAlert that throws does not stop the consumer or later alerts', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    const warnings: string[] = [];
    const rr2 = await connectClient({ logger: { warn: (m) => warnings.push(m), error: (m) => warnings.push(m) } });
    let calls = 0;
    const consumer = track(
      await rr2.consume(
        {
          queue,
          onFailure: { delays: [] },
          alert: {
            parkedAbove: 0,
            every: '100ms',
            onAlert: () => {
              calls++;
              throw new Error('pager down');
            },
          },
        },
        async () => {
          throw new Error('x');
        },
      ),
    );
    const events: ParkedAlert[] = [];
    consumer.on('alert', (a) => events.push(a));
    await rr.publish('', queue, { a: 1 });
    await waitFor(() => calls === 1, 5000, 'the alert');
    await waitFor(() => events.length === 1, 5000, 'the alert event');
    expect(warnings.some((w) => w.includes('pager down'))).toBe(true);
    await rr.parked(queue).purge();
    await sleep(300);
    await rr.publish('', queue, { a: 2 });
    await waitFor(() => calls === 2, 5000, 'the second alert');
    expect(consumer.stats().parked).toBe(2);
  });
});
