/**
 * onFailure.brokerDelay: RabbitMQ 4.3's own delayed retry on a quorum work
 * queue. A retryable failure is rejected with requeue and the broker holds the
 * message for min × failures (up to max); after `attempts` it parks as it does
 * with retry queues. Runs on 4.3 or later; on older brokers only the version
 * refusal runs.
 */
import { type Message, NonRetryableError, type ParkedEvent, type RetryEvent, parkedQueueName, retryQueueName } from '../lib';
import {
  brokerIs43,
  brokerQueues,
  cleanup,
  closeAmqp,
  connectClient,
  it43,
  queueExists,
  rabbitmqctl,
  testQueue,
  track,
  waitFor,
  waitForOne,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const MIN = 200;
const MAX = 600;
const brokerDelay = { min: `${MIN}ms`, max: `${MAX}ms`, attempts: 4 } as const;

/** Every queue of the broker whose name starts with `queue.` (what a consumer of `queue` declared beside it). */
async function siblings(queue: string): Promise<string[]> {
  const out = await rabbitmqctl(['list_queues', '-q', '--formatter', 'json', 'name']);
  const rows = JSON.parse(out.slice(out.indexOf('['))) as { name: string }[];
  return rows.map((r) => r.name).filter((n) => n.startsWith(`${queue}.`));
}

let on43 = false;
beforeAll(async () => {
  on43 = await brokerIs43();
  if (!on43) console.warn('broker-delay: the broker is older than RabbitMQ 4.3; only the version refusal runs (brokerDelay needs 4.3)');
});

describe('onFailure.brokerDelay on RabbitMQ 4.3', () => {
  it43('declares the work queue with delayed retry and no retry queue', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    track(await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay } }, async () => undefined));
    const info = await brokerQueues([queue]);
    expect(info[queue].arguments).toEqual({
      'x-queue-type': 'quorum',
      'x-delayed-retry-type': 'failed',
      'x-delayed-retry-min': MIN,
      'x-delayed-retry-max': MAX,
      // Above the attempts: every failed attempt counts as a delivery.
      'x-delivery-limit': 6,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': parkedQueueName(queue),
      'x-dead-letter-strategy': 'at-least-once',
      'x-overflow': 'reject-publish',
    });
    expect(await siblings(queue)).toEqual([parkedQueueName(queue)]);
    expect(await queueExists(retryQueueName(queue, '200ms'))).toBe(false);
  });

  it43(
    'waits min × n between attempts, capped at max, then parks with the last error and the first failure',
    async () => {
      const queue = testQueue();
      const rr = await connectClient();
      const calls: number[] = [];
      const retries: RetryEvent[] = [];
      const parked: ParkedEvent[] = [];
      const consumer = track(
        await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay } }, async (msg: Message) => {
          calls.push(Date.now());
          throw new TypeError(`carrier down (${calls.length}) for ${msg.properties.messageId ?? '?'}`);
        }),
      );
      consumer.on('retry', (e) => retries.push(e));
      consumer.on('parked', (e) => parked.push(e));
      await rr.publish('', queue, Buffer.from('x'), { messageId: 'm-1' });
      const p = await waitForOne(parkedQueueName(queue), 15_000);

      // The handler ran once, then once after each of the 4 returns.
      expect(calls).toHaveLength(5);
      const gaps = calls.slice(1).map((t, i) => t - calls[i]);
      const want = [200, 400, 600, 600];
      console.log(`broker-delay gaps (ms): ${gaps.join(', ')}; wanted at least ${want.join(', ')}`);
      gaps.forEach((g, i) => {
        expect(g).toBeGreaterThanOrEqual(want[i] - 20);
        expect(g).toBeLessThan(want[i] + 400);
      });
      expect(retries.map((r) => [r.attempt, r.delay, r.target])).toEqual([
        [1, '200ms', queue],
        [2, '400ms', queue],
        [3, '600ms', queue],
        [4, '600ms', queue],
      ]);
      await waitFor(() => parked.length === 1);
      expect(parked[0]).toMatchObject({ reason: 'exhausted', attempt: 4, target: parkedQueueName(queue) });

      const h = p.headers;
      expect(h['retry-reason']).toBe('exhausted');
      expect(h['retry-attempt']).toBe(4);
      expect(h['retry-error-name']).toBe('TypeError');
      expect(String(h['retry-last-error'])).toBe('carrier down (5) for m-1');
      expect(String(h['retry-error-stack'])).toContain('TypeError: carrier down (5)');
      expect(h['retry-original-routing-key']).toBe(queue);
      expect(h['retry-queue']).toBe(queue);
      // Derived from the broker's delays (the park's time less 200 + 400 + 600 + 600 ms):
      // not before the first failure, and later only by what the handler and the hops took.
      const first = Date.parse(String(h['retry-first-failed-at']));
      expect(first).toBeGreaterThanOrEqual(calls[0] - 50);
      expect(first).toBeLessThanOrEqual(calls[4] - 1800 + 100);
      expect(p.content.toString()).toBe('x');
    },
    30_000,
  );

  it43('parks a non-retryable failure at once', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    let calls = 0;
    track(
      await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay } }, async () => {
        calls++;
        throw new NonRetryableError('bad input');
      }),
    );
    await rr.publish('', queue, Buffer.from('x'));
    const p = await waitForOne(parkedQueueName(queue));
    expect(calls).toBe(1);
    expect(p.headers['retry-reason']).toBe('non-retryable');
    expect(p.headers['retry-attempt']).toBe(0);
    expect(p.headers['retry-error-name']).toBe('NonRetryableError');
  });

  it43('gets the same topology advice as other options when the work queue differs', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await (await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay } }, async () => undefined)).close();
    await expect(
      rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay: { ...brokerDelay, min: '300ms' } } }, async () => undefined),
    ).rejects.toMatchObject({
      code: 'TOPOLOGY_MISMATCH',
      message: expect.stringContaining("'x-delayed-retry-min' = '200'") as unknown,
    });
    await expect(
      rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay: { ...brokerDelay, min: '300ms' } } }, async () => undefined),
    ).rejects.toThrow('set onFailure.brokerDelay.min: 200 (milliseconds) to match');
  });
});

describe('onFailure.brokerDelay refusals', () => {
  it('refuses brokerDelay beside delays, before anything is declared', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await expect(rr.consume({ queue, queueType: 'quorum', onFailure: { delays: ['1s'], brokerDelay } }, async () => undefined)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining('use one, brokerDelay') as unknown,
    });
    expect(await queueExists(queue)).toBe(false);
  });

  it('refuses brokerDelay on a classic queue, naming what to use instead', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await expect(rr.consume({ queue, onFailure: { brokerDelay } }, async () => undefined)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringMatching(/needs queueType 'quorum'.*use onFailure.delays on a classic queue/) as unknown,
    });
    expect(await queueExists(queue)).toBe(false);
  });

  it('refuses brokerDelay on a broker older than 4.3 with BROKER_UNSUPPORTED, declaring nothing', async () => {
    if (on43) {
      console.warn('skipped on RabbitMQ 4.3 or later: the version refusal needs an older broker (it runs on 3.10)');
      return;
    }
    const queue = testQueue();
    const rr = await connectClient();
    await expect(rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay } }, async () => undefined)).rejects.toMatchObject({
      code: 'BROKER_UNSUPPORTED',
      message: expect.stringMatching(/needs RabbitMQ 4.3 or later.*this broker is RabbitMQ 3\.\d+.*use onFailure.delays/) as unknown,
    });
    expect(await queueExists(queue)).toBe(false);
    expect(await queueExists(parkedQueueName(queue))).toBe(false);
  });
});
