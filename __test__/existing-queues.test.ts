/**
 * Queues that exist before the consumer: declared by an operator, by another
 * library or by an earlier setup, with arguments of their own. The consumer
 * adopts them through queueArguments or assertQueue: false, or fails with an
 * error that names the argument and the option, having created nothing.
 */
import {
  type Delay,
  InvalidOptionsError,
  type Message,
  type ParkedEvent,
  type QueueArguments,
  TopologyMismatchError,
  parkedQueueName,
  retryQueueName,
} from '../lib';
import amqp from 'amqplib';

import {
  AMQP_URL,
  brokerAtLeast,
  brokerQueues,
  cleanup,
  closeAmqp,
  connectClient,
  deleteExchange,
  queueDepth,
  queueExists,
  testExchange,
  testQueue,
  track,
  waitFor,
  waitForOne,
  withChannel,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const delays: Delay[] = ['200ms'];

/** The retry and parked queues of `queue`. */
function companions(queue: string): string[] {
  return [...delays.map((d) => retryQueueName(queue, d)), parkedQueueName(queue)];
}

/** Declares `queue` as an operator would, outside rabbit-retry. */
async function operatorQueue(queue: string, options: { durable?: boolean; arguments?: Record<string, unknown> }): Promise<void> {
  await withChannel((ch) => ch.assertQueue(queue, { durable: options.durable ?? true, arguments: options.arguments }));
}

async function consumeError(options: Parameters<Awaited<ReturnType<typeof connectClient>>['consume']>[0]): Promise<Error> {
  const rr = await connectClient();
  return rr
    .consume(options, async () => undefined)
    .then(
      (c) => {
        track(c);
        return new Error('consume resolved');
      },
      (e: unknown) => e as Error,
    );
}

/** Fails on the first failure, then parks: one retry through the 200ms queue. */
async function retryThenPark(queue: string, extra: { assertQueue?: boolean; queueArguments?: QueueArguments } = {}) {
  const rr = await connectClient();
  const seen: number[] = [];
  const parked: ParkedEvent[] = [];
  const consumer = track(
    await rr.consume({ queue, ...extra, onFailure: { delays } }, async (msg: Message) => {
      seen.push(msg.attempt);
      throw new Error(`carrier down (attempt ${msg.attempt})`);
    }),
  );
  consumer.on('parked', (e) => parked.push(e));
  await rr.publish('', queue, { orderId: 48213 }, { messageId: 'order-48213' });
  const m = await waitForOne(parkedQueueName(queue));
  return { seen, parked, m };
}

describe('a work queue that exists with arguments of its own', () => {
  it('fails consume with TOPOLOGY_MISMATCH naming the argument and queueArguments, and creates nothing', async () => {
    const queue = testQueue(delays);
    await operatorQueue(queue, { arguments: { 'x-max-length': 1000 } });
    const err = await consumeError({ queue, onFailure: { delays } });
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toContain(`queue '${queue}'`);
    expect(err.message).toContain("set queueArguments: { 'x-max-length': 1000 } to match");
    expect(err.message).toContain('assertQueue: false');
    for (const name of companions(queue)) expect(await queueExists(name)).toBe(false);
  });

  it('a dead-letter exchange from an earlier setup: the error quotes its value as a string', async () => {
    const queue = testQueue(delays);
    await operatorQueue(queue, { arguments: { 'x-dead-letter-exchange': 'old-dlx', 'x-dead-letter-routing-key': 'dead' } });
    const err = await consumeError({ queue, onFailure: { delays } });
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toMatch(/queueArguments: \{ 'x-dead-letter-(exchange': 'old-dlx'|routing-key': 'dead') \}/);
    for (const name of companions(queue)) expect(await queueExists(name)).toBe(false);
  });

  it('is consumed with queueArguments that match, and its arguments stay as they were', async () => {
    const queue = testQueue(delays);
    const args = { 'x-max-length': 1000, 'x-dead-letter-exchange': 'old-dlx' };
    await operatorQueue(queue, { arguments: args });
    const { seen, parked, m } = await retryThenPark(queue, { queueArguments: args });
    expect(seen).toEqual([0, 1]);
    expect(parked).toHaveLength(1);
    expect(m.properties.messageId).toBe('order-48213');
    expect(m.headers['retry-reason']).toBe('exhausted');
    const q = await brokerQueues([queue]);
    expect(q[queue].arguments).toEqual({ 'x-max-length': 1000, 'x-dead-letter-exchange': 'old-dlx' });
    expect(await queueDepth(queue)).toBe(0);
  });

  it('is consumed as it is with assertQueue: false, whatever its arguments, and the retry topology is still built', async () => {
    const queue = testQueue(delays);
    await operatorQueue(queue, { arguments: { 'x-max-length': 500, 'x-message-ttl': 3_600_000, 'x-queue-mode': 'lazy' } });
    const { seen, m } = await retryThenPark(queue, { assertQueue: false });
    expect(seen).toEqual([0, 1]);
    expect(m.headers['retry-attempt']).toBe(1);
    const q = await brokerQueues([queue, ...companions(queue)]);
    expect(q[queue].arguments).toEqual({ 'x-max-length': 500, 'x-message-ttl': 3_600_000, 'x-queue-mode': 'lazy' });
    expect(q[retryQueueName(queue, '200ms')].arguments).toMatchObject({ 'x-message-ttl': 200, 'x-dead-letter-routing-key': queue });
  });

  it('assertQueue: false consumes a non-durable queue that rabbit-retry would refuse to declare', async () => {
    const queue = testQueue(delays);
    // A broker that denies transient non-exclusive queues (RabbitMQ 4.x's deprecation, refused by
    // default in later releases) closes the connection that asks: ask on one of its own.
    const operator = await amqp.connect(AMQP_URL);
    let refusal = '';
    operator.on('error', (err: Error) => (refusal += err.message));
    const made = await operator
      .createChannel()
      .then((ch) => ch.assertQueue(queue, { durable: false }))
      .then(
        () => true,
        (err: unknown) => {
          refusal += String(err);
          return false;
        },
      );
    await operator.close().catch(() => undefined);
    if (!made) {
      await waitFor(() => refusal.includes('transient_nonexcl_queues'), 5000, `the broker's refusal (got: ${refusal})`);
      expect(await queueExists(queue)).toBe(false);
      return;
    }
    const declared = await consumeError({ queue, onFailure: { delays } });
    expect(declared).toBeInstanceOf(TopologyMismatchError);
    expect(declared.message).toContain("'durable'");
    expect(declared.message).toContain('assertQueue: false');
    const { seen } = await retryThenPark(queue, { assertQueue: false });
    expect(seen).toEqual([0, 1]);
  });

  it('assertQueue: false on a queue that does not exist fails and creates nothing', async () => {
    const queue = testQueue(delays);
    const err = await consumeError({ queue, assertQueue: false, onFailure: { delays } });
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toContain(`queue '${queue}' does not exist`);
    for (const name of [queue, ...companions(queue)]) expect(await queueExists(name)).toBe(false);
  });

  it('a quorum queue consumed as classic: the error says queueType', async () => {
    const queue = testQueue(delays);
    await operatorQueue(queue, { arguments: { 'x-queue-type': 'quorum' } });
    const err = await consumeError({ queue, onFailure: { delays } });
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toContain("set queueType: 'quorum' to match");
    for (const name of companions(queue)) expect(await queueExists(name)).toBe(false);
  });
});

describe('retry and parked queues that exist', () => {
  it('a parked queue with a length limit: parkedQueueArguments matches it, and the mismatch names that option', async () => {
    const queue = testQueue(delays);
    const parked = parkedQueueName(queue);
    const args = { 'x-max-length': 10_000, 'x-overflow': 'reject-publish' };
    await operatorQueue(parked, { arguments: args });
    const err = await consumeError({ queue, onFailure: { delays } });
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toContain(`queue '${parked}'`);
    expect(err.message).toContain('parkedQueueArguments');
    // Nothing new: neither the work queue nor the retry queue.
    for (const name of [queue, retryQueueName(queue, '200ms')]) expect(await queueExists(name)).toBe(false);

    const rr = await connectClient();
    track(await rr.consume({ queue, parkedQueueArguments: args, onFailure: { delays } }, async () => Promise.reject(new Error('no'))));
    await rr.publish('', queue, 'x');
    await waitFor(async () => (await queueDepth(parked)) === 1, 10_000, 'the message parked');
  });

  it('a retry queue left by other settings fails with advice to delete it, not an option to set', async () => {
    const queue = testQueue(delays);
    const retry = retryQueueName(queue, '200ms');
    await operatorQueue(retry, { arguments: { 'x-message-ttl': 999, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue } });
    const err = await consumeError({ queue, onFailure: { delays } });
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toContain(`queue '${retry}'`);
    expect(err.message).toContain('delete it once it is empty');
    for (const name of [queue, parkedQueueName(queue)]) expect(await queueExists(name)).toBe(false);
  });

  it('retryQueueArguments reach every retry queue', async () => {
    const queue = testQueue(['200ms', '1m']);
    const rr = await connectClient();
    track(
      await rr.consume(
        { queue, retryQueueArguments: { 'x-max-length': 50_000, 'x-overflow': 'reject-publish' }, onFailure: { delays: ['200ms', '1m'] } },
        async () => undefined,
      ),
    );
    const q = await brokerQueues([retryQueueName(queue, '200ms'), retryQueueName(queue, '1m')]);
    for (const r of Object.values(q)) expect(r.arguments).toMatchObject({ 'x-max-length': 50_000, 'x-overflow': 'reject-publish' });
    expect(Object.keys(q)).toHaveLength(2);
  });
});

describe('the classic queue version and mode of retry queues', () => {
  it('a new retry queue is of version 2 (3.10 to 3.13) and lazy (3.10 and 3.11) where the broker lets a queue choose; the work and parked queues are left to the broker', async () => {
    const queue = testQueue(delays);
    const rr = await connectClient();
    track(await rr.consume({ queue, onFailure: { delays } }, async () => undefined));
    const q = await brokerQueues([queue, ...companions(queue)]);
    const version = !(await brokerAtLeast(4, 0));
    const lazy = !(await brokerAtLeast(3, 12));
    expect(q[retryQueueName(queue, '200ms')].arguments['x-queue-version']).toBe(version ? 2 : undefined);
    expect(q[retryQueueName(queue, '200ms')].arguments['x-queue-mode']).toBe(lazy ? 'lazy' : undefined);
    for (const name of [queue, parkedQueueName(queue)]) {
      expect(q[name].arguments['x-queue-version']).toBeUndefined();
      expect(q[name].arguments['x-queue-mode']).toBeUndefined();
    }
  });

  it('retryQueueArguments choose the version and mode instead', async () => {
    const queue = testQueue(delays);
    const rr = await connectClient();
    track(await rr.consume({ queue, retryQueueArguments: { 'x-queue-mode': 'default' }, onFailure: { delays } }, async () => undefined));
    const retry = retryQueueName(queue, '200ms');
    expect((await brokerQueues([retry]))[retry].arguments['x-queue-mode']).toBe('default');
  });

  it.each<[string, Record<string, unknown>]>([
    ['without a version or mode', {}],
    ['lazy and of version 2, as RabbitMQ 3.10 and 3.11 left it before an upgrade', { 'x-queue-version': 2, 'x-queue-mode': 'lazy' }],
  ])('a retry queue that exists %s is used as it is, and still brings messages back', async (_name, storage) => {
    const queue = testQueue(delays);
    const retry = retryQueueName(queue, '200ms');
    const args = { 'x-message-ttl': 200, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue, ...storage };
    await operatorQueue(retry, { arguments: args });
    const { seen, parked, m } = await retryThenPark(queue);
    expect(seen).toEqual([0, 1]);
    expect(parked).toHaveLength(1);
    expect(m.headers['retry-reason']).toBe('exhausted');
    const { arguments: kept } = (await brokerQueues([retry]))[retry];
    // 4.x lists `x-queue-type` beside what was declared.
    expect({ ...kept, 'x-queue-type': undefined }).toEqual({ ...args, 'x-queue-type': undefined });
    expect(await queueDepth(retry)).toBe(0);
  });
});

describe('a failed consume leaves nothing new behind', () => {
  it('an exchange of another type: the error says exchangeType, and no queue was created', async () => {
    const queue = testQueue(delays);
    const exchange = testExchange();
    await withChannel((ch) => ch.assertExchange(exchange, 'direct', { durable: true }));
    const err = await consumeError({ queue, exchange, onFailure: { delays } });
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toContain(`exchange '${exchange}'`);
    expect(err.message).toContain("set exchangeType: 'direct' to match");
    for (const name of [queue, ...companions(queue)]) expect(await queueExists(name)).toBe(false);
    await deleteExchange(exchange);
  });

  it('an argument the broker refuses on a new queue: the queues created before it are removed again', async () => {
    const queue = testQueue(delays);
    // x-max-length must be a non-negative integer: the broker refuses a string
    // when it creates the parked queue, after the work and retry queues.
    const err = await consumeError({
      queue,
      parkedQueueArguments: { 'x-max-length': 'lots', 'x-overflow': 'reject-publish' },
      onFailure: { delays },
    });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect(err.message).toContain("'x-max-length'");
    expect(err.message).toContain('parkedQueueArguments');
    for (const name of [queue, ...companions(queue)]) expect(await queueExists(name)).toBe(false);
  });
});

describe('queue arguments that are refused before anything is declared', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['queueArguments', { queueArguments: { 'x-queue-type': 'quorum' } }, "queueArguments may not set 'x-queue-type': queueType sets it"],
    ['retryQueueArguments', { retryQueueArguments: { 'x-message-ttl': 5 } }, "retryQueueArguments may not set 'x-message-ttl'"],
    ['retryQueueArguments', { retryQueueArguments: { 'x-expires': 60_000 } }, 'with the messages in it'],
    ['retryQueueArguments', { retryQueueArguments: { 'x-max-length': 10 } }, "'x-overflow': 'reject-publish'"],
    ['parkedQueueArguments', { parkedQueueArguments: { 'x-message-ttl': 60_000 } }, 'expire unread'],
    ['queueArguments', { queueArguments: { 'x-max-length': { n: 1 } } }, "queueArguments['x-max-length'] must be a string, a finite number or a boolean"],
    ['queueArguments', { queueArguments: ['x-max-length'] }, 'queueArguments must be an object'],
    ['assertQueue', { assertQueue: 'no' }, 'assertQueue must be'],
    ['quorum deliveryLimit', { queueType: 'quorum', queueArguments: { 'x-dead-letter-exchange': 'dlx' } }, 'deliveryLimit'],
  ])('%s: %j', async (_name, extra, message) => {
    const queue = testQueue(delays);
    const err = await consumeError({ queue, onFailure: { delays }, ...(extra as object) });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect(err.message).toContain(message);
    for (const name of [queue, ...companions(queue)]) expect(await queueExists(name)).toBe(false);
  });
});
