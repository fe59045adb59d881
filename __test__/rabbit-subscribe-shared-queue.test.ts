/**
 * `@RabbitSubscribe` handlers that share a queue, each bound with keys of its
 * own (golevelup's competing consumers): one consumer, and each message goes
 * to the handler its key was bound for.
 */
import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { type Delay, RabbitRetry } from '../lib';
import { RabbitRetryModule, RabbitSubscribe } from '../lib/nestjs';
import { AMQP_URL, cleanup, closeAmqp, sleep, testExchange, testQueue, topologyDepths, waitFor } from './helpers';
import { boot, closeApps } from './nest-boot';

const DELAYS: readonly Delay[] = ['100ms', '200ms'];

afterEach(async () => {
  await closeApps();
  await cleanup();
});
afterAll(closeAmqp);

describe('@RabbitSubscribe: handlers that share a queue', () => {
  test('handlers of one queue, each bound with keys of its own, share its consumer: a message goes to the handler its key was bound for, one sent to the queue directly to each in turn', async () => {
    const exchange = testExchange();
    const queue = testQueue(DELAYS);
    const seen: Record<string, unknown[]> = { strict: [], lenient: [] };

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ exchange, routingKey: ['orders.created', 'orders.paid'], queue })
      async strictHandler(msg: unknown): Promise<void> {
        seen.strict.push(msg);
      }

      @RabbitSubscribe({ exchange, routingKey: 'orders.raw', queue, allowNonJsonMessages: true })
      async lenientHandler(msg: unknown): Promise<void> {
        seen.lenient.push(msg);
      }
    }

    const app = await boot({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, defaultOnFailure: { delays: DELAYS } })],
      providers: [MessagingService],
    });
    const rr = app.get(RabbitRetry);
    for (let i = 0; i < 3; i++) {
      await rr.publish(exchange, 'orders.raw', Buffer.from(`raw ${i}`));
      await rr.publish(exchange, 'orders.created', { created: i });
    }
    await rr.publish(exchange, 'orders.raw', Buffer.alloc(0));
    await rr.publish(exchange, 'orders.paid', { paid: 1 });
    for (let i = 0; i < 2; i++) await rr.publish('', queue, { direct: i });
    await waitFor(() => seen.strict.length + seen.lenient.length === 10, 10_000, 'ten messages');
    await sleep(300);

    const isDirect = (m: unknown) => typeof m === 'object' && m !== null && 'direct' in m;
    expect(seen.strict.filter((m) => !isDirect(m))).toEqual([{ created: 0 }, { created: 1 }, { created: 2 }, { paid: 1 }]);
    expect(seen.lenient.filter((m) => typeof m === 'string')).toEqual(['raw 0', 'raw 1', 'raw 2', '']);
    // The two sent to the queue directly: one each.
    expect([seen.strict.filter(isDirect).length, seen.lenient.filter(isDirect).length]).toEqual([1, 1]);
    expect(await topologyDepths(queue, DELAYS)).toEqual({ work: 0, retry: { [`${queue}.retry.100ms`]: 0, [`${queue}.retry.200ms`]: 0 }, parked: 0 });
  });
});
