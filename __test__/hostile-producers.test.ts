/**
 * Producers the consumer does not control: other clients write bytes amqplib
 * never would (short strings that are not UTF-8, headers as large as a frame
 * allows, another user's user-id, headers named like ours). Each describe
 * states what a user of the consumer can rely on; the raw client of
 * ./raw-amqp puts those bytes on the wire.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

import amqp, { type MessageProperties as AmqpProperties, type Options } from 'amqplib';

import {
  type Consumer,
  type DisconnectedEvent,
  type Message,
  NonRetryableError,
  RabbitRetry,
  type RabbitRetryError,
  parkedQueueName,
  retryQueueName,
  type Delay,
} from '../lib';
import {
  AMQP_URL,
  brokerUrl,
  cleanup,
  closeAmqp,
  connectClient,
  getOne,
  queueDepth,
  queueExists,
  queueUnacked,
  rabbitmqctl,
  sleep,
  testExchange,
  testQueue,
  track,
  waitFor,
  withChannel,
} from './helpers';
import { AmqpError, type FieldValue, type GetResult, LongStr, type Properties, RawAmqp, Table, encodeProperties, encodeValue, shortStr } from './raw-amqp';

// amqplib's own decoder of basic properties (flags and property list), for what the raw client reads;
// loaded by file path, beside amqplib's entry point, as its exports map names only the entry points.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a file of amqplib's that its exports map does not name
const defs = require(path.join(path.dirname(require.resolve('amqplib')), 'lib', 'defs.js')) as {
  decode: (id: number, buf: Buffer) => AmqpProperties;
};

const raws: RawAmqp[] = [];
afterEach(async () => {
  for (const r of raws.splice(0)) await r.close();
});
afterEach(cleanup);
afterAll(closeAmqp);

/** A raw connection that the test's clean-up closes. */
async function openRaw(): Promise<RawAmqp> {
  const r = await RawAmqp.connect({ connectionName: 'hostile-producer' });
  raws.push(r);
  return r;
}

/** Latin-1 bytes: `é` is the single byte 0xE9, which is not valid UTF-8. */
const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');

/** The properties (and headers) of a message the raw client got, as amqplib decodes them. */
function propertiesOf(g: GetResult): AmqpProperties & { headers: Record<string, unknown> } {
  const p = defs.decode(60, g.properties);
  return { ...p, headers: p.headers ?? {} };
}

/** Waits for a message in `queue` and takes it with the raw client (basic.get, ack). */
async function rawGetOne(raw: RawAmqp, queue: string, timeoutMs = 15_000): Promise<GetResult> {
  await waitFor(async () => (await queueDepth(queue)) > 0, timeoutMs, `a message in '${queue}'`);
  const g = await raw.basicGet(queue);
  if (g === null) throw new Error(`'${queue}' was emptied by someone else`);
  return g;
}

/** Publishes with amqplib on a confirm channel of its own connection (as `url`'s user) and waits for the confirm. */
async function amqplibPublish(queue: string, body: Buffer, options: Options.Publish, url = AMQP_URL): Promise<void> {
  const conn = await amqp.connect(url);
  try {
    const ch = await conn.createConfirmChannel();
    ch.sendToQueue(queue, body, { persistent: true, ...options });
    await ch.waitForConfirms();
    await ch.close();
  } finally {
    await conn.close();
  }
}

/** What a consumer emitted that a user would alert on. */
function watch(c: Consumer): { disconnected: DisconnectedEvent[]; errors: Error[] } {
  const w = { disconnected: [] as DisconnectedEvent[], errors: [] as Error[] };
  c.on('disconnected', (e) => w.disconnected.push(e));
  c.on('error', (e) => w.errors.push(e));
  return w;
}

/** The disconnects and errors as text (each distinct one once, with a count), so a failure shows what happened. */
function described(w: { disconnected: DisconnectedEvent[]; errors: Error[] }): string[] {
  const all = [...w.disconnected.map((e) => `disconnected: ${e.error.message}`), ...w.errors.map((e) => `error: ${e.message}`)];
  return Object.entries(tally(all)).map(([text, n]) => (n === 1 ? text : `${n}x ${text}`));
}

/** Counts of each value. */
/**
 * A client and a consumer of a new work queue (prefetch 1, delays ['1m']) whose
 * handler always throws `message`; `calls()` counts the handler's calls and
 * `w` what the consumer reported.
 */
async function alwaysFailing(message: string): Promise<{
  queue: string;
  delays: Delay[];
  consumer: Consumer;
  calls: () => number;
  w: ReturnType<typeof watch>;
}> {
  const delays: Delay[] = ['1m'];
  const queue = testQueue(delays);
  const rr = await connectClient();
  let count = 0;
  const consumer = track(
    // The stack and every header on the retried copy too: these tests fit them in the frame.
    await rr.consume({ queue, prefetch: 1, onFailure: { delays, stackOnRetry: true, retryHeaders: 'full' } }, () => {
      count++;
      throw new Error(message);
    }),
  );
  return { queue, delays, consumer, calls: () => count, w: watch(consumer) };
}

function tally(xs: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}

// ---------------------------------------------------------------------------

describe('A. a short string that is not UTF-8 parks the message undecoded, and nothing else is disturbed', () => {
  // [label, the hostile message's properties, its bytes that must reach Q.parked unchanged, what retry-last-error names]
  const cases: [string, Properties, Buffer, RegExp][] = [
    [
      'a header key',
      {
        messageId: 'hostile-1',
        headers: new Table([
          [latin1('ordér'), 'x'],
          ['tenant', 'acme'],
        ]),
      },
      shortStr(latin1('ordér')),
      /header/i,
    ],
    [
      'a key of a table nested in a header value',
      {
        messageId: 'hostile-2',
        headers: new Table([
          ['order', new Table([[latin1('clé'), 'v']])],
          ['tenant', 'acme'],
        ]),
      },
      shortStr(latin1('clé')),
      /header/i,
    ],
    ['the message-id property', { messageId: latin1('ordér-1'), headers: { tenant: 'acme' } }, shortStr(latin1('ordér-1')), /message-id/i],
    [
      'the content-type property',
      { messageId: 'hostile-4', contentType: latin1('text/plain; charset=café'), headers: { tenant: 'acme' } },
      shortStr(latin1('text/plain; charset=café')),
      /content-type/i,
    ],
  ];

  it('uses bytes that really are not valid UTF-8', () => {
    for (const [, , bytes] of cases) expect(Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes)).toBe(false);
  });

  it.each(cases)('%s', async (_label, props, originalBytes, fieldName) => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const other = testQueue(delays);
    const rr = await connectClient();
    const handled: string[] = [];
    const handledOther: string[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        handled.push(msg.text());
      }),
    );
    const otherConsumer = track(
      await rr.consume({ queue: other, prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        handledOther.push(msg.text());
      }),
    );
    const w = watch(consumer);
    const wOther = watch(otherConsumer);
    const raw = await openRaw();

    // The ledger: what went into each queue.
    const published: string[] = [];
    const publishedOther: string[] = [];
    await amqplibPublish(queue, Buffer.from('before'), { messageId: 'before-1' });
    published.push('before');
    await rr.publish('', other, 'other-before', { messageId: 'other-1' });
    publishedOther.push('other-before');

    const { returned } = await raw.publish('', queue, { deliveryMode: 2, ...props }, Buffer.from('hostile'), { mandatory: true });
    expect(returned).toBeUndefined();
    published.push('hostile');
    // While the consumer deals with it: a publish on the same client, and the other queue's traffic.
    await rr.publish('', other, 'other-during', { messageId: 'other-2' });
    publishedOther.push('other-during');
    await rr.publish('', queue, 'after-rr', { messageId: 'after-1' });
    published.push('after-rr');
    await amqplibPublish(queue, Buffer.from('after-amqplib'), { messageId: 'after-2' });
    published.push('after-amqplib');
    await rr.publish('', other, 'other-after', { messageId: 'other-3' });
    publishedOther.push('other-after');

    const parkedQueue = parkedQueueName(queue);
    try {
      await waitFor(async () => (await queueDepth(parkedQueue)) === 1, 15_000, `the hostile message in '${parkedQueue}'`);
      await waitFor(() => handled.length === 3 && handledOther.length === 3, 10_000, 'every other message handled');
    } catch (err) {
      throw new Error(
        `${(err as Error).message}; handled ${JSON.stringify(handled)}, other ${JSON.stringify(handledOther)}, ` +
          `events ${JSON.stringify([...described(w), ...described(wOther)])}, depths Q=${await queueDepth(queue)} ` +
          `parked=${await queueDepth(parkedQueue)} unacked=${await queueUnacked(queue)}`,
        { cause: err },
      );
    }
    await sleep(300); // room for a wrong extra delivery to show

    // The parked copy: undecodable, naming the field, with the producer's bytes.
    const parked = await rawGetOne(raw, parkedQueue);
    const p = propertiesOf(parked);
    expect(p.headers['retry-reason']).toBe('undecodable');
    expect(String(p.headers['retry-last-error'])).toMatch(fieldName);
    expect(parked.header.includes(originalBytes)).toBe(true);
    expect(parked.body.toString()).toBe('hostile');
    expect(p.headers.tenant).toBe('acme');

    // The ledger: handled once each, or parked; nothing left over.
    expect(tally(handled)).toEqual(tally(published.filter((b) => b !== 'hostile')));
    expect(tally(handledOther)).toEqual(tally(publishedOther));
    expect(handled).not.toContain('hostile');
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(0);
    expect(await queueDepth(parkedQueue)).toBe(0);
    expect(await queueDepth(other)).toBe(0);

    expect(described(w)).toEqual([]);
    expect(described(wOther)).toEqual([]);
    expect(consumer.state).toBe('connected');
    expect(otherConsumer.state).toBe('connected');
  });
});

// ---------------------------------------------------------------------------

describe('B. headers that would outgrow a frame: the message still moves on at once, never loops', () => {
  const FRAME_MAX = 131_072;
  /** The largest frame payload the spec allows: frame_max counts the frame's own 8 bytes. */
  const MAX_PAYLOAD = FRAME_MAX - 8;
  /** Class, weight and body size before the property flags in a content header. */
  const HEADER_PREFIX = 12;

  /** Properties with a `huge-blob` header so large that the content header is exactly `payload` bytes. */
  function withBlobOfPayload(payload: number, base: Properties & { headers: Record<string, FieldValue> }): Properties {
    const empty = encodeProperties({ ...base, headers: { ...base.headers, 'huge-blob': new LongStr(Buffer.alloc(0)) } }).length;
    const blob = Buffer.alloc(payload - HEADER_PREFIX - empty, 'b');
    return { ...base, headers: { ...base.headers, 'huge-blob': new LongStr(blob) } };
  }

  it('the broker takes from a producer a content header of frame_max bytes (8 over the spec) and refuses one byte more', async () => {
    const queue = testQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    const base = { messageId: 'probe', deliveryMode: 2, headers: {} };

    const ok = await openRaw();
    expect(ok.frameMax).toBe(FRAME_MAX);
    await ok.publish('', queue, withBlobOfPayload(FRAME_MAX, base), Buffer.from('x'), { mandatory: true });
    expect(await queueDepth(queue)).toBe(1);

    const refused = await openRaw();
    const err = await refused.publish('', queue, withBlobOfPayload(FRAME_MAX + 1, base), Buffer.from('x')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmqpError);
    expect(err).toMatchObject({ scope: 'connection', code: 501 });
    expect((err as AmqpError).text).toContain('frame_too_large');
  });

  it('125 kB of user headers and a 6 kB error: to Q.retry.1m once, user headers whole, our own cut to fit', async () => {
    const message = `carrier said: ${'503 Service Unavailable; '.repeat(250)}`; // ~6 kB
    const { queue, consumer, calls, w } = await alwaysFailing(message);
    const raw = await openRaw();
    const blob = 'h'.repeat(125_000);
    await raw.publish('', queue, { messageId: 'big-1', deliveryMode: 2, headers: { 'huge-blob': blob, tenant: 'acme' } }, Buffer.from('{"id":1}'), {
      mandatory: true,
    });

    const retryQueue = retryQueueName(queue, '1m');
    let copy: GetResult;
    try {
      copy = await rawGetOne(raw, retryQueue);
    } catch (err) {
      throw new Error(
        `${(err as Error).message}; handler calls ${calls()}, events ${JSON.stringify(described(w))}, parked ${await queueDepth(parkedQueueName(queue))}`,
        { cause: err },
      );
    }
    await sleep(500); // a loop would call the handler again by now
    const p = propertiesOf(copy);

    expect(calls()).toBe(1);
    expect(copy.body.toString()).toBe('{"id":1}');
    expect(p.messageId).toBe('big-1');
    expect(p.headers['huge-blob']).toBe(blob);
    expect(p.headers.tenant).toBe('acme');
    expect(p.headers['retry-attempt']).toBe(1);
    expect(p.headers['retry-reason']).toBe('retry');
    const lastError = p.headers['retry-last-error'];
    const stack = p.headers['retry-error-stack'];
    if (typeof lastError !== 'string' || typeof stack !== 'string') {
      throw new Error(`retry-last-error / retry-error-stack are not strings: ${typeof lastError}, ${typeof stack}`);
    }
    expect(lastError.length).toBeGreaterThan(0);
    for (const [header, full] of [
      [lastError, message],
      [stack, `Error: ${message}`],
    ]) {
      // Whole, or a prefix (with or without a marker saying how much was cut).
      const cutAt = header.lastIndexOf('\n…[cut');
      expect(full.startsWith(cutAt >= 0 ? header.slice(0, cutAt) : header) || header.startsWith(full)).toBe(true);
    }
    expect(copy.header.length).toBeLessThanOrEqual(MAX_PAYLOAD);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(described(w)).toEqual([]);
    expect(consumer.state).toBe('connected');
  });

  it('user headers as large as a frame allows: parked as headers-too-large, naming the dropped header', async () => {
    const { queue, consumer, calls, w } = await alwaysFailing('carrier down');
    const raw = await openRaw();
    const props = withBlobOfPayload(MAX_PAYLOAD, { messageId: 'big-2', deliveryMode: 2, headers: { tenant: 'acme' } });
    const blobBytes = ((props.headers as Record<string, FieldValue>)['huge-blob'] as LongStr).bytes.length;
    expect(blobBytes).toBeGreaterThan(130_700);
    await raw.publish('', queue, props, Buffer.from('{"id":2}'), { mandatory: true });

    const parkedQueue = parkedQueueName(queue);
    let parked: GetResult;
    try {
      parked = await rawGetOne(raw, parkedQueue);
    } catch (err) {
      throw new Error(
        `${(err as Error).message}; handler calls ${calls()}, events ${JSON.stringify(described(w))}, ` +
          `retry queue ${await queueDepth(retryQueueName(queue, '1m'))}, Q ${await queueDepth(queue)}, unacked ${await queueUnacked(queue)}`,
        { cause: err },
      );
    }
    await sleep(500);
    const p = propertiesOf(parked);

    expect(calls()).toBe(1);
    expect(parked.body.toString()).toBe('{"id":2}');
    expect(p.messageId).toBe('big-2');
    expect(p.headers['retry-reason']).toBe('headers-too-large');
    const dropped = p.headers['retry-dropped-headers'];
    const droppedNames = Array.isArray(dropped)
      ? dropped.map(String)
      : String(dropped)
          .split(/[\s,]+/)
          .filter(Boolean);
    expect(droppedNames).toContain('huge-blob');
    expect('huge-blob' in p.headers).toBe(false);
    // Every user header is either kept as it was or named as dropped.
    if ('tenant' in p.headers) {
      expect(p.headers.tenant).toBe('acme');
      expect(droppedNames).not.toContain('tenant');
    } else {
      expect(droppedNames).toContain('tenant');
    }
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(0);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(described(w)).toEqual([]);
    expect(consumer.state).toBe('connected');
  });

  it("a content header in the broker's 8-byte tolerance (frame_max bytes): parked, other traffic undisturbed", async () => {
    // RabbitMQ takes it from the producer (see above) and delivers it in a frame 8 bytes over frame_max.
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const other = testQueue(delays);
    const rr = await connectClient();
    const handled: string[] = [];
    const handledOther: string[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        handled.push(msg.properties.messageId ?? '?');
        if (msg.properties.messageId === 'big-3') throw new Error('carrier down');
      }),
    );
    const otherConsumer = track(
      await rr.consume({ queue: other, prefetch: 1, onFailure: { delays } }, (msg: Message) => void handledOther.push(msg.text())),
    );
    const w = watch(consumer);
    const wOther = watch(otherConsumer);
    const raw = await openRaw();
    await raw.publish('', queue, withBlobOfPayload(FRAME_MAX, { messageId: 'big-3', deliveryMode: 2, headers: {} }), Buffer.from('{"id":3}'), {
      mandatory: true,
    });

    const parkedQueue = parkedQueueName(queue);
    let parked: GetResult;
    try {
      await rr.publish('', queue, 'after', { messageId: 'after-3' });
      await rr.publish('', other, 'other-after');
      parked = await rawGetOne(raw, parkedQueue);
      await waitFor(() => handled.includes('after-3') && handledOther.length === 1, 10_000, 'the other messages handled');
    } catch (err) {
      throw new Error(
        `${(err as Error).message}; handled ${JSON.stringify(tally(handled))}, other ${JSON.stringify(handledOther)}, ` +
          `events ${JSON.stringify([...described(w), ...described(wOther)])}, Q ${await queueDepth(queue)}, unacked ${await queueUnacked(queue)}`,
        { cause: err },
      );
    }
    await sleep(300);
    const p = propertiesOf(parked);
    expect(p.messageId).toBe('big-3');
    expect(['headers-too-large', 'undecodable']).toContain(p.headers['retry-reason']);
    expect(handled.filter((id) => id === 'big-3').length).toBeLessThanOrEqual(1);
    expect(tally(handled.filter((id) => id !== 'big-3'))).toEqual({ 'after-3': 1 });
    expect(handledOther).toEqual(['other-after']);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(described(w)).toEqual([]);
    expect(described(wOther)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------

describe("C. another user's user-id: the retry copy drops the property and keeps the name in a header", () => {
  const user = `rr-alice-${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');

  beforeAll(async () => {
    await rabbitmqctl(['add_user', user, password]);
    await rabbitmqctl(['set_permissions', '-p', '/', user, '.*', '.*', '.*']);
  }, 30_000);
  afterAll(async () => {
    await rabbitmqctl(['delete_user', user]);
  }, 30_000);

  it('alice: no user-id on the copy, retry-original-user-id names her; guest: user-id kept', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const seen: { messageId?: string; userId?: string }[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        seen.push({ messageId: msg.properties.messageId, userId: msg.properties.userId });
        throw new Error('carrier down');
      }),
    );
    const w = watch(consumer);
    await amqplibPublish(queue, Buffer.from('from alice'), { messageId: 'alice-1', userId: user }, brokerUrl({ user, password }));
    await amqplibPublish(queue, Buffer.from('from guest'), { messageId: 'guest-1', userId: 'guest' });

    const retryQueue = retryQueueName(queue, '1m');
    try {
      await waitFor(async () => (await queueDepth(retryQueue)) === 2, 15_000, `both messages in '${retryQueue}'`);
    } catch (err) {
      throw new Error(`${(err as Error).message}; handler saw ${JSON.stringify(seen)}, events ${JSON.stringify(described(w))}`, { cause: err });
    }
    await sleep(300);
    const copies = new Map<string, { userId?: string; headers: Record<string, unknown> }>();
    for (let i = 0; i < 2; i++) {
      const m = await getOne(retryQueue);
      if (m) copies.set(m.properties.messageId ?? '?', { userId: m.properties.userId, headers: m.headers });
    }

    expect(seen).toEqual([
      { messageId: 'alice-1', userId: user },
      { messageId: 'guest-1', userId: 'guest' },
    ]);
    expect(copies.get('alice-1')?.userId).toBeUndefined();
    expect(copies.get('alice-1')?.headers).toMatchObject({ 'retry-original-user-id': user, 'retry-attempt': 1 });
    expect(copies.get('guest-1')?.userId).toBe('guest');
    expect(copies.get('guest-1')?.headers['retry-attempt']).toBe(1);
    expect(copies.get('guest-1')?.headers['retry-original-user-id']).toBeUndefined();
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(described(w)).toEqual([]);
    expect(consumer.state).toBe('connected');
  });
});

// ---------------------------------------------------------------------------

describe('D. user headers named retry-* survive a retry and a park unchanged; our own are replaced', () => {
  it('retry-after, retry-policy and retry-count come through both hops', async () => {
    const delays: Delay[] = ['200ms'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const userHeaders = { 'retry-after': '30', 'retry-policy': 'fast', 'retry-count': 3 };
    const seen: { attempt: number; headers: Record<string, unknown> }[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        seen.push({ attempt: msg.attempt, headers: msg.headers });
        throw new Error(msg.attempt === 0 ? 'first failure' : 'second failure');
      }),
    );
    const w = watch(consumer);
    await rr.publish('', queue, { id: 4 }, { messageId: 'd-1', headers: userHeaders });

    const raw = await openRaw();
    const parked = propertiesOf(await rawGetOne(raw, parkedQueueName(queue)));

    expect(seen.map((s) => s.attempt)).toEqual([0, 1]);
    for (const s of seen) expect(s.headers).toMatchObject(userHeaders);
    expect(seen[1].headers).toMatchObject({ 'retry-attempt': 1, 'retry-last-error': 'first failure' });
    // A retried copy carries only what counting and parking need: no retry-reason of its own.
    expect(seen[1].headers['retry-reason']).toBeUndefined();
    expect(parked.headers).toMatchObject({
      ...userHeaders,
      'retry-attempt': 1,
      'retry-reason': 'exhausted',
      'retry-last-error': 'second failure',
      'retry-first-failed-at': seen[1].headers['retry-first-failed-at'],
    });
    expect(described(w)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------

describe('E. connection errors that explain', () => {
  it('an HTTP server at the port: CONNECTION, saying the server did not answer as an AMQP 0-9-1 broker', async () => {
    const server = http.createServer((_req, res) => res.end('hello from http\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const started = Date.now();
    try {
      const err = await RabbitRetry.connect({ url: `amqp://guest:guest@127.0.0.1:${port}` }).then(
        async (rr) => {
          await rr.close();
          return new Error('connected to an HTTP server');
        },
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: 'CONNECTION' });
      const message = (err as RabbitRetryError).message;
      expect(message).toContain('AMQP');
      expect(message).toContain('did not answer as an AMQP 0-9-1 broker');
      expect(message).toContain(String(port));
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("a URL with a trailing slash connects to vhost '/' and consumes", async () => {
    const queue = testQueue(['1m']);
    const rr = await connectClient({ url: `${brokerUrl()}/` });
    const handled: string[] = [];
    track(await rr.consume({ queue, onFailure: { delays: ['1m'] } }, (msg: Message) => void handled.push(msg.text())));
    expect(await queueExists(queue)).toBe(true); // amqplib looks in vhost '/'
    await rr.publish('', queue, 'via trailing slash');
    await waitFor(() => handled.length === 1, 10_000, 'the message handled');
    expect(handled).toEqual(['via trailing slash']);
  });
});

// ---------------------------------------------------------------------------

describe('F. other legal oddities go where the handler decides, without a disconnect', () => {
  it('a 255-byte routing key through a topic binding #', async () => {
    const delays: Delay[] = ['200ms'];
    const queue = testQueue(delays);
    const exchange = testExchange();
    const rr = await connectClient();
    const key = `order.${'k'.repeat(249)}`;
    expect(Buffer.byteLength(key)).toBe(255);
    const seen: { attempt: number; routingKey: string; original: unknown }[] = [];
    const consumer = track(
      await rr.consume({ queue, exchange, routingKey: '#', prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        seen.push({ attempt: msg.attempt, routingKey: msg.routingKey, original: msg.headers['retry-original-routing-key'] });
        if (msg.attempt === 0) throw new Error('once');
      }),
    );
    const w = watch(consumer);
    await rr.publish(exchange, key, 'long key', { messageId: 'rk-255' });
    await waitFor(() => seen.length === 2, 10_000, 'the retry handled');
    await sleep(200);
    expect(seen).toEqual([
      { attempt: 0, routingKey: key, original: undefined },
      { attempt: 1, routingKey: queue, original: key },
    ]);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    expect(described(w)).toEqual([]);
  });

  it('an empty body and an empty routing key through a fanout exchange', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const exchange = testExchange();
    const rr = await connectClient();
    const seen: { id?: string; bodyLength: number; routingKey: string; exchange: string }[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        seen.push({ id: msg.properties.messageId, bodyLength: msg.body.length, routingKey: msg.routingKey, exchange: msg.exchange });
        if (msg.properties.messageId === 'empty-park') throw new NonRetryableError('nothing to do');
      }),
    );
    const w = watch(consumer);
    await withChannel(async (ch) => {
      await ch.assertExchange(exchange, 'fanout', { durable: false });
      await ch.bindQueue(queue, exchange, '');
    });
    const raw = await openRaw();
    await raw.publish(exchange, '', { messageId: 'empty-ok' }, Buffer.alloc(0), { mandatory: true });
    await raw.publish(exchange, '', { messageId: 'empty-park' }, Buffer.alloc(0), { mandatory: true });

    const parked = await rawGetOne(raw, parkedQueueName(queue));
    const p = propertiesOf(parked);
    expect(parked.body.length).toBe(0);
    expect(p.messageId).toBe('empty-park');
    expect(p.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-original-exchange': exchange, 'retry-original-routing-key': '' });
    expect(seen).toEqual([
      { id: 'empty-ok', bodyLength: 0, routingKey: '', exchange },
      { id: 'empty-park', bodyLength: 0, routingKey: '', exchange },
    ]);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueUnacked(queue)).toBe(0);
    expect(described(w)).toEqual([]);
  });

  it('byte arrays, voids, nested arrays and tables, a non-UTF-8 long string: the same bytes on the retry copy', async () => {
    const { queue, calls, w } = await alwaysFailing('retry me');
    const headers: [string, FieldValue][] = [
      ['bytes', Buffer.from([0, 1, 0x7f, 0x80, 0xff])],
      ['emptyBytes', Buffer.alloc(0)],
      ['nothing', null],
      ['nestedArrays', [[1, [2, [null, 'deep']]], [], [Buffer.from([9])]]],
      [
        'tableInArray',
        [
          new Table([
            ['k', 'v'],
            ['n', 5_000_000_000n],
          ]),
        ],
      ],
      [
        'nested',
        new Table([
          [
            'inner',
            new Table([
              ['flag', true],
              ['ratio', 0.25],
            ]),
          ],
        ]),
      ],
      ['latin1Value', new LongStr(latin1('café'))],
    ];
    const raw = await openRaw();
    await raw.publish('', queue, { messageId: 'typed-1', deliveryMode: 2, headers: new Table(headers) }, Buffer.from('typed'), { mandatory: true });

    const copy = await rawGetOne(raw, retryQueueName(queue, '1m'));
    await sleep(300);
    expect(calls()).toBe(1);
    for (const [key, value] of headers) {
      const entry = Buffer.concat([shortStr(key), encodeValue(value)]);
      expect({ key, kept: copy.properties.includes(entry) }).toEqual({ key, kept: true });
    }
    expect(propertiesOf(copy).headers['retry-attempt']).toBe(1);
    expect(await queueDepth(queue)).toBe(0);
    expect(described(w)).toEqual([]);
  });

  it('timestamp 0 and priority 255 reach the handler and the retry copy', async () => {
    const delays: Delay[] = ['1m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const seen: { timestamp?: number; priority?: number }[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays } }, (msg: Message) => {
        seen.push({ timestamp: msg.properties.timestamp, priority: msg.properties.priority });
        throw new Error('retry me');
      }),
    );
    const w = watch(consumer);
    const raw = await openRaw();
    await raw.publish('', queue, { messageId: 'ts-0', deliveryMode: 2, timestamp: 0, priority: 255 }, Buffer.from('edge'), { mandatory: true });

    const copy = await rawGetOne(raw, retryQueueName(queue, '1m'));
    const p = propertiesOf(copy);
    expect(seen).toEqual([{ timestamp: 0, priority: 255 }]);
    expect(p.timestamp).toBe(0);
    expect(p.priority).toBe(255);
    expect(p.messageId).toBe('ts-0');
    expect(p.headers['retry-attempt']).toBe(1);
    expect(described(w)).toEqual([]);
  });
});
