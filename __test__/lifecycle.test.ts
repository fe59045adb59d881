import { type CloseResult, type Consumer, type Message, type StuckEvent, ClosedError } from '../lib';
import {
  cleanup,
  closeAmqp,
  collectUnhandledRejections,
  connectClient,
  queueDepth,
  queueUnacked,
  recordingLogger,
  sleep,
  testQueue,
  track,
  waitFor,
  waitForOne,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

// What the process would die of: every test expects none.
const unhandled = collectUnhandledRejections();

/** `p`, or a rejection naming `what` after `ms`: a deadlock fails the test instead of hanging it. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not resolve within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** A promise that never settles, unless `release` is called. */
function gate(): { wait: Promise<void>; release: () => void } {
  let release!: () => void;
  const wait = new Promise<void>((resolve) => (release = resolve));
  return { wait, release };
}

describe('a handler that does not settle', () => {
  it('is reported stuck once after stuckAfterMs, health() turns unhealthy, and other messages keep flowing', async () => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const hang = gate();
    const handled: string[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 2, stuckAfterMs: 300, onFailure: { delays: ['1m'] } }, async (msg) => {
        if (msg.properties.messageId === 'hangs') await hang.wait;
        handled.push(msg.properties.messageId ?? '?');
      }),
    );
    const stuck: StuckEvent[] = [];
    consumer.on('stuck', (e) => stuck.push(e));
    expect(consumer.health()).toEqual({ queue, state: 'connected', healthy: true, inFlight: 0, stuck: 0, oldestInFlightMs: 0 });

    await rr.publish('', queue, { n: 0 }, { messageId: 'hangs' });
    for (let i = 1; i <= 5; i++) await rr.publish('', queue, { n: i }, { messageId: `ok-${i}` });
    await waitFor(() => handled.length === 5, 10_000, 'the five other messages');
    await waitFor(() => stuck.length === 1, 5000, 'a stuck event');
    // Once per delivery, however long it stays stuck.
    await sleep(700);
    expect(stuck).toEqual([{ queue, messageId: 'hangs', attempt: 0, sinceMs: expect.any(Number) }]);
    expect(stuck[0].sinceMs).toBeGreaterThanOrEqual(300);
    const health = consumer.health();
    expect(health).toMatchObject({ queue, state: 'connected', healthy: false, inFlight: 1, stuck: 1 });
    expect(health.oldestInFlightMs).toBeGreaterThanOrEqual(1000);
    expect(consumer.stats()).toMatchObject({ acked: 5, inFlight: 1, stuck: 1 });
    expect(consumer.stats().oldestInFlightMs).toBeGreaterThanOrEqual(1000);
    expect(await queueUnacked(queue)).toBe(1);

    // Once it settles, the consumer is healthy again and the message is acked.
    hang.release();
    await waitFor(() => consumer.health().healthy, 5000, 'a healthy consumer');
    await waitFor(async () => (await queueUnacked(queue)) === 0, 10_000, 'the ack');
    expect(consumer.stats()).toMatchObject({ acked: 6, inFlight: 0, stuck: 0, oldestInFlightMs: 0 });
    expect(await queueDepth(queue)).toBe(0);
    expect(stuck).toHaveLength(1);
  });

  it('without a stuck listener, a warning is logged instead', async () => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const hang = gate();
    const consumer = track(
      await rr.consume({ queue, stuckAfterMs: 200, onFailure: { delays: ['1m'] } }, async () => {
        await hang.wait;
      }),
    );
    await rr.publish('', queue, 'x', { messageId: 'order-7' });
    await waitFor(() => logger.warnings.some((w) => w.includes('order-7')), 5000, 'a warning');
    expect(logger.warnings.join('\n')).toMatch(/order-7 .*has not settled after \d+ ms/);
    hang.release();
    await consumer.close();
  });

  it.each([
    [0, 'stuckAfterMs'],
    [1.5, 'stuckAfterMs'],
    ['300', 'stuckAfterMs'],
  ])('stuckAfterMs %p is refused with INVALID_OPTIONS', async (value, name) => {
    const rr = await connectClient();
    await expect(rr.consume({ queue: testQueue(), stuckAfterMs: value as number }, async () => undefined)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining(name),
    });
  });
});

describe('close from inside a handler', () => {
  it('consumer.close() resolves without waiting for the handler, and the message is acked', async () => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    let calls = 0;
    let closed: CloseResult | undefined;
    const consumer: Consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        calls++;
        closed = await within(consumer.close(), 8000, 'close() inside the handler');
      }),
    );
    await rr.publish('', queue, { orderId: 1 }, { messageId: 'closes' });
    await waitFor(() => closed !== undefined, 10_000, 'the close inside the handler');
    expect(closed).toEqual({ unfinished: 0 });
    // The same close, awaited from outside, ends once the handler's message is settled.
    expect(await within(consumer.close(), 8000, 'close() outside')).toEqual({ unfinished: 0 });
    expect(consumer.state).toBe('closed');
    await sleep(300);
    expect(calls).toBe(1);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(consumer.stats().acked).toBe(1);
    expect(logger.errors).toEqual([]);
    expect(unhandled).toEqual([]);
  });

  it('a handler that closes and then throws still has its message retried', async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ logger: recordingLogger() });
    const consumer: Consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        await within(consumer.close(), 3000, 'close() inside the handler');
        throw new Error('failed after closing');
      }),
    );
    await rr.publish('', queue, 'x', { messageId: 'closes-then-fails' });
    await waitFor(() => consumer.state === 'closed', 10_000, 'the consumer to close');
    expect(await queueDepth(queue)).toBe(0);
    const retried = await waitForOne(`${queue}.retry.1m`, 5000);
    expect(retried.properties.messageId).toBe('closes-then-fails');
    expect(retried.headers['retry-last-error']).toBe('failed after closing');
    expect(consumer.stats()).toMatchObject({ failed: 1, retried: 1 });
  });

  it('a close awaited after awaits, through a function of its own or a then() chain, does not wait for its handler', async () => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const results: CloseResult[] = [];
    // Deep in the handler's awaits: its own async function, after a timer.
    const stop = async (): Promise<CloseResult> => {
      await sleep(20);
      await Promise.resolve();
      return within(consumer.close(), 8000, 'close() in a function the handler awaits');
    };
    const consumer: Consumer = track(
      await rr.consume({ queue, prefetch: 2, onFailure: { delays: ['1m'] } }, async (msg: Message) => {
        if (msg.properties.messageId === 'nested') {
          await sleep(20);
          results.push(await stop());
          return;
        }
        // Not an async function: a then() chain the handler returns.
        return sleep(20)
          .then(() => within(consumer.close(), 8000, 'close() in a then() callback'))
          .then((r) => void results.push(r));
      }),
    );
    await rr.publish('', queue, 'a', { messageId: 'nested' });
    await rr.publish('', queue, 'b', { messageId: 'then-chain' });
    await waitFor(() => results.length === 2, 10_000, 'both closes inside the handlers');
    expect(results).toEqual([{ unfinished: 0 }, { unfinished: 0 }]);
    expect(await within(consumer.close(), 8000, 'close() outside')).toEqual({ unfinished: 0 });
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(consumer.stats().acked).toBe(2);
    expect(logger.errors).toEqual([]);
    expect(unhandled).toEqual([]);
  });

  it("is told apart with Error.stackTraceLimit at 0 and an application's Error.prepareStackTrace, both left as they were", async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ logger: recordingLogger() });
    const limit = Error.stackTraceLimit;
    const prepare = Object.getOwnPropertyDescriptor(Error, 'prepareStackTrace');
    const appPrepare = (err: Error): string => `app: ${err.message}`;
    let closed: CloseResult | undefined;
    let seen: { limit: number; prepare: unknown } | undefined;
    const consumer: Consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        await sleep(10);
        closed = await within(consumer.close(), 8000, 'close() inside the handler');
        seen = { limit: Error.stackTraceLimit, prepare: Object.getOwnPropertyDescriptor(Error, 'prepareStackTrace')?.value as unknown };
      }),
    );
    try {
      Error.stackTraceLimit = 0;
      Error.prepareStackTrace = appPrepare;
      await rr.publish('', queue, 'x', { messageId: 'no-stacks' });
      await waitFor(() => seen !== undefined, 10_000, 'the close inside the handler');
    } finally {
      Error.stackTraceLimit = limit;
      if (prepare) Object.defineProperty(Error, 'prepareStackTrace', prepare);
      else delete (Error as { prepareStackTrace?: unknown }).prepareStackTrace;
    }
    expect(closed).toEqual({ unfinished: 0 });
    expect(seen).toEqual({ limit: 0, prepare: appPrepare });
    await waitFor(async () => (await queueUnacked(queue)) === 0, 5000, 'the message acked');
    expect(await queueDepth(queue)).toBe(0);
  });

  it("one consumer's handler closing another waits for that other consumer's handlers, as from outside", async () => {
    const [qa, qb] = [testQueue(['1m']), testQueue(['1m'])];
    const rr = await connectClient({ logger: recordingLogger() });
    const hang = gate();
    let bStarted = false;
    let closedB: CloseResult | undefined;
    const b: Consumer = track(
      await rr.consume({ queue: qb, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        bStarted = true;
        await hang.wait;
      }),
    );
    track(
      await rr.consume({ queue: qa, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        await sleep(10);
        closedB = await within(b.close(), 15_000, "close() of the other consumer in a's handler");
      }),
    );
    await rr.publish('', qb, 'b', { messageId: 'held' });
    await waitFor(() => bStarted, 10_000, "b's handler to start");
    await rr.publish('', qa, 'a', { messageId: 'closes-b' });
    await waitFor(() => b.state === 'closing', 10_000, 'b closing');
    await sleep(500);
    // b's close waits for b's handler, which has not returned.
    expect(closedB).toBeUndefined();
    hang.release();
    await waitFor(() => closedB !== undefined, 10_000, "b's close");
    expect(closedB).toEqual({ unfinished: 0 });
    expect(b.state).toBe('closed');
    expect(b.stats().acked).toBe(1);
    await waitFor(async () => (await queueDepth(qa)) === 0 && (await queueUnacked(qa)) === 0, 10_000, "a's message acked");
    expect(await queueDepth(qb)).toBe(0);
  });

  it('rr.close() resolves, the message is acked, and the client is closed', async () => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    let calls = 0;
    let closed: CloseResult | undefined;
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        calls++;
        closed = await within(rr.close(), 8000, 'rr.close() inside the handler');
      }),
    );
    await rr.publish('', queue, { orderId: 2 }, { messageId: 'closes-client' });
    await waitFor(() => closed !== undefined, 10_000, 'the close inside the handler');
    expect(closed).toEqual({ unfinished: 0 });
    expect(await within(rr.close(), 8000, 'rr.close() outside')).toEqual({ unfinished: 0 });
    expect(consumer.state).toBe('closed');
    await expect(rr.publish('', queue, 'late')).rejects.toBeInstanceOf(ClosedError);
    expect(calls).toBe(1);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(logger.errors).toEqual([]);
    expect(unhandled).toEqual([]);
  });
});

describe('a bounded close', () => {
  it('close({ timeoutMs }) gives up on a handler that never settles: the message goes back to the queue', async () => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const hang = gate();
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        calls++;
        await hang.wait;
        // Settled after the close: dropped, quietly.
        throw new Error('too late');
      }),
    );
    const errors: Error[] = [];
    consumer.on('error', (e) => errors.push(e));
    await rr.publish('', queue, 'x', { messageId: 'never-settles' });
    await waitFor(() => calls === 1, 10_000, 'the handler to start');
    const started = Date.now();
    const result = await within(consumer.close({ timeoutMs: 300 }), 5000, 'close({ timeoutMs: 300 })');
    expect(Date.now() - started).toBeLessThan(3000);
    expect(result).toEqual({ unfinished: 1 });
    expect(consumer.state).toBe('closed');
    await waitFor(async () => (await queueDepth(queue)) === 1, 5000, 'the message back in the queue');

    hang.release();
    await sleep(300);
    expect(errors).toEqual([]);
    expect(logger.errors).toEqual([]);
    expect(await queueDepth(queue)).toBe(1);
    expect(await queueDepth(`${queue}.retry.1m`)).toBe(0);
    expect(consumer.stats()).toMatchObject({ failed: 0, retried: 0 });
    expect(unhandled).toEqual([]);
  });

  it('rr.close({ timeoutMs }) counts the unfinished handlers of every consumer', async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ logger: recordingLogger() });
    const hang = gate();
    let calls = 0;
    track(
      await rr.consume({ queue, prefetch: 2, onFailure: { delays: ['1m'] } }, async () => {
        calls++;
        await hang.wait;
      }),
    );
    await rr.publish('', queue, 'a', { messageId: 'a' });
    await rr.publish('', queue, 'b', { messageId: 'b' });
    await waitFor(() => calls === 2, 10_000, 'both handlers to start');
    const started = Date.now();
    expect(await within(rr.close({ timeoutMs: 300 }), 5000, 'rr.close({ timeoutMs: 300 })')).toEqual({ unfinished: 2 });
    expect(Date.now() - started).toBeLessThan(3000);
    await waitFor(async () => (await queueDepth(queue)) === 2, 5000, 'both messages back in the queue');
    hang.release();
  });

  it('a later close with a shorter timeoutMs shortens the wait', async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ logger: recordingLogger() });
    const hang = gate();
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['1m'] } }, async () => {
        calls++;
        await hang.wait;
      }),
    );
    await rr.publish('', queue, 'x');
    await waitFor(() => calls === 1, 10_000, 'the handler to start');
    const first = consumer.close();
    const second = consumer.close({ timeoutMs: 200 });
    expect(await within(second, 5000, 'the shorter close')).toEqual({ unfinished: 1 });
    expect(await first).toEqual({ unfinished: 1 });
    hang.release();
  });

  it('a handler that finishes within the bound is settled as usual', async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ logger: recordingLogger() });
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['1m'] } }, async () => {
        calls++;
        await sleep(300);
      }),
    );
    await rr.publish('', queue, 'x');
    await waitFor(() => calls === 1, 10_000, 'the handler to start');
    expect(await consumer.close({ timeoutMs: 5000 })).toEqual({ unfinished: 0 });
    expect(await queueDepth(queue)).toBe(0);
    expect(consumer.stats().acked).toBe(1);
  });

  it.each([[-1], [1.5], ['100'], [null]])('close({ timeoutMs: %p }) is refused with INVALID_OPTIONS', async (timeoutMs) => {
    const rr = await connectClient();
    const consumer = track(await rr.consume({ queue: testQueue(['1m']), onFailure: { delays: ['1m'] } }, async () => undefined));
    await expect(consumer.close({ timeoutMs: timeoutMs as number })).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining('timeoutMs'),
    });
    await expect(rr.close({ timeoutMs: timeoutMs as number })).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
    expect(consumer.state).toBe('connected');
  });
});

describe('handlers unaffected by the context of a close', () => {
  it('a close started by code a finished handler left behind waits for the other handlers, as from outside', async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ logger: recordingLogger() });
    const hang = gate();
    let later: Promise<CloseResult> | undefined;
    let laterResult: CloseResult | undefined;
    const consumer: Consumer = track(
      await rr.consume({ queue, prefetch: 2, onFailure: { delays: ['1m'] } }, async (msg: Message) => {
        if (msg.properties.messageId === 'waits') return hang.wait;
        // Runs after this handler returned, in the context it started in.
        setTimeout(() => {
          later = consumer.close();
          void later.then((r) => (laterResult = r));
        }, 100);
      }),
    );
    await rr.publish('', queue, 'x', { messageId: 'waits' });
    await rr.publish('', queue, 'y', { messageId: 'leaves-a-timer' });
    await waitFor(() => later !== undefined, 10_000, 'the late close');
    await sleep(500);
    // Still waiting for the handler of 'waits'.
    expect(laterResult).toBeUndefined();
    expect(consumer.state).toBe('closing');
    hang.release();
    expect(await within(later as Promise<CloseResult>, 5000, 'the late close')).toEqual({ unfinished: 0 });
    expect(consumer.state).toBe('closed');
    expect(await queueDepth(queue)).toBe(0);
    expect(consumer.stats().acked).toBe(2);
  });

  it('a close from a timer the handler does not await waits for that handler until timeoutMs; its message goes back to the queue', async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ logger: recordingLogger() });
    let result: CloseResult | undefined;
    const consumer: Consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        // The close runs in the timer's callback, outside the handler, and the handler waits for it.
        await new Promise<void>((resolve) =>
          setTimeout(() => {
            void consumer.close({ timeoutMs: 300 }).then((r) => {
              result = r;
              resolve();
            });
          }, 10),
        );
      }),
    );
    await rr.publish('', queue, 'x', { messageId: 'closes-from-a-timer' });
    await waitFor(() => result !== undefined, 10_000, 'the close from the timer');
    expect(result).toEqual({ unfinished: 1 });
    expect(consumer.state).toBe('closed');
    await waitFor(async () => (await queueDepth(queue)) === 1, 5000, 'the message back in the queue');
    expect(consumer.stats().acked).toBe(0);
    expect(await queueDepth(`${queue}.retry.1m`)).toBe(0);
  });
});

describe('moves nobody listens to', () => {
  it('are counted in stats() without a listener; a retry or parked listener added later hears each move from then on, and one removed stops hearing', async () => {
    const queue = testQueue(['100ms']);
    const rr = await connectClient();
    const consumer = track(
      await rr.consume({ queue, prefetch: 10, onFailure: { delays: ['100ms'] } }, async (msg) => {
        if (msg.properties.messageId?.startsWith('bad')) throw new Error('carrier 503');
      }),
    );
    // No listener: 3 messages fail twice each (retried, then parked), all counted.
    for (let i = 0; i < 3; i++) await rr.publish('', queue, { i }, { messageId: `bad-${i}` });
    await waitFor(() => consumer.stats().parked === 3, 10_000, 'three parked');
    expect(consumer.stats()).toMatchObject({ retried: 3, parked: 3, retriedByDelay: { '100ms': 3 }, parkedByReason: { exhausted: 3 } });

    const retries: (string | undefined)[] = [];
    const parks: (string | undefined)[] = [];
    const onRetry = (e: { messageId?: string }) => retries.push(e.messageId);
    consumer.on('retry', onRetry);
    consumer.on('parked', (e) => parks.push(e.messageId));
    await rr.publish('', queue, { i: 3 }, { messageId: 'bad-3' });
    await waitFor(() => parks.length === 1, 10_000, 'the parked event');
    expect(retries).toEqual(['bad-3']);
    expect(parks).toEqual(['bad-3']);
    expect(consumer.stats()).toMatchObject({ retried: 4, parked: 4 });

    consumer.off('retry', onRetry);
    await rr.publish('', queue, { i: 4 }, { messageId: 'bad-4' });
    await waitFor(() => parks.length === 2, 10_000, 'the second parked event');
    expect(retries).toEqual(['bad-3']);
    expect(consumer.stats()).toMatchObject({ retried: 5, parked: 5, retriedByDelay: { '100ms': 5 } });
    expect(await queueDepth(`${queue}.parked`)).toBe(5);
  });
});
