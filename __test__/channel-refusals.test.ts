/**
 * One publish, one outcome: RabbitMQ refuses a publish for its content (a
 * missing or internal exchange, a property, a header, a size) by closing the
 * channel, and with it every publish in flight there. Against the real broker:
 * each refusal is told before sending and costs only its own publish or
 * request; a refusal nobody could foresee is charged to the publish the broker
 * names, the others learning only that their outcome is unknown, never that
 * they were refused. Declarations the broker refuses get codes that say why,
 * and a copy of a failed message never spreads to the queues its producer's
 * `CC` header named.
 */
import 'reflect-metadata';

import { Injectable, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { type Message, RabbitRetry, type RabbitRetryError, RemoteError } from '../lib';
import { RabbitRPC, RabbitRetryModule } from '../lib/nestjs';
import {
  AMQP_URL,
  brokerVersion,
  cleanup,
  closeAmqp,
  collectUnhandledRejections,
  connectClient,
  deleteQueues,
  drainAll,
  durableQueue,
  it43,
  queueDepth,
  sleep,
  testExchange,
  testQueue,
  track,
  uniqueName,
  waitFor,
  withChannel,
} from './helpers';

const unhandled = collectUnhandledRejections();
const apps: INestApplication[] = [];
const rpcQueues: string[] = [];

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
  for (const q of rpcQueues.splice(0)) await deleteQueues(q);
  await cleanup();
  expect(unhandled).toEqual([]);
});
afterAll(closeAmqp);

/** How each of `sends` ended: resolved, or rejected with its code. */
async function outcomes(sends: Promise<unknown>[]): Promise<string[]> {
  const settled = await Promise.allSettled(sends);
  return settled.map((s) => (s.status === 'fulfilled' ? 'ok' : String((s.reason as { code?: unknown }).code)));
}

/** The broker's max_message_size by default for the version under test. */
async function defaultMaxMessageSize(): Promise<number> {
  const [major] = await brokerVersion();
  return major >= 4 ? 16 * 1024 * 1024 : 128 * 1024 * 1024;
}

describe('rr.publish: one publish, one outcome', () => {
  it('a publish to a missing exchange among 200 in flight fails alone, UNROUTABLE; the others are confirmed and arrive once', async () => {
    const rr = await connectClient();
    const q = await durableQueue();
    const missing = uniqueName('rr-test-missing');
    const sends = Array.from({ length: 200 }, (_, i) =>
      i === 77 ? rr.publish(missing, 'k', 'lost') : rr.publish('', q, `m${i}`, { messageId: `m${i}` }),
    );
    const ends = await outcomes(sends);
    expect(ends[77]).toBe('UNROUTABLE');
    await expect(sends[77]).rejects.toThrow(`no exchange '${missing}'`);
    expect(ends.filter((e, i) => i !== 77 && e !== 'ok')).toEqual([]);
    const got = await drainAll(q);
    expect(got).toHaveLength(199);
    expect(new Set(got.map((m) => m.properties.messageId)).size).toBe(199);
  });

  it('what the broker refuses for its content is refused before it is sent, PRECONDITION_FAILED, and costs no other publish', async () => {
    const rr = await connectClient();
    const q = await durableQueue();
    const max = await defaultMaxMessageSize();
    const bad: [string, Promise<void>, RegExp][] = [
      ['another user', rr.publish('', q, 'x', { userId: 'rr-somebody-else' }), /user-id 'rr-somebody-else'/],
      ['a negative expiration', rr.publish('', q, 'x', { expiration: '-1' }), /expiration '-1'/],
      ['a CC header that is no array', rr.publish('', q, 'x', { headers: { CC: 5 } }), /'CC' header/],
      ['a body over max_message_size', rr.publish('', q, Buffer.alloc(max + 1)), /max_message_size/],
    ];
    const good = Array.from({ length: 50 }, (_, i) => rr.publish('', q, `m${i}`, { messageId: `m${i}` }));
    for (const [what, sent, why] of bad) {
      const err = (await sent.catch((e: unknown) => e)) as RabbitRetryError;
      expect([what, err.code]).toEqual([what, 'PRECONDITION_FAILED']);
      expect(err.message).toMatch(why);
      expect(err.message).toContain('was not sent');
    }
    expect(await outcomes(good)).toEqual(good.map(() => 'ok'));
    expect((await drainAll(q)).map((m) => m.properties.messageId)).toEqual(good.map((_, i) => `m${i}`));
  });

  it('a refusal no check foresees (an internal exchange) is charged to its publish, ACCESS_REFUSED; the others are told only that their outcome is unknown', async () => {
    const rr = await connectClient();
    const q = await durableQueue();
    const internal = testExchange();
    await withChannel(async (ch) => {
      await ch.assertExchange(internal, 'topic', { internal: true, durable: false });
    });
    // Once alone: the exchange exists, so it goes out, and the broker closes the channel over it.
    const alone = (await rr.publish(internal, 'k', 'x').catch((e: unknown) => e)) as RabbitRetryError;
    expect(alone.code).toBe('ACCESS_REFUSED');
    expect(alone.message).toContain(`internal exchange '${internal}'`);

    // Among 100 in flight: the refused one is charged; every other is confirmed, or
    // told PUBLISH_FAILED (taken before the refusal, or dropped after it): never refused.
    const sends = Array.from({ length: 100 }, (_, i) =>
      i === 50 ? rr.publish(internal, 'k', 'refused') : rr.publish('', q, `m${i}`, { messageId: `m${i}` }),
    );
    const ends = await outcomes(sends);
    expect(ends[50]).toBe('ACCESS_REFUSED');
    const others = ends.filter((_, i) => i !== 50);
    expect(others.filter((e) => e !== 'ok' && e !== 'PUBLISH_FAILED')).toEqual([]);
    const arrived = new Set((await drainAll(q)).map((m) => m.properties.messageId));
    // A confirmed publish arrived; nothing arrived twice.
    ends.forEach((e, i) => {
      if (i !== 50 && e === 'ok') expect(arrived.has(`m${i}`)).toBe(true);
    });
    // The client publishes on: a new channel.
    await rr.publish('', q, 'after');
    expect((await drainAll(q)).map((m) => m.content.toString())).toEqual(['after']);
  });

  it('an exchange deleted after its first publish: the next publish to it fails UNROUTABLE, and once declared again it is found', async () => {
    const rr = await connectClient();
    const q = await durableQueue();
    const ex = testExchange();
    await rr.declareExchange(ex, 'direct');
    await rr.bindQueue(q, ex, 'k');
    await rr.publish(ex, 'k', 'one');
    await withChannel(async (ch) => {
      await ch.deleteExchange(ex);
    });
    await expect(rr.publish(ex, 'k', 'two')).rejects.toMatchObject({ code: 'UNROUTABLE' });
    await rr.declareExchange(ex, 'direct');
    await rr.bindQueue(q, ex, 'k');
    await rr.publish(ex, 'k', 'three');
    expect((await drainAll(q)).map((m) => m.content.toString())).toEqual(['one', 'three']);
  });
});

describe('requests: a missing exchange fails its request alone', () => {
  /** A started application with one @RabbitRPC handler on a queue of its own. */
  async function rpcApp(handle: (payload: unknown, msg: Message) => unknown) {
    const queue = uniqueName('rr-test-rpc');
    rpcQueues.push(queue);
    @Injectable()
    class Rpc {
      @RabbitRPC({ queue, prefetch: 20 })
      handle(payload: unknown, msg: Message): unknown {
        return handle(payload, msg);
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })],
      providers: [Rpc],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    apps.push(app);
    await app.init();
    return { queue, rr: app.get(RabbitRetry) };
  }

  it('UNROUTABLE for it; the requests waiting beside it get their replies, each handled once', async () => {
    const handled: number[] = [];
    const { queue, rr } = await rpcApp(async (payload) => {
      const { n } = payload as { n: number };
      handled.push(n);
      await sleep(100);
      return { n };
    });
    const missing = uniqueName('rr-test-missing');
    const waiting = Array.from({ length: 20 }, (_, n) => rr.request({ routingKey: queue, payload: { n } }));
    await sleep(20);
    const lost = await rr.request({ exchange: missing, routingKey: 'k', payload: {} }).catch((e: unknown) => e);
    expect(lost).toMatchObject({ code: 'UNROUTABLE' });
    expect((lost as Error).message).toContain(`no exchange '${missing}'`);
    expect(await Promise.all(waiting)).toEqual(Array.from({ length: 20 }, (_, n) => ({ n })));
    expect(handled.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, n) => n));
    await expect(rr.request({ routingKey: queue, payload: { n: 99 } })).resolves.toEqual({ n: 99 });
  });

  it43('a reply the broker refuses (over max_message_size) answers its caller at once with REPLY_REFUSED, and the request parks', async () => {
    const max = await defaultMaxMessageSize();
    const { queue, rr } = await rpcApp(() => Buffer.alloc(max + 1));
    const started = Date.now();
    const err = await rr.request({ routingKey: queue, payload: {}, timeout: 20_000 }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(err).toBeInstanceOf(RemoteError);
    expect(err).toMatchObject({ remoteName: 'ReplyRefusedError', remoteCode: 'REPLY_REFUSED' });
    expect((err as Error).message).toContain('max_message_size');
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'the request parked');
    const [parked] = await drainAll(`${queue}.parked`);
    expect(parked.properties.headers?.['retry-reason']).toBe('reply-refused');
  });
});

describe('declarations the broker refuses are coded for what happened', () => {
  it('a reserved amq. name: ACCESS_REFUSED; a binding to a missing exchange: NOT_FOUND; neither is CONNECTION', async () => {
    const rr = await connectClient();
    const q = await durableQueue();
    const reserved = await rr.declareQueue(`amq.${uniqueName('x')}`).catch((e: unknown) => e);
    expect(reserved).toMatchObject({ code: 'ACCESS_REFUSED' });
    expect((reserved as Error).message).toContain('reserved prefix');
    const missing = uniqueName('rr-test-missing');
    const bound = await rr.bindQueue(q, missing, 'k').catch((e: unknown) => e);
    expect(bound).toMatchObject({ code: 'NOT_FOUND' });
    expect((bound as Error).message).toContain(`no exchange '${missing}'`);
    // The client is fine: each refusal closed only a channel of its own.
    await rr.publish('', q, 'still here');
    expect(await queueDepth(q)).toBe(1);
  });

  it('an exchange type the broker cannot know is refused before it is sent; a plugin type it lacks is refused without closing the connection', async () => {
    const rr = await connectClient();
    const q = await durableQueue();
    const ex = testExchange();
    await expect(rr.declareExchange(ex, 'weird')).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining("'weird'") });
    const plugin = await rr.declareExchange(ex, 'x-no-such-plugin').catch((e: unknown) => e);
    expect(plugin).toMatchObject({ code: 'INVALID_OPTIONS' });
    expect((plugin as Error).message).toContain('x-no-such-plugin');
    // The connection lives: a consumer started before still takes messages, and a publish goes.
    const got: string[] = [];
    const work = testQueue();
    track(await rr.consume({ queue: work }, (msg) => void got.push(msg.text())));
    await expect(rr.declareExchange(ex, 'x-no-such-plugin')).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
    await rr.publish('', work, 'after');
    await rr.publish('', q, 'after');
    await waitFor(() => got.length === 1, 5_000, 'the consumer to take a message');
    expect(await queueDepth(q)).toBe(1);
  });

  it("declareQueue('') is refused: the broker would keep a durable queue under a name nobody asked for", async () => {
    const rr = await connectClient();
    await expect(rr.declareQueue('')).rejects.toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('a queue needs a name') });
  });
});

describe('a copy never spreads to the queues a CC header named', () => {
  it("a failed message's retried and parked copies reach only the retry and parked queues", async () => {
    const rr = await connectClient();
    const queue = testQueue(['100ms']);
    const audit = await durableQueue();
    let calls = 0;
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['100ms'] } }, () => {
        calls++;
        throw new Error('carrier 503');
      }),
    );
    await rr.publish('', queue, 'order 48213', { headers: { CC: [audit] } });
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'parked');
    expect(calls).toBe(2);
    expect(consumer.stats().parked).toBe(1);
    // The producer's publish reached the audit queue once; no copy of ours did.
    const audited = await drainAll(audit);
    expect(audited.map((m) => m.content.toString())).toEqual(['order 48213']);
    const [parked] = await drainAll(`${queue}.parked`);
    expect(parked.properties.headers?.CC).toBeUndefined();
  });
});
