/**
 * rabbit-retry/nestjs against the real broker, through Test.createTestingModule.
 * Classes are declared inside each test so that their decorators see the
 * test's unique queue names.
 */
import 'reflect-metadata';

import {
  type CallHandler,
  type CanActivate,
  type ExecutionContext,
  Inject,
  Injectable,
  type LoggerService,
  Module,
  type ModuleMetadata,
  type NestInterceptor,
  ParseIntPipe,
  Scope,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Observable } from 'rxjs';
import { tap } from 'rxjs/operators';

import {
  DEFAULT_DELAYS,
  InvalidOptionsError,
  Message,
  NonRetryableError,
  RabbitRetry,
  type Delay,
  type OnFailureOptions,
  type TableRouteOptions,
  retryQueueName,
} from '../lib';
import {
  Consume,
  InjectRabbitRetry,
  OnFailure,
  RABBIT_RETRY,
  RabbitMessage,
  RabbitPayload,
  RabbitRetryConsumers,
  RabbitRetryModule,
  type ConsumeHandlerOptions,
  type RabbitRetryModuleAsyncOptions,
  type RabbitRetryModuleOptions,
  type RabbitRetryOptionsFactory,
} from '../lib/nestjs';
import { type DeleteTestQueuesOptions, deleteTestQueues, readParked, uniqueQueueName, waitForQueueDepth } from '../lib/testing';
import { AMQP_URL, closeAmqp, deleteExchange, deleteQueues, queueDepth, queueExists, sleep, waitFor, withChannel } from './helpers';

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Collects what Nest logs, so tests can read the retry and park lines. */
class CaptureLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  log(message: unknown): void {
    this.lines.push({ level: 'log', message: String(message) });
  }
  warn(message: unknown): void {
    this.lines.push({ level: 'warn', message: String(message) });
  }
  error(message: unknown): void {
    this.lines.push({ level: 'error', message: String(message) });
  }
  debug(): void {}
  verbose(): void {}
  matching(re: RegExp): string[] {
    return this.lines.map((l) => l.message).filter((m) => re.test(m));
  }
}

// What each test created; afterEach closes and deletes it all.
const apps: TestingModule[] = [];
const clients: RabbitRetry[] = [];
const queues: { base: string; delays: readonly Delay[] }[] = [];
const exchanges: string[] = [];

function testQueue(delays: readonly Delay[] = DEFAULT_DELAYS): string {
  const base = uniqueQueueName('rr-nest');
  queues.push({ base, delays });
  return base;
}

function testExchange(): string {
  const name = uniqueQueueName('rr-nest-ex');
  exchanges.push(name);
  return name;
}

async function client(): Promise<RabbitRetry> {
  const rr = await RabbitRetry.connect({ url: AMQP_URL });
  clients.push(rr);
  return rr;
}

/** Compiles the module (not yet bootstrapped); afterEach closes it. */
async function compile(metadata: ModuleMetadata, logger = new CaptureLogger()): Promise<TestingModule> {
  const app = await Test.createTestingModule(metadata).setLogger(logger).compile();
  apps.push(app);
  return app;
}

/** Compiles and bootstraps: consumers are running when it resolves. */
async function boot(metadata: ModuleMetadata, logger = new CaptureLogger()): Promise<TestingModule> {
  const app = await compile(metadata, logger);
  await app.init();
  return app;
}

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  for (const rr of clients.splice(0)) await rr.close().catch(() => undefined);
  // The module's default delays may have declared retry queues too.
  for (const q of queues.splice(0)) await deleteQueues(q.base, [...new Set([...q.delays, ...DEFAULT_DELAYS])]);
  for (const e of exchanges.splice(0)) await deleteExchange(e);
});
afterAll(closeAmqp);

/** Consumers the broker counts on `queue`. */
async function rabbitConsumers(queue: string): Promise<number> {
  return (await withChannel((ch) => ch.checkQueue(queue))).consumerCount;
}

interface Order {
  orderId: number;
}

class ValidationError extends Error {
  override name = 'ValidationError';
}

describe('RabbitRetryModule', () => {
  test('forRoot: a @Consume method gets the parsed body and the Message, bound to its instance; publish through @InjectRabbitRetry', async () => {
    const queue = testQueue();
    const seen: { body: unknown; msg: Message; self: boolean }[] = [];

    @Injectable()
    class OrdersPublisher {
      constructor(@InjectRabbitRetry() readonly rr: RabbitRetry) {}
      publish(order: Order): Promise<void> {
        return this.rr.publish('', queue, order, { messageId: `order-${order.orderId}` });
      }
    }

    @Injectable()
    class OrderConsumer {
      readonly marker = 'instance';
      @Consume({ queue })
      async handle(order: Order, msg: Message): Promise<void> {
        seen.push({ body: order, msg, self: this.marker === 'instance' });
      }
    }

    const app = await boot({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })],
      providers: [OrdersPublisher, OrderConsumer],
    });
    await app.get(OrdersPublisher).publish({ orderId: 1 });
    await waitFor(() => seen.length === 1, 10_000, 'the handler');
    expect(seen[0].body).toEqual({ orderId: 1 });
    expect(seen[0].msg).toBeInstanceOf(Message);
    expect(seen[0].msg.properties.messageId).toBe('order-1');
    expect(seen[0].self).toBe(true);
    expect(app.get(RABBIT_RETRY)).toBe(app.get(OrdersPublisher).rr);
    expect(app.get(RabbitRetryConsumers).get(queue)?.queue).toBe(queue);
    await waitFor(async () => (await queueDepth(queue)) === 0, 5_000, 'the ack');
  });

  test('forRoot with the nodes of a cluster: it connects to the first that answers and consumes there', async () => {
    const queue = testQueue();
    const handled: number[] = [];

    @Injectable()
    class OrderConsumer {
      @Consume({ queue })
      async handle(order: Order): Promise<void> {
        handled.push(order.orderId);
      }
    }

    const down = 'amqp://app:s3cret@127.0.0.1:1';
    const app = await boot({
      imports: [RabbitRetryModule.forRoot({ url: [down, AMQP_URL], hostOrder: 'ordered', connectTimeoutMs: 2000 })],
      providers: [OrderConsumer],
    });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    expect(rr.urls).toEqual(['amqp://app:***@127.0.0.1:1', rr.url]);
    await rr.publish('', queue, { orderId: 7 });
    await waitFor(() => handled.length === 1, 10_000, 'the handler');
    expect(handled).toEqual([7]);
  });

  test('forRootAsync with ConfigService (useFactory), and with useClass', async () => {
    const queue = testQueue();
    const handled: number[] = [];

    @Injectable()
    class OrderConsumer {
      @Consume({ queue })
      async handle(order: Order): Promise<void> {
        handled.push(order.orderId);
      }
    }

    const app = await boot({
      imports: [
        ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ BROKER_URL: AMQP_URL, PREFETCH: 2 })] }),
        RabbitRetryModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService): RabbitRetryModuleOptions => ({
            url: config.getOrThrow<string>('BROKER_URL'),
            connectionName: 'nest-config',
            prefetch: config.get<number>('PREFETCH'),
          }),
        }),
      ],
      providers: [OrderConsumer],
    });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    expect(rr).toBeInstanceOf(RabbitRetry);
    await rr.publish('', queue, { orderId: 7 });
    await waitFor(() => handled.length === 1, 10_000, 'the handler');
    expect(handled).toEqual([7]);
    await app.close();

    @Injectable()
    class OptionsFromClass implements RabbitRetryOptionsFactory {
      createRabbitRetryOptions(): RabbitRetryModuleOptions {
        return { url: AMQP_URL };
      }
    }
    const app2 = await boot({
      imports: [RabbitRetryModule.forRootAsync({ useClass: OptionsFromClass, isGlobal: true })],
      providers: [OrderConsumer],
    });
    await app2.get<RabbitRetry>(RABBIT_RETRY).publish('', queue, { orderId: 8 });
    await waitFor(() => handled.length === 2, 10_000, 'the handler');
    expect(handled).toEqual([7, 8]);
  });

  test('isGlobal: a feature module injects the client without importing the module', async () => {
    @Injectable()
    class Feature {
      constructor(@InjectRabbitRetry() readonly rr: RabbitRetry) {}
    }
    @Module({ providers: [Feature], exports: [Feature] })
    class FeatureModule {}

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, isGlobal: true }), FeatureModule] });
    expect(app.get(Feature).rr).toBe(app.get(RABBIT_RETRY));
  });

  test('two consumers in two providers, each on its own queue', async () => {
    const qa = testQueue();
    const qb = testQueue();
    const a: number[] = [];
    const b: number[] = [];

    @Injectable()
    class ConsumerA {
      @Consume({ queue: qa })
      async handle(order: Order): Promise<void> {
        a.push(order.orderId);
      }
    }
    @Injectable()
    class ConsumerB {
      @Consume({ queue: qb })
      async handle(order: Order): Promise<void> {
        b.push(order.orderId);
      }
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [ConsumerA, ConsumerB] });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    for (let i = 1; i <= 3; i++) await rr.publish('', qa, { orderId: i });
    for (let i = 11; i <= 12; i++) await rr.publish('', qb, { orderId: i });
    await waitFor(() => a.length === 3 && b.length === 2, 10_000, 'both handlers');
    expect(a.sort()).toEqual([1, 2, 3]);
    expect(b.sort()).toEqual([11, 12]);
  });

  test('@OnFailure({ circuit }) shares one circuit between two handlers of one dependency, in health() too', async () => {
    const qa = testQueue(['10s']);
    const qb = testQueue(['10s']);
    const dependency = `carrier-${qa}`;
    const circuit = { dependency, openAfter: { failures: 2, within: '10s' as const }, probeEvery: '1h' as const };
    const calls: string[] = [];

    @Injectable()
    class Shipments {
      @OnFailure({ delays: ['10s'], circuit })
      @Consume({ queue: qa, prefetch: 1 })
      async book(): Promise<void> {
        calls.push('a');
        throw new Error('carrier 503');
      }

      @Consume({ queue: qb, prefetch: 1 })
      @OnFailure({ delays: ['10s'], circuit })
      async track(): Promise<void> {
        calls.push('b');
      }
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Shipments] });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    for (let i = 1; i <= 3; i++) await rr.publish('', qa, { orderId: i });
    const consumers = app.get(RabbitRetryConsumers);
    await waitFor(() => consumers.get(qb)?.health().circuit?.state === 'open', 10_000, 'the shared circuit to open');
    expect(consumers.get(qa)?.health().circuit).toMatchObject({ dependency, state: 'open' });
    // The second handler takes nothing while its dependency's circuit is open.
    await rr.publish('', qb, { orderId: 11 });
    await sleep(300);
    expect(calls).toEqual(['a', 'a']);
    expect(consumers.health().details[qb]).toMatchObject({ healthy: true, circuit: { state: 'open' } });
  });

  test('@OnFailure applies whether it is written above or below @Consume', async () => {
    const above = testQueue([]);
    const below = testQueue([]);

    @Injectable()
    class Handlers {
      @OnFailure({ delays: [] })
      @Consume({ queue: above })
      async first(): Promise<void> {
        throw new Error('first failed');
      }

      @Consume({ queue: below })
      @OnFailure({ delays: [] })
      async second(): Promise<void> {
        throw new Error('second failed');
      }
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Handlers] });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    await rr.publish('', above, { orderId: 1 });
    await rr.publish('', below, { orderId: 2 });
    // delays [] parks on the first failure; the default delays would have sent it to a retry queue.
    await waitForQueueDepth(rr, `${above}.parked`, 1);
    await waitForQueueDepth(rr, `${below}.parked`, 1);
    expect((await readParked(rr, above))[0]).toMatchObject({ 'retry-reason': 'exhausted', 'retry-last-error': 'first failed' });
    expect((await readParked(rr, below))[0]).toMatchObject({ 'retry-reason': 'exhausted', 'retry-last-error': 'second failed' });
    expect(await queueExists(retryQueueName(above, '5s'))).toBe(false);
    expect(await queueExists(retryQueueName(below, '5s'))).toBe(false);
  });

  test('module defaults (defaultOnFailure, prefetch) and a method overriding them', async () => {
    const byDefault = testQueue(['300ms']);
    const overridden = testQueue([]);
    const slowDefault = testQueue(['300ms']);
    const slowOne = testQueue(['300ms']);
    let inFlight = { default: 0, one: 0 };
    const max = { default: 0, one: 0 };
    const calls: string[] = [];

    async function slow(kind: 'default' | 'one'): Promise<void> {
      inFlight = { ...inFlight, [kind]: inFlight[kind] + 1 };
      max[kind] = Math.max(max[kind], inFlight[kind]);
      await sleep(200);
      inFlight = { ...inFlight, [kind]: inFlight[kind] - 1 };
    }

    @Injectable()
    class Handlers {
      // No @OnFailure: the module's delays and retryable apply.
      @Consume({ queue: byDefault })
      async inherits(order: Order): Promise<void> {
        calls.push(`inherits:${order.orderId}`);
        if (order.orderId === 1) throw new Error('carrier down');
        throw new ValidationError('no address');
      }

      // Overrides the delays; keeps the module's retryable.
      @Consume({ queue: overridden })
      @OnFailure({ delays: [] })
      async overrides(): Promise<void> {
        throw new Error('carrier down');
      }

      @Consume({ queue: slowDefault })
      async withDefaultPrefetch(): Promise<void> {
        await slow('default');
      }

      @Consume({ queue: slowOne, prefetch: 1 })
      async withOwnPrefetch(): Promise<void> {
        await slow('one');
      }
    }

    const app = await boot({
      imports: [
        RabbitRetryModule.forRoot({
          url: AMQP_URL,
          prefetch: 3,
          defaultOnFailure: { delays: ['300ms'], retryable: (err) => !(err instanceof ValidationError) },
        }),
      ],
      providers: [Handlers],
    });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);

    await rr.publish('', byDefault, { orderId: 1 }, { messageId: 'retryable' });
    await rr.publish('', byDefault, { orderId: 2 }, { messageId: 'validation' });
    await rr.publish('', overridden, { orderId: 3 });
    await waitForQueueDepth(rr, `${byDefault}.parked`, 2);
    await waitForQueueDepth(rr, `${overridden}.parked`, 1);
    const parked = await readParked(rr, byDefault);
    const reasons = Object.fromEntries(parked.map((h) => [String(h['retry-last-error']), [h['retry-reason'], h['retry-attempt']]]));
    // 'carrier down' went through the module's 300ms retry queue once; the ValidationError parked at once.
    expect(reasons).toEqual({ 'carrier down': ['exhausted', 1], 'no address': ['non-retryable', 0] });
    expect(await queueExists(retryQueueName(byDefault, '300ms'))).toBe(true);
    expect((await readParked(rr, overridden))[0]).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 0 });
    expect(await queueExists(retryQueueName(overridden, '300ms'))).toBe(false);

    for (let i = 0; i < 6; i++) {
      await rr.publish('', slowDefault, { orderId: i });
      await rr.publish('', slowOne, { orderId: i });
    }
    await waitFor(async () => (await queueDepth(slowDefault)) === 0 && (await queueDepth(slowOne)) === 0, 10_000, 'both queues drained');
    await waitFor(() => inFlight.default === 0 && inFlight.one === 0, 5_000, 'handlers done');
    expect(max).toEqual({ default: 3, one: 1 });
  });

  test('retry then park through a Nest handler: the headers of api.md, and one log line per retry and park', async () => {
    const delays: Delay[] = ['200ms', '400ms'];
    const queue = testQueue(delays);
    const exchange = testExchange();
    const attempts: number[] = [];

    @Injectable()
    class Failing {
      @Consume({ queue, exchange, routingKey: 'order.created' })
      @OnFailure({ delays })
      async handle(_order: Order, msg: Message): Promise<void> {
        attempts.push(msg.attempt);
        throw new Error(`carrier down (attempt ${msg.attempt + 1})`);
      }
    }

    const logger = new CaptureLogger();
    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Failing] }, logger);
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    await rr.publish(
      exchange,
      'order.created',
      { orderId: 5 },
      {
        messageId: 'order-5',
        correlationId: 'corr-5',
        headers: { 'x-tenant': 'acme' },
      },
    );
    await waitForQueueDepth(rr, `${queue}.parked`, 1);
    expect(attempts).toEqual([0, 1, 2]);

    const [h] = await readParked(rr, queue);
    expect(h).toMatchObject({
      'retry-attempt': 2,
      'retry-reason': 'exhausted',
      'retry-last-error': 'carrier down (attempt 3)',
      'retry-error-name': 'Error',
      'retry-original-exchange': exchange,
      'retry-original-routing-key': 'order.created',
      'retry-queue': queue,
      'x-tenant': 'acme',
    });
    expect(String(h['retry-error-stack'])).toContain('carrier down (attempt 3)');
    expect(String(h['retry-failed-at'])).toMatch(ISO_8601);
    expect(String(h['retry-first-failed-at'])).toMatch(ISO_8601);
    expect(Date.parse(String(h['retry-first-failed-at']))).toBeLessThanOrEqual(Date.parse(String(h['retry-failed-at'])));
    expect(Object.keys(h).filter((k) => k.startsWith('x-death') || k.startsWith('x-first-death') || k.startsWith('x-last-death'))).toEqual([]);
    const [parked] = await rr.parked(queue).peek({ limit: 1 });
    expect(parked.properties).toMatchObject({ messageId: 'order-5', correlationId: 'corr-5' });

    const retries = logger.matching(/^retry: /);
    const parks = logger.matching(/^parked: /);
    expect(retries).toEqual([
      `retry: queue '${queue}', message order-5, attempt 1 failed, next in 200ms (${queue}.retry.200ms): carrier down (attempt 1)`,
      `retry: queue '${queue}', message order-5, attempt 2 failed, next in 400ms (${queue}.retry.400ms): carrier down (attempt 2)`,
    ]);
    expect(parks).toEqual([`parked: queue '${queue}', message order-5, exhausted after attempt 3 (${queue}.parked): carrier down (attempt 3)`]);
    expect(logger.matching(/consumes/)).toEqual([`Failing.handle consumes '${queue}' on ${rr.url}`]);
    expect(logger.lines.some((l) => l.message.includes('guest:guest'))).toBe(false);
  });

  test('invalid JSON parks at once as non-retryable, without calling the handler', async () => {
    const queue = testQueue();
    let called = 0;

    @Injectable()
    class Handler {
      @Consume({ queue })
      async handle(): Promise<void> {
        called++;
      }
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Handler] });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    await rr.publish('', queue, '{"orderId": 1', { contentType: 'application/json' });
    await waitForQueueDepth(rr, `${queue}.parked`, 1);
    expect((await readParked(rr, queue))[0]).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-error-name': 'NonRetryableError' });
    expect(called).toBe(0);
  });

  test('guards, interceptors and pipes apply, with context type rabbit-retry', async () => {
    const queue = testQueue();
    const piped = testQueue([]);
    const handled: number[] = [];
    const intercepted: { type: string; data: unknown; handler: string }[] = [];
    const pipedSeen: { orderId: unknown; msg: unknown }[] = [];
    let guardSawMessage = false;

    @Injectable()
    class BlockedOrdersGuard implements CanActivate {
      canActivate(context: ExecutionContext): boolean {
        if (context.getType<string>() !== 'rabbit-retry') return false;
        const rpc = context.switchToRpc();
        guardSawMessage = rpc.getContext() instanceof Message;
        return !(rpc.getData<{ blocked?: boolean }>().blocked ?? false);
      }
    }

    @Injectable()
    class RecordingInterceptor implements NestInterceptor {
      intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
        const entry = { type: context.getType<string>(), data: context.switchToRpc().getData(), handler: context.getHandler().name };
        return next.handle().pipe(tap(() => intercepted.push(entry)));
      }
    }

    @Injectable()
    class Handlers {
      @Consume({ queue })
      @UseGuards(BlockedOrdersGuard)
      @UseInterceptors(RecordingInterceptor)
      async handle(order: Order & { blocked?: boolean }): Promise<void> {
        handled.push(order.orderId);
      }

      @Consume({ queue: piped })
      @OnFailure({ delays: [] })
      async parsed(@RabbitPayload('orderId', ParseIntPipe) orderId: number, @RabbitMessage() msg: Message): Promise<void> {
        pipedSeen.push({ orderId, msg });
      }
    }

    const app = await boot({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })],
      providers: [Handlers, BlockedOrdersGuard, RecordingInterceptor],
    });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    await rr.publish('', queue, { orderId: 1 });
    await rr.publish('', queue, { orderId: 2, blocked: true });
    await rr.publish('', piped, { orderId: '42' });
    await rr.publish('', piped, { orderId: 'forty-two' });

    await waitForQueueDepth(rr, `${queue}.parked`, 1);
    await waitFor(() => handled.length === 1 && intercepted.length === 1, 10_000, 'the allowed order');
    expect(handled).toEqual([1]);
    expect(guardSawMessage).toBe(true);
    expect(intercepted).toEqual([{ type: 'rabbit-retry', data: { orderId: 1 }, handler: 'handle' }]);
    // A guard's refusal parks at once: another attempt would be refused too.
    const [refused] = await readParked(rr, queue);
    expect(refused).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-error-name': 'NonRetryableError' });
    expect(String(refused['retry-last-error'])).toContain('Handlers.handle refused the message: Forbidden resource');

    // Pipes see the marked parameters; a pipe that throws fails the message like any handler error.
    await waitForQueueDepth(rr, `${piped}.parked`, 1);
    expect(pipedSeen).toHaveLength(1);
    expect(pipedSeen[0].orderId).toBe(42);
    expect(pipedSeen[0].msg).toBeInstanceOf(Message);
    expect((await readParked(rr, piped))[0]).toMatchObject({
      'retry-error-name': 'BadRequestException',
      'retry-last-error': 'Validation failed (numeric string is expected)',
    });
  });

  test('a consumer whose queue exists with other arguments fails the bootstrap with TOPOLOGY_MISMATCH', async () => {
    const queue = testQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true, arguments: { 'x-max-length': 5 } }));

    @Injectable()
    class Mismatched {
      @Consume({ queue })
      async handle(): Promise<void> {}
    }

    const app = await compile({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Mismatched] });
    const failure = app.init();
    await expect(failure).rejects.toMatchObject({ code: 'TOPOLOGY_MISMATCH', name: 'TopologyMismatchError' });
    await expect(failure).rejects.toThrow(new RegExp(`Mismatched\\.handle could not consume '${queue}' \\(TOPOLOGY_MISMATCH\\): .*${queue}`));
  });

  test('a broker that does not answer fails the start with CONNECTION', async () => {
    const failure = compile({
      imports: [RabbitRetryModule.forRoot({ url: 'amqp://guest:guest@127.0.0.1:1', connectTimeoutMs: 1000 })],
    });
    await expect(failure).rejects.toMatchObject({ code: 'CONNECTION' });
  });

  test('app.close() while handlers are in flight loses nothing: handled + still queued == published', async () => {
    const queue = testQueue();
    const published = 40;
    let started = 0;
    let handled = 0;

    @Injectable()
    class Slow {
      @Consume({ queue, prefetch: 5 })
      async handle(): Promise<void> {
        started++;
        await sleep(300);
        handled++;
      }
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Slow] });
    const rr = await client();
    for (let i = 0; i < published; i++) await rr.publish('', queue, { orderId: i });
    await waitFor(() => started >= 3, 10_000, 'handlers in flight');
    await app.close();
    const finishedAtClose = handled;
    expect(started).toBe(handled);
    await sleep(200);
    expect(handled).toBe(finishedAtClose);
    expect(handled).toBeGreaterThanOrEqual(3);
    expect(handled).toBeLessThan(published);
    expect(handled + (await queueDepth(queue))).toBe(published);
    expect(await queueDepth(`${queue}.parked`)).toBe(0);
    expect(await queueDepth(retryQueueName(queue, '5s'))).toBe(0);
  });

  test('@OnFailure without @Consume fails the bootstrap naming Class.method', async () => {
    @Injectable()
    class Forgetful {
      @OnFailure({ delays: ['1s'] })
      async handle(): Promise<void> {}
    }

    const app = await compile({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Forgetful] });
    await expect(app.init()).rejects.toThrow(/Forgetful\.handle has @OnFailure but no @Consume/);
  });

  test('a request-scoped provider is refused, naming the class', async () => {
    const queue = testQueue();

    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Consume({ queue })
      async handle(): Promise<void> {}
    }

    @Injectable()
    class DependsOnRequest {
      constructor(@Inject(PerRequest) readonly dep: PerRequest) {}
      @Consume({ queue })
      async handle(): Promise<void> {}
    }

    const app = await compile({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [PerRequest, DependsOnRequest] });
    const failure = app.init();
    await expect(failure).rejects.toThrow(/PerRequest\.handle is in a request-scoped provider/);
    await expect(failure).rejects.toThrow(/DependsOnRequest\.handle is in a request-scoped provider/);
    expect(await queueExists(queue)).toBe(false);
  });

  test('NonRetryableError from a Nest handler parks at once', async () => {
    const queue = testQueue();

    @Injectable()
    class Handler {
      @Consume({ queue })
      async handle(order: Order): Promise<void> {
        throw new NonRetryableError(`order ${order.orderId} is invalid`);
      }
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Handler] });
    const rr = app.get<RabbitRetry>(RABBIT_RETRY);
    await rr.publish('', queue, { orderId: 9 });
    await waitForQueueDepth(rr, `${queue}.parked`, 1);
    expect((await readParked(rr, queue))[0]).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-last-error': 'order 9 is invalid' });
  });

  test('two RabbitRetryModules: each consumes, on its own connection, for the providers of the module that imports it', async () => {
    const qa = testQueue();
    const qb = testQueue();

    @Injectable()
    class ConsumerA {
      constructor(
        readonly consumers: RabbitRetryConsumers,
        @InjectRabbitRetry() readonly rr: RabbitRetry,
      ) {}
      @Consume({ queue: qa })
      async handle(): Promise<void> {}
    }
    @Injectable()
    class ConsumerB {
      constructor(
        readonly consumers: RabbitRetryConsumers,
        @InjectRabbitRetry() readonly rr: RabbitRetry,
      ) {}
      @Consume({ queue: qb })
      async handle(): Promise<void> {}
    }
    @Module({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, connectionName: 'a' })], providers: [ConsumerA] })
    class ModuleA {}
    @Module({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, connectionName: 'b' })], providers: [ConsumerB] })
    class ModuleB {}

    const app = await boot({ imports: [ModuleA, ModuleB] });
    const a = app.get(ConsumerA).consumers;
    const b = app.get(ConsumerB).consumers;
    expect(a.all().map((c) => c.queue)).toEqual([qa]);
    expect(b.all().map((c) => c.queue)).toEqual([qb]);
    expect(app.get(ConsumerA).rr).not.toBe(app.get(ConsumerB).rr);
    expect(await rabbitConsumers(qa)).toBe(1);
    expect(await rabbitConsumers(qb)).toBe(1);
    await app.close();
    expect(a.all()).toEqual([]);
    expect(await rabbitConsumers(qa)).toBe(0);
  });
});

describe('RabbitRetry injected by its class', () => {
  test('app.get(RabbitRetry) is the client of RABBIT_RETRY, and a constructor parameter typed RabbitRetry gets it without a decorator', async () => {
    const queue = testQueue();

    @Injectable()
    class OrdersPublisher {
      constructor(readonly rr: RabbitRetry) {}
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [OrdersPublisher] });
    const rr = app.get(RabbitRetry);
    expect(rr).toBeInstanceOf(RabbitRetry);
    expect(rr).toBe(app.get(RABBIT_RETRY));
    expect(app.get(OrdersPublisher).rr).toBe(rr);
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await app.get(OrdersPublisher).rr.publish('', queue, { orderId: 1 });
    expect(await queueDepth(queue)).toBe(1);
  });

  test('forRootAsync with isGlobal: a feature module injects it by class without importing the module', async () => {
    @Injectable()
    class Feature {
      constructor(
        readonly rr: RabbitRetry,
        @InjectRabbitRetry() readonly byToken: RabbitRetry,
      ) {}
    }
    @Module({ providers: [Feature], exports: [Feature] })
    class FeatureModule {}

    const app = await boot({
      imports: [RabbitRetryModule.forRootAsync({ useFactory: () => ({ url: AMQP_URL }), isGlobal: true }), FeatureModule],
    });
    expect(app.get(Feature).rr).toBeInstanceOf(RabbitRetry);
    expect(app.get(Feature).rr).toBe(app.get(Feature).byToken);
    expect(app.get(RabbitRetry)).toBe(app.get(RABBIT_RETRY));
  });
});

describe('unknown options of the module and the decorators', () => {
  test('a typo in @Consume fails the bootstrap with INVALID_OPTIONS naming Class.method, and no consumer starts', async () => {
    const queue = testQueue();
    const fine = testQueue();

    @Injectable()
    class Fine {
      @Consume({ queue: fine })
      async handle(): Promise<void> {}
    }

    @Injectable()
    class Typo {
      @Consume({ queue, prefech: 1 } as ConsumeHandlerOptions)
      async handle(): Promise<void> {}
    }

    const app = await compile({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Fine, Typo] });
    const failure = app.init();
    await expect(failure).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(failure).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      name: 'InvalidOptionsError',
      message: `Typo.handle could not consume '${queue}' (INVALID_OPTIONS): \`prefech\` is not an option of @Consume; did you mean \`prefetch\`?`,
    });
    expect(await queueExists(queue)).toBe(false);
    expect(await queueExists(fine)).toBe(false);
  });

  test('a typo in @OnFailure, in its table, and onFailure given to @Consume fail the bootstrap with INVALID_OPTIONS', async () => {
    const queue = testQueue(['1s']);

    @Injectable()
    class DelayTypo {
      @Consume({ queue })
      @OnFailure({ delay: ['1s'] } as OnFailureOptions)
      async handle(): Promise<void> {}
    }
    // The module has defaults, which a dropped @OnFailure key would leave in force unnoticed.
    const module = RabbitRetryModule.forRoot({ url: AMQP_URL, defaultOnFailure: { delays: ['1m'] } });
    const app = await compile({ imports: [module], providers: [DelayTypo] });
    await expect(app.init()).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: `DelayTypo.handle could not consume '${queue}' (INVALID_OPTIONS): \`delay\` is not an option of @OnFailure; did you mean \`delays\`?`,
    });
    expect(await queueExists(queue)).toBe(false);

    @Injectable()
    class TableTypo {
      @Consume({ queue })
      @OnFailure({ delays: [], table: { maxAttempt: 3 } as TableRouteOptions })
      async handle(): Promise<void> {}
    }
    const app2 = await compile({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [TableTypo] });
    await expect(app2.init()).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining('`maxAttempt` is not an option of @OnFailure.table; did you mean `maxAttempts`?'),
    });

    @Injectable()
    class MisplacedOnFailure {
      @Consume({ queue, onFailure: { delays: [] } } as ConsumeHandlerOptions)
      async handle(): Promise<void> {}
    }
    const app3 = await compile({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [MisplacedOnFailure] });
    await expect(app3.init()).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringContaining('`onFailure` is not an option of @Consume; put it in @OnFailure({ delays, retryable }) on the same method'),
    });
    expect(await queueExists(queue)).toBe(false);
  });

  test('forRoot and forRootAsync refuse an unknown key when called', () => {
    const refused = (f: () => unknown): unknown => {
      try {
        f();
      } catch (err) {
        return err;
      }
      throw new Error('expected a throw');
    };
    const cases: [() => unknown, string | RegExp][] = [
      [
        () => RabbitRetryModule.forRoot({ url: AMQP_URL, isGlobl: true } as RabbitRetryModuleOptions),
        '`isGlobl` is not an option of RabbitRetryModule.forRoot; did you mean `isGlobal`?',
      ],
      [
        () => RabbitRetryModule.forRoot({ url: AMQP_URL, defaultOnFailure: { retriable: () => true } as OnFailureOptions }),
        '`retriable` is not an option of defaultOnFailure; did you mean `retryable`?',
      ],
      [
        () => RabbitRetryModule.forRootAsync({ useFactroy: () => ({ url: AMQP_URL }) } as RabbitRetryModuleAsyncOptions),
        '`useFactroy` is not an option of RabbitRetryModule.forRootAsync; did you mean `useFactory`?',
      ],
      [
        () => RabbitRetryModule.forRootAsync({ useFactory: () => ({}), global: true } as RabbitRetryModuleAsyncOptions),
        /^`global` is not an option of RabbitRetryModule\.forRootAsync; its options are .*`isGlobal`$/,
      ],
    ];
    for (const [f, message] of cases) {
      const err = refused(f);
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect(err).toMatchObject({ code: 'INVALID_OPTIONS', message });
    }
  });

  test("forRootAsync: an unknown key in the factory's options fails the start with INVALID_OPTIONS", async () => {
    const failure = compile({
      imports: [RabbitRetryModule.forRootAsync({ useFactory: () => ({ url: AMQP_URL, maxInFlight: 5 }) as RabbitRetryModuleOptions })],
    });
    await expect(failure).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(failure).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringMatching(
        /^`maxInFlight` is not an option of RabbitRetryModule options; its options are `url`, .*`defaultOnFailure`, `prefetch`, `serviceName`, `amqplibChannel`$/,
      ),
    });
  });
});

describe('RabbitRetryConsumers.health and a stuck handler', () => {
  test('a handler past stuckAfterMs makes health() unhealthy with details; once it settles, healthy again, and app.close() works', async () => {
    const queue = testQueue(['1m']);
    let release!: () => void;
    const hang = new Promise<void>((resolve) => (release = resolve));
    let handled = 0;

    @Injectable()
    class Hangs {
      @Consume({ queue, prefetch: 2, stuckAfterMs: 200 })
      @OnFailure({ delays: ['1m'] })
      async handle(body: { hang: boolean }): Promise<void> {
        if (body.hang) await hang;
        handled++;
      }
    }

    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Hangs] });
    const consumers = app.get(RabbitRetryConsumers);
    expect(consumers.health()).toMatchObject({ healthy: true, consumers: { [queue]: 'connected' } });
    const rr = await client();
    await rr.publish('', queue, { hang: true });
    await rr.publish('', queue, { hang: false });
    await waitFor(() => handled === 1, 10_000, 'the other message');
    await waitFor(() => !consumers.health().healthy, 5000, 'an unhealthy report');
    expect(consumers.health()).toMatchObject({
      healthy: false,
      consumers: { [queue]: 'connected' },
      details: { [queue]: { queue, state: 'connected', healthy: false, inFlight: 1, stuck: 1 } },
    });
    release();
    await waitFor(() => consumers.health().healthy, 5000, 'a healthy report');
    await app.close();
    expect(handled).toBe(2);
    expect(await queueDepth(queue)).toBe(0);
  });
});

describe('rabbit-retry/testing', () => {
  test('uniqueQueueName gives a new name each time, with the prefix', () => {
    const a = uniqueQueueName('orders');
    expect(a).toMatch(/^orders-[0-9a-f]{12}$/);
    expect(uniqueQueueName('orders')).not.toBe(a);
    expect(uniqueQueueName()).toMatch(/^rr-test-/);
  });

  test('waitForQueueDepth resolves at the depth and says what it saw on timeout', async () => {
    const rr = await client();
    const queue = testQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await rr.publish('', queue, { n: 1 });
    await rr.publish('', queue, { n: 2 });
    await expect(waitForQueueDepth(rr, queue, 2)).resolves.toBe(2);
    await expect(waitForQueueDepth(rr, queue, 3, 200)).rejects.toThrow(`'${queue}' held 2 message(s), not 3, after waiting 200 ms`);
  });

  test('readParked returns [] for a queue that never parked anything', async () => {
    const rr = await client();
    expect(await readParked(rr, uniqueQueueName())).toEqual([]);
  });

  test('deleteTestQueues deletes the work, retry and parked queues and the exchange', async () => {
    const delays: Delay[] = ['1s', '1m'];
    const queue = testQueue(delays);
    const exchange = testExchange();
    const rr = await client();
    const consumer = await rr.consume({ queue, exchange, onFailure: { delays } }, async () => undefined);
    await consumer.close();
    const names = [queue, retryQueueName(queue, '1s'), retryQueueName(queue, '1m'), `${queue}.parked`];
    for (const n of names) expect(await queueExists(n)).toBe(true);

    await deleteTestQueues(rr, queue, delays, { exchange });
    for (const n of names) expect(await queueExists(n)).toBe(false);
    await expect(withChannel((ch) => ch.checkExchange(exchange))).rejects.toMatchObject({ code: 404 });
  });

  test('deleteTestQueues refuses an unknown option before deleting anything', async () => {
    const rr = await client();
    const queue = testQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    const err = await deleteTestQueues(rr, queue, [], { exchnage: 'x' } as DeleteTestQueuesOptions).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect(err).toMatchObject({ code: 'INVALID_OPTIONS', message: '`exchnage` is not an option of deleteTestQueues; did you mean `exchange`?' });
    expect(await queueExists(queue)).toBe(true);
  });
});
