/**
 * A batch's `errorHandler` (golevelup's `batchOptions.errorHandler`) against the
 * real broker: where each message of a failed batch goes when the handler acks
 * it, nacks it with requeue (the retry queue), nacks or rejects it without
 * (the parked queue), leaves it unsettled, or throws.
 */
import 'reflect-metadata';

import { Injectable } from '@nestjs/common';
import type { Channel, ConsumeMessage } from 'amqplib';

import { type Delay, RabbitRetry, parkedQueueName, retryQueueName } from '../lib';
import { type BatchErrorHandler, RabbitRetryModule, RabbitSubscribe } from '../lib/nestjs';
import { AMQP_URL, cleanup, closeAmqp, drain, queueDepth, queueUnacked, testQueue, waitFor } from './helpers';
import { boot, closeApps } from './nest-boot';

// An hour's delay: a message sent to the retry queue stays there to be counted.
const DELAYS: readonly Delay[] = ['1h'];

afterEach(async () => {
  await closeApps();
  await cleanup();
});
afterAll(closeAmqp);

/** Boots a module whose one provider consumes `queue` in batches of `size`, its method always throwing `carrier 503`. */
async function bootBatch(queue: string, size: number, errorHandler: BatchErrorHandler) {
  const calls: number[][] = [];

  @Injectable()
  class Shipments {
    @RabbitSubscribe({ queue, batchOptions: { size, timeout: 5_000, errorHandler } })
    async ship(bodies: { n: number }[]): Promise<void> {
      calls.push(bodies.map((b) => b.n));
      throw new Error('carrier 503');
    }
  }

  const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, defaultOnFailure: { delays: DELAYS } })], providers: [Shipments] });
  return { rr: app.get(RabbitRetry), calls };
}

/** The `n` of each message's JSON body, sorted. */
function ns(msgs: { content: Buffer }[]): number[] {
  return msgs.map((m) => (JSON.parse(m.content.toString()) as { n: number }).n).sort((a, b) => a - b);
}

/** Publishes `{ n }` for each n, with message id `m-<n>`. */
async function publish(rr: RabbitRetry, queue: string, n: readonly number[]): Promise<void> {
  for (const i of n) await rr.publish('', queue, { n: i }, { messageId: `m-${i}` });
}

/** Waits until the work queue is empty and nothing is unacked: every message of the batch is settled. */
async function settled(queue: string): Promise<void> {
  await waitFor(async () => (await queueDepth(queue)) === 0 && (await queueUnacked(queue)) === 0, 10_000, `'${queue}' settled`);
}

describe('batchOptions.errorHandler', () => {
  test('ack settles a message, nack with requeue sends it to the retry queue, nack without parks it, one left unsettled takes the failure path', async () => {
    const queue = testQueue(DELAYS);
    const handled: { ns: number[]; error: unknown; contents: string[]; routingKeys: string[] }[] = [];
    const { rr, calls } = await bootBatch(queue, 4, (channel, msgs, error) => {
      handled.push({ ns: ns(msgs), error, contents: msgs.map((m) => m.content.toString()), routingKeys: msgs.map((m) => m.fields.routingKey) });
      for (const msg of msgs) {
        const { n } = JSON.parse(msg.content.toString()) as { n: number };
        if (n === 1) channel.ack(msg);
        if (n === 2) channel.nack(msg, false, true);
        if (n === 3) channel.nack(msg, false, false);
        // n === 4: left unsettled.
      }
    });
    await publish(rr, queue, [1, 2, 3, 4]);
    await waitFor(
      async () => (await queueDepth(parkedQueueName(queue))) === 1 && (await queueDepth(retryQueueName(queue, '1h'))) === 2,
      10_000,
      'the verdicts',
    );
    await settled(queue);

    expect(calls).toEqual([[1, 2, 3, 4]]);
    expect(handled).toHaveLength(1);
    expect(handled[0].ns).toEqual([1, 2, 3, 4]);
    expect(handled[0].error).toEqual(new Error('carrier 503'));
    expect(handled[0].contents).toEqual(['{"n":1}', '{"n":2}', '{"n":3}', '{"n":4}']);
    expect(handled[0].routingKeys).toEqual([queue, queue, queue, queue]);

    const retried = await drain(retryQueueName(queue, '1h'));
    expect(ns(retried)).toEqual([2, 4]);
    for (const r of retried) expect(r.headers).toMatchObject({ 'retry-attempt': 1, 'retry-last-error': 'carrier 503' });
    const parked = await drain(parkedQueueName(queue));
    expect(ns(parked)).toEqual([3]);
    expect(parked[0].properties.messageId).toBe('m-3');
    expect(parked[0].headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-attempt': 0, 'retry-queue': queue });
    expect(parked[0].headers['retry-last-error']).toContain('the batch error handler rejected the message without requeue');
    // The acked one went nowhere.
    expect(await queueDepth(queue)).toBe(0);
  });

  test("reject(msg, true) retries and reject(msg, false) parks; golevelup's handler typed with amqplib's Channel parks them all", async () => {
    const queue = testQueue(DELAYS);
    const { rr } = await bootBatch(queue, 2, (channel, msgs) => {
      channel.reject(msgs[0], true);
      channel.reject(msgs[1], false);
    });
    await publish(rr, queue, [1, 2]);
    await waitFor(
      async () => (await queueDepth(parkedQueueName(queue))) === 1 && (await queueDepth(retryQueueName(queue, '1h'))) === 1,
      10_000,
      'the verdicts',
    );
    await settled(queue);
    expect(ns(await drain(retryQueueName(queue, '1h')))).toEqual([1]);
    expect(ns(await drain(parkedQueueName(queue)))).toEqual([2]);

    // golevelup's defaultNackErrorHandler, as a project writes it with amqplib's types.
    const other = testQueue(DELAYS);
    const nackAll = (channel: Channel, msg: ConsumeMessage[]) => {
      for (const m of Array.isArray(msg) ? msg : [msg]) {
        channel.nack(m, false, false);
      }
    };
    const second = await bootBatch(other, 3, nackAll);
    await publish(second.rr, other, [7, 8, 9]);
    await waitFor(async () => (await queueDepth(parkedQueueName(other))) === 3, 10_000, 'all three parked');
    await settled(other);
    expect(await queueDepth(retryQueueName(other, '1h'))).toBe(0);
    const parked = await drain(parkedQueueName(other));
    expect(ns(parked)).toEqual([7, 8, 9]);
    for (const p of parked) expect(p.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-queue': other });
  });

  test('an errorHandler that throws sends every message of the batch the failure path with its error; one that acks all leaves nothing anywhere', async () => {
    const queue = testQueue(DELAYS);
    const { rr } = await bootBatch(queue, 2, () => {
      throw new Error('handler broke');
    });
    await publish(rr, queue, [1, 2]);
    await waitFor(async () => (await queueDepth(retryQueueName(queue, '1h'))) === 2, 10_000, 'both in the retry queue');
    await settled(queue);
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
    const retried = await drain(retryQueueName(queue, '1h'));
    expect(ns(retried)).toEqual([1, 2]);
    for (const r of retried) expect(r.headers).toMatchObject({ 'retry-last-error': 'handler broke' });

    const acked = testQueue(DELAYS);
    const second = await bootBatch(acked, 2, (channel, msgs) => {
      for (const m of msgs) channel.ack(m);
    });
    await publish(second.rr, acked, [5, 6]);
    await waitFor(() => second.calls.length === 1, 10_000, 'the batch');
    await settled(acked);
    expect(await queueDepth(retryQueueName(acked, '1h'))).toBe(0);
    expect(await queueDepth(parkedQueueName(acked))).toBe(0);
  });
});
