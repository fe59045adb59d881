/**
 * `onFailure.faults`: a fault event for every message that parks, against the
 * real broker. JSON with the message's ids, its queue, why it parked, its
 * error, its attempts, when it first failed and when it parked, and where it
 * was first published; routed by the work queue's name; published confirmed
 * after the park and before the ack, once per park, never for a message that
 * did not park. A fault event the broker refuses does not hold up parking.
 */
import type { FaultFailedEvent } from '../lib';
import { NonRetryableError } from '../lib';
import { cleanup, closeAmqp, connectClient, drainAll, durableQueue, queueDepth, testExchange, testQueue, track, waitFor, withChannel } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

/** A queue bound to `exchange` for the fault events of work queue `queue`. */
async function faultsOf(exchange: string, queue: string): Promise<string> {
  const q = await durableQueue();
  await withChannel(async (ch) => {
    await ch.bindQueue(q, exchange, queue);
  });
  return q;
}

interface FaultBody {
  messageId: string | null;
  correlationId: string | null;
  queue: string;
  reason: string;
  error: { name: string; message: string };
  attempts: number;
  firstFailedAt: string;
  parkedAt: string;
  originalExchange: string;
  originalRoutingKey: string;
}

describe('fault events', () => {
  it('one for every message that parks, with why and when, routed by the queue name; none for one that did not park', async () => {
    const rr = await connectClient();
    const queue = testQueue(['100ms']);
    const faults = testExchange();
    const calls = new Map<string, number>();
    class CarrierError extends Error {
      override name = 'CarrierError';
    }
    // The first consumer declares the faults exchange; then a queue of ours listens to it.
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['100ms'], faults: { exchange: faults } } }, (msg) => {
        const id = msg.properties.messageId ?? '';
        calls.set(id, (calls.get(id) ?? 0) + 1);
        if (id.startsWith('bad')) throw new NonRetryableError('no such order');
        if (id.startsWith('down')) throw new CarrierError('carrier 503');
        if (id === 'flaky' && msg.attempt === 0) throw new CarrierError('once');
      }),
    );
    const listened = await faultsOf(faults, queue);
    const started = new Date().toISOString();
    for (let i = 0; i < 10; i++) await rr.publish('', queue, { i }, { messageId: `down-${i}`, correlationId: `c-${i}` });
    await rr.publish('', queue, {}, { messageId: 'bad-1' });
    await rr.publish('', queue, {}, { messageId: 'flaky' });
    await rr.publish('', queue, {}, { messageId: 'fine' });
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 11, 15_000, 'eleven parked');
    await waitFor(async () => (await queueDepth(listened)) === 11, 5_000, 'eleven fault events');
    const events = (await drainAll(listened)).map((m) => ({
      body: JSON.parse(m.content.toString()) as FaultBody,
      routingKey: m.routingKey,
      type: m.properties.type as string,
      persistent: m.properties.deliveryMode,
    }));
    expect(events.map((e) => e.body.messageId).sort()).toEqual(['bad-1', ...Array.from({ length: 10 }, (_, i) => `down-${i}`)].sort());
    for (const e of events) {
      expect(e.routingKey).toBe(queue);
      expect(e.type).toBe('rabbit-retry.fault');
      expect(e.persistent).toBe(2);
      expect(e.body.queue).toBe(queue);
      expect(e.body.originalExchange).toBe('');
      expect(e.body.originalRoutingKey).toBe(queue);
      expect(e.body.parkedAt >= started).toBe(true);
      expect(e.body.firstFailedAt <= e.body.parkedAt).toBe(true);
    }
    const down = events.find((e) => e.body.messageId === 'down-3')!.body;
    expect(down).toMatchObject({ correlationId: 'c-3', reason: 'exhausted', attempts: 2, error: { name: 'CarrierError', message: 'carrier 503' } });
    const bad = events.find((e) => e.body.messageId === 'bad-1')!.body;
    expect(bad).toMatchObject({ reason: 'non-retryable', attempts: 1, error: { name: 'NonRetryableError', message: 'no such order' } });
    expect(bad.firstFailedAt).toBe(bad.parkedAt);
    expect(calls.get('flaky')).toBe(2);
    expect(calls.get('fine')).toBe(1);
    expect(consumer.stats()).toMatchObject({ parked: 11, faultsFailed: 0 });
  });

  it('declares the exchange as a durable topic exchange when it does not exist', async () => {
    const rr = await connectClient();
    const queue = testQueue(['100ms']);
    const faults = testExchange();
    track(await rr.consume({ queue, onFailure: { delays: ['100ms'], faults: { exchange: faults } } }, () => undefined));
    // A passive declare of the same name as topic and durable succeeds; as another type it would be refused.
    await withChannel(async (ch) => {
      await ch.assertExchange(faults, 'topic', { durable: true });
    });
  });

  it('a fault event the broker refuses does not hold up parking: the message parks and is acked, faultFailed says why', async () => {
    const rr = await connectClient();
    const queue = testQueue([]);
    const faults = testExchange();
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [], faults: { exchange: faults } } }, () => {
        throw new Error('carrier 503');
      }),
    );
    const refused: FaultFailedEvent[] = [];
    consumer.on('faultFailed', (e) => refused.push(e));
    await withChannel(async (ch) => {
      await ch.deleteExchange(faults);
    });
    for (let i = 0; i < 3; i++) await rr.publish('', queue, {}, { messageId: `m-${i}` });
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 3, 10_000, 'three parked');
    await waitFor(() => refused.length === 3, 5_000, 'three refusals');
    expect(refused.map((e) => [e.messageId, e.reason, e.error.code]).sort()).toEqual([
      ['m-0', 'exhausted', 'UNROUTABLE'],
      ['m-1', 'exhausted', 'UNROUTABLE'],
      ['m-2', 'exhausted', 'UNROUTABLE'],
    ]);
    expect(refused[0].error.message).toContain(`'${faults}'`);
    expect(await queueDepth(queue)).toBe(0);
    expect(consumer.stats()).toMatchObject({ parked: 3, faultsFailed: 3 });
  });

  it('is refused without an exchange, or with a key it does not have', async () => {
    const rr = await connectClient();
    const queue = testQueue([]);
    await expect(rr.consume({ queue, onFailure: { faults: {} as { exchange: string } } }, () => undefined)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining('onFailure.faults.exchange'),
    });
    await expect(
      rr.consume({ queue, onFailure: { faults: { exchange: 'x', route: 'y' } as unknown as { exchange: string } } }, () => undefined),
    ).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('`route` is not an option of onFailure.faults') });
  });
});
