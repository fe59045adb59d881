import {
  ConnectionError,
  type ConsumeOptions,
  type Delay,
  type Handler,
  type Message,
  NonRetryableError,
  type ParkedEvent,
  type PublishFailedEvent,
  RabbitRetry,
  type RetryEvent,
  TopologyMismatchError,
  UnroutableError,
  parkedQueueName,
  retryQueueName,
} from '../lib';
import {
  cleanup,
  closeAmqp,
  connectClient,
  deleteQueue,
  extraQueue,
  getOne,
  queueDepth,
  queueExists,
  queueUnacked,
  drainAll,
  sleep,
  testExchange,
  testQueue,
  topologyDepths,
  track,
  waitFor,
  waitForOne,
  withChannel,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Connects, consumes `queue` with `options`, and registers both for cleanup. */
async function start(options: ConsumeOptions, handler: Handler): Promise<{ rr: RabbitRetry; consumer: ReturnType<typeof track> }> {
  const rr = await connectClient();
  const consumer = track(await rr.consume(options, handler));
  return { rr, consumer };
}

async function expectEmpty(queue: string, delays: readonly Delay[]): Promise<void> {
  expect(await topologyDepths(queue, delays)).toEqual({
    work: 0,
    retry: Object.fromEntries(delays.map((d) => [retryQueueName(queue, d), 0])),
    parked: 0,
  });
}

class ValidationError extends Error {
  override name = 'ValidationError';
}

describe('consume option validation', () => {
  // Each case must reject before any queue is declared.
  const cases: [string, (queue: string) => ConsumeOptions, string][] = [
    ['an empty queue name', () => ({ queue: '' }), 'queue'],
    ['prefetch 0', (queue) => ({ queue, prefetch: 0 }), 'prefetch'],
    ['prefetch 70000', (queue) => ({ queue, prefetch: 70_000 }), 'prefetch'],
    ['an unknown queueType', (queue) => ({ queue, queueType: 'lazy' as unknown as 'classic' }), 'queueType'],
    ['unsorted delays', (queue) => ({ queue, onFailure: { delays: ['1m', '5s'] } }), 'delays'],
    ['duplicated delays', (queue) => ({ queue, onFailure: { delays: ['5s', '5000ms'] } }), 'delays'],
    ['a zero delay', (queue) => ({ queue, onFailure: { delays: [0] } }), 'delays'],
    ['a zero delay string', (queue) => ({ queue, onFailure: { delays: ['0s'] } }), 'delays'],
    ['a negative delay', (queue) => ({ queue, onFailure: { delays: [-5000] } }), 'delays'],
    ['a delay in days', (queue) => ({ queue, onFailure: { delays: ['5d' as never] } }), 'delays'],
  ];

  it.each(cases)('rejects %s with INVALID_OPTIONS naming the option', async (_label, options, optionName) => {
    const queue = testQueue(['1m', '5s', '5000ms']);
    const rr = await connectClient();
    const consuming = rr.consume(options(queue), async () => undefined);
    await expect(consuming).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      name: 'InvalidOptionsError',
      message: expect.stringContaining(optionName),
    });
    expect(await queueExists(queue)).toBe(false);
    expect(await queueExists(parkedQueueName(queue))).toBe(false);
  });
});

describe('the failure path', () => {
  it('acks a success and leaves nothing in Q, Q.retry.* or Q.parked', async () => {
    const delays: Delay[] = ['200ms', '400ms'];
    const queue = testQueue(delays);
    const seen: { body: unknown; attempt: number }[] = [];
    const { rr } = await start({ queue, onFailure: { delays } }, async (msg) => {
      seen.push({ body: msg.json(), attempt: msg.attempt });
    });
    await rr.publish('', queue, { orderId: 1 }, { messageId: 'order-1' });
    await waitFor(() => seen.length === 1, 10_000, 'the handler');
    // Give a wrongly requeued or retried message time to show up.
    await sleep(700);
    expect(seen).toEqual([{ body: { orderId: 1 }, attempt: 0 }]);
    await expectEmpty(queue, delays);
  });

  it('hands short and long message and correlation ids, and several bodies of one batch, to the handler intact', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const seen = new Map<string, { correlationId?: string; text: string; body: string }>();
    const { rr } = await start({ queue, prefetch: 20, onFailure: { delays } }, async (msg) => {
      seen.set(msg.properties.messageId ?? '?', { correlationId: msg.properties.correlationId, text: msg.text(), body: msg.body.toString() });
    });
    const ids = ['7', '48213', 'ten chars!', 'order-48213-eu', 'é', '😀abcdefgh'];
    for (const [i, id] of ids.entries()) {
      await rr.publish('', queue, `body ${i} of ${id}`, { messageId: id, correlationId: `c${i}` });
    }
    await waitFor(() => seen.size === ids.length, 10_000, 'every message');
    for (const [i, id] of ids.entries()) {
      expect(seen.get(id)).toEqual({ correlationId: `c${i}`, text: `body ${i} of ${id}`, body: `body ${i} of ${id}` });
    }
    await expectEmpty(queue, delays);
  });

  it('keeps consuming behind a handler that hangs and behind failures: every other delivery is acked, none is lost', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    const handled = new Set<string>();
    const { rr } = await start({ queue, prefetch: 10, onFailure: { delays } }, async (msg) => {
      const id = msg.properties.messageId ?? '?';
      if (id === 'hangs') await hung;
      handled.add(id);
      if (id.startsWith('fails-')) throw new Error(`carrier down for ${id}`);
    });
    await rr.publish('', queue, 'first', { messageId: 'hangs' });
    const ids = Array.from({ length: 60 }, (_, i) => (i % 5 === 0 ? `fails-${i}` : `ok-${i}`));
    for (const id of ids) await rr.publish('', queue, id, { messageId: id });
    // With prefetch 10, the 60 behind the hung handler only arrive if their acks go out.
    await waitFor(() => ids.every((id) => handled.has(id)), 15_000, 'every message behind the hung handler');
    await waitFor(async () => (await queueUnacked(queue)) === 1, 10_000, 'only the hung delivery to stay unacked');
    const retried = await drainAll(retryQueueName(queue, '1m'));
    expect(retried.map((m) => m.properties.messageId).sort()).toEqual(ids.filter((id) => id.startsWith('fails-')).sort());
    release();
    await waitFor(async () => (await queueUnacked(queue)) === 0, 10_000, 'the hung delivery to be acked once it finished');
    await expectEmpty(queue, delays);
  });

  it('moves a retryable failure to Q.retry.<first delay> with every retry header and the message intact', async () => {
    const delays: Delay[] = ['1m', '10m'];
    const queue = testQueue(delays);
    const exchange = testExchange();
    const routingKey = 'shipment.requested.eu';
    const retries: RetryEvent[] = [];
    const before = Date.now();

    async function rateShipmentHandler(msg: Message): Promise<void> {
      msg.json();
      throw new Error('carrier timeout after 30s');
    }

    // stackOnRetry: the retried copy carries the stack too (by default only a parked one does);
    // retryHeaders 'full': and every header a parked copy has (by default only what counting and parking need).
    const { rr, consumer } = await start(
      { queue, exchange, routingKey, onFailure: { delays, stackOnRetry: true, retryHeaders: 'full' } },
      rateShipmentHandler,
    );
    consumer.on('retry', (e) => retries.push(e));
    const timestamp = new Date('2024-05-01T12:00:00Z');
    await rr.publish(
      exchange,
      routingKey,
      { orderId: 48213 },
      {
        messageId: 'order-48213',
        correlationId: 'corr-7',
        timestamp,
        expiration: 600_000,
        headers: { tenant: 'acme', 'x-trace-id': 'trace-1', priorityClass: 3 },
      },
    );

    const target = retryQueueName(queue, '1m');
    const m = await waitForOne(target);
    const after = Date.now();

    expect(JSON.parse(m.content.toString('utf8'))).toEqual({ orderId: 48213 });
    expect(m.properties.messageId).toBe('order-48213');
    expect(m.properties.correlationId).toBe('corr-7');
    expect(m.properties.contentType).toBe('application/json');
    expect(m.properties.timestamp).toBe(timestamp.getTime() / 1000);
    expect(m.properties.deliveryMode).toBe(2);
    expect(m.properties.expiration).toBeUndefined();

    const h = m.headers;
    expect(h.tenant).toBe('acme');
    expect(h['x-trace-id']).toBe('trace-1');
    expect(h.priorityClass).toBe(3);
    expect(h['retry-attempt']).toBe(1);
    expect(h['retry-reason']).toBe('retry');
    expect(h['retry-last-error']).toBe('carrier timeout after 30s');
    expect(h['retry-error-name']).toBe('Error');
    expect(h['retry-error-stack']).toEqual(expect.stringContaining('carrier timeout after 30s'));
    expect(h['retry-error-stack']).toEqual(expect.stringContaining('rateShipmentHandler'));
    expect(h['retry-original-exchange']).toBe(exchange);
    expect(h['retry-original-routing-key']).toBe(routingKey);
    expect(h['retry-queue']).toBe(queue);
    for (const key of ['retry-failed-at', 'retry-first-failed-at']) {
      const value = h[key];
      expect(typeof value).toBe('string');
      expect(value).toMatch(ISO_8601);
      const t = Date.parse(value as string);
      expect(t).toBeGreaterThanOrEqual(before - 1000);
      expect(t).toBeLessThanOrEqual(after + 1000);
    }
    expect(h['retry-first-failed-at']).toBe(h['retry-failed-at']);
    expect(Object.keys(h).filter((k) => k.startsWith('x-death') || k.startsWith('x-first-death') || k.startsWith('x-last-death'))).toEqual([]);

    await waitFor(() => retries.length === 1, 5000, 'the retry event');
    expect(retries[0]).toMatchObject({ queue, target, messageId: 'order-48213', attempt: 1, delay: '1m', error: 'carrier timeout after 30s' });
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(retryQueueName(queue, '10m'))).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });

  it('by default a retried copy carries only the retry headers counting and parking need; a bad retryHeaders is INVALID_OPTIONS', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const { rr } = await start({ queue, onFailure: { delays } }, async () => {
      throw new Error('carrier 503');
    });
    await rr.publish('', queue, { orderId: 1 }, { messageId: 'o-1', headers: { tenant: 'acme' } });
    const m = await waitForOne(retryQueueName(queue, '1m'));
    const ours = Object.keys(m.headers)
      .filter((k) => k.startsWith('retry-'))
      .sort();
    expect(ours).toEqual(['retry-attempt', 'retry-first-failed-at', 'retry-last-error', 'retry-original-exchange', 'retry-original-routing-key']);
    expect(m.headers).toMatchObject({
      tenant: 'acme',
      'retry-attempt': 1,
      'retry-last-error': 'carrier 503',
      'retry-original-exchange': '',
      'retry-original-routing-key': queue,
    });
    expect(m.headers['retry-first-failed-at']).toMatch(ISO_8601);
    await expect(rr.consume({ queue: testQueue(delays), onFailure: { delays, retryHeaders: 'all' as 'full' } }, async () => {})).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining("onFailure.retryHeaders must be 'minimal' or 'full'") as unknown,
    });
  });

  it('retries through each delay, then parks as exhausted with the last error', async () => {
    const delays: Delay[] = ['200ms', '400ms'];
    const queue = testQueue(delays);
    const calls: { attempt: number; headers: Record<string, unknown> }[] = [];
    const parkedEvents: ParkedEvent[] = [];

    async function reserveStockHandler(msg: Message): Promise<void> {
      calls.push({ attempt: msg.attempt, headers: msg.headers });
      throw new Error(`stock service down (attempt ${msg.attempt})`);
    }

    const { rr, consumer } = await start({ queue, onFailure: { delays } }, reserveStockHandler);
    consumer.on('parked', (e) => parkedEvents.push(e));
    await rr.publish('', queue, { sku: 'A-1' }, { messageId: 'stock-1' });

    const m = await waitForOne(parkedQueueName(queue), 15_000);
    // A fourth attempt would show up within the longest delay.
    await sleep(800);

    expect(calls.map((c) => c.attempt)).toEqual([0, 1, 2]);
    expect(JSON.parse(m.content.toString('utf8'))).toEqual({ sku: 'A-1' });
    expect(m.properties.messageId).toBe('stock-1');
    expect(m.headers['retry-reason']).toBe('exhausted');
    expect(m.headers['retry-attempt']).toBe(2);
    expect(m.headers['retry-last-error']).toBe('stock service down (attempt 2)');
    expect(m.headers['retry-error-stack']).toEqual(expect.stringContaining('reserveStockHandler'));
    expect(m.headers['retry-error-stack']).toEqual(expect.stringContaining('stock service down (attempt 2)'));
    // By default the retried copies carry the error but not its stack; the parked one carries both.
    expect(calls.slice(1).map((c) => [c.headers['retry-last-error'], c.headers['retry-error-stack']])).toEqual([
      ['stock service down (attempt 0)', undefined],
      ['stock service down (attempt 1)', undefined],
    ]);
    expect(m.headers['retry-queue']).toBe(queue);
    expect(m.headers['retry-original-exchange']).toBe('');
    expect(m.headers['retry-original-routing-key']).toBe(queue);

    // The first failure's time, as the second delivery carried it, survives to the parked copy.
    const firstFailedAt = calls[1].headers['retry-first-failed-at'];
    expect(firstFailedAt).toMatch(ISO_8601);
    // A retried copy carries its first failure's time, not each failure's (retryHeaders 'minimal').
    expect(calls[1].headers['retry-failed-at']).toBeUndefined();
    expect(calls[2].headers['retry-first-failed-at']).toBe(firstFailedAt);
    expect(m.headers['retry-first-failed-at']).toBe(firstFailedAt);
    expect(Date.parse(m.headers['retry-failed-at'] as string)).toBeGreaterThan(Date.parse(firstFailedAt as string));

    expect(calls[1].headers['retry-attempt']).toBe(1);
    expect(calls[2].headers['retry-attempt']).toBe(2);
    expect(calls[2].headers['retry-last-error']).toBe('stock service down (attempt 1)');

    await waitFor(() => parkedEvents.length === 1, 5000, 'the parked event');
    expect(parkedEvents[0]).toMatchObject({ queue, target: parkedQueueName(queue), reason: 'exhausted', attempt: 2, messageId: 'stock-1' });
    await expectEmpty(queue, delays);
  });

  const nonRetryable: [string, Partial<ConsumeOptions['onFailure']>, Handler, string | RegExp][] = [
    [
      'a NonRetryableError',
      {},
      async () => {
        throw new NonRetryableError('order 7 has no address');
      },
      'order 7 has no address',
    ],
    [
      'an error the retryable predicate rejects',
      { retryable: (err: unknown) => !(err instanceof ValidationError) },
      async () => {
        throw new ValidationError('weight must be positive');
      },
      'weight must be positive',
    ],
    [
      'invalid JSON read with msg.json()',
      {},
      async (msg: Message) => {
        msg.json();
      },
      /JSON/,
    ],
  ];

  it.each(nonRetryable)('parks %s after one attempt as non-retryable', async (_label, failure, handler, lastError) => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    let calls = 0;
    const { rr } = await start({ queue, onFailure: { delays, ...failure } }, async (msg) => {
      calls += 1;
      await handler(msg);
    });
    await rr.publish('', queue, '{"orderId": 7, oops', { messageId: 'order-7', contentType: 'application/json' });

    const m = await waitForOne(parkedQueueName(queue));
    await sleep(300);
    expect(calls).toBe(1);
    expect(m.content.toString('utf8')).toBe('{"orderId": 7, oops');
    expect(m.properties.messageId).toBe('order-7');
    expect(m.headers['retry-reason']).toBe('non-retryable');
    expect(m.headers['retry-attempt']).toBe(0);
    expect(m.headers['retry-last-error']).toMatch(lastError);
    await expectEmpty(queue, delays);
  });

  it('passes the error and the message to the retryable predicate', async () => {
    const queue = testQueue(['1m']);
    const seen: { err: unknown; messageId?: string }[] = [];
    const { rr } = await start(
      {
        queue,
        onFailure: {
          delays: ['1m'],
          retryable: (err, msg) => {
            seen.push({ err, messageId: msg.properties.messageId });
            return true;
          },
        },
      },
      async () => {
        throw new ValidationError('nope');
      },
    );
    await rr.publish('', queue, { a: 1 }, { messageId: 'p-1' });
    await waitForOne(retryQueueName(queue, '1m'));
    expect(seen).toHaveLength(1);
    expect(seen[0].err).toBeInstanceOf(ValidationError);
    expect(seen[0].messageId).toBe('p-1');
  });
});

describe('attempt counting from headers', () => {
  async function attemptOf(headers: (queue: string) => Record<string, unknown>): Promise<number> {
    const delays: Delay[] = ['200ms', '400ms'];
    const queue = testQueue(delays);
    const attempts: number[] = [];
    await start({ queue, onFailure: { delays } }, async (msg) => {
      attempts.push(msg.attempt);
    });
    await withChannel(async (ch) => {
      ch.sendToQueue(queue, Buffer.from('{}'), { headers: headers(queue), contentType: 'application/json' });
    });
    await waitFor(() => attempts.length === 1, 10_000, 'the delivery');
    return attempts[0];
  }

  function death(queue: string, count: number, reason = 'expired'): Record<string, unknown> {
    return { count, reason, queue, exchange: '', 'routing-keys': [queue] };
  }

  it('sums x-death expiries from Q.retry.* when retry-attempt is missing (RabbitMQ 3.10)', async () => {
    const attempt = await attemptOf((q) => ({
      'x-death': [death(`${q}.retry.400ms`, 1), death(`${q}.retry.200ms`, 1)],
      'x-first-death-queue': `${q}.retry.200ms`,
      'x-first-death-reason': 'expired',
    }));
    expect(attempt).toBe(2);
  });

  it('counts repeated expiries of one retry queue (RabbitMQ 3.10 merged entries)', async () => {
    const attempt = await attemptOf((q) => ({ 'x-death': [death(`${q}.retry.200ms`, 2)] }));
    expect(attempt).toBe(2);
  });

  it('trusts retry-attempt when x-death only counts the last hop (RabbitMQ 4.x)', async () => {
    const attempt = await attemptOf((q) => ({ 'retry-attempt': 2, 'x-death': [death(`${q}.retry.400ms`, 1)] }));
    expect(attempt).toBe(2);
  });

  it('ignores x-death entries of other queues and other reasons', async () => {
    const attempt = await attemptOf((q) => ({
      'x-death': [death('some.other.queue.retry.5s', 4), death(`${q}.retry.200ms`, 3, 'rejected'), death(`${q}.retry.200ms`, 1)],
    }));
    expect(attempt).toBe(1);
  });
});

describe('routing', () => {
  it('delivers to other queues bound to the exchange once and never the retries', async () => {
    const delays: Delay[] = ['100ms', '200ms'];
    const queue = testQueue(delays);
    const exchange = testExchange();
    const routingKey = 'invoice.created';
    const audit = extraQueue();
    const seen: { attempt: number; exchange: string; originalExchange: unknown }[] = [];

    await start({ queue, exchange, routingKey, onFailure: { delays } }, async (msg) => {
      seen.push({ attempt: msg.attempt, exchange: msg.exchange, originalExchange: msg.headers['retry-original-exchange'] });
      if (msg.attempt < 2) throw new Error('ledger locked');
    });
    await withChannel(async (ch) => {
      await ch.assertQueue(audit, { durable: true });
      await ch.bindQueue(audit, exchange, routingKey);
    });
    const rr = await connectClient();
    await rr.publish(exchange, routingKey, { invoice: 9 });

    await waitFor(() => seen.length === 3, 10_000, 'three attempts');
    await sleep(500);
    expect(seen.map((s) => s.attempt)).toEqual([0, 1, 2]);
    expect(seen[0].exchange).toBe(exchange);
    expect(seen[1].originalExchange).toBe(exchange);
    expect(seen[2].originalExchange).toBe(exchange);
    expect(await queueDepth(audit)).toBe(1);
    await expectEmpty(queue, delays);
  });
});

describe('when the republish fails', () => {
  it('keeps the message unacked, reports UNROUTABLE, and returns it to Q on close', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const failed: PublishFailedEvent[] = [];
    let calls = 0;
    const { rr, consumer } = await start({ queue, onFailure: { delays } }, async () => {
      calls += 1;
      throw new Error('downstream 503');
    });
    consumer.on('publishFailed', (e) => failed.push(e));
    await deleteQueue(retryQueueName(queue, '1m'));

    await rr.publish('', queue, { n: 1 }, { messageId: 'lost-1' });
    await waitFor(() => failed.length === 1, 10_000, 'the publishFailed event');

    expect(failed[0].error).toBeInstanceOf(UnroutableError);
    expect(failed[0].error.code).toBe('UNROUTABLE');
    expect(failed[0].target).toBe(retryQueueName(queue, '1m'));
    expect(failed[0].messageId).toBe('lost-1');
    // Unacked: neither ready in Q nor redelivered while the channel lives.
    await sleep(300);
    expect(calls).toBe(1);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);

    await consumer.close();
    await waitFor(async () => (await queueDepth(queue)) === 1, 5000, 'the message back in Q');
    const m = await getOne(queue);
    expect(m?.properties.messageId).toBe('lost-1');
    expect(m?.headers['retry-attempt']).toBeUndefined();
  });
});

describe('topology', () => {
  async function mismatchedConsume(): Promise<{ rr: RabbitRetry; retryQueue: string; err: unknown }> {
    const delays: Delay[] = ['200ms'];
    const queue = testQueue(delays);
    const retryQueue = retryQueueName(queue, '200ms');
    // Only the TTL differs from what consume declares.
    await withChannel(async (ch) => {
      await ch.assertQueue(retryQueue, {
        durable: true,
        arguments: { 'x-message-ttl': 999, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue },
      });
    });
    const rr = await connectClient();
    const err = await rr
      .consume({ queue, onFailure: { delays } }, async () => undefined)
      .then(
        () => new Error('consume resolved'),
        (e: unknown) => e,
      );
    return { rr, retryQueue, err };
  }

  it('rejects a queue declared with other arguments with a TopologyMismatchError', async () => {
    const { err } = await mismatchedConsume();
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err).toMatchObject({ code: 'TOPOLOGY_MISMATCH', name: 'TopologyMismatchError' });
  });

  it('the mismatch message names the queue and the argument, and the client stays usable', async () => {
    const { rr, retryQueue, err } = await mismatchedConsume();
    expect((err as Error).message).toContain(retryQueue);
    expect((err as Error).message).toContain('x-message-ttl');
    expect(await queueDepth(retryQueue)).toBe(0);
    await rr.publish('', retryQueue, 'still works');
    expect(await queueDepth(retryQueue)).toBe(1);
  });

  it('declaring the same topology twice is idempotent', async () => {
    const delays: Delay[] = ['200ms', '1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const a = track(await rr.consume({ queue, onFailure: { delays } }, async () => undefined));
    await a.close();
    track(await rr.consume({ queue, onFailure: { delays } }, async () => undefined));
    for (const name of [queue, retryQueueName(queue, '200ms'), retryQueueName(queue, '1m'), parkedQueueName(queue)]) {
      expect(await queueExists(name)).toBe(true);
    }
  });
});

describe('close()', () => {
  it('finishes started handlers, requeues the rest, and loses nothing', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const total = 20;
    await withChannel(async (ch) => {
      await ch.assertQueue(queue, { durable: true });
      for (let i = 0; i < total; i++) ch.sendToQueue(queue, Buffer.from(JSON.stringify({ i })), { persistent: true });
      await ch.close();
    });
    await waitFor(async () => (await queueDepth(queue)) === total, 5000, 'the messages in Q');

    let started = 0;
    let finished = 0;
    const rr = await connectClient();
    const consumer = track(
      await rr.consume({ queue, prefetch: 5, onFailure: { delays } }, async () => {
        started += 1;
        await sleep(300);
        finished += 1;
      }),
    );
    await waitFor(() => started >= 1, 10_000, 'the first handler', 5);
    await consumer.close();

    expect(finished).toBe(started);
    expect(started).toBeGreaterThanOrEqual(1);
    expect(started).toBeLessThanOrEqual(5);
    await waitFor(async () => (await queueDepth(queue)) === total - finished, 5000, `${total - finished} messages back in Q`);
    await sleep(200);
    expect(finished + (await queueDepth(queue))).toBe(total);
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(consumer.inFlightCount).toBe(0);
  });
});

describe('unusual handler outcomes', () => {
  it('a thrown string becomes retry-last-error', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const { rr } = await start({ queue, onFailure: { delays } }, async () => {
      throw 'inventory locked';
    });
    await rr.publish('', queue, { a: 1 });
    const m = await waitForOne(retryQueueName(queue, '1m'));
    expect(m.headers['retry-last-error']).toBe('inventory locked');
    expect(m.headers['retry-attempt']).toBe(1);
  });

  it('a thrown undefined becomes a message mentioning undefined', async () => {
    const delays: Delay[] = [];
    const queue = testQueue(delays);
    const { rr } = await start({ queue, onFailure: { delays } }, async () => {
      throw undefined;
    });
    await rr.publish('', queue, { a: 1 });
    const m = await waitForOne(parkedQueueName(queue));
    expect(m.headers['retry-last-error']).toEqual(expect.stringContaining('undefined'));
    expect(m.headers['retry-reason']).toBe('exhausted');
    expect(m.headers['retry-attempt']).toBe(0);
  });

  it('a synchronous handler returning a plain value acks the message', async () => {
    const delays: Delay[] = ['200ms'];
    const queue = testQueue(delays);
    let calls = 0;
    const { rr } = await start({ queue, onFailure: { delays } }, () => {
      calls += 1;
      return 42;
    });
    await rr.publish('', queue, { a: 1 });
    await waitFor(() => calls === 1, 10_000, 'the handler');
    await sleep(500);
    expect(calls).toBe(1);
    await expectEmpty(queue, delays);
  });

  it('a synchronous throw is retried like an async one', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const { rr } = await start({ queue, onFailure: { delays } }, () => {
      throw new Error('sync failure');
    });
    await rr.publish('', queue, { a: 1 });
    const m = await waitForOne(retryQueueName(queue, '1m'));
    expect(m.headers['retry-last-error']).toBe('sync failure');
  });
});

describe('publish', () => {
  it('rejects with UNROUTABLE for an exchange that does not exist, and publishing still works after', async () => {
    const rr = await connectClient();
    const missing = testExchange();
    await expect(rr.publish(missing, 'k', { a: 1 })).rejects.toMatchObject({ code: 'UNROUTABLE', name: 'UnroutableError' });
    const err = await rr.publish(missing, 'k', { a: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnroutableError);
    expect((err as Error).message).toContain(missing);

    const queue = testQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await rr.publish('', queue, { ok: true }, { messageId: 'after-404' });
    const m = await waitForOne(queue);
    expect(m.properties.messageId).toBe('after-404');
  });

  it('rejects with UnroutableError when no queue is bound, and publishing still works after', async () => {
    const rr = await connectClient();
    const exchange = testExchange();
    await withChannel((ch) => ch.assertExchange(exchange, 'topic', { durable: false }));
    const err = await rr.publish(exchange, 'nobody.listens', { a: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnroutableError);
    expect((err as UnroutableError).code).toBe('UNROUTABLE');

    const queue = testQueue();
    await expect(rr.publish('', queue, 'x')).rejects.toMatchObject({ code: 'UNROUTABLE' });
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await rr.publish('', queue, 'hello', { messageId: 'after-312' });
    const m = await waitForOne(queue);
    expect(m.content.toString('utf8')).toBe('hello');
    expect(m.properties.contentType).toBe('text/plain');
    expect(m.properties.messageId).toBe('after-312');
  });
  it('a failed publish leaves the client usable', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const missingExchange = testExchange();
    // Whatever class the errors have, both publishes must fail and the next one succeed.
    await expect(rr.publish(missingExchange, 'k', { a: 1 })).rejects.toThrow(missingExchange);
    await expect(rr.publish('', queue, { a: 2 })).rejects.toThrow(/no queue|NO_ROUTE/);
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    for (let i = 0; i < 3; i++) await rr.publish('', queue, { i });
    await waitFor(async () => (await queueDepth(queue)) === 3, 5000, 'three messages in Q');
  });
});

describe('connect', () => {
  const refused = (): Promise<unknown> =>
    RabbitRetry.connect({ url: 'amqp://guest:s3cret@127.0.0.1:1', connectTimeoutMs: 5000 }).then(
      () => new Error('connect resolved'),
      (e: unknown) => e,
    );

  it('rejects with a ConnectionError when nothing listens', async () => {
    const err = await refused();
    expect(err).toBeInstanceOf(ConnectionError);
    expect((err as ConnectionError).code).toBe('CONNECTION');
  });

  it('the connection error hides the password and names the address', async () => {
    const err = await refused();
    expect((err as Error).message).not.toContain('s3cret');
    expect((err as Error).message).toContain('127.0.0.1:1');
  });

  it('the client url hides the password', async () => {
    const rr = await connectClient();
    expect(rr.url).not.toContain(':guest@');
  });
});
