/**
 * golevelup's exclusive queue as an opt-in: a `@RabbitSubscribe` (or a module's `handlers`
 * entry) without `queue` and with `queueOptions: { exclusive: true }` (or `autoDelete: true`)
 * consumes a queue of the instance's own, whose failed messages retry and park as any other's,
 * and which the application's close deletes with its retry queues (its parked queue only when
 * empty). With `queue`, `exclusive` stays refused, naming the replacement.
 */
import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { type Message, NonRetryableError, type RabbitRetry } from '../lib';
import { AmqpConnection, RabbitRetryConsumers, RabbitRetryModule, RabbitSubscribe } from '../lib/nestjs';
import { OWN_QUEUE_EXPIRES_MS } from '../lib/nestjs/own-queue';
import { parkedQueueName, retryQueueName } from '../lib/native';
import { AMQP_URL, brokerQueues, cleanup, closeAmqp, connectClient, deleteQueues, queueDepth, rabbitmqctl, testExchange, waitFor } from './helpers';
import { boot, bootError, closeApps } from './nest-boot';

const DELAYS = ['200ms'] as const;
/** Own queues a test made, deleted (with their retry and parked queues) after it. */
const made: string[] = [];

afterEach(async () => {
  await closeApps();
  for (const q of made.splice(0)) await deleteQueues(q, DELAYS);
  await cleanup();
});
afterAll(closeAmqp);

/** Whether `queue` exists on the broker. */
async function exists(rr: RabbitRetry, queue: string): Promise<boolean> {
  return (await rr.queueInfo(queue)) !== null;
}

/** A provider whose one handler, without a queue, asks for an exclusive one on a fanout `exchange`; it fails `{ fail: true }`. */
function exclusiveSubscriber(exchange: string, seen: unknown[], queueOptions: Record<string, unknown> = { exclusive: true }) {
  @Injectable()
  class Broadcasts {
    @RabbitSubscribe({ exchange, exchangeType: 'fanout', routingKey: '', queueOptions, onFailure: { delays: [...DELAYS] } })
    onBroadcast(body: { fail?: boolean }) {
      seen.push(body);
      if (body.fail === true) throw new Error('cannot handle this one');
    }
  }
  return Broadcasts;
}

/** The work queues the application's module consumes. */
function queuesOf(app: { get: (token: typeof RabbitRetryConsumers) => RabbitRetryConsumers }): string[] {
  return app
    .get(RabbitRetryConsumers)
    .all()
    .map((c) => c.queue);
}

describe('@RabbitSubscribe without a queue, with queueOptions.exclusive', () => {
  test("consumes '<serviceName>.<exchange>.<Class>.<method>.<8 hex digits>', durable with x-expires; each instance gets its own, and every message", async () => {
    const exchange = testExchange();
    const seenA: unknown[] = [];
    const seenB: unknown[] = [];
    const a = await boot({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, serviceName: 'orders' })],
      providers: [exclusiveSubscriber(exchange, seenA)],
    });
    const b = await boot({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, serviceName: 'orders' })],
      providers: [exclusiveSubscriber(exchange, seenB)],
    });
    const [qa] = queuesOf(a);
    const [qb] = queuesOf(b);
    made.push(qa, qb);
    const pattern = new RegExp(`^orders\\.${exchange.replace(/[.-]/g, '\\$&')}\\.Broadcasts\\.onBroadcast\\.[0-9a-f]{8}$`);
    expect(qa).toMatch(pattern);
    expect(qb).toMatch(pattern);
    expect(qa).not.toBe(qb);

    const onBroker = await brokerQueues([qa]);
    expect(onBroker[qa].arguments).toMatchObject({ 'x-expires': OWN_QUEUE_EXPIRES_MS });

    await a.get(AmqpConnection).publish(exchange, '', { n: 1 });
    await waitFor(() => seenA.length === 1 && seenB.length === 1, 10_000, 'both instances to get the broadcast');
    expect(seenA).toEqual([{ n: 1 }]);
    expect(seenB).toEqual([{ n: 1 }]);
  });

  test('a message that fails retries through its retry queue, then parks; close() deletes the queue and its retry queue, and keeps the parked queue with the message', async () => {
    const exchange = testExchange();
    const seen: unknown[] = [];
    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [exclusiveSubscriber(exchange, seen)] });
    const [queue] = queuesOf(app);
    made.push(queue);
    const rr = await connectClient();
    expect(await exists(rr, queue)).toBe(true);
    expect(await exists(rr, retryQueueName(queue, DELAYS[0]))).toBe(true);

    await app.get(AmqpConnection).publish(exchange, '', { fail: true });
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 1, 10_000, 'the message to park');
    // The first attempt and the one retry.
    expect(seen).toEqual([{ fail: true }, { fail: true }]);

    await closeApps();
    expect(await exists(rr, queue)).toBe(false);
    expect(await exists(rr, retryQueueName(queue, DELAYS[0]))).toBe(false);
    expect(await queueDepth(parkedQueueName(queue))).toBe(1);
  });

  test('close() deletes the parked queue too when it is empty', async () => {
    const exchange = testExchange();
    const seen: unknown[] = [];
    const app = await boot({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })],
      providers: [exclusiveSubscriber(exchange, seen, { autoDelete: true })],
    });
    const [queue] = queuesOf(app);
    made.push(queue);
    expect(queue).toMatch(/\.[0-9a-f]{8}$/);
    await app.get(AmqpConnection).publish(exchange, '', { ok: true });
    await waitFor(() => seen.length === 1, 10_000, 'the message');

    await closeApps();
    const rr = await connectClient();
    for (const name of [queue, retryQueueName(queue, DELAYS[0]), parkedQueueName(queue)]) expect(await exists(rr, name)).toBe(false);
  });

  test("a module's handlers entry takes it too", async () => {
    const exchange = testExchange();
    const seen: unknown[] = [];
    @Injectable()
    class Named {
      @RabbitSubscribe({ name: 'broadcasts' })
      handle(body: unknown) {
        seen.push(body);
      }
    }
    const app = await boot({
      imports: [
        RabbitRetryModule.forRoot({
          url: AMQP_URL,
          exchanges: [{ name: exchange, type: 'fanout' }],
          handlers: { broadcasts: { exchange, routingKey: '', queueOptions: { exclusive: true }, onFailure: { delays: [...DELAYS] } } },
        }),
      ],
      providers: [Named],
    });
    const [queue] = queuesOf(app);
    made.push(queue);
    expect(queue).toMatch(new RegExp(`^app\\.${exchange.replace(/[.-]/g, '\\$&')}\\.Named\\.handle\\.[0-9a-f]{8}$`));
    await app.get(AmqpConnection).publish(exchange, '', { n: 2 });
    await waitFor(() => seen.length === 1, 10_000, 'the message');
    await closeApps();
    expect(await exists(await connectClient(), queue)).toBe(false);
  });

  test("AmqpConnection.createSubscriber takes it too: close() deletes the subscription's queue", async () => {
    const exchange = testExchange();
    const seen: unknown[] = [];
    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, exchanges: [{ name: exchange, type: 'fanout' }] })] });
    const amqp = app.get(AmqpConnection);
    await amqp.createSubscriber(
      (body) => seen.push(body),
      { exchange, exchangeType: 'fanout', routingKey: '', queueOptions: { exclusive: true } },
      'listener',
    );
    const prefix = `app.${exchange}.listener.`;
    const listed = (await rabbitmqctl(['list_queues', '-q', 'name'])).split('\n').map((l) => l.trim());
    const queue = listed.find((n) => n.startsWith(prefix) && /^[0-9a-f]{8}$/.test(n.slice(prefix.length)));
    expect(queue).toBeDefined();
    made.push(queue as string);
    await amqp.publish(exchange, '', { n: 3 });
    await waitFor(() => seen.length === 1, 10_000, 'the message');
    await closeApps();
    expect(await exists(await connectClient(), queue as string)).toBe(false);
    await closeApps();
  });
});

describe('queueOptions.exclusive (or autoDelete) with a queue', () => {
  test.each([['exclusive'], ['autoDelete']])('%s: true is refused with UNSUPPORTED_OPTION, naming the queue-less replacement', async (option) => {
    const exchange = testExchange();
    @Injectable()
    class Named {
      @RabbitSubscribe({ exchange, routingKey: 'k', queue: 'orders-shared', queueOptions: { [option]: true } })
      handle(_body: unknown, _msg: Message) {
        throw new NonRetryableError('never called');
      }
    }
    const err = await bootError({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Named] });
    expect(err).toMatchObject({ code: 'UNSUPPORTED_OPTION', option: `queueOptions.${option}` });
    expect(err.message).toContain('leave out `queue`');
    expect(err.message).toContain("a queue of this instance's own");
  });
});
