/**
 * rabbit-retry/microservices against the real broker: the handlers of
 * NestJS's microservices and RabbitMQ documentation, in their shapes
 * (`@MessagePattern({ cmd: 'sum' })`, `@EventPattern('user_created')`,
 * `@Payload()` and `@Ctx()` with a channel ack), run by RabbitRetryServer.
 * Producers and callers are RabbitRetryClient, and amqplib publishing what
 * Nest's own RMQ client publishes.
 */
import 'reflect-metadata';

import { Controller, Inject, Injectable, type INestMicroservice, type LoggerService, type ModuleMetadata } from '@nestjs/common';
import { ClientProxy, ClientsModule, Ctx, EventPattern, MessagePattern, Payload, RmqContext, RmqRecordBuilder, RpcException } from '@nestjs/microservices';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { Test } from '@nestjs/testing';
import type { ConsumeMessage } from 'amqplib';
import { type Observable, from, lastValueFrom, throwError, toArray } from 'rxjs';

import { DEFAULT_DELAYS, Message, NonRetryableError, UnroutableError, UnsupportedOptionError, InvalidOptionsError, type Delay } from '../lib';
import {
  RabbitRetryChannelRef,
  RabbitRetryClient,
  RabbitRetryContext,
  RabbitRetryExceptionFilter,
  RabbitRetryServer,
  type RabbitRetryServerOptions,
} from '../lib/microservices';
import { cleanup, closeAmqp, connectClient, getOne, queueDepth, queueUnacked, sleep, testQueue, topologyDepths, waitFor } from './helpers';
import { amqpConnection } from './broker';

/** Collects what Nest logs. */
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

const DELAYS: readonly Delay[] = ['100ms', '200ms'];

// What each test started; afterEach closes it before cleanup() deletes the queues.
const apps: INestMicroservice[] = [];
const clients: ClientProxy[] = [];

interface Service {
  app: INestMicroservice;
  server: RabbitRetryServer;
  logger: CaptureLogger;
}

/**
 * Starts a microservice with `metadata` (its controllers) on RabbitRetryServer,
 * as `NestFactory.createMicroservice(AppModule, { strategy })` would, with
 * RabbitRetryExceptionFilter unless `filter` is false.
 */
async function start(metadata: ModuleMetadata, options: RabbitRetryServerOptions, filter = true): Promise<Service> {
  const logger = new CaptureLogger();
  const moduleRef = await Test.createTestingModule(metadata).setLogger(logger).compile();
  const server = new RabbitRetryServer(options);
  const app = moduleRef.createNestMicroservice({ strategy: server });
  apps.push(app);
  if (filter) app.useGlobalFilters(new RabbitRetryExceptionFilter());
  await app.listen();
  return { app, server, logger };
}

function client(queue: string): RabbitRetryClient {
  const c = new RabbitRetryClient({ queue });
  clients.push(c);
  return c;
}

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});
afterAll(closeAmqp);

/** Publishes what Nest's RMQ client's `emit` publishes: `{ pattern, data }` as JSON, to the queue. */
async function emitRaw(queue: string, pattern: unknown, data: unknown): Promise<void> {
  await publishRaw(queue, Buffer.from(JSON.stringify({ pattern, data })));
}

async function publishRaw(queue: string, body: Buffer, options: Record<string, unknown> = {}): Promise<void> {
  const ch = await (await amqpConnection()).createConfirmChannel();
  try {
    ch.sendToQueue(queue, body, options);
    await ch.waitForConfirms();
  } finally {
    await ch.close();
  }
}

/**
 * Sends a request as Nest's RMQ client does (`{ pattern, data, id }`, its
 * correlation id, `reply-to` direct reply-to or `replyQueue`) and resolves
 * to the replies, as they came, up to the one with `isDisposed`.
 */
async function requestRaw(
  queue: string,
  pattern: unknown,
  data: unknown,
  replyQueue?: string,
): Promise<{ body: Record<string, unknown>; correlationId: string }[]> {
  const conn = await amqpConnection();
  const ch = await conn.createConfirmChannel();
  const replyTo = replyQueue ?? 'amq.rabbitmq.reply-to';
  const id = `req-${Math.random().toString(16).slice(2)}`;
  try {
    if (replyQueue) await ch.assertQueue(replyQueue, { exclusive: true });
    const replies: { body: Record<string, unknown>; correlationId: string }[] = [];
    const done = new Promise<void>((resolve) => {
      void ch.consume(
        replyTo,
        (m: ConsumeMessage | null) => {
          if (!m) return;
          const body = JSON.parse(m.content.toString()) as Record<string, unknown>;
          replies.push({ body, correlationId: m.properties.correlationId as string });
          if (body.isDisposed) resolve();
        },
        { noAck: true },
      );
    });
    await sleep(50);
    ch.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern, data, id })), { replyTo, correlationId: id });
    await ch.waitForConfirms();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('no reply within 10 s')), 10_000);
    });
    try {
      await Promise.race([done, timeout]);
    } finally {
      clearTimeout(timer);
    }
    return replies;
  } finally {
    await ch.close().catch(() => undefined);
  }
}

/** An RPC or HTTP arguments host over `[data, context]`. */
function withType(ctx: unknown, type: 'rpc' | 'http'): ExecutionContextHost {
  const host = new ExecutionContextHost([{}, ctx]);
  host.setType(type);
  return host;
}

/** The parked copies' headers and bodies, taken off `queue.parked`. */
async function takeParked(queue: string, n: number): Promise<{ headers: Record<string, unknown>; body: Buffer }[]> {
  await waitFor(async () => (await queueDepth(`${queue}.parked`)) === n, 10_000, `${n} parked message(s) in ${queue}.parked`);
  const out = [];
  for (let i = 0; i < n; i++) {
    const m = await getOne(`${queue}.parked`);
    if (m) out.push({ headers: m.headers, body: m.content });
  }
  return out;
}

class CarrierError extends Error {
  override name = 'CarrierError';
}

interface UserCreatedEvent {
  email: string;
}

describe('RabbitRetryServer: @EventPattern handlers of Transport.RMQ, unchanged', () => {
  test('the handler gets @Payload() and @Ctx(): the Message, its attempt, headers and pattern; the event is acked', async () => {
    const queue = testQueue(DELAYS);
    const seen: { data: UserCreatedEvent; ctx: RabbitRetryContext }[] = [];

    @Controller()
    class UsersController {
      @EventPattern<string>('user_created')
      async handleUserCreated(@Payload() data: UserCreatedEvent, @Ctx() context: RmqContext): Promise<void> {
        seen.push({ data, ctx: context as RabbitRetryContext });
      }
    }

    await start({ controllers: [UsersController] }, { queue, onFailure: { delays: DELAYS } });
    const record = new RmqRecordBuilder<UserCreatedEvent>({ email: 'ada@example.com' })
      .setOptions({ headers: { 'x-version': '1.0.0' }, priority: 3 })
      .build();
    await lastValueFrom(client(queue).emit('user_created', record), { defaultValue: undefined });
    await waitFor(() => seen.length === 1, 10_000, 'the handler');

    const { data, ctx } = seen[0];
    expect(data).toEqual({ email: 'ada@example.com' });
    expect(ctx).toBeInstanceOf(RmqContext);
    expect(ctx.getPattern()).toBe('user_created');
    const msg = ctx.getMessage();
    expect(msg).toBeInstanceOf(Message);
    expect(msg.attempt).toBe(0);
    expect(ctx.getAttempt()).toBe(0);
    expect(msg.headers['x-version']).toBe('1.0.0');
    expect(msg.properties.priority).toBe(3);
    expect(msg.properties.deliveryMode).toBe(2);
    expect(msg.json()).toEqual({ pattern: 'user_created', data: { email: 'ada@example.com' } });

    await waitFor(async () => (await queueUnacked(queue)) === 0, 5_000, 'the ack');
    expect(await topologyDepths(queue, DELAYS)).toEqual({ work: 0, retry: { [`${queue}.retry.100ms`]: 0, [`${queue}.retry.200ms`]: 0 }, parked: 0 });
  });

  test('a thrown error retries through the delay queues, then parks with the error itself (RabbitRetryExceptionFilter)', async () => {
    const queue = testQueue(DELAYS);
    const attempts: number[] = [];

    @Controller()
    class ShipmentsController {
      @EventPattern<string>('shipment_requested')
      async rate(@Payload() order: { orderId: number }, @Ctx() ctx: RabbitRetryContext): Promise<void> {
        attempts.push(ctx.getMessage().attempt);
        throw new CarrierError(`carrier 503 for order ${order.orderId}`);
      }
    }

    const { logger } = await start({ controllers: [ShipmentsController] }, { queue, onFailure: { delays: DELAYS } });
    await emitRaw(queue, 'shipment_requested', { orderId: 48213 });
    const [parked] = await takeParked(queue, 1);

    expect(attempts).toEqual([0, 1, 2]);
    expect(parked.headers).toMatchObject({
      'retry-reason': 'exhausted',
      'retry-attempt': 2,
      'retry-last-error': 'carrier 503 for order 48213',
      'retry-error-name': 'CarrierError',
      'retry-queue': queue,
      'retry-original-routing-key': queue,
    });
    expect(String(parked.headers['retry-error-stack'])).toContain('ShipmentsController.rate');
    expect(JSON.parse(parked.body.toString())).toEqual({ pattern: 'shipment_requested', data: { orderId: 48213 } });
    expect(await topologyDepths(queue, DELAYS)).toMatchObject({ work: 0, retry: { [`${queue}.retry.100ms`]: 0, [`${queue}.retry.200ms`]: 0 } });
    expect(logger.matching(/^retry: queue/)).toHaveLength(2);
    expect(logger.matching(/^parked: queue .* exhausted after attempt 3/)).toHaveLength(1);
  });

  test("with Nest's default exception filter, an RpcException parks with its message; a plain error with Nest's 'Internal server error', and a warning says why", async () => {
    const queue = testQueue(['100ms']);
    let calls = 0;

    @Controller()
    class OrdersController {
      @EventPattern('order_rpc_exception')
      async refused(_data: unknown): Promise<void> {
        calls++;
        throw new RpcException('order 7 has no address');
      }

      @EventPattern('order_plain_error')
      async broken(_data: unknown): Promise<void> {
        calls++;
        throw new NonRetryableError('never seen by the transport');
      }
    }

    const { logger } = await start({ controllers: [OrdersController] }, { queue, onFailure: { delays: ['100ms'] } }, false);
    await emitRaw(queue, 'order_rpc_exception', {});
    await emitRaw(queue, 'order_plain_error', {});
    const parked = await takeParked(queue, 2);
    const byError = Object.fromEntries(parked.map((p) => [String(p.headers['retry-last-error']), p.headers]));

    expect(byError['order 7 has no address']).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 1, 'retry-error-name': 'RpcHandlerError' });
    // The filter hid the NonRetryableError: it retried like any other error.
    expect(byError['Internal server error']).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 1, 'retry-error-name': 'RpcHandlerError' });
    expect(calls).toBe(4);
    expect(logger.matching(/Register RabbitRetryExceptionFilter/)).toHaveLength(1);
  });

  test('a NonRetryableError parks at once; a stream that errors retries like a throw', async () => {
    const queue = testQueue(['100ms']);
    const calls: string[] = [];

    @Controller()
    class OrdersController {
      @EventPattern('order_invalid')
      async invalid(_data: unknown): Promise<void> {
        calls.push('invalid');
        throw new NonRetryableError('order 9 has no lines');
      }

      @EventPattern('order_stream')
      stream(_data: unknown): Observable<never> {
        calls.push('stream');
        return throwError(() => new CarrierError('stream failed'));
      }
    }

    await start({ controllers: [OrdersController] }, { queue, onFailure: { delays: ['100ms'] } });
    await emitRaw(queue, 'order_invalid', { orderId: 9 });
    await emitRaw(queue, 'order_stream', {});
    const parked = await takeParked(queue, 2);
    const byError = Object.fromEntries(parked.map((p) => [String(p.headers['retry-last-error']), p.headers]));

    expect(byError['order 9 has no lines']).toMatchObject({
      'retry-reason': 'non-retryable',
      'retry-attempt': 0,
      'retry-error-name': 'NonRetryableError',
    });
    expect(byError['stream failed']).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 1, 'retry-error-name': 'CarrierError' });
    expect(calls.sort()).toEqual(['invalid', 'stream', 'stream']);
  });

  test('a body that is not JSON is parked once, byte for byte, without calling a handler', async () => {
    const queue = testQueue(DELAYS);
    let calls = 0;

    @Controller()
    class UsersController {
      @EventPattern('user_created')
      async handleUserCreated(_data: unknown): Promise<void> {
        calls++;
      }
    }

    await start({ controllers: [UsersController] }, { queue, onFailure: { delays: DELAYS } });
    const body = Buffer.from('{"pattern":"user_created","data":{"email":', 'utf8');
    await publishRaw(queue, body, { messageId: 'malformed-1' });
    const [parked] = await takeParked(queue, 1);

    expect(parked.body.equals(body)).toBe(true);
    expect(parked.headers).toMatchObject({ 'retry-reason': 'non-retryable', 'retry-attempt': 0, 'retry-error-name': 'NonRetryableError' });
    expect(String(parked.headers['retry-last-error'])).toMatch(/^the message body is not valid JSON/);
    await sleep(400); // longer than both delays: it was never retried
    expect(await topologyDepths(queue, DELAYS)).toEqual({ work: 0, retry: { [`${queue}.retry.100ms`]: 0, [`${queue}.retry.200ms`]: 0 }, parked: 0 });
    expect(calls).toBe(0);
  });

  test('an event whose pattern has no handler is parked as no-handler at once: not dropped, not left unacked', async () => {
    const queue = testQueue(DELAYS);

    @Controller()
    class UsersController {
      @EventPattern('user_created')
      async handleUserCreated(_data: unknown): Promise<void> {}
    }

    const { server } = await start({ controllers: [UsersController] }, { queue, onFailure: { delays: DELAYS } });
    await emitRaw(queue, 'user_deleted', { id: 3 });
    await emitRaw(queue, { cmd: 'user_archived' }, { id: 4 });
    await publishRaw(queue, Buffer.from('{"kind":"external","id":5}'));
    const parked = await takeParked(queue, 3);

    for (const p of parked) expect(p.headers).toMatchObject({ 'retry-reason': 'no-handler', 'retry-attempt': 0, 'retry-error-name': 'NoHandlerError' });
    const errors = parked.map((p) => String(p.headers['retry-last-error']));
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^no handler for pattern user_deleted/),
        expect.stringMatching(/^no handler for pattern \{"cmd":"user_archived"\}/),
        expect.stringMatching(/^the message has no pattern/),
      ]),
    );
    expect(parked.map((p) => JSON.parse(p.body.toString()))).toEqual(
      expect.arrayContaining([
        { pattern: 'user_deleted', data: { id: 3 } },
        { kind: 'external', id: 5 },
      ]),
    );
    expect(await queueUnacked(queue)).toBe(0);
    expect(server.consumer?.stats()).toMatchObject({ parked: 3, parkedByReason: { 'no-handler': 3 }, retried: 0, inFlight: 0 });
  });

  test('handlers that settle their own message (noAck: false) run unchanged: ack acks, nack() retries, nack without requeue parks', async () => {
    const queue = testQueue(['100ms']);
    const seen: string[] = [];

    @Controller()
    class NotificationsController {
      @MessagePattern('notifications')
      getNotifications(@Payload() data: number[], @Ctx() context: RmqContext): void {
        seen.push(`notifications ${context.getPattern()} ${data.join(',')}`);
        const channel = context.getChannelRef() as { ack(m: unknown): void };
        const originalMsg = context.getMessage();
        channel.ack(originalMsg);
      }

      @EventPattern<string>('retry_me')
      retryMe(@Payload() _data: unknown, @Ctx() context: RmqContext): void {
        seen.push('retry_me');
        (context.getChannelRef() as { nack(m: unknown): void }).nack(context.getMessage());
      }

      @EventPattern<string>('reject_me')
      rejectMe(@Payload() _data: unknown, @Ctx() context: RmqContext): void {
        seen.push('reject_me');
        (context.getChannelRef() as { nack(m: unknown, allUpTo: boolean, requeue: boolean): void }).nack(context.getMessage(), false, false);
      }
    }

    await start({ controllers: [NotificationsController] }, { queue, onFailure: { delays: ['100ms'] } });
    await emitRaw(queue, 'notifications', [1, 2]);
    await emitRaw(queue, 'retry_me', {});
    await emitRaw(queue, 'reject_me', {});
    const parked = await takeParked(queue, 2);
    const byReason = Object.fromEntries(parked.map((p) => [String(p.headers['retry-reason']), p.headers]));

    expect(byReason['non-retryable']['retry-last-error']).toMatch(/rejected the message without requeue/);
    expect(byReason.exhausted).toMatchObject({ 'retry-attempt': 1 });
    expect(seen.sort()).toEqual(['notifications notifications 1,2', 'reject_me', 'retry_me', 'retry_me']);
    expect(await queueDepth(queue)).toBe(0);
  });
});

describe('RabbitRetryServer: @MessagePattern request/response', () => {
  @Controller()
  class MathController {
    @MessagePattern({ cmd: 'sum' })
    accumulate(data: number[]): number {
      return (data || []).reduce((a, b) => a + b);
    }

    @MessagePattern({ cmd: 'sum_async' })
    async accumulateAsync(data: number[]): Promise<number> {
      await sleep(10);
      return data.reduce((a, b) => a + b);
    }

    @MessagePattern({ cmd: 'count' })
    count(data: number): Observable<number> {
      return from(Array.from({ length: data }, (_, i) => i + 1));
    }
  }

  test('RabbitRetryClient.send over direct reply-to: a value, a Promise and a stream are answered', async () => {
    const queue = testQueue(DEFAULT_DELAYS);
    await start({ controllers: [MathController] }, { queue });
    const math = client(queue);

    expect(await lastValueFrom(math.send<number>({ cmd: 'sum' }, [1, 2, 3]))).toBe(6);
    expect(await lastValueFrom(math.send<number>({ cmd: 'sum_async' }, [4, 5]))).toBe(9);
    expect(await lastValueFrom(math.send<number>({ cmd: 'count' }, 3).pipe(toArray()))).toEqual([1, 2, 3]);
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => lastValueFrom(math.send<number>({ cmd: 'sum' }, [i, 1]))));
    expect(many).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await queueDepth(queue)).toBe(0);
  });

  test("a client shaped as Nest's RMQ client gets Nest's reply packet, by correlation id, over direct reply-to and over a reply queue", async () => {
    const queue = testQueue(DEFAULT_DELAYS);
    await start({ controllers: [MathController] }, { queue });

    const direct = await requestRaw(queue, { cmd: 'sum' }, [1, 2, 3]);
    expect(direct).toHaveLength(1);
    expect(direct[0].body).toEqual({ id: expect.any(String), response: 6, isDisposed: true });
    expect(direct[0].correlationId).toBe(direct[0].body.id);

    const replyQueue = `${queue}-replies`;
    const viaQueue = await requestRaw(queue, { cmd: 'count' }, 2, replyQueue);
    expect(viaQueue.map((r) => r.body)).toEqual([
      { id: expect.any(String), response: 1 },
      { id: expect.any(String), response: 2, isDisposed: true },
    ]);
  });

  test('a failed request answers the caller with the error, as Nest would; it is neither retried nor parked', async () => {
    const queue = testQueue(DELAYS);
    const calls: string[] = [];

    @Controller()
    class OrdersController {
      @MessagePattern({ cmd: 'quote' })
      quote(data: { orderId: number }): number {
        calls.push(`quote ${data.orderId}`);
        if (data.orderId === 1) throw new RpcException('order 1 is closed');
        if (data.orderId === 2) throw new RpcException({ code: 'NO_STOCK', sku: 'A-1' });
        throw new CarrierError('carrier 503');
      }
    }

    await start({ controllers: [OrdersController] }, { queue, onFailure: { delays: DELAYS } });
    const orders = client(queue);
    await expect(lastValueFrom(orders.send({ cmd: 'quote' }, { orderId: 1 }))).rejects.toEqual({ status: 'error', message: 'order 1 is closed' });
    await expect(lastValueFrom(orders.send({ cmd: 'quote' }, { orderId: 2 }))).rejects.toEqual({ code: 'NO_STOCK', sku: 'A-1' });
    await expect(lastValueFrom(orders.send({ cmd: 'quote' }, { orderId: 3 }))).rejects.toEqual({ status: 'error', message: 'Internal server error' });

    await sleep(400);
    expect(calls).toEqual(['quote 1', 'quote 2', 'quote 3']);
    expect(await topologyDepths(queue, DELAYS)).toEqual({ work: 0, retry: { [`${queue}.retry.100ms`]: 0, [`${queue}.retry.200ms`]: 0 }, parked: 0 });
  });

  test("a request whose pattern has no handler is answered with Nest's no-handler error and parked as no-handler", async () => {
    const queue = testQueue(DELAYS);
    await start({ controllers: [MathController] }, { queue, onFailure: { delays: DELAYS } });

    await expect(lastValueFrom(client(queue).send({ cmd: 'divide' }, [1, 0]))).rejects.toBe(
      'There is no matching message handler defined in the remote service.',
    );
    const [parked] = await takeParked(queue, 1);
    expect(parked.headers).toMatchObject({ 'retry-reason': 'no-handler', 'retry-attempt': 0 });
    expect(JSON.parse(parked.body.toString())).toMatchObject({ pattern: { cmd: 'divide' }, data: [1, 0], id: expect.any(String) });
  });

  test('retryRequests: a failed request retries; the caller is answered by the attempt that succeeds, or by the one that parks it', async () => {
    const queue = testQueue(DELAYS);
    const attempts: Record<number, number[]> = { 1: [], 2: [] };

    @Controller()
    class QuotesController {
      @MessagePattern({ cmd: 'quote' })
      quote(@Payload() data: { orderId: number }, @Ctx() ctx: RabbitRetryContext): number {
        attempts[data.orderId].push(ctx.getAttempt());
        if (data.orderId === 1 && ctx.getAttempt() === 0) throw new CarrierError('carrier 503, once');
        if (data.orderId === 2) throw new CarrierError('carrier 503, always');
        return 42;
      }
    }

    await start({ controllers: [QuotesController] }, { queue, onFailure: { delays: DELAYS }, retryRequests: true });
    const quotes = client(queue);
    const [first, second] = await Promise.allSettled([
      lastValueFrom(quotes.send({ cmd: 'quote' }, { orderId: 1 })),
      lastValueFrom(quotes.send({ cmd: 'quote' }, { orderId: 2 })),
    ]);

    expect(first).toEqual({ status: 'fulfilled', value: 42 });
    expect(second).toEqual({ status: 'rejected', reason: { status: 'error', message: 'Internal server error' } });
    expect(attempts).toEqual({ 1: [0, 1], 2: [0, 1, 2] });
    const [parked] = await takeParked(queue, 1);
    expect(parked.headers).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 2, 'retry-last-error': 'carrier 503, always' });
  });

  test("Nest's serializer and deserializer hooks: a deserializer reads an external producer's JSON, a serializer shapes the replies", async () => {
    const queue = testQueue(DEFAULT_DELAYS);
    const seen: unknown[] = [];

    @Controller()
    class OrdersController {
      @EventPattern<string>('order_placed')
      placed(@Payload() data: unknown, @Ctx() ctx: RabbitRetryContext): void {
        seen.push({ data, pattern: ctx.getPattern(), type: ctx.getMessage().properties.type });
      }

      @MessagePattern({ cmd: 'sum' })
      sum(data: number[]): number {
        return data.reduce((a, b) => a + b);
      }
    }

    await start(
      { controllers: [OrdersController] },
      {
        queue,
        deserializer: {
          // Nest's own messages as they are; any other JSON is an order_placed event, named by its `type` property.
          deserialize: (value: unknown, options?: Record<string, unknown>) =>
            value !== null && typeof value === 'object' && 'pattern' in value
              ? (value as { pattern: unknown; data: unknown; id?: string })
              : { pattern: options?.type === 'order' ? 'order_placed' : undefined, data: value },
        },
        serializer: {
          serialize: (packet: { id: string; response?: unknown }) => ({
            ...packet,
            response: { total: packet.response },
            options: { headers: { 'x-served-by': 'orders' } },
          }),
        },
      },
    );
    await publishRaw(queue, Buffer.from(JSON.stringify({ orderId: 11 })), { type: 'order' });
    await waitFor(() => seen.length === 1, 10_000, 'the handler');
    expect(seen[0]).toEqual({ data: { orderId: 11 }, pattern: 'order_placed', type: 'order' });

    expect(await lastValueFrom(client(queue).send({ cmd: 'sum' }, [2, 3]))).toEqual({ total: 5 });
    const replies = await requestRaw(queue, { cmd: 'sum' }, [2, 3]);
    expect(replies[0].body).toEqual({ id: expect.any(String), response: { total: 5 }, isDisposed: true });
  });
});

describe('RabbitRetryServer and RabbitRetryClient in an application', () => {
  test('ClientsModule registers RabbitRetryClient as a custom client class; emit completes once the broker confirmed the event', async () => {
    const queue = testQueue(DEFAULT_DELAYS);
    const created: string[] = [];

    @Controller()
    class UsersController {
      @EventPattern('user_created')
      async handleUserCreated(data: UserCreatedEvent): Promise<void> {
        created.push(data.email);
      }
    }

    @Injectable()
    class SignupService {
      constructor(@Inject('USERS_SERVICE') readonly users: ClientProxy) {}
      signup(email: string): Promise<unknown> {
        return lastValueFrom(this.users.emit('user_created', { email }), { defaultValue: undefined });
      }
    }

    await start({ controllers: [UsersController] }, { queue });
    const moduleRef = await Test.createTestingModule({
      imports: [ClientsModule.register([{ name: 'USERS_SERVICE', customClass: RabbitRetryClient, options: { queue } }])],
      providers: [SignupService],
    }).compile();
    try {
      const signup = moduleRef.get(SignupService);
      expect(signup.users).toBeInstanceOf(RabbitRetryClient);
      await signup.signup('grace@example.com');
      await waitFor(() => created.length === 1, 10_000, 'the handler');
      expect(created).toEqual(['grace@example.com']);
    } finally {
      await moduleRef.close();
    }
  });

  test('emit fails with UNROUTABLE when no queue takes the event, instead of losing it', async () => {
    const nowhere = testQueue();
    const err = await lastValueFrom(client(nowhere).emit('user_created', { email: 'x@example.com' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnroutableError);
    expect(err).toMatchObject({ code: 'UNROUTABLE' });
  });

  test('app.close() is prompt: it waits for the handler in flight, acks it, and gives the unstarted messages back', async () => {
    const queue = testQueue(['1m']);
    const started: number[] = [];
    const finished: number[] = [];

    @Controller()
    class SlowController {
      @EventPattern('slow')
      async slow(data: { n: number }): Promise<void> {
        started.push(data.n);
        await sleep(300);
        finished.push(data.n);
      }
    }

    const { app } = await start({ controllers: [SlowController] }, { queue, prefetch: 1, onFailure: { delays: ['1m'] } });
    for (const n of [1, 2, 3]) await emitRaw(queue, 'slow', { n });
    await waitFor(() => started.length === 1, 10_000, 'the first handler');

    const t0 = Date.now();
    await app.close();
    const took = Date.now() - t0;
    apps.splice(apps.indexOf(app), 1);

    expect(took).toBeLessThan(2_000);
    expect(started).toEqual([1]);
    expect(finished).toEqual([1]);
    expect(await queueDepth(queue)).toBe(2);
    expect(await queueDepth(`${queue}.parked`)).toBe(0);
    const left = [await getOne(queue), await getOne(queue)].map((m) => JSON.parse(m?.content.toString() ?? 'null') as { data: { n: number } });
    expect(left.map((m) => m.data.n)).toEqual([2, 3]);

    const idle = await start({ controllers: [SlowController] }, { queue, onFailure: { delays: ['1m'] } });
    const t1 = Date.now();
    await idle.app.close();
    apps.splice(apps.indexOf(idle.app), 1);
    expect(Date.now() - t1).toBeLessThan(1_000);
  });

  test('options: a Transport.RMQ option with no meaning here fails at once with UNSUPPORTED_OPTION, naming it; an unknown one with INVALID_OPTIONS', () => {
    const refused = (f: () => unknown): unknown => {
      try {
        f();
      } catch (err) {
        return err;
      }
      throw new Error('expected a throw');
    };
    const noAck = refused(() => new RabbitRetryServer({ queue: 'q', noAck: false } as RabbitRetryServerOptions));
    expect(noAck).toBeInstanceOf(UnsupportedOptionError);
    expect(noAck).toMatchObject({
      code: 'UNSUPPORTED_OPTION',
      option: 'noAck',
      message: expect.stringMatching(/^`noAck` of RabbitRetryServer has no meaning in rabbit-retry: remove it/),
    });
    expect(refused(() => new RabbitRetryServer({ queue: 'q', urls: ['amqp://x'] } as RabbitRetryServerOptions))).toMatchObject({
      code: 'UNSUPPORTED_OPTION',
      option: 'urls',
      message: expect.stringContaining('write `url`'),
    });
    expect(refused(() => new RabbitRetryClient({ queue: 'q', replyQueue: 'r' } as never))).toMatchObject({
      code: 'UNSUPPORTED_OPTION',
      option: 'replyQueue',
    });
    const typo = refused(() => new RabbitRetryServer({ queue: 'q', prefech: 5 } as RabbitRetryServerOptions));
    expect(typo).toBeInstanceOf(InvalidOptionsError);
    expect(typo).toMatchObject({ message: '`prefech` is not an option of RabbitRetryServer; did you mean `prefetch`?' });
    expect(refused(() => new RabbitRetryServer({} as RabbitRetryServerOptions))).toMatchObject({
      code: 'INVALID_OPTIONS',
      message: expect.stringMatching(/^queue must be/),
    });
    expect(refused(() => new RabbitRetryClient({}))).toMatchObject({ code: 'INVALID_OPTIONS' });
  });

  test("RabbitRetryExceptionFilter passes a RabbitRetryServer handler's error on, gives other RPC errors Nest's answer, and HTTP errors to Nest's HTTP filter when it has the adapter", async () => {
    const httpHost = () => withType({ sent: false }, 'http');
    const rabbitCtx = new RabbitRetryContext(null as unknown as Message, new RabbitRetryChannelRef(), 'p');
    const error = new CarrierError('carrier 503');
    const filter = new RabbitRetryExceptionFilter();

    const passed = await lastValueFrom(filter.catch(error, withType(rabbitCtx, 'rpc')) as Observable<never>).catch((e: unknown) => e);
    expect(passed).toBe(error);
    const other = await lastValueFrom(filter.catch(new RpcException('bad'), withType({}, 'rpc')) as Observable<never>).catch((e: unknown) => e);
    expect(other).toEqual({ status: 'error', message: 'bad' });

    expect(() => filter.catch(error, httpHost())).toThrow(
      /without an HTTP adapter: register it as new RabbitRetryExceptionFilter\(app\.getHttpAdapter\(\)\)/,
    );
    const replies: unknown[] = [];
    const adapter = {
      isHeadersSent: () => false,
      reply: (_res: unknown, body: unknown, status: number) => replies.push({ body, status }),
      end: () => undefined,
    };
    new RabbitRetryExceptionFilter(adapter as never).catch(new RpcException('x'), httpHost());
    expect(replies).toEqual([{ body: { statusCode: 500, message: 'Internal server error' }, status: 500 }]);
  });

  test('a server on a client of its own module shares its connection, and unwrap() gives the client', async () => {
    const queue = testQueue(DEFAULT_DELAYS);
    const rr = await connectClient();

    @Controller()
    class MathController {
      @MessagePattern({ cmd: 'sum' })
      sum(data: number[]): number {
        return data.reduce((a, b) => a + b);
      }
    }

    const { server, app } = await start({ controllers: [MathController] }, { client: rr, queue });
    expect(server.unwrap()).toBe(rr);
    const math = new RabbitRetryClient({ client: rr, queue });
    expect(await lastValueFrom(math.send({ cmd: 'sum' }, [3, 4]))).toBe(7);
    await math.close();
    await app.close();
    apps.splice(apps.indexOf(app), 1);
    // Neither closed the shared client.
    expect(await rr.queueInfo(queue)).toEqual({ messages: 0, consumers: 0 });
  });
});
