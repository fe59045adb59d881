// Must load before amqplib (./helpers loads it): it records each message's headers with their wire types.
import { headersWireBytes, typedHeaders } from './fixtures/typed-headers';

import { randomBytes } from 'node:crypto';

import amqp, { type ConfirmChannel } from 'amqplib';

import {
  type ConsumeOptions,
  type Handler,
  InvalidOptionsError,
  type ParkedEvent,
  type RetryEvent,
  parkedQueueName,
  retryQueueName,
  type Delay,
} from '../lib';
import {
  AMQP_URL,
  cleanup,
  closeAmqp,
  connectClient,
  deleteQueue,
  extraQueue,
  getOne,
  queueDepth,
  queueExists,
  sleep,
  testQueue,
  track,
  uniqueName,
  waitFor,
  waitForOne,
  withChannel,
} from './helpers';

// Queues made outside testQueue(): long names, deleted after each test.
const longNamed: string[] = [];
afterEach(async () => {
  for (const q of longNamed.splice(0)) {
    for (const name of [q, parkedQueueName(q)]) if (Buffer.byteLength(name) <= 255) await deleteQueue(name);
  }
});
afterEach(cleanup);
afterAll(closeAmqp);

/** A unique name of exactly `bytes` bytes. */
function nameOfLength(bytes: number): string {
  const base = uniqueName();
  const name = base + 'x'.repeat(bytes - base.length);
  if (bytes <= 255) longNamed.push(name);
  return name;
}

/** Publishes with amqplib (typed header values allowed) and waits for the broker's confirm. */
async function publishRaw(queue: string, body: Buffer, options: { messageId?: string; headers?: Record<string, unknown> }): Promise<void> {
  await withConfirm(async (ch) => {
    ch.sendToQueue(queue, body, { persistent: true, ...options });
  });
}

/** Runs `f` on a confirm channel of its own connection and waits for every confirm. */
async function withConfirm(f: (ch: ConfirmChannel) => Promise<void>): Promise<void> {
  const conn = await amqp.connect(AMQP_URL);
  try {
    const ch = await conn.createConfirmChannel();
    await f(ch);
    await ch.waitForConfirms();
    await ch.close();
  } finally {
    await conn.close();
  }
}

describe('option validation: InvalidOptionsError naming the option, nothing declared', () => {
  // [label, options, text the message must contain, queue names that must not exist afterwards]
  const cases: [string, () => { options: ConsumeOptions; absent: string[] }, string][] = [
    ['an empty queue name', () => ({ options: { queue: '' }, absent: [] }), 'queue'],
    ['a 256-byte queue name', () => ({ options: { queue: nameOfLength(256) }, absent: [] }), 'queue'],
    [
      'a queue whose retry queue name would be over 255 bytes',
      () => {
        const queue = nameOfLength(250); // queue.retry.5s is 259 bytes
        return { options: { queue, onFailure: { delays: ['5s'] } }, absent: [queue] };
      },
      'queue',
    ],
    [
      'a queue whose parked queue name would be over 255 bytes',
      () => {
        const queue = nameOfLength(249); // queue.parked is 256 bytes
        return { options: { queue, onFailure: { delays: [] } }, absent: [queue] };
      },
      'queue',
    ],
    ['a 256-byte exchange name', () => ({ options: { queue: testQueue(), exchange: 'e'.repeat(256) }, absent: [] }), 'exchange'],
    ['unsorted delays', () => ({ options: { queue: testQueue(), onFailure: { delays: ['1m', '5s'] } }, absent: [] }), 'onFailure.delays'],
    ['duplicated delays', () => ({ options: { queue: testQueue(), onFailure: { delays: ['5s', '5000ms'] } }, absent: [] }), 'onFailure.delays'],
    ['a zero delay (number)', () => ({ options: { queue: testQueue(), onFailure: { delays: [0] } }, absent: [] }), 'onFailure.delays'],
    ['a zero delay (string)', () => ({ options: { queue: testQueue(), onFailure: { delays: ['0ms'] } }, absent: [] }), 'onFailure.delays'],
    ['a negative delay (number)', () => ({ options: { queue: testQueue(), onFailure: { delays: [-5000] } }, absent: [] }), 'onFailure.delays'],
    ['a negative delay (string)', () => ({ options: { queue: testQueue(), onFailure: { delays: ['-5s'] } }, absent: [] }), 'onFailure.delays'],
    ['prefetch 0', () => ({ options: { queue: testQueue(), prefetch: 0 }, absent: [] }), 'prefetch'],
    ['prefetch 65536', () => ({ options: { queue: testQueue(), prefetch: 65_536 }, absent: [] }), 'prefetch'],
    ['an unknown queueType', () => ({ options: { queue: testQueue(), queueType: 'stream' as unknown as 'quorum' }, absent: [] }), 'queueType'],
    ['recovery.maxAttempts 0', () => ({ options: { queue: testQueue(), recovery: { maxAttempts: 0 } }, absent: [] }), 'recovery.maxAttempts'],
    ['alert.parkedAbove -1', () => ({ options: { queue: testQueue(), alert: { parkedAbove: -1 } }, absent: [] }), 'alert.parkedAbove'],
  ];

  it.each(cases)('rejects %s', async (_label, make, optionName) => {
    const { options, absent } = make();
    const rr = await connectClient();
    let caught: unknown;
    try {
      track(await rr.consume(options, async () => undefined));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidOptionsError);
    expect(caught).toMatchObject({ code: 'INVALID_OPTIONS', name: 'InvalidOptionsError', message: expect.stringContaining(optionName) });
    const names = [...absent];
    if (options.queue && Buffer.byteLength(options.queue) <= 255) names.push(options.queue);
    for (const q of names) {
      expect(await queueExists(q)).toBe(false);
      if (Buffer.byteLength(parkedQueueName(q)) <= 255) expect(await queueExists(parkedQueueName(q))).toBe(false);
    }
  });
});

describe('bodies go through a retry and a park byte for byte', () => {
  const notUtf8 = Buffer.concat([Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82, 0x00, 0x80, 0xed, 0xa0, 0x80]), randomBytes(4096)]);
  const cases: [string, () => Buffer][] = [
    ['an empty body', () => Buffer.alloc(0)],
    ['a 10 MB body', () => randomBytes(10 * 1024 * 1024)],
    ['a body that is not UTF-8', () => notUtf8],
  ];

  it('uses a body that really is not valid UTF-8', () => {
    expect(Buffer.from(notUtf8.toString('utf8'), 'utf8').equals(notUtf8)).toBe(false);
  });

  it.each(cases)(
    '%s',
    async (_label, make) => {
      const body = make();
      const delays: Delay[] = ['200ms'];
      const queue = testQueue(delays);
      const rr = await connectClient();
      const seen: { attempt: number; body: Buffer }[] = [];
      track(
        await rr.consume({ queue, onFailure: { delays } }, async (msg) => {
          seen.push({ attempt: msg.attempt, body: Buffer.from(msg.body) });
          throw new Error('not this time');
        }),
      );
      await rr.publish('', queue, body, { messageId: 'body-1' });
      const parked = await waitForOne(parkedQueueName(queue), 30_000);

      expect(seen.map((s) => s.attempt)).toEqual([0, 1]);
      for (const s of seen) {
        expect(s.body.length).toBe(body.length);
        expect(s.body.equals(body)).toBe(true);
      }
      expect(parked.content.length).toBe(body.length);
      expect(parked.content.equals(body)).toBe(true);
      expect(parked.properties.messageId).toBe('body-1');
      expect(parked.headers['retry-reason']).toBe('exhausted');
      expect(await queueDepth(queue)).toBe(0);
      expect(await queueDepth(retryQueueName(queue, '200ms'))).toBe(0);
    },
    60_000,
  );
});

describe('headers of every AMQP type survive retries', () => {
  const headers: Record<string, unknown> = {
    text: 'plain ünïcödé ✓',
    emptyText: '',
    decimal: { '!': 'decimal', value: { places: 2, digits: 12345 } },
    timestamp: { '!': 'timestamp', value: 1_700_000_000 },
    bytes: Buffer.from([0, 1, 2, 0x7f, 0x80, 0xfe, 0xff]),
    emptyBytes: Buffer.alloc(0),
    nested: { level1: { level2: { n: 1, s: 'deep', flag: false, none: null }, list: [1, 'two'] } },
    emptyTable: {},
    array: [1, 'two', true, null, { k: 'v' }, [3, [4]], Buffer.from('ab')],
    typedArray: [
      { '!': 'short', value: 7 },
      { '!': 'float', value: 1.25 },
      { '!': 'timestamp', value: 1 },
      { '!': 'decimal', value: { places: 0, digits: 1 } },
      { '!': 'long', value: -1 },
    ],
    emptyArray: [],
    yes: true,
    no: false,
    float: { '!': 'float', value: 1.5 },
    floatInexact: { '!': 'float', value: 0.1 },
    double: { '!': 'double', value: 2.718281828459045 },
    byte: { '!': 'byte', value: -8 },
    short: { '!': 'short', value: -300 },
    int: { '!': 'int', value: -70_000 },
    long: { '!': 'long', value: -5_000_000_000 },
    maxSafeLong: { '!': 'long', value: Number.MAX_SAFE_INTEGER },
    unsignedByte: { '!': 'unsignedbyte', value: 200 },
    unsignedShort: { '!': 'unsignedshort', value: 60_000 },
    unsignedInt: { '!': 'unsignedint', value: 4_000_000_000 },
    nothing: null,
  };

  function pick<T>(o: Record<string, T>, keys: string[]): Record<string, T> {
    return Object.fromEntries(keys.filter((k) => k in o).map((k) => [k, o[k]]));
  }

  it('keeps types and values through two failures (Q.retry.200ms, the broker hop back to Q, Q.retry.1m)', async () => {
    const delays: Delay[] = ['200ms', '1m'];
    const queue = testQueue(delays);
    const control = extraQueue();
    const rr = await connectClient();
    const seen: { attempt: number; headers: Record<string, unknown> }[] = [];
    track(
      await rr.consume({ queue, onFailure: { delays } }, async (msg) => {
        seen.push({ attempt: msg.attempt, headers: msg.headers });
        throw new Error('typed headers test');
      }),
    );
    await withChannel((ch) => ch.assertQueue(control, { durable: true }));
    await withConfirm(async (ch) => {
      ch.sendToQueue(control, Buffer.from('typed'), { persistent: true, messageId: 'typed-1', headers });
      ch.sendToQueue(queue, Buffer.from('typed'), { persistent: true, messageId: 'typed-1', headers });
    });

    const expected = await getOne(control);
    if (expected === null) throw new Error('the control message is missing');
    const got = await waitForOne(retryQueueName(queue, '1m'), 15_000);
    const keys = Object.keys(headers);

    // Every header of ours is there, and no other but the retry-* headers.
    expect(
      Object.keys(got.headers)
        .filter((k) => !k.startsWith('retry-'))
        .sort(),
    ).toEqual(Object.keys(expected.headers).sort());
    expect(got.headers['retry-attempt']).toBe(2);
    // The same decoded values as the original, read by amqplib...
    expect(pick(got.headers, keys)).toEqual(expected.headers);
    // ...and the same wire types (a short stays a short, a float a float, an unsigned int unsigned).
    expect(pick(typedHeaders(got.properties), keys)).toEqual(typedHeaders(expected.properties));
    expect(typedHeaders(expected.properties).short).toEqual({ t: 's', hex: 'fed4' });

    // What the handler saw, both times: the documented JavaScript forms.
    expect(seen.map((s) => s.attempt)).toEqual([0, 1]);
    for (const s of seen) {
      const h = s.headers;
      expect(h.text).toBe('plain ünïcödé ✓');
      expect(h.decimal).toBeCloseTo(123.45, 10);
      expect(h.timestamp).toBe(1_700_000_000);
      expect(h.bytes).toEqual([0, 1, 2, 0x7f, 0x80, 0xfe, 0xff]);
      expect(h.nested).toEqual({ level1: { level2: { n: 1, s: 'deep', flag: false, none: null }, list: [1, 'two'] } });
      expect(h.long).toBe(-5_000_000_000);
      expect(h.unsignedInt).toBe(4_000_000_000);
      expect(h.float).toBe(1.5);
      expect(h.double).toBe(2.718281828459045);
      expect(h.yes).toBe(true);
      expect(h.no).toBe(false);
      expect(h.nothing).toBeNull();
    }
    const userHeaders = (h: Record<string, unknown>) => pick(h, keys);
    expect(userHeaders(seen[1].headers)).toEqual(userHeaders(seen[0].headers));
  });
});

describe('a malformed x-death header', () => {
  const cases: [string, unknown][] = [
    ['a string', 'garbage'],
    ['a number', 42],
    ['an array of strings', ['a', 'b']],
    ['a table instead of an array', { count: 3, reason: 'expired', queue: 'QUEUE.retry.1m' }],
    ['entries with a string count', [{ count: '3', reason: 'expired', queue: 'QUEUE.retry.1m', exchange: '', 'routing-keys': ['QUEUE'] }]],
    ['entries with a missing count and a numeric reason', [{ reason: 7, queue: 'QUEUE.retry.1m' }]],
  ];

  it('does not crash the consumer and counts as no earlier attempt', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const attempts = new Map<string, number>();
    const errors: Error[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays } }, async (msg) => {
        attempts.set(msg.properties.messageId ?? '?', msg.attempt);
        if (msg.properties.messageId !== 'ok') throw new Error('fail once');
      }),
    );
    consumer.on('error', (e) => errors.push(e));
    const withQueue = (v: unknown): unknown => JSON.parse(JSON.stringify(v).split('QUEUE').join(queue));
    for (const [label, xDeath] of cases) {
      await publishRaw(queue, Buffer.from(label), { messageId: label, headers: { 'x-death': withQueue(xDeath) } });
    }
    // A well-formed message after them is still handled.
    await publishRaw(queue, Buffer.from('ok'), { messageId: 'ok' });
    await waitFor(() => attempts.size === cases.length + 1, 10_000, 'every message handled');
    await waitFor(async () => (await queueDepth(retryQueueName(queue, '1m'))) === cases.length, 10_000, 'every failure in Q.retry.1m');

    expect(Object.fromEntries(attempts)).toEqual(Object.fromEntries([...cases.map(([label]) => [label, 0]), ['ok', 0]]));
    const retried: Record<string, unknown> = {};
    for (const _case of cases) {
      const m = await getOne(retryQueueName(queue, '1m'));
      retried[m?.properties.messageId ?? '?'] = m?.headers['retry-attempt'];
    }
    expect(retried).toEqual(Object.fromEntries(cases.map(([label]) => [label, 1])));
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(consumer.state).toBe('connected');
    expect(errors).toEqual([]);
  });
});

describe('a 1 MB error message or stack', () => {
  const MB = 1024 * 1024;
  const FRAME_MAX = 131_072;
  const cases: [string, () => Error][] = [
    // The default stack repeats the message, so this one is 1 MB twice.
    ['a 1 MB message (multi-byte UTF-8)', () => new Error('é'.repeat(MB / 2))],
    [
      'a 1 MB stack',
      () => {
        const e = new Error('short message');
        e.stack = `Error: short message\n${'    at frame (/app/src/deep/module.ts:10:20)\n'.repeat(Math.ceil(MB / 44))}`;
        return e;
      },
    ],
    [
      'a 1 MB name',
      () => {
        const e = new Error('named');
        e.name = 'N'.repeat(MB);
        return e;
      },
    ],
  ];

  it.each(cases)(
    '%s: the message retries and parks, its headers cut to fit a frame',
    async (_label, makeError) => {
      const delays: Delay[] = ['200ms'];
      const queue = testQueue(delays);
      const rr = await connectClient();
      const retries: RetryEvent[] = [];
      const parkedEvents: ParkedEvent[] = [];
      let calls = 0;
      const error = makeError();
      const consumer = track(
        await rr.consume({ queue, onFailure: { delays } }, async () => {
          calls++;
          throw error;
        }),
      );
      consumer.on('retry', (e) => retries.push(e));
      consumer.on('parked', (e) => parkedEvents.push(e));
      await rr.publish('', queue, { id: 1 }, { messageId: 'big-error', headers: { tenant: 'acme' } });

      const m = await waitForOne(parkedQueueName(queue), 20_000);
      expect(calls).toBe(2);
      expect(retries).toHaveLength(1);
      await waitFor(() => parkedEvents.length === 1, 5000, 'the parked event');
      expect(JSON.parse(m.content.toString('utf8'))).toEqual({ id: 1 });
      expect(m.headers).toMatchObject({ tenant: 'acme', 'retry-reason': 'exhausted', 'retry-attempt': 1 });

      const lastError = m.headers['retry-last-error'];
      const stack = m.headers['retry-error-stack'];
      const name = m.headers['retry-error-name'];
      if (typeof lastError !== 'string' || typeof stack !== 'string' || typeof name !== 'string') {
        throw new Error(`retry-* headers are not strings: ${typeof lastError}, ${typeof stack}, ${typeof name}`);
      }
      expect(Buffer.byteLength(lastError)).toBeLessThanOrEqual(8 * 1024);
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(200);
      expect(Buffer.byteLength(stack)).toBeLessThan(FRAME_MAX);
      for (const [header, full] of [
        [lastError, error.message],
        [stack, error.stack ?? ''],
        [name, error.name],
      ]) {
        // Either whole, or a UTF-8-clean prefix with a marker saying how much was cut.
        expect(header).not.toContain('\uFFFD');
        if (header !== full) {
          expect(header).toMatch(/\n…\[cut \d+ bytes\]$/);
          expect(full.startsWith(header.slice(0, header.lastIndexOf('\n…[cut')))).toBe(true);
        }
      }
      expect(lastError.length).toBeGreaterThan(0);
      // The whole headers table, as sent on the wire, leaves room in a frame for the other properties.
      expect(headersWireBytes(m.properties)).toBeLessThan(FRAME_MAX - 10_000);
      expect(await queueDepth(queue)).toBe(0);
    },
    30_000,
  );
});

describe('handlers that do not throw an Error', () => {
  const cases: [string, Handler, RegExp][] = [
    [
      'throws a string',
      async () => {
        throw 'plain string failure';
      },
      /^plain string failure$/,
    ],
    [
      'throws undefined',
      async () => {
        throw undefined;
      },
      /undefined/,
    ],
    [
      'throws null',
      async () => {
        throw null;
      },
      /null/,
    ],
    [
      'throws a number',
      async () => {
        throw 42;
      },
      /^42$/,
    ],
    [
      'throws an object without message',
      async () => {
        throw { code: 'E_DOWNSTREAM', status: 503 };
      },
      /E_DOWNSTREAM/,
    ],
    [
      'throws an object that cannot be serialized (a cycle)',
      async () => {
        const o: Record<string, unknown> = { kind: 'cyclic' };
        o.self = o;
        throw o;
      },
      /object/i,
    ],
    [
      'throws synchronously from a non-async function',
      () => {
        throw new TypeError('sync boom');
      },
      /^sync boom$/,
    ],
    ['returns a rejected promise from a non-async function', () => Promise.reject(new Error('rejected')), /^rejected$/],
  ];

  it.each(cases)('%s: the message goes to the retry queue with a readable error', async (_label, handler, lastError) => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const retries: RetryEvent[] = [];
    // Every header on the retried copy, its error's name among them.
    const consumer = track(await rr.consume({ queue, onFailure: { delays, retryHeaders: 'full' } }, handler));
    consumer.on('retry', (e) => retries.push(e));
    await rr.publish('', queue, 'payload', { messageId: 'odd-1' });

    const m = await waitForOne(retryQueueName(queue, '1m'), 10_000);
    expect(m.content.toString('utf8')).toBe('payload');
    expect(m.headers['retry-attempt']).toBe(1);
    expect(m.headers['retry-reason']).toBe('retry');
    expect(typeof m.headers['retry-error-name']).toBe('string');
    expect((m.headers['retry-error-name'] as string).length).toBeGreaterThan(0);
    expect(m.headers['retry-last-error']).toMatch(lastError);
    await waitFor(() => retries.length === 1, 5000, 'the retry event');
    expect(retries[0].error).toMatch(lastError);
    expect(consumer.stats()).toMatchObject({ failed: 1, retried: 1, acked: 0 });
    expect(await queueDepth(queue)).toBe(0);
  });

  const successes: [string, Handler][] = [
    ['returns a number from a non-async function', () => 42],
    ['returns undefined from a non-async function', () => undefined],
    ['returns an object from an async function', async () => ({ ok: true })],
  ];

  it.each(successes)('%s: the message is acked', async (_label, handler) => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const consumer = track(await rr.consume({ queue, onFailure: { delays } }, handler));
    await rr.publish('', queue, 'payload', { messageId: 'plain-1' });
    await waitFor(() => consumer.stats().acked === 1, 10_000, 'the ack');
    await sleep(300);
    expect(consumer.stats()).toMatchObject({ acked: 1, failed: 0 });
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });
});
