/**
 * Broker facts come from the broker, and a consumer stays bounded: a
 * producer's `x-delivery-count` on a first delivery is not the broker's
 * count; a handler that always outlives `consumerTimeoutMs` parks at the
 * delivery limit, as `consumer-timeout`, and `stats()` counts no ack that did
 * not take; `brokerDelay` on a queue consumed as it is (`assertQueue: false`)
 * is checked for the arguments it depends on, and the advice that refuses it
 * never leads to a silent wrong mode.
 */
import { type Message, parkedQueueName } from '../lib';
import { brokerIs43, cleanup, closeAmqp, connectClient, it43, queueDepth, sleep, testQueue, track, waitFor, waitForOne, withChannel } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

describe("x-delivery-count is the broker's only where the broker wrote it", () => {
  it("a first delivery carrying a producer's x-delivery-count: 99 reaches its handler and is acked", async () => {
    const rr = await connectClient();
    const queue = testQueue(['1s']);
    const got: Message[] = [];
    const consumer = track(await rr.consume({ queue, queueType: 'quorum', deliveryLimit: 3, onFailure: { delays: ['1s'] } }, (msg) => void got.push(msg)));
    await rr.publish('', queue, 'order 48213', { headers: { 'x-delivery-count': 99, 'x-acquired-count': 99 } });
    await waitFor(() => got.length === 1, 10_000, 'the handler');
    await waitFor(() => consumer.stats().acked === 1, 5_000, 'the ack');
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(got[0].redelivered).toBe(false);
  });

  it43('with brokerDelay: the same first delivery is handled, and a message that fails counts from the broker', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay: { min: '100ms', max: '200ms', attempts: 2 } } }, (msg) => {
        calls++;
        if (msg.text() === 'fails') throw new Error('carrier 503');
      }),
    );
    await rr.publish('', queue, 'ok', { headers: { 'x-delivery-count': 99 } });
    await rr.publish('', queue, 'fails', { headers: { 'x-delivery-count': 99 } });
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 1, 15_000, 'the failing one parked');
    const parked = await waitForOne(parkedQueueName(queue));
    expect(parked.properties.headers?.['retry-reason']).toBe('exhausted');
    // One success, and the failing message's first attempt and its two returns.
    expect(calls).toBe(4);
    expect(consumer.stats().acked).toBe(1);
  });
});

describe('consumerTimeoutMs is bounded by deliveryLimit', () => {
  it43(
    'a handler that always outlives the timeout is called deliveryLimit times, then the message parks as consumer-timeout; no ack is counted',
    async () => {
      const rr = await connectClient();
      const queue = testQueue(['1s']);
      let calls = 0;
      const consumer = track(
        await rr.consume(
          { queue, queueType: 'quorum', deliveryLimit: 2, consumerTimeoutMs: 1_000, prefetch: 1, onFailure: { delays: ['1s'] } },
          async () => {
            calls++;
            await sleep(2_500);
          },
        ),
      );
      const disconnects: string[] = [];
      consumer.on('disconnected', (e) => disconnects.push(e.error.message));
      await rr.publish('', queue, 'slow', { messageId: 'slow-1' });
      await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 1, 60_000, 'parked', 200);
      const parked = await waitForOne(parkedQueueName(queue));
      expect(parked.properties.headers).toMatchObject({ 'retry-reason': 'consumer-timeout', 'retry-error-name': 'ConsumerTimeout' });
      expect(String(parked.properties.headers?.['retry-last-error'])).toContain('consumer timeout');
      expect(calls).toBe(2);
      expect(disconnects.length).toBeGreaterThan(0);
      expect(disconnects.every((m) => m.startsWith('consumer timeout:'))).toBe(true);
      // The handlers end after their message was taken back: no ack took, and none is counted.
      await waitFor(() => consumer.stats().takenBack === 2, 10_000, 'both handlers ended');
      expect(consumer.stats()).toMatchObject({ acked: 0, takenBack: 2, parked: 1 });
      expect(await queueDepth(queue)).toBe(0);
    },
    90_000,
  );
});

describe('brokerDelay on a queue consumed as it is', () => {
  it43('a queue without the x-delayed-retry-* arguments is refused, TOPOLOGY_MISMATCH, with no advice toward assertQueue: false', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await withChannel(async (ch) => {
      await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    });
    const brokerDelay = { min: '100ms', max: '1s', attempts: 3 } as const;
    const err = await rr.consume({ queue, queueType: 'quorum', assertQueue: false, onFailure: { brokerDelay } }, () => undefined).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'TOPOLOGY_MISMATCH' });
    expect((err as Error).message).toContain('x-delayed-retry');
    expect((err as Error).message).not.toContain('assertQueue: false');
  });

  it43('a queue with them, whose other arguments are its own, is consumed as it is, and a failure comes back after the delay', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await withChannel(async (ch) => {
      await ch.assertQueue(queue, {
        durable: true,
        arguments: {
          'x-queue-type': 'quorum',
          'x-delayed-retry-type': 'failed',
          'x-delayed-retry-min': 300,
          'x-delayed-retry-max': 1000,
          'x-max-length': 10_000,
        },
      });
    });
    const at: number[] = [];
    track(
      await rr.consume(
        { queue, queueType: 'quorum', assertQueue: false, deliveryLimit: 10, onFailure: { brokerDelay: { min: '300ms', max: '1s', attempts: 1 } } },
        () => {
          at.push(Date.now());
          if (at.length === 1) throw new Error('once');
        },
      ),
    );
    await rr.publish('', queue, 'x');
    await waitFor(() => at.length === 2, 10_000, 'the retry');
    expect(at[1] - at[0]).toBeGreaterThanOrEqual(250);
  });
});

beforeAll(async () => {
  if (!(await brokerIs43())) console.warn('broker-facts: consumerTimeoutMs and brokerDelay run on RabbitMQ 4.3 only');
});
