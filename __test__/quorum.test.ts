import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  type ConsumeOptions,
  type Message,
  type ParkedEvent,
  type PublishFailedEvent,
  type RetryEvent,
  parkedQueueName,
  retryQueueName,
  type Delay,
} from '../lib';
import {
  brokerQueues,
  cleanup,
  closeAmqp,
  connectClient,
  getOne,
  queueDepth,
  queueExists,
  rabbitmqctl,
  sleep,
  startScript,
  testQueue,
  topologyDepths,
  track,
  waitFor,
  waitForOne,
  withChannel,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const CRASH_CONSUMER = path.join(__dirname, 'fixtures', 'crash-consumer.ts');

/** Declares `name` again with amqplib; resolves to the reply code (200 when it succeeded). */
async function redeclare(name: string, args: Record<string, unknown>): Promise<number> {
  try {
    await withChannel((ch) => ch.assertQueue(name, { durable: true, arguments: args }));
    return 200;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'number') return code;
    throw err;
  }
}

const long = (value: number) => ({ '!': 'long', value });

describe("queueType: 'quorum' topology", () => {
  it('declares Q, Q.retry.<delay> and Q.parked as quorum queues with at-least-once retries and the delivery limit', async () => {
    const delays: Delay[] = ['200ms', '1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    track(await rr.consume({ queue, queueType: 'quorum', deliveryLimit: 3, onFailure: { delays } }, async () => undefined));

    const retry200 = retryQueueName(queue, '200ms');
    const retry1m = retryQueueName(queue, '1m');
    const parked = parkedQueueName(queue);
    const info = await brokerQueues([queue, retry200, retry1m, parked]);
    expect(Object.keys(info).sort()).toEqual([queue, parked, retry1m, retry200].sort());
    for (const q of Object.values(info)) expect({ name: q.name, type: q.type }).toEqual({ name: q.name, type: 'quorum' });

    for (const [name, ttl] of [
      [retry200, 200],
      [retry1m, 60_000],
    ] as const) {
      expect(info[name].arguments).toEqual({
        'x-queue-type': 'quorum',
        'x-message-ttl': ttl,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': queue,
        'x-dead-letter-strategy': 'at-least-once',
        'x-overflow': 'reject-publish',
      });
    }
    expect(info[queue].arguments).toEqual({
      'x-queue-type': 'quorum',
      'x-delivery-limit': 4,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': parked,
      'x-dead-letter-strategy': 'at-least-once',
      'x-overflow': 'reject-publish',
    });
    expect(info[parked].arguments).toEqual({ 'x-queue-type': 'quorum' });

    // The broker agrees: the same arguments declare again, a classic queue of the same name is refused.
    const retryArgs = (ttl: number) => ({
      'x-queue-type': 'quorum',
      'x-message-ttl': long(ttl),
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': queue,
      'x-dead-letter-strategy': 'at-least-once',
      'x-overflow': 'reject-publish',
    });
    const workArgs = {
      'x-queue-type': 'quorum',
      'x-delivery-limit': long(4),
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': parked,
      'x-dead-letter-strategy': 'at-least-once',
      'x-overflow': 'reject-publish',
    };
    expect(await redeclare(retry200, retryArgs(200))).toBe(200);
    expect(await redeclare(retry1m, retryArgs(60_000))).toBe(200);
    expect(await redeclare(queue, workArgs)).toBe(200);
    expect(await redeclare(parked, { 'x-queue-type': 'quorum' })).toBe(200);
    expect(await redeclare(retry200, { ...retryArgs(200), 'x-queue-type': 'classic' })).toBe(406);
    expect(await redeclare(queue, { ...workArgs, 'x-queue-type': 'classic' })).toBe(406);
    expect(await redeclare(parked, { 'x-queue-type': 'classic' })).toBe(406);
    expect(await redeclare(retry200, { ...retryArgs(200), 'x-dead-letter-strategy': 'at-most-once' })).toBe(406);
  });

  it('gives the work queue x-delivery-limit 6 when deliveryLimit is left at its default of 5', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    track(await rr.consume({ queue, queueType: 'quorum', onFailure: { delays } }, async () => undefined));
    const info = await brokerQueues([queue]);
    expect(info[queue].type).toBe('quorum');
    expect(info[queue].arguments['x-delivery-limit']).toBe(6);
    expect(info[queue].arguments['x-dead-letter-routing-key']).toBe(parkedQueueName(queue));
  });

  const invalid: [string, (queue: string) => ConsumeOptions, RegExp][] = [
    ["deliveryLimit with queueType 'classic'", (queue) => ({ queue, queueType: 'classic', deliveryLimit: 3 }), /deliveryLimit/],
    ['deliveryLimit without a queueType (classic by default)', (queue) => ({ queue, deliveryLimit: 3 }), /deliveryLimit/],
    ['deliveryLimit 0', (queue) => ({ queue, queueType: 'quorum', deliveryLimit: 0 }), /deliveryLimit/],
    ['deliveryLimit -1', (queue) => ({ queue, queueType: 'quorum', deliveryLimit: -1 }), /deliveryLimit/],
    ['deliveryLimit 1.5', (queue) => ({ queue, queueType: 'quorum', deliveryLimit: 1.5 }), /deliveryLimit/],
  ];

  it.each(invalid)('rejects %s with INVALID_OPTIONS and declares nothing', async (_label, options, names) => {
    const queue = testQueue(['1m']);
    const rr = await connectClient();
    await expect(rr.consume(options(queue), async () => undefined)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      name: 'InvalidOptionsError',
      message: expect.stringMatching(names),
    });
    expect(await queueExists(queue)).toBe(false);
    expect(await queueExists(parkedQueueName(queue))).toBe(false);
  });
});

describe('the failure path on quorum queues', () => {
  it('retries through each delay, then parks as exhausted with its headers', async () => {
    const delays: Delay[] = ['200ms', '400ms'];
    const queue = testQueue(delays);
    const calls: number[] = [];
    const retries: RetryEvent[] = [];
    const parkedEvents: ParkedEvent[] = [];
    const rr = await connectClient();
    async function chargeCardHandler(msg: Message): Promise<void> {
      calls.push(msg.attempt);
      throw new Error(`gateway timeout (attempt ${msg.attempt})`);
    }
    const consumer = track(await rr.consume({ queue, queueType: 'quorum', onFailure: { delays } }, chargeCardHandler));
    consumer.on('retry', (e) => retries.push(e));
    consumer.on('parked', (e) => parkedEvents.push(e));
    await rr.publish('', queue, { card: 'tok_1' }, { messageId: 'charge-1', headers: { tenant: 'acme' } });

    const m = await waitForOne(parkedQueueName(queue), 20_000);
    // A fourth call would come within the longest delay.
    await sleep(800);

    expect(calls).toEqual([0, 1, 2]);
    expect(JSON.parse(m.content.toString('utf8'))).toEqual({ card: 'tok_1' });
    expect(m.properties.messageId).toBe('charge-1');
    expect(m.headers).toMatchObject({
      tenant: 'acme',
      'retry-reason': 'exhausted',
      'retry-attempt': 2,
      'retry-last-error': 'gateway timeout (attempt 2)',
      'retry-error-name': 'Error',
      'retry-queue': queue,
      'retry-original-exchange': '',
      'retry-original-routing-key': queue,
    });
    expect(m.headers['retry-error-stack']).toEqual(expect.stringContaining('chargeCardHandler'));
    // No dead-letter history carried over; x-delivery-count 0 is the parked quorum queue's own count of this copy.
    expect(Object.keys(m.headers).filter((k) => k.startsWith('x-') && k !== 'x-delivery-count')).toEqual([]);
    expect(m.headers['x-delivery-count'] ?? 0).toBe(0);
    expect(retries.map((e) => [e.delay, e.attempt])).toEqual([
      ['200ms', 1],
      ['400ms', 2],
    ]);
    await waitFor(() => parkedEvents.length === 1, 5000, 'the parked event');
    expect(parkedEvents[0]).toMatchObject({ reason: 'exhausted', attempt: 2, messageId: 'charge-1' });
    expect(await topologyDepths(queue, delays)).toEqual({
      work: 0,
      retry: { [retryQueueName(queue, '200ms')]: 0, [retryQueueName(queue, '400ms')]: 0 },
      parked: 0,
    });
  });

  it('acks a message that fails twice and then succeeds, parking nothing', async () => {
    const delays: Delay[] = ['200ms', '400ms'];
    const queue = testQueue(delays);
    const calls: number[] = [];
    const rr = await connectClient();
    const consumer = track(
      await rr.consume({ queue, queueType: 'quorum', onFailure: { delays } }, async (msg) => {
        calls.push(msg.attempt);
        if (msg.attempt < 2) throw new Error('not yet');
      }),
    );
    await rr.publish('', queue, 'hello', { messageId: 'flaky-1' });
    await waitFor(() => consumer.stats().acked === 1, 20_000, 'the ack after two failures');
    await sleep(500);
    expect(calls).toEqual([0, 1, 2]);
    expect(consumer.stats()).toMatchObject({ acked: 1, failed: 2, retried: 2, parked: 0 });
    expect(await topologyDepths(queue, delays)).toEqual({
      work: 0,
      retry: { [retryQueueName(queue, '200ms')]: 0, [retryQueueName(queue, '400ms')]: 0 },
      parked: 0,
    });
  });

  it('treats a reject-publish nack of a full retry queue as a failed publish and keeps the original', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const retryQueue = retryQueueName(queue, '1m');
    // A policy on this test's retry queue only: at most one message (the queue already overflows with reject-publish).
    const policy = `rr-test-maxlen-${queue}`;
    const pattern = `^${retryQueue.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`;
    const rr = await connectClient();
    const failed: PublishFailedEvent[] = [];
    const retries: RetryEvent[] = [];
    const consumer = track(
      await rr.consume({ queue, queueType: 'quorum', prefetch: 5, onFailure: { delays } }, async () => {
        throw new Error('downstream down');
      }),
    );
    consumer.on('publishFailed', (e) => failed.push(e));
    consumer.on('retry', (e) => retries.push(e));
    await rabbitmqctl(['set_policy', '--apply-to', 'queues', '--priority', '100', policy, pattern, '{"max-length":1}']);
    try {
      await waitFor(async () => (await brokerQueues([retryQueue]))[retryQueue]?.policy === policy, 15_000, 'the policy on the retry queue');

      // Quorum queues apply reject-publish once they are over the limit, so the
      // retry queue takes one message more than max-length; publish until a nack. Bounded.
      let nackedId: string | undefined;
      for (let i = 1; i <= 5 && nackedId === undefined; i++) {
        const id = `full-${i}`;
        await rr.publish('', queue, `body ${i}`, { messageId: id });
        await waitFor(
          () => retries.some((e) => e.messageId === id) || failed.some((e) => e.messageId === id),
          10_000,
          `the retry or publishFailed event of ${id}`,
        );
        if (failed.some((e) => e.messageId === id)) nackedId = id;
      }
      expect(nackedId).toBeDefined();
      const nacked = failed.find((e) => e.messageId === nackedId);
      expect(nacked).toMatchObject({ queue, target: retryQueue });
      expect(nacked?.error).toMatchObject({ code: 'PUBLISH_NACKED', name: 'PublishNackedError' });
      expect(retries.map((e) => e.messageId)).not.toContain(nackedId);
      expect(consumer.stats().publishFailed).toBeGreaterThanOrEqual(1);
      const retried = retries.length;

      // Nothing lost: the original is still the work queue's (unacked while the consumer holds it).
      await consumer.close();
      await waitFor(async () => (await queueDepth(queue)) === 1, 10_000, 'the original back in the work queue');
      const back = await getOne(queue);
      expect(back?.properties.messageId).toBe(nackedId);
      expect(back?.content.toString('utf8')).toBe(`body ${String(nackedId).slice('full-'.length)}`);
      expect(await queueDepth(retryQueue)).toBe(retried);
      expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    } finally {
      await rabbitmqctl(['clear_policy', policy]);
    }
  });
});

interface Call {
  pid: number;
  messageId?: string;
  deliveryCount: number | null;
  redelivered: boolean;
  attempt: number;
}

describe('a message that crashes the consumer process (quorum, deliveryLimit 2)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'rr-crash-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is handled deliveryLimit times, then parks with retry-reason delivery-limit without reaching the handler again', async () => {
    const deliveryLimit = 2;
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const callsFile = path.join(dir, 'calls.jsonl');
    const rr = await connectClient();
    const readCalls = (): Call[] =>
      existsSync(callsFile)
        ? readFileSync(callsFile, 'utf8')
            .split('\n')
            .filter((l) => l.length > 0)
            .map((l) => JSON.parse(l) as Call)
        : [];

    const runs: { code: number | null; signal: NodeJS.Signals | null; parkedLine?: string }[] = [];
    let published = false;
    // Each run is one process; the poison message kills every one until it parks. Bounded.
    for (let run = 0; run < deliveryLimit + 3; run++) {
      const script = startScript(CRASH_CONSUMER, [queue, callsFile, String(deliveryLimit), 'poison']);
      try {
        await waitFor(
          () => script.stdout().includes('ready') || script.child.exitCode !== null || script.child.signalCode !== null,
          30_000,
          'the consumer process to start',
        );
        if (!script.stdout().includes('ready')) throw new Error(`the consumer process did not start: ${script.stderr()}`);
        if (!published) {
          await rr.publish('', queue, { order: 'poison' }, { messageId: 'poison', headers: { tenant: 'acme' } });
          published = true;
        }
        let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
        void script.exited.then((e) => (exited = e));
        await waitFor(() => exited !== undefined || script.stdout().includes('"event":"parked"'), 30_000, 'a crash or the parked event');
        if (exited) {
          runs.push(exited);
          continue;
        }
        runs.push({
          code: null,
          signal: null,
          parkedLine: script
            .stdout()
            .split('\n')
            .find((l) => l.includes('"event":"parked"')),
        });
        break;
      } finally {
        if (script.child.exitCode === null && script.child.signalCode === null) {
          script.child.kill('SIGKILL');
          await script.exited;
        }
      }
    }

    const calls = readCalls();
    // The handler ran exactly deliveryLimit times, each in a process that then died.
    expect(calls.map((c) => c.messageId)).toEqual(['poison', 'poison']);
    expect(calls.map((c) => c.deliveryCount)).toEqual([null, 1]);
    expect(calls.map((c) => c.redelivered)).toEqual([false, true]);
    expect(new Set(calls.map((c) => c.pid)).size).toBe(deliveryLimit);
    expect(runs.slice(0, deliveryLimit).map((r) => r.signal)).toEqual(['SIGKILL', 'SIGKILL']);
    expect(runs).toHaveLength(deliveryLimit + 1);

    const parkedEvent = JSON.parse(runs[deliveryLimit].parkedLine ?? '{}') as Record<string, unknown>;
    expect(parkedEvent).toMatchObject({ queue, target: parkedQueueName(queue), messageId: 'poison', reason: 'delivery-limit' });

    const m = await waitForOne(parkedQueueName(queue), 10_000);
    expect(JSON.parse(m.content.toString('utf8'))).toEqual({ order: 'poison' });
    expect(m.properties.messageId).toBe('poison');
    expect(m.headers).toMatchObject({
      tenant: 'acme',
      'retry-reason': 'delivery-limit',
      'retry-error-name': 'DeliveryLimitExceeded',
      'retry-queue': queue,
      'retry-original-routing-key': queue,
    });
    expect(m.headers['retry-last-error']).toEqual(expect.stringContaining('delivered 3 times'));
    // The work queue's count (2) is not carried over; 0 is the parked quorum queue's own count of this copy.
    expect(m.headers['x-delivery-count'] ?? 0).toBe(0);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(0);
  }, 180_000);
});
