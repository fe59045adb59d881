/**
 * golevelup's `batchOptions` of `@RabbitSubscribe` against the real broker:
 * the method takes its messages in batches, and a batch that fails sends
 * each of its messages the failure path on its own, never requeued.
 */
import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { type Delay, Message, RabbitRetry } from '../lib';
import { Nack, RabbitRetryModule, RabbitRPC, RabbitSubscribe } from '../lib/nestjs';
import { AMQP_URL, cleanup, closeAmqp, getOne, queueDepth, queueUnacked, sleep, testQueue, waitFor } from './helpers';
import { boot, bootError, closeApps } from './nest-boot';

const DELAYS: readonly Delay[] = ['100ms'];

function rabbit(prefetch?: number) {
  return RabbitRetryModule.forRoot({ url: AMQP_URL, prefetch, defaultOnFailure: { delays: DELAYS } });
}

afterEach(async () => {
  await closeApps();
  await cleanup();
});
afterAll(closeAmqp);

/** Everything left in `queue`, each message's body and headers. */
async function drain(queue: string): Promise<{ body: unknown; headers: Record<string, unknown> }[]> {
  const out: { body: unknown; headers: Record<string, unknown> }[] = [];
  for (let m = await getOne(queue); m; m = await getOne(queue)) out.push({ body: JSON.parse(m.content.toString()) as unknown, headers: m.headers });
  return out;
}

describe('@RabbitSubscribe batchOptions', () => {
  test('a full batch comes at once, a partial one after the timeout; each call has the bodies, the messages and their headers; all are acked', async () => {
    const queue = testQueue(DELAYS);
    const calls: { bodies: unknown[]; msgs: Message[]; headers: unknown[] }[] = [];

    @Injectable()
    class Batches {
      @RabbitSubscribe({ queue, batchOptions: { size: 3, timeout: 300 } })
      async take(bodies: unknown[], msgs: Message[], headers: unknown[]): Promise<void> {
        calls.push({ bodies, msgs, headers });
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [Batches] });
    const rr = app.get(RabbitRetry);
    for (let i = 0; i < 4; i++) await rr.publish('', queue, { n: i }, { messageId: `m-${i}`, headers: { 'x-n': i } });
    await waitFor(() => calls.length === 1, 5_000, 'the full batch');
    expect(calls[0].bodies).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
    expect(calls[0].msgs.map((m) => m.properties.messageId)).toEqual(['m-0', 'm-1', 'm-2']);
    expect(calls[0].msgs[0]).toBeInstanceOf(Message);
    expect(calls[0].headers).toEqual([{ 'x-n': 0 }, { 'x-n': 1 }, { 'x-n': 2 }].map((h) => expect.objectContaining(h) as unknown));
    // The fourth waits for the timeout: no call before it.
    await sleep(150);
    expect(calls).toHaveLength(1);
    await waitFor(() => calls.length === 2, 5_000, 'the partial batch');
    expect(calls[1].bodies).toEqual([{ n: 3 }]);
    await waitFor(async () => (await queueUnacked(queue)) === 0 && (await queueDepth(queue)) === 0, 5_000, 'the acks');
    expect(await queueDepth(`${queue}.retry.100ms`)).toBe(0);
  });

  test('a batch whose method throws sends each message the failure path on its own: a retry, then the parked queue with the error', async () => {
    const queue = testQueue(DELAYS);
    const calls: { n: number; attempt: number }[][] = [];

    @Injectable()
    class Batches {
      @RabbitSubscribe({ queue, batchOptions: { size: 2, timeout: 100 } })
      async take(bodies: { n: number }[], msgs: Message[]): Promise<void> {
        calls.push(bodies.map((b, i) => ({ n: b.n, attempt: msgs[i].attempt })));
        throw new Error('carrier 503');
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [Batches] });
    const rr = app.get(RabbitRetry);
    await rr.publish('', queue, { n: 1 }, { messageId: 'm-1' });
    await rr.publish('', queue, { n: 2 }, { messageId: 'm-2' });
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 2, 10_000, 'both parked');

    // Each message: its first attempt, then its retry (in a batch of whatever came back with it).
    const seen = calls.flat();
    expect(seen.filter((c) => c.attempt === 0).map((c) => c.n)).toEqual([1, 2]);
    expect(
      seen
        .filter((c) => c.attempt === 1)
        .map((c) => c.n)
        .sort(),
    ).toEqual([1, 2]);
    const parked = await drain(`${queue}.parked`);
    expect(parked.map((p) => p.body).sort((a, b) => (a as { n: number }).n - (b as { n: number }).n)).toEqual([{ n: 1 }, { n: 2 }]);
    for (const p of parked) {
      expect(p.headers).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 1, 'retry-last-error': 'carrier 503' });
    }
    expect(await queueDepth(queue)).toBe(0);
  });

  test('a message whose body cannot be read parks alone; the rest of its batch is handled', async () => {
    const queue = testQueue(DELAYS);
    const calls: unknown[][] = [];

    @Injectable()
    class Batches {
      @RabbitSubscribe({ queue, batchOptions: { size: 2, timeout: 200 } })
      async take(bodies: unknown[]): Promise<void> {
        calls.push(bodies);
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [Batches] });
    const rr = app.get(RabbitRetry);
    await rr.publish('', queue, Buffer.from('not json'), { contentType: 'application/json', messageId: 'bad' });
    await rr.publish('', queue, { n: 1 }, { messageId: 'm-1' });
    await rr.publish('', queue, { n: 2 }, { messageId: 'm-2' });
    await waitFor(async () => calls.length === 1 && (await queueDepth(`${queue}.parked`)) === 1, 5_000, 'one batch and one parked');

    expect(calls).toEqual([[{ n: 1 }, { n: 2 }]]);
    const parked = await getOne(`${queue}.parked`);
    expect(parked?.content.toString()).toBe('not json');
    expect(parked?.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-attempt': 0 });
    await waitFor(async () => (await queueUnacked(queue)) === 0, 5_000, 'the acks');
  });

  test('new Nack(true) sends every message of the batch to the retry queue, new Nack() parks them all', async () => {
    const queue = testQueue(DELAYS);
    const attempts: number[] = [];

    @Injectable()
    class Batches {
      @RabbitSubscribe({ queue, batchOptions: { size: 2, timeout: 100 } })
      async take(_bodies: unknown[], msgs: Message[]): Promise<Nack> {
        attempts.push(...msgs.map((m) => m.attempt));
        return new Nack(msgs[0].attempt === 0);
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [Batches] });
    const rr = app.get(RabbitRetry);
    await rr.publish('', queue, { n: 1 }, { messageId: 'm-1' });
    await rr.publish('', queue, { n: 2 }, { messageId: 'm-2' });
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 2, 10_000, 'both parked');
    expect(attempts).toEqual([0, 0, 1, 1]);
    for (const p of await drain(`${queue}.parked`)) expect(p.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-attempt': 1 });
  });

  test("the consumer's prefetch is at least a full batch, so that one can fill", async () => {
    const queue = testQueue(DELAYS);
    const sizes: number[] = [];

    @Injectable()
    class Batches {
      @RabbitSubscribe({ queue, batchOptions: { size: 5, timeout: 5_000 } })
      async take(bodies: unknown[]): Promise<void> {
        sizes.push(bodies.length);
      }
    }

    // The module's prefetch of 2 alone would never let a batch of 5 fill before the timeout.
    const app = await boot({ imports: [rabbit(2)], providers: [Batches] });
    const rr = app.get(RabbitRetry);
    for (let i = 0; i < 5; i++) await rr.publish('', queue, { n: i });
    await waitFor(() => sizes.length === 1, 3_000, 'a full batch before the timeout');
    expect(sizes).toEqual([5]);
  });

  test('errorBehavior is refused (errorHandler is taken); a wrong size is INVALID_OPTIONS; @RabbitRPC takes no batches', async () => {
    const queue = testQueue(DELAYS);

    @Injectable()
    class WithErrorHandler {
      @RabbitSubscribe({ queue, errorBehavior: 'nack', batchOptions: { size: 2, errorHandler: () => undefined } })
      async take(): Promise<void> {}
    }
    const refused = await bootError({ imports: [rabbit()], providers: [WithErrorHandler] });
    expect(refused).toMatchObject({ code: 'UNSUPPORTED_OPTION', option: 'errorBehavior' });
    expect(refused.message).toContain('errorBehavior');

    @Injectable()
    class WrongSize {
      @RabbitSubscribe({ queue, batchOptions: { size: 0 } })
      async take(): Promise<void> {}
    }
    const wrong = await bootError({ imports: [rabbit()], providers: [WrongSize] });
    expect(wrong).toMatchObject({ code: 'INVALID_OPTIONS' });
    expect(wrong.message).toContain('batchOptions.size must be a whole number of messages from 1 to 65535, got 0');

    @Injectable()
    class Rpc {
      @RabbitRPC({ exchange: 'amq.direct', routingKey: 'rpc-batch', queue, batchOptions: { size: 2 } })
      async answer(): Promise<number> {
        return 1;
      }
    }
    const rpc = await bootError({ imports: [rabbit()], providers: [Rpc] });
    expect(rpc).toMatchObject({ code: 'UNSUPPORTED_OPTION', option: 'batchOptions' });
  });
});
