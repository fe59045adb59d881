/**
 * The queue of a `@RabbitSubscribe` handler that gives none (golevelup's
 * server-named queue), against the real broker: a durable queue named
 * `<serviceName>.<exchange>.<routingKey>.<Class>.<method>`, logged at start-up,
 * the same at every start, with its retry and parked queues.
 */
import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { type Delay, RabbitRetry, parkedQueueName, retryQueueName } from '../lib';
import { RabbitRetryModule, RabbitSubscribe } from '../lib/nestjs';
import { AMQP_URL, cleanup, closeAmqp, deleteQueues, drain, queueDepth, queueExists, testExchange, uniqueName, waitFor, withChannel } from './helpers';
import { boot, closeApps } from './nest-boot';

const DELAYS: readonly Delay[] = ['100ms'];
const derived: string[] = [];

afterEach(async () => {
  await closeApps();
  for (const q of derived.splice(0)) await deleteQueues(q, DELAYS);
  await cleanup();
});
afterAll(closeAmqp);

/** A logger that keeps the module's informational lines. */
function infoLogger(): { lines: string[]; log: (m: string) => void; warn: () => void; error: () => void } {
  const lines: string[] = [];
  return { lines, log: (m) => lines.push(m), warn: () => undefined, error: () => undefined };
}

/** Whether the broker has `queue` as a durable queue (a passive declare cannot tell: a durable redeclare of a transient one fails). */
async function isDurable(queue: string): Promise<boolean> {
  return withChannel(async (ch) => {
    ch.on('error', () => undefined);
    try {
      await ch.assertQueue(queue, { durable: true, arguments: {} });
      return true;
    } catch {
      return false;
    }
  }).catch(() => false);
}

describe('@RabbitSubscribe without queue', () => {
  test("consumes '<serviceName>.<exchange>.<routingKey>.<Class>.<method>', logs it, keeps it across starts, and parks a failing message there", async () => {
    const exchange = testExchange();
    const serviceName = uniqueName('orders-svc');
    const queue = `${serviceName}.${exchange}.order.created.OrderEvents.onCreated`;
    derived.push(queue);
    const seen: { body: unknown; attempt: number }[] = [];

    @Injectable()
    class OrderEvents {
      @RabbitSubscribe({ exchange, routingKey: 'order.created' })
      async onCreated(body: { id: number }, msg: { attempt: number }): Promise<void> {
        seen.push({ body, attempt: msg.attempt });
        if (body.id === 2) throw new Error('carrier 503');
      }
    }

    const start = async () => {
      const logger = infoLogger();
      const app = await boot({
        imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, serviceName, logger, defaultOnFailure: { delays: DELAYS } })],
        providers: [OrderEvents],
      });
      return { app, lines: logger.lines };
    };

    const first = await start();
    expect(first.lines).toContain(`OrderEvents.onCreated gives no queue: it consumes the durable queue '${queue}'`);
    expect(first.lines.filter((l) => l.includes('gives no queue'))).toHaveLength(1);
    expect(await queueExists(queue)).toBe(true);
    expect(await queueExists(retryQueueName(queue, '100ms'))).toBe(true);
    expect(await queueExists(parkedQueueName(queue))).toBe(true);

    // Published while no application runs: the durable queue keeps it for the next start.
    await first.app.close();
    const rr = await RabbitRetry.connect({ url: AMQP_URL });
    try {
      await rr.publish(exchange, 'order.created', { id: 1 }, { messageId: 'o-1' });
      await rr.publish(exchange, 'order.created', { id: 2 }, { messageId: 'o-2' });
    } finally {
      await rr.close();
    }
    expect(await queueDepth(queue)).toBe(2);
    expect(await isDurable(queue)).toBe(true);

    const second = await start();
    expect(second.lines).toContain(`OrderEvents.onCreated gives no queue: it consumes the durable queue '${queue}'`);
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 1, 10_000, 'the failing message parked');
    expect(seen).toEqual(
      expect.arrayContaining([
        { body: { id: 1 }, attempt: 0 },
        { body: { id: 2 }, attempt: 0 },
        { body: { id: 2 }, attempt: 1 },
      ]),
    );
    expect(seen).toHaveLength(3);
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(retryQueueName(queue, '100ms'))).toBe(0);
    const parked = await drain(parkedQueueName(queue));
    expect(parked).toHaveLength(1);
    expect(JSON.parse(parked[0].content.toString())).toEqual({ id: 2 });
    expect(parked[0].properties.messageId).toBe('o-2');
    expect(parked[0].headers).toMatchObject({
      'retry-reason': 'exhausted',
      'retry-attempt': 1,
      'retry-error-name': 'Error',
      'retry-last-error': 'carrier 503',
      'retry-queue': queue,
      'retry-original-exchange': exchange,
      'retry-original-routing-key': 'order.created',
    });
  });

  test("serviceName defaults to 'app', and a second handler of the same class gets a queue of its own", async () => {
    const exchange = testExchange();
    const created = `app.${exchange}.invoice.created.Invoices.created`;
    const paid = `app.${exchange}.invoice.paid.Invoices.paid`;
    derived.push(created, paid);

    @Injectable()
    class Invoices {
      @RabbitSubscribe({ exchange, routingKey: 'invoice.created' })
      created(): void {}

      @RabbitSubscribe({ exchange, routingKey: 'invoice.paid' })
      paid(): void {}
    }

    const logger = infoLogger();
    await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, logger, defaultOnFailure: { delays: DELAYS } })], providers: [Invoices] });
    expect(logger.lines.filter((l) => l.includes('gives no queue')).sort()).toEqual([
      `Invoices.created gives no queue: it consumes the durable queue '${created}'`,
      `Invoices.paid gives no queue: it consumes the durable queue '${paid}'`,
    ]);
    for (const q of [created, paid]) {
      expect(await queueExists(q)).toBe(true);
      expect(await queueExists(retryQueueName(q, '100ms'))).toBe(true);
      expect(await queueExists(parkedQueueName(q))).toBe(true);
    }
  });
});
