/**
 * golevelup's module topology on a RabbitRetryModule: the `exchanges`,
 * `queues` and `exchangeBindings` declared at start-up, `connectionInitOptions`,
 * consumer tags, and a handler bound to several exchanges.
 */
import 'reflect-metadata';

import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { InvalidOptionsError, type Message, RabbitRetry, TopologyMismatchError } from '../lib';
import { AmqpConnection, RabbitRetryModule, RabbitSubscribe } from '../lib/nestjs';
import { AMQP_URL, cleanup, closeAmqp, extraQueue, queueDepth, rabbitmqctl, testExchange, testQueue, waitFor, withChannel } from './helpers';
import { QuietLogger, boot, closeApps } from './nest-boot';

afterEach(async () => {
  await closeApps();
  await cleanup();
});
afterAll(closeAmqp);

/** Whether `exchange` exists on the broker. */
function exchangeExists(exchange: string): Promise<boolean> {
  return withChannel((ch) => ch.checkExchange(exchange)).then(
    () => true,
    () => false,
  );
}

describe("RabbitRetryModule: golevelup's exchanges, queues and exchangeBindings", () => {
  test('are declared when the module starts, in order: a message published to the source exchange reaches the bound queue', async () => {
    const source = testExchange();
    const destination = testExchange();
    const queue = extraQueue();
    const app = await boot({
      imports: [
        RabbitRetryModule.forRoot({
          url: AMQP_URL,
          exchanges: [
            { name: source, type: 'topic' },
            { name: destination, type: 'fanout' },
          ],
          queues: [{ name: queue, exchange: destination, routingKey: ['a', 'b'] }],
          exchangeBindings: [{ destination, source, pattern: 'orders.*' }],
        }),
      ],
    });
    const amqp = app.get(AmqpConnection);
    await amqp.publish(source, 'orders.created', { id: 1 });
    await waitFor(async () => (await queueDepth(queue)) === 1, 10_000, 'the bound queue');
    await expect(amqp.publish(source, 'invoices.created', { id: 2 }, { mandatory: true })).rejects.toMatchObject({ code: 'UNROUTABLE' });
    // As golevelup's: without `mandatory`, a message no queue takes resolves.
    await expect(amqp.publish(source, 'invoices.created', { id: 3 })).resolves.toBe(true);
  });

  test('createExchangeIfNotExists: false on a missing exchange fails the start with TOPOLOGY_MISMATCH, naming it; the queues after it are not declared', async () => {
    const missing = testExchange();
    const queue = extraQueue();
    const err = await Test.createTestingModule({
      imports: [
        RabbitRetryModule.forRoot({
          url: AMQP_URL,
          exchanges: [{ name: missing, createExchangeIfNotExists: false }],
          queues: [{ name: queue }],
        }),
      ],
    })
      .setLogger(new QuietLogger())
      .compile()
      .then(
        () => new Error('the module started'),
        (e: unknown) => e as Error,
      );
    expect(err).toBeInstanceOf(TopologyMismatchError);
    expect(err.message).toContain(`exchange '${missing}' does not exist`);
    expect(await exchangeExists(missing)).toBe(false);
    expect(
      await withChannel((ch) => ch.checkQueue(queue)).then(
        () => true,
        () => false,
      ),
    ).toBe(false);
  });

  test('an exchange declared with another type fails the start with TOPOLOGY_MISMATCH', async () => {
    const exchange = testExchange();
    await withChannel((ch) => ch.assertExchange(exchange, 'direct', { durable: true }));
    const start = Test.createTestingModule({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, exchanges: [{ name: exchange, type: 'topic' }] })],
    })
      .setLogger(new QuietLogger())
      .compile();
    await expect(start).rejects.toBeInstanceOf(TopologyMismatchError);
  });

  test.each([
    [{ exchanges: [{ name: 'x', type: 7 }] }, 'exchanges[0].type'],
    [{ exchanges: { name: 'x' } }, 'exchanges must be a list'],
    [{ exchanges: [{ name: 'x', options: { durabel: true } }] }, '`durabel` is not an option of exchanges[0].options'],
    [{ queues: [{ name: 'q' }, { exchange: 'x' }] }, 'queues[1].name'],
    [{ queues: [{ name: 'q', routingKey: ['a', 1] }] }, 'queues[0].routingKey'],
    [{ queues: [{ name: 'q', bindQueueArguments: {} }] }, '`bindQueueArguments` is not an option of queues[0]'],
    [{ exchangeBindings: [{ destination: 'a', source: 'b' }] }, 'exchangeBindings[0].pattern'],
    [{ connectionInitOptions: { timeout: 0 } }, 'connectionInitOptions.timeout'],
  ])('%j fails forRoot with INVALID_OPTIONS naming %s', (options, named) => {
    let err: unknown;
    try {
      RabbitRetryModule.forRoot({ url: AMQP_URL, ...(options as object) });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toContain(named);
  });

  test("connectionInitOptions.timeout is connect's connectTimeoutMs; connectTimeoutMs wins when both are given", async () => {
    const connect = jest.spyOn(RabbitRetry, 'connect');
    try {
      await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, connectionInitOptions: { wait: true, reject: true, timeout: 3000 } })] });
      await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, connectTimeoutMs: 5000, connectionInitOptions: { timeout: 3000 } })] });
      expect(connect.mock.calls.map(([o]) => o?.connectTimeoutMs)).toEqual([3000, 5000]);
    } finally {
      connect.mockRestore();
    }
  });

  test("a logger with `log` (a Nest LoggerService) gets the module's informational lines", async () => {
    const lines: string[] = [];
    await boot({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, logger: { log: (m) => lines.push(m), warn: () => undefined, error: () => undefined } })],
    });
    expect(lines).toEqual([expect.stringMatching(/^connected to amqp:\/\//)]);
  });
});

describe('@RabbitSubscribe with the module topology', () => {
  test("a handler's exchange listed in the module's exchanges takes its type; bindings to a second exchange deliver too", async () => {
    const fanout = testExchange();
    const second = testExchange();
    const queue = testQueue(['100ms']);
    const got: unknown[] = [];

    @Injectable()
    class Handlers {
      @RabbitSubscribe({
        queue,
        bindings: [
          { exchange: fanout, routingKey: '' },
          { exchange: second, routingKey: 'k2' },
        ],
      })
      handle(msg: unknown): void {
        got.push(msg);
      }
    }

    const app = await boot({
      imports: [
        RabbitRetryModule.forRoot({
          url: AMQP_URL,
          defaultOnFailure: { delays: ['100ms'] },
          exchanges: [{ name: fanout, type: 'fanout' }, { name: second }],
        }),
      ],
      providers: [Handlers],
    });
    const amqp = app.get(AmqpConnection);
    await amqp.publish(fanout, 'any-key', 'from the fanout');
    await amqp.publish(second, 'k2', 'from the second');
    await waitFor(() => got.length === 2, 10_000, 'both messages');
    expect(got.sort()).toEqual(['from the fanout', 'from the second']);
  });

  test('a binding to an exchange that does not exist fails the start, naming the handler', async () => {
    const missing = testExchange();
    const queue = testQueue(['100ms']);

    @Injectable()
    class Handlers {
      @RabbitSubscribe({ queue, exchange: testExchange(), bindings: [{ exchange: missing, routingKey: 'k' }] })
      handle(): void {}
    }

    const start = boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, defaultOnFailure: { delays: ['100ms'] } })], providers: [Handlers] });
    await expect(start).rejects.toThrow(new RegExp(`^Handlers\\.handle could not consume '${queue}' \\(NOT_FOUND\\): .*'${missing}'`));
  });

  test("consumer tags: the module's queues tag their handlers, a decorator's consumerOptions.consumerTag overrides it; each Message carries its tag", async () => {
    const tagged = testQueue(['100ms']);
    const own = testQueue(['100ms']);
    const seen: Record<string, string | undefined> = {};

    @Injectable()
    class Handlers {
      @RabbitSubscribe({ queue: tagged })
      fromModule(_msg: unknown, raw: Message): void {
        seen.module = raw.consumerTag;
      }

      @RabbitSubscribe({ queue: own, queueOptions: { consumerOptions: { consumerTag: `${own}-own` } } })
      fromDecorator(_msg: unknown, raw: Message): void {
        seen.decorator = raw.consumerTag;
      }
    }

    const app = await boot({
      imports: [
        RabbitRetryModule.forRoot({
          url: AMQP_URL,
          defaultOnFailure: { delays: ['100ms'] },
          queues: [
            { name: tagged, consumerTag: `${tagged}-module` },
            { name: own, consumerTag: `${own}-module` },
          ],
        }),
      ],
      providers: [Handlers],
    });
    const amqp = app.get(AmqpConnection);
    await amqp.publish('', tagged, {});
    await amqp.publish('', own, {});
    await waitFor(() => Object.keys(seen).length === 2, 10_000, 'both handlers');
    expect(seen).toEqual({ module: `${tagged}-module`, decorator: `${own}-own` });
    // The broker's consumers carry the same tags.
    const listed = JSON.parse(await rabbitmqctl(['list_consumers', '-q', '--formatter', 'json', 'queue_name', 'consumer_tag'])) as {
      queue_name: string;
      consumer_tag: string;
    }[];
    const tags = Object.fromEntries(listed.filter((c) => c.queue_name === tagged || c.queue_name === own).map((c) => [c.queue_name, c.consumer_tag]));
    expect(tags).toEqual({ [tagged]: `${tagged}-module`, [own]: `${own}-own` });
  });
});
