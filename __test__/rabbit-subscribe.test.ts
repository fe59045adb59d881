/**
 * `@RabbitSubscribe` of rabbit-retry/nestjs against the real broker: the
 * handlers of `@golevelup/nestjs-rabbitmq`'s README, in their shapes
 * (`@RabbitSubscribe({ exchange, routingKey, queue })` on a service method
 * taking the message), after a change of import and of module registration.
 */
import 'reflect-metadata';

import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor, ParseIntPipe, UseInterceptors } from '@nestjs/common';
import type { Observable } from 'rxjs';

import { type Delay, InvalidOptionsError, Message, NonRetryableError, RabbitRetry, TopologyMismatchError, UnsupportedOptionError } from '../lib';
import {
  Consume,
  Nack,
  OnFailure,
  RMQ_CONTEXT,
  RabbitHeader,
  RabbitPayload,
  RabbitRequest,
  RabbitRetryModule,
  RabbitSubscribe,
  RabbitSubscribeMessage,
  type RabbitSubscribeOptions,
} from '../lib/nestjs';
import {
  AMQP_URL,
  brokerQueues,
  cleanup,
  closeAmqp,
  connectClient,
  getOne,
  queueDepth,
  queueUnacked,
  sleep,
  testExchange,
  testQueue,
  topologyDepths,
  waitFor,
  withChannel,
} from './helpers';
import { boot, bootError, closeApps } from './nest-boot';

const DELAYS: readonly Delay[] = ['100ms', '200ms'];

/** The module as a golevelup user registers it after the switch. */
function rabbit() {
  return RabbitRetryModule.forRoot({ url: AMQP_URL, defaultOnFailure: { delays: DELAYS } });
}

afterEach(async () => {
  await closeApps();
  await cleanup();
});
afterAll(closeAmqp);

describe('@RabbitSubscribe: the handlers of golevelup, on rabbit-retry', () => {
  test("the README's pub/sub handler: bound to its exchange and routing key, it gets the message, the Message and its headers; it is acked", async () => {
    const exchange = testExchange();
    const queue = testQueue(DELAYS);
    const received: { msg: unknown; amqpMsg: unknown; headers: unknown }[] = [];

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ exchange, routingKey: 'subscribe-route', queue })
      public async pubSubHandler(msg: object, amqpMsg: Message, headers: Record<string, unknown>): Promise<void> {
        received.push({ msg, amqpMsg, headers });
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService] });
    const rr = app.get(RabbitRetry);
    await rr.publish(exchange, 'subscribe-route', { hello: 'world' }, { messageId: 'm-1', headers: { 'x-request-id': 'r-1' } });
    await rr.publish(exchange, 'subscribe-route', { hello: 'again' }, { messageId: 'm-2' });
    await waitFor(() => received.length === 2, 10_000, 'the handler');

    expect(received[0].msg).toEqual({ hello: 'world' });
    expect(received[0].amqpMsg).toBeInstanceOf(Message);
    expect((received[0].amqpMsg as Message).routingKey).toBe('subscribe-route');
    expect((received[0].amqpMsg as Message).exchange).toBe(exchange);
    expect(received[0].headers).toMatchObject({ 'x-request-id': 'r-1' });
    // amqplib's ConsumeMessage, as golevelup handed it: content, fields (the delivery tags of one channel, in order), properties.headers.
    const raw = received.map((r) => r.amqpMsg as RabbitSubscribeMessage);
    expect(raw.map((m) => m.content.toString())).toEqual(['{"hello":"world"}', '{"hello":"again"}']);
    const tag = raw[0].fields.deliveryTag;
    expect(tag).toBeGreaterThanOrEqual(1);
    expect(raw.map((m) => m.fields)).toEqual([
      { exchange, routingKey: 'subscribe-route', redelivered: false, deliveryTag: tag },
      { exchange, routingKey: 'subscribe-route', redelivered: false, deliveryTag: tag + 1 },
    ]);
    expect(raw.map((m) => m.deliveryTag)).toEqual([tag, tag + 1]);
    expect(raw[0].properties.headers).toMatchObject({ 'x-request-id': 'r-1' });
    await waitFor(async () => (await queueUnacked(queue)) === 0, 5_000, 'the ack');
    expect(await topologyDepths(queue, DELAYS)).toEqual({ work: 0, retry: { [`${queue}.retry.100ms`]: 0, [`${queue}.retry.200ms`]: 0 }, parked: 0 });
    // Not bound under any other key.
    await expect(rr.publish(exchange, 'other-route', {})).rejects.toMatchObject({ code: 'UNROUTABLE' });
  });

  test('a handler that throws retries through the delay queues and parks: never requeued (onFailure in the decorator, or @OnFailure)', async () => {
    const exchange = testExchange();
    const q1 = testQueue(DELAYS);
    const q2 = testQueue(['100ms']);
    const attempts: Record<string, number[]> = { [q1]: [], [q2]: [] };

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ exchange, routingKey: 'orders.created', queue: q1, onFailure: { delays: DELAYS } })
      async created(_msg: object, amqpMsg: Message): Promise<void> {
        attempts[q1].push(amqpMsg.attempt);
        throw new Error('carrier 503');
      }

      @OnFailure({ delays: ['100ms'] })
      @RabbitSubscribe({ exchange, routingKey: 'orders.cancelled', queue: q2 })
      async cancelled(_msg: object, amqpMsg: Message): Promise<void> {
        attempts[q2].push(amqpMsg.attempt);
        throw new Error('refund service down');
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService] });
    const rr = app.get(RabbitRetry);
    await rr.publish(exchange, 'orders.created', { orderId: 1 }, { messageId: 'order-1' });
    await rr.publish(exchange, 'orders.cancelled', { orderId: 2 }, { messageId: 'order-2' });
    await waitFor(async () => (await queueDepth(`${q1}.parked`)) === 1 && (await queueDepth(`${q2}.parked`)) === 1, 10_000, 'both parked');

    expect(attempts).toEqual({ [q1]: [0, 1, 2], [q2]: [0, 1] });
    expect((await getOne(`${q1}.parked`))?.headers).toMatchObject({
      'retry-reason': 'exhausted',
      'retry-attempt': 2,
      'retry-last-error': 'carrier 503',
      'retry-original-exchange': exchange,
      'retry-original-routing-key': 'orders.created',
    });
    expect((await getOne(`${q2}.parked`))?.headers).toMatchObject({
      'retry-reason': 'exhausted',
      'retry-attempt': 1,
      'retry-last-error': 'refund service down',
    });
    expect(await queueDepth(q1)).toBe(0);
  });

  test('a body that is not JSON, or empty, parks once; allowNonJsonMessages hands its text to the handler; a deserializer reads the body', async () => {
    const strict = testQueue(DELAYS);
    const lenient = testQueue(DELAYS);
    const custom = testQueue(DELAYS);
    const seen: Record<string, unknown[]> = { strict: [], lenient: [], custom: [] };

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ queue: strict })
      async strictHandler(msg: unknown): Promise<void> {
        seen.strict.push(msg);
      }

      @RabbitSubscribe({ queue: lenient, allowNonJsonMessages: true })
      async lenientHandler(msg: unknown): Promise<void> {
        seen.lenient.push(msg);
      }

      @RabbitSubscribe({
        queue: custom,
        deserializer: (body: Buffer, msg: Message) => ({ csv: body.toString().split(','), type: msg.properties.contentType }),
      })
      async csvHandler(msg: unknown): Promise<void> {
        seen.custom.push(msg);
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService] });
    const rr = app.get(RabbitRetry);
    const body = Buffer.from('order=7;status=open', 'utf8');
    for (const q of [strict, lenient]) {
      await rr.publish('', q, body, { contentType: 'text/plain', messageId: 'text' });
      await rr.publish('', q, Buffer.alloc(0), { messageId: 'empty' });
    }
    await rr.publish('', custom, Buffer.from('a,b,c'), { contentType: 'text/csv' });
    await waitFor(async () => (await queueDepth(`${strict}.parked`)) === 2 && seen.lenient.length === 2 && seen.custom.length === 1, 10_000, 'all five');

    const parked = [await getOne(`${strict}.parked`), await getOne(`${strict}.parked`)];
    expect(parked.map((m) => [m?.properties.messageId, m?.content.length]).sort()).toEqual([
      ['empty', 0],
      ['text', body.length],
    ]);
    for (const m of parked) {
      expect(m?.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-attempt': 0, 'retry-error-name': 'NonRetryableError' });
      expect(String(m?.headers['retry-last-error'])).toMatch(/^the message body is not valid JSON/);
    }
    expect(seen.lenient.sort()).toEqual(['', 'order=7;status=open']);
    expect(seen).toEqual({ strict: [], lenient: ['', 'order=7;status=open'], custom: [{ csv: ['a', 'b', 'c'], type: 'text/csv' }] });
    await sleep(400);
    expect(await queueDepth(`${strict}.retry.100ms`)).toBe(0);
    expect(await queueDepth(`${lenient}.parked`)).toBe(0);
  });

  test("golevelup's Nack: new Nack(true) goes to the next retry queue, new Nack() parks; neither requeues", async () => {
    const queue = testQueue(['100ms']);
    const attempts: string[] = [];

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ queue, onFailure: { delays: ['100ms'] } })
      async handler(msg: { kind: string }, amqpMsg: Message): Promise<Nack | undefined> {
        attempts.push(`${msg.kind} ${amqpMsg.attempt}`);
        if (msg.kind === 'later') return new Nack(true);
        if (msg.kind === 'never') return new Nack();
        return undefined;
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService] });
    const rr = app.get(RabbitRetry);
    for (const kind of ['ok', 'later', 'never']) await rr.publish('', queue, { kind }, { messageId: kind });
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 2, 10_000, 'two parked');

    const parked = [await getOne(`${queue}.parked`), await getOne(`${queue}.parked`)];
    const byId = Object.fromEntries(parked.map((m) => [String(m?.properties.messageId), m?.headers]));
    expect(byId.never).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-attempt': 0 });
    expect(byId.later).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 1 });
    expect(attempts.sort()).toEqual(['later 0', 'later 1', 'never 0', 'ok 0']);
    expect(await queueDepth(queue)).toBe(0);
  });

  test("parameter decorators: @RabbitPayload with a pipe, @RabbitHeader and @RabbitRequest; interceptors see golevelup's rmq context", async () => {
    const queue = testQueue(DELAYS);
    const seen: unknown[] = [];
    const types: string[] = [];

    @Injectable()
    class SeesType implements NestInterceptor {
      intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
        types.push(context.getType());
        return next.handle();
      }
    }

    @Injectable()
    class MessagingService {
      @UseInterceptors(SeesType)
      @RabbitSubscribe({ queue })
      async handler(
        @RabbitPayload('orderId', ParseIntPipe) orderId: number,
        @RabbitHeader('x-tenant') tenant: string,
        @RabbitHeader() headers: Record<string, unknown>,
        @RabbitRequest() msg: Message,
      ): Promise<void> {
        seen.push({ orderId, tenant, hasHeaders: headers['x-tenant'] === tenant, id: msg.properties.messageId });
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService, SeesType] });
    await app.get(RabbitRetry).publish('', queue, { orderId: '42' }, { messageId: 'order-42', headers: { 'x-tenant': 'acme' } });
    await waitFor(() => seen.length === 1, 10_000, 'the handler');
    expect(seen).toEqual([{ orderId: 42, tenant: 'acme', hasHeaders: true, id: 'order-42' }]);
    expect(types).toEqual([RMQ_CONTEXT]);
  });

  test('app.close() is prompt: it waits for the handler in flight and acks it; unstarted messages go back to the queue', async () => {
    const queue = testQueue(DELAYS);
    const started: number[] = [];
    const finished: number[] = [];

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ queue, prefetch: 1 })
      async handler(msg: { n: number }): Promise<void> {
        started.push(msg.n);
        await sleep(300);
        finished.push(msg.n);
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService] });
    const rr = await connectClient();
    for (const n of [1, 2, 3]) await rr.publish('', queue, { n });
    await waitFor(() => started.length === 1, 10_000, 'the first handler');
    const t0 = Date.now();
    await app.close();
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(finished).toEqual([1]);
    expect(await queueDepth(queue)).toBe(2);
  });
});

describe('@RabbitSubscribe: queues golevelup declared, and options', () => {
  test("queueOptions become the queue's arguments, and x-queue-type its queue type", async () => {
    const classic = testQueue(DELAYS);
    const quorum = testQueue(DELAYS);

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({
        queue: classic,
        queueOptions: {
          durable: true,
          deadLetterExchange: 'orders.dlx',
          deadLetterRoutingKey: 'dead',
          messageTtl: 60_000,
          maxLength: 1000,
          arguments: { 'x-max-priority': 5 },
        },
      })
      async a(): Promise<void> {}

      @RabbitSubscribe({ queue: quorum, queueOptions: { arguments: { 'x-queue-type': 'quorum' } } })
      async b(): Promise<void> {}
    }

    await boot({ imports: [rabbit()], providers: [MessagingService] });
    const queues = await brokerQueues([classic, quorum, `${quorum}.parked`]);
    expect(queues[classic].arguments).toEqual({
      'x-dead-letter-exchange': 'orders.dlx',
      'x-dead-letter-routing-key': 'dead',
      'x-message-ttl': 60000,
      'x-max-length': 1000,
      'x-max-priority': 5,
    });
    expect(queues[quorum].type).toBe('quorum');
    expect(queues[`${quorum}.parked`].type).toBe('quorum');
  });

  test('a queue golevelup declared with a dead-letter exchange: its messages in flight are handled; the same queueOptions adopt it, other ones fail with TOPOLOGY_MISMATCH', async () => {
    const queue = testQueue(DELAYS);
    const dlx = testExchange();
    // As golevelup left it: declared by amqplib's assertQueue with a DLX, with messages waiting.
    await withChannel(async (ch) => {
      await ch.assertExchange(dlx, 'fanout', { durable: true });
      await ch.assertQueue(queue, { durable: true, deadLetterExchange: dlx });
      ch.sendToQueue(queue, Buffer.from(JSON.stringify({ orderId: 1 })), { persistent: true });
      ch.sendToQueue(queue, Buffer.from(JSON.stringify({ orderId: 2 })), { persistent: true });
    });
    await waitFor(async () => (await queueDepth(queue)) === 2, 5_000, 'the waiting messages');

    @Injectable()
    class WithoutTheDlx {
      @RabbitSubscribe({ queue })
      async handler(): Promise<void> {}
    }
    const mismatch = await bootError({ imports: [rabbit()], providers: [WithoutTheDlx] });
    expect(mismatch).toBeInstanceOf(TopologyMismatchError);
    expect(mismatch.message).toMatch(/WithoutTheDlx\.handler could not consume .*'x-dead-letter-exchange'/);
    expect(await queueDepth(queue)).toBe(2);

    const handled: number[] = [];
    @Injectable()
    class SameOptions {
      @RabbitSubscribe({ queue, queueOptions: { deadLetterExchange: dlx } })
      async handler(msg: { orderId: number }, amqpMsg: Message): Promise<void> {
        handled.push(msg.orderId * 10 + amqpMsg.attempt);
      }
    }
    await boot({ imports: [rabbit()], providers: [SameOptions] });
    await waitFor(() => handled.length === 2, 10_000, 'the messages that waited');
    expect(handled.sort()).toEqual([10, 20]);
    expect((await brokerQueues([queue]))[queue].arguments).toEqual({ 'x-dead-letter-exchange': dlx });
  });

  test('createQueueIfNotExists: false consumes the queue as it is, never declaring it', async () => {
    const queue = testQueue(DELAYS);
    await withChannel((ch) => ch.assertQueue(queue, { durable: true, arguments: { 'x-max-length': 50, 'x-dead-letter-exchange': 'legacy.dlx' } }));
    const handled: unknown[] = [];

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ queue, createQueueIfNotExists: false })
      async handler(msg: unknown): Promise<void> {
        handled.push(msg);
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService] });
    await app.get(RabbitRetry).publish('', queue, { ok: true });
    await waitFor(() => handled.length === 1, 10_000, 'the handler');
    expect((await brokerQueues([queue]))[queue].arguments).toEqual({ 'x-max-length': 50, 'x-dead-letter-exchange': 'legacy.dlx' });
  });

  test.each<[string, RabbitSubscribeOptions, string]>([
    ['errorHandler', { errorHandler: () => undefined }, 'errorHandler'],
    ['errorBehavior', { errorBehavior: 'REQUEUE' }, 'errorBehavior'],
    ['assertQueueErrorHandler', { assertQueueErrorHandler: () => 'q' }, 'assertQueueErrorHandler'],
    ['usePersistentReplyTo', { usePersistentReplyTo: true }, 'usePersistentReplyTo'],
    [
      'several options at once',
      { errorHandler: () => undefined, queueOptions: { consumerOptions: { noAck: true } } },
      'errorHandler, queueOptions.consumerOptions.noAck',
    ],
    ['a non-durable queue', { queueOptions: { durable: false } }, 'queueOptions.durable'],
    ['an exclusive queue', { queueOptions: { exclusive: true } }, 'queueOptions.exclusive'],
    ['an auto-delete queue', { queueOptions: { autoDelete: true } }, 'queueOptions.autoDelete'],
    ['consumer options but the tag', { queueOptions: { consumerOptions: { priority: 5 } } }, 'queueOptions.consumerOptions.priority'],
    ['binding arguments', { queueOptions: { bindQueueArguments: { 'x-match': 'all' } } }, 'queueOptions.bindQueueArguments'],
    ['a stream queue', { queueOptions: { arguments: { 'x-queue-type': 'stream' } } }, 'queueOptions.arguments.x-queue-type'],
  ])('%s fails the bootstrap with UNSUPPORTED_OPTION, naming the option and the handler; nothing is declared', async (_what, extra, option) => {
    const queue = testQueue(DELAYS);

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ queue, ...extra })
      async pubSubHandler(): Promise<void> {}
    }

    const err = await bootError({ imports: [rabbit()], providers: [MessagingService] });
    expect(err).toBeInstanceOf(UnsupportedOptionError);
    expect(err).toMatchObject({ code: 'UNSUPPORTED_OPTION', option });
    expect(err.message).toMatch(new RegExp(`^MessagingService\\.pubSubHandler could not consume '${queue}' \\(UNSUPPORTED_OPTION\\): `));
    expect(err.message).toContain(option.split('.').pop() as string);
    expect(await topologyDepths(queue, DELAYS)).toEqual({ work: 0, retry: { [`${queue}.retry.100ms`]: 0, [`${queue}.retry.200ms`]: 0 }, parked: 0 });
    expect((await brokerQueues([queue, `${queue}.parked`]))[queue]).toBeUndefined();
  });

  test('a missing queue and exchange, a typo, onFailure given twice, or @Consume beside it fail the bootstrap, naming the handler and what is wrong', async () => {
    const queue = testQueue(DELAYS);

    @Injectable()
    class NoQueue {
      @RabbitSubscribe({ routingKey: 'orders.created' })
      async handler(): Promise<void> {}
    }
    const noQueue = await bootError({ imports: [rabbit()], providers: [NoQueue] });
    expect(noQueue).toBeInstanceOf(InvalidOptionsError);
    expect(noQueue.message).toMatch(
      /NoQueue\.handler could not consume '\(no queue\)' \(INVALID_OPTIONS\): @RabbitSubscribe without a queue needs an exchange/,
    );

    @Injectable()
    class Typo {
      @RabbitSubscribe({ queue, routingkey: 'x' } as RabbitSubscribeOptions)
      async handler(): Promise<void> {}
    }
    expect((await bootError({ imports: [rabbit()], providers: [Typo] })).message).toMatch(
      /`routingkey` is not an option of @RabbitSubscribe; did you mean `routingKey`\?/,
    );

    @Injectable()
    class Twice {
      @OnFailure({ delays: ['1s'] })
      @RabbitSubscribe({ queue, onFailure: { delays: ['2s'] } })
      async handler(): Promise<void> {}
    }
    expect((await bootError({ imports: [rabbit()], providers: [Twice] })).message).toMatch(/onFailure is given twice/);

    @Injectable()
    class Both {
      @Consume({ queue })
      @RabbitSubscribe({ queue })
      async handler(): Promise<void> {}
    }
    expect((await bootError({ imports: [rabbit()], providers: [Both] })).message).toMatch(/Both\.handler has both @Consume and @RabbitSubscribe/);
  });

  test("golevelup's module options fail forRoot with UNSUPPORTED_OPTION and say what to write instead", () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ uri: AMQP_URL }, 'uri', /write `url`/],
      [{ url: AMQP_URL, prefetchCount: 10 }, 'prefetchCount', /write `prefetch`/],
      [{ url: AMQP_URL, connectionInitOptions: { wait: false } }, 'connectionInitOptions.wait', /connects when it starts/],
      [{ url: AMQP_URL, connectionInitOptions: { reject: false } }, 'connectionInitOptions.reject', /fails the start/],
      [{ url: AMQP_URL, defaultSubscribeErrorBehavior: 'NACK' }, 'defaultSubscribeErrorBehavior', /defaultOnFailure/],
    ];
    for (const [options, option, advice] of cases) {
      let err: unknown;
      try {
        RabbitRetryModule.forRoot(options);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UnsupportedOptionError);
      expect(err).toMatchObject({ code: 'UNSUPPORTED_OPTION', option, message: expect.stringMatching(advice) });
    }
  });

  test('a handler that throws a NonRetryableError parks at once', async () => {
    const queue = testQueue(DELAYS);

    @Injectable()
    class MessagingService {
      @RabbitSubscribe({ queue })
      async handler(msg: { sku?: string }): Promise<void> {
        if (!msg.sku) throw new NonRetryableError('the order has no sku');
      }
    }

    const app = await boot({ imports: [rabbit()], providers: [MessagingService] });
    await app.get(RabbitRetry).publish('', queue, {});
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'parked');
    expect((await getOne(`${queue}.parked`))?.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-last-error': 'the order has no sku' });
  });
});
