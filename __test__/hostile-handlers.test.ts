import { Consumer, type ConsumerContext } from '../lib/consumer';
import { type ConsumeOptions, type Logger, type Message, parkedQueueName, retryQueueName, type Delay } from '../lib';
import type { NativeBatch, NativeConsumer, NativeFailureInfo } from '../lib/native';
import {
  type GotMessage,
  cleanup,
  closeAmqp,
  collectUnhandledRejections,
  connectClient,
  drainAll,
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

const DELAYS: Delay[] = ['1m'];

interface Run {
  /** Handler calls per message id. */
  calls: Map<string, number>;
  logger: ReturnType<typeof recordingLogger>;
  consumer: Consumer;
}

/**
 * Consumes a fresh queue with prefetch 1 (unless `options` says otherwise) and
 * publishes `ids` in order; the handler calls `fail` for the message `bad` and
 * resolves for every other.
 */
async function run(queue: string, ids: string[], fail: () => unknown, options: Partial<ConsumeOptions> = {}): Promise<Run> {
  const logger = recordingLogger();
  const rr = await connectClient({ logger });
  const calls = new Map<string, number>();
  const consumer = track(
    await rr.consume({ queue, prefetch: 1, ...options, onFailure: { delays: DELAYS, ...options.onFailure } }, async (msg: Message) => {
      const id = msg.properties.messageId ?? '?';
      calls.set(id, (calls.get(id) ?? 0) + 1);
      if (id === 'bad') return fail();
    }),
  );
  for (const id of ids) await rr.publish('', queue, { id }, { messageId: id });
  return { calls, logger, consumer };
}

/**
 * Waits until the bad message is in `target`, the message after it was
 * handled and nothing is unacked; returns the bad message as it arrived there.
 */
async function expectSettled(queue: string, target: string, r: Run): Promise<GotMessage> {
  const moved = await waitForOne(target, 10_000);
  await waitFor(() => r.calls.get('after') === 1, 10_000, 'the message after the bad one to be handled');
  await waitFor(async () => (await queueUnacked(queue)) === 0, 10_000, `nothing unacked in '${queue}'`);
  // Time for a wrongly settled message to come back.
  await sleep(300);
  expect(Object.fromEntries(r.calls)).toEqual({ before: 1, bad: 1, after: 1 });
  expect(await queueDepth(queue)).toBe(0);
  expect(await queueUnacked(queue)).toBe(0);
  expect(moved.properties.messageId).toBe('bad');
  expect(unhandled).toEqual([]);
  return moved;
}

function readable(h: Record<string, unknown>, header: string): string {
  const v = h[header];
  expect(typeof v).toBe('string');
  expect((v as string).length).toBeGreaterThan(0);
  return v as string;
}

const IDS = ['before', 'bad', 'after'];

describe('an Error with fields of the wrong type is retried with a readable retry-last-error', () => {
  const cases: [string, () => Error, { lastError: RegExp; name?: RegExp; stack?: RegExp }][] = [
    ['message undefined', () => Object.assign(new Error('x'), { message: undefined }), { lastError: /whose message is undefined/ }],
    ['message 42', () => Object.assign(new Error('x'), { message: 42 }), { lastError: /^42$/ }],
    [
      'message an object',
      () => Object.assign(new Error('x'), { message: { code: 'E_CARRIER', detail: { status: 503 } } }),
      { lastError: /"code":"E_CARRIER".*503/ },
    ],
    ['name a number', () => Object.assign(new Error('carrier down'), { name: 7 }), { lastError: /^carrier down$/, name: /^7$/ }],
    ['stack an object', () => Object.assign(new Error('carrier down'), { stack: { frames: 3 } }), { lastError: /^carrier down$/, stack: /"frames":3/ }],
    // Lone surrogate halves read as U+FFFD, as any string crossing to the native side does; a pair stays one character.
    [
      'lone surrogates in its name, message and stack',
      () => Object.assign(new Error('carrier \ud800 down \udc00 😀'), { name: 'Carrier\udbff', stack: 'at \ud83d x' }),
      { lastError: /^carrier \ufffd down \ufffd 😀$/, name: /^Carrier\ufffd$/, stack: /^at \ufffd x$/ },
    ],
  ];

  it.each(cases)('%s', async (_label, make, expected) => {
    const queue = testQueue(DELAYS);
    // The stack is read for a retried copy too, as it is for a parked one.
    const r = await run(
      queue,
      IDS,
      () => {
        throw make();
      },
      { onFailure: { stackOnRetry: true, retryHeaders: 'full' } },
    );
    const moved = await expectSettled(queue, retryQueueName(queue, '1m'), r);
    expect(readable(moved.headers, 'retry-last-error')).toMatch(expected.lastError);
    expect(moved.headers['retry-reason']).toBe('retry');
    if (expected.name) expect(readable(moved.headers, 'retry-error-name')).toMatch(expected.name);
    if (expected.stack) expect(readable(moved.headers, 'retry-error-stack')).toMatch(expected.stack);
    expect(r.consumer.stats()).toMatchObject({ acked: 2, failed: 1, retried: 1 });
    // Settled with the others, not one by one after a refused batch.
    expect(r.logger.warnings.filter((l) => l.includes('settling'))).toEqual([]);
  });
});

describe('an error that throws when it is read costs only its own message', () => {
  function throwingGetter(key: 'message' | 'name' | 'stack'): Error {
    const err = new Error('never seen');
    Object.defineProperty(err, key, {
      get() {
        throw new Error(`the ${key} getter exploded`);
      },
    });
    return err;
  }

  const everyTrapThrows = new Proxy(
    {},
    Object.fromEntries(
      ['get', 'has', 'ownKeys', 'getPrototypeOf', 'getOwnPropertyDescriptor', 'defineProperty', 'set', 'deleteProperty', 'apply'].map((trap) => [
        trap,
        () => {
          throw new Error(`trap ${trap} refuses`);
        },
      ]),
    ),
  );

  const unprintable = {
    toJSON() {
      throw new Error('toJSON refuses');
    },
    toString() {
      throw new Error('toString refuses');
    },
    [Symbol.toPrimitive]() {
      throw new Error('toPrimitive refuses');
    },
  };

  const cases: [string, () => unknown, Record<string, RegExp>][] = [
    ['a message getter that throws', () => throwingGetter('message'), { 'retry-last-error': /message could not be read: the message getter exploded/ }],
    ['a name getter that throws', () => throwingGetter('name'), { 'retry-last-error': /^never seen$/, 'retry-error-name': /^Error$/ }],
    [
      'a stack getter that throws',
      () => throwingGetter('stack'),
      { 'retry-last-error': /^never seen$/, 'retry-error-stack': /stack could not be read: the stack getter exploded/ },
    ],
    ['a Proxy whose every trap throws', () => everyTrapThrows, { 'retry-last-error': /message could not be read: trap get refuses/ }],
    [
      'a value whose toJSON, toString and Symbol.toPrimitive throw',
      () => unprintable,
      { 'retry-last-error': /neither read as JSON nor turned into a string/ },
    ],
  ];

  it.each(cases)('%s', async (_label, make, headers) => {
    const queue = testQueue(DELAYS);
    // The stack and every header are written for a retried copy too, as they are for a parked one.
    const r = await run(
      queue,
      IDS,
      () => {
        throw make();
      },
      { onFailure: { stackOnRetry: true, retryHeaders: 'full' } },
    );
    const moved = await expectSettled(queue, retryQueueName(queue, '1m'), r);
    for (const [header, pattern] of Object.entries(headers)) expect(readable(moved.headers, header)).toMatch(pattern);
    expect(r.consumer.stats()).toMatchObject({ acked: 2, failed: 1, retried: 1 });
  });

  it('a rejected promise of such a value is settled the same way', async () => {
    const queue = testQueue(DELAYS);
    const r = await run(queue, IDS, () => Promise.reject(throwingGetter('message')));
    const moved = await expectSettled(queue, retryQueueName(queue, '1m'), r);
    expect(readable(moved.headers, 'retry-last-error')).toMatch(/message could not be read/);
  });
});

describe('a retryable predicate that does not return a boolean parks the message as non-retryable and says why', () => {
  class CarrierError extends Error {
    isRetryable?: boolean;
  }

  const cases: [string, (err: unknown) => unknown, RegExp | undefined][] = [
    ['undefined (err => err.isRetryable)', (err) => (err as CarrierError).isRetryable, /returned undefined/],
    ['a number', () => 1, /returned a number \(1\)/],
    ['a string', () => 'yes', /returned a string/],
    ['a Promise (an async predicate)', async () => true, /returned a Promise/],
    ['a Promise that rejects', () => Promise.reject(new Error('the lookup failed')), /returned a Promise/],
    [
      'nothing: it throws',
      () => {
        throw new Error('predicate bug');
      },
      /onFailure\.retryable threw \(predicate bug\)/,
    ],
  ];

  it.each(cases)('%s', async (_label, retryable, warning) => {
    const queue = testQueue(DELAYS);
    const r = await run(
      queue,
      IDS,
      () => {
        throw new CarrierError('carrier returned 503');
      },
      { onFailure: { retryable: retryable as (err: unknown) => boolean } },
    );
    const moved = await expectSettled(queue, parkedQueueName(queue), r);
    expect(moved.headers['retry-reason']).toBe('non-retryable');
    expect(readable(moved.headers, 'retry-last-error')).toBe('carrier returned 503');
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(0);
    expect(r.consumer.stats()).toMatchObject({ acked: 2, failed: 1, parked: 1, retried: 0 });
    if (warning) expect(r.logger.warnings.join('\n')).toMatch(warning);
    // The rejected promise, too, must not surface later.
    await sleep(100);
    expect(unhandled).toEqual([]);
  });

  it.each([
    [true, 'retry'],
    [false, 'non-retryable'],
  ])('%s still gives %s, without a warning', async (verdict, reason) => {
    const queue = testQueue(DELAYS);
    const r = await run(
      queue,
      IDS,
      () => {
        throw new CarrierError('carrier returned 503');
      },
      // Every header on a retried copy too, its retry-reason among them.
      { onFailure: { retryable: () => verdict, retryHeaders: 'full' } },
    );
    const moved = await expectSettled(queue, verdict ? retryQueueName(queue, '1m') : parkedQueueName(queue), r);
    expect(moved.headers['retry-reason']).toBe(reason);
    expect(r.logger.warnings).toEqual([]);
  });
});

describe('handlers that finish in the same tick as a bad one', () => {
  it('are acked exactly once, and the bad one is settled too', async () => {
    const queue = testQueue(DELAYS);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const calls = new Map<string, number>();
    const ids = ['a', 'b', 'bad', 'c', 'd', 'e'];
    // Every handler waits for the same gate, so that all of them settle in one turn.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const consumer = track(
      await rr.consume({ queue, prefetch: 10, onFailure: { delays: DELAYS, retryable: () => undefined as unknown as boolean } }, async (msg) => {
        const id = msg.properties.messageId ?? '?';
        calls.set(id, (calls.get(id) ?? 0) + 1);
        await gate;
        if (id === 'bad') throw Object.assign(new Error('x'), { message: { status: 503 } });
      }),
    );
    for (const id of ids) await rr.publish('', queue, { id }, { messageId: id });
    await waitFor(() => consumer.inFlightCount === ids.length, 10_000, 'every handler in flight');
    open();
    const parked = await waitForOne(parkedQueueName(queue), 10_000);
    await waitFor(async () => (await queueUnacked(queue)) === 0, 10_000, `nothing unacked in '${queue}'`);
    await sleep(500);
    expect(Object.fromEntries(calls)).toEqual(Object.fromEntries(ids.map((id) => [id, 1])));
    expect(consumer.stats()).toMatchObject({ acked: 5, failed: 1, parked: 1 });
    expect(parked.headers['retry-last-error']).toBe('{"status":503}');
    expect(await queueDepth(queue)).toBe(0);
    expect(await drainAll(parkedQueueName(queue))).toEqual([]);
    expect(logger.errors).toEqual([]);
    expect(unhandled).toEqual([]);
  });
});

describe('when the native settle refuses a whole batch', () => {
  /** A native consumer that refuses the first settle call and records the others. */
  function fakeNative(refuse: (call: number) => Error | undefined) {
    const settled: { acked: number[]; failed: NativeFailureInfo[] }[] = [];
    let onBatch: (b: NativeBatch) => void = () => undefined;
    let calls = 0;
    const inner = {
      queue: 'fake',
      state: 'connected',
      start: (_max: number, f: (b: NativeBatch) => void) => {
        onBatch = f;
      },
      settle: (acked: number[], failed: NativeFailureInfo[]) => {
        const err = refuse(calls++);
        if (err) throw err;
        settled.push({ acked, failed });
      },
      stop: async () => {
        setImmediate(() => onBatch({ meta: '[]', bodies: Buffer.alloc(0), large: [], strings: [], events: '[]', closed: true }));
      },
      finish: async () => '[]',
    };
    const deliver = (ids: number[]) =>
      onBatch({
        meta: JSON.stringify(
          ids.map((i) => ({
            id: i,
            exchange: '',
            routingKey: 'fake',
            redelivered: false,
            attempt: 0,
            properties: { messageId: `m${i}` },
            offset: 0,
            length: 0,
          })),
        ),
        bodies: Buffer.alloc(0),
        large: [],
        strings: [],
        events: '[]',
        closed: false,
      });
    return { inner: inner as unknown as NativeConsumer, settled, deliver };
  }

  function consumerOf(inner: NativeConsumer, handler: (msg: Message) => unknown, logger: Logger): Consumer {
    const noop = () => undefined;
    const ctx: ConsumerContext = {
      inner,
      handler,
      retryable: () => true,
      batchSize: 10,
      url: 'amqp://fake',
      logger,
      metrics: {
        acked: noop,
        retried: noop,
        parked: noop,
        publishFailed: noop,
        faultFailed: noop,
        duplicate: noop,
        handlerDuration: noop,
        circuitOpened: noop,
        stop: noop,
      },
      parkedDepth: async () => undefined,
      stuckAfterMs: 300_000,
      onClosed: noop,
    };
    return new Consumer(ctx);
  }

  it('settles the acks on their own and each failure on its own, each exactly once', async () => {
    const conversion = Object.assign(new Error('Failed to convert JavaScript value `Object {}` into rust type `String` on FailureInfo.message'), {
      code: 'StringExpected',
    });
    const fake = fakeNative((call) => (call === 0 ? conversion : undefined));
    const logger = recordingLogger();
    const consumer = consumerOf(
      fake.inner,
      async (msg) => {
        if (msg.properties.messageId === 'm2' || msg.properties.messageId === 'm4') throw new Error(`bad ${msg.properties.messageId}`);
      },
      logger,
    );
    const errors: Error[] = [];
    consumer.on('error', (e) => errors.push(e));
    fake.deliver([1, 2, 3, 4, 5]);
    await waitFor(() => fake.settled.length === 3, 2000, 'three settle calls');
    expect(fake.settled).toEqual([
      { acked: [1, 3, 5], failed: [] },
      { acked: [], failed: [expect.objectContaining({ id: 2, message: 'bad m2', kind: 'retryable' })] },
      { acked: [], failed: [expect.objectContaining({ id: 4, message: 'bad m4', kind: 'retryable' })] },
    ]);
    expect(logger.warnings.join('\n')).toMatch(/at once failed .*one by one/);
    expect(errors).toEqual([]);
    await consumer.close();
  });

  it('falls back to a minimal failure when a failure is refused on its own too', async () => {
    const refusal = Object.assign(new Error('Failed to convert napi value into rust type `bool`'), { code: 'BooleanExpected' });
    // The batch and the first try of the failure are refused; the minimal failure goes through.
    const fake = fakeNative((call) => (call === 0 || call === 2 ? refusal : undefined));
    const consumer = consumerOf(
      fake.inner,
      async (msg) => {
        if (msg.properties.messageId === 'm2') throw new Error('bad');
      },
      recordingLogger(),
    );
    fake.deliver([1, 2]);
    await waitFor(() => fake.settled.length === 2, 2000, 'two settle calls');
    expect(fake.settled[0]).toEqual({ acked: [1], failed: [] });
    expect(fake.settled[1]).toMatchObject({ acked: [], failed: [{ id: 2, name: 'Error', kind: 'non-retryable' }] });
    expect(typeof fake.settled[1].failed[0].message).toBe('string');
    await consumer.close();
  });
});
