/**
 * What RabbitMQ 4.x changed that a retry library meets, checked on whichever broker
 * AMQP_URL names (CI runs this file against 3.10 and 4.3): the quorum consumer timeout,
 * the delivery counters, and what the queue type's name looks like in a refusal.
 */
import { type Message, InvalidOptionsError, TopologyMismatchError, retryQueueName, type Delay } from '../lib';
import {
  brokerAtLeast,
  brokerVersion,
  cleanup,
  closeAmqp,
  connectClient,
  queueDepth,
  queueExists,
  sleep,
  testQueue,
  topologyDepths,
  track,
  waitFor,
  waitForOne,
  withChannel,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

describe('the quorum consumer timeout (RabbitMQ 4.3 evaluates it per queue)', () => {
  it("takes no delivery back from a handler that runs past the queue's own x-consumer-timeout", async () => {
    const on43 = await brokerAtLeast(4, 3);
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const calls: number[] = [];
    // 4.3 returns a delivery unacked for 1 s, unless the consumer asks for more (it does by default).
    const queueArguments: Record<string, number> = on43 ? { 'x-consumer-timeout': 1000 } : {};
    track(
      await rr.consume({ queue, queueType: 'quorum', queueArguments, onFailure: { delays } }, async (msg: Message) => {
        calls.push(Date.now());
        await sleep(3000);
        expect(msg.text()).toBe('slow carrier');
      }),
    );
    await rr.publish('', queue, 'slow carrier');
    await waitFor(async () => calls.length === 1 && (await queueDepth(queue)) === 0, 10_000, 'the handler to start');
    await sleep(4500);
    expect(calls).toHaveLength(1);
    expect(await topologyDepths(queue, delays)).toEqual({ work: 0, retry: { [retryQueueName(queue, '1m')]: 0 }, parked: 0 });
  });

  it('consumerTimeoutMs is the consumer saying so: on 4.3 the broker takes the delivery back and the consumer subscribes again', async () => {
    const on43 = await brokerAtLeast(4, 3);
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const calls: string[] = [];
    const consumer = track(
      await rr.consume({ queue, queueType: 'quorum', consumerTimeoutMs: 1000, onFailure: { delays } }, async (msg: Message) => {
        calls.push(msg.text());
        if (calls.length === 1) await sleep(3000);
      }),
    );
    const recovered: unknown[] = [];
    consumer.on('recovered', (e) => recovered.push(e));
    await rr.publish('', queue, 'order 48213');
    await waitFor(() => calls.length >= 1, 10_000, 'the first call');
    await sleep(5000);
    await rr.publish('', queue, 'order 48214');
    await waitFor(() => calls.includes('order 48214'), 20_000, 'the consumer to take the next message');
    if (on43) {
      // Returned under the first, still running, call: handled a second time after the consumer came back.
      expect(calls.filter((c) => c === 'order 48213').length).toBe(2);
      expect(recovered.length).toBeGreaterThanOrEqual(1);
    } else {
      // 3.x ignores the argument on quorum queues.
      expect(calls).toEqual(['order 48213', 'order 48214']);
    }
    await waitFor(async () => (await queueDepth(queue)) === 0, 10_000, 'the work queue to empty');
  });

  it('consumerTimeoutMs on a classic queue is refused before anything is declared', async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient();
    const err = await rr.consume({ queue, consumerTimeoutMs: 60_000, onFailure: { delays: ['1m'] } }, () => undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toContain("consumerTimeoutMs needs queueType 'quorum'");
    expect(await queueExists(queue)).toBe(false);
  });
});

describe('delivery counters', () => {
  it('a message the broker returned once reaches the handler with its counters, and its retry copy carries none of them', async () => {
    const [major, minor] = await brokerVersion();
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    // Declared by the consumer first, then the consumer stops, so that another client can return a message.
    const first = await rr.consume({ queue, queueType: 'quorum', onFailure: { delays } }, () => undefined);
    await first.close();
    await rr.publish('', queue, 'returned once');
    await withChannel(async (ch) => {
      await waitFor(async () => (await queueDepth(queue)) === 1, 5000, 'the message');
      const m = await ch.get(queue, { noAck: false });
      if (m === false) throw new Error('no message');
      ch.nack(m, false, true); // a return: 4.3 counts it in x-acquired-count only
      await sleep(200);
    });
    const seen: Record<string, unknown>[] = [];
    track(
      await rr.consume({ queue, queueType: 'quorum', onFailure: { delays } }, (msg: Message) => {
        seen.push({ ...msg.headers });
        throw new Error('carrier 503');
      }),
    );
    const copy = await waitForOne(retryQueueName(queue, '1m'));
    expect(seen).toHaveLength(1);
    if (major > 4 || (major === 4 && minor >= 3)) {
      expect(seen[0]['x-acquired-count']).toBe(1);
      expect(seen[0]['x-delivery-count'] ?? 0).toBe(0);
    } else {
      // Before 4.3 every return counts as a delivery.
      expect(seen[0]['x-delivery-count']).toBe(1);
    }
    // What the copy shows is the quorum retry queue's own count of it (3.x writes a 0), nothing carried over.
    expect(copy.headers['x-acquired-count'] ?? 0).toBe(0);
    expect(copy.headers['x-delivery-count'] ?? 0).toBe(0);
    expect(copy.headers['retry-attempt']).toBe(1);
  });
});

describe('queue types in a refusal, as 3.x and 4.x word them', () => {
  it("a quorum queue consumed as classic is told to set queueType: 'quorum'", async () => {
    const queue = testQueue(['1m']);
    await withChannel((ch) => ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } }));
    const rr = await connectClient();
    const err = await rr.consume({ queue, queueType: 'classic', onFailure: { delays: ['1m'] } }, () => undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect((err as Error).message).toContain("set queueType: 'quorum' to match");
  });

  it('a classic queue consumed as quorum is refused with the argument the broker names', async () => {
    const queue = testQueue(['1m']);
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    const rr = await connectClient();
    const err = await rr.consume({ queue, queueType: 'quorum', onFailure: { delays: ['1m'] } }, () => undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TopologyMismatchError);
    const message = (err as Error).message;
    // 3.x names x-queue-type first; 4.3 checks x-dead-letter-exchange (which a quorum work queue gets) first.
    if (message.includes("'x-queue-type'")) expect(message).toContain("set queueType: 'classic' to match");
    else expect(message).toMatch(/inequivalent arg 'x-dead-letter-exchange'.*assertQueue: false/);
  });
});
