/**
 * rabbit-retry/microservices where Nest's own RMQ transport sets the
 * expectations: the context's message in amqplib's shape and the `rpc`
 * execution context, `wildcards` on a topic exchange, a broadcast's queue of
 * the server's own (`queue: ''`), and connection errors with the OS's code.
 */
import 'reflect-metadata';

import { type CanActivate, Controller, type ExecutionContext, type INestMicroservice, Injectable, UseGuards } from '@nestjs/common';
import { ClientProxy, Ctx, EventPattern, MessagePattern, Payload, RmqContext } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { lastValueFrom } from 'rxjs';

import { ConnectionError, Message, parkedQueueName, retryQueueName } from '../lib';
import { RabbitRetryClient, RabbitRetryRmqMessage, RabbitRetryServer, RmqConnectionError, type RabbitRetryServerOptions } from '../lib/microservices';
import { cleanup, closeAmqp, connectClient, testExchange, testQueue, waitFor } from './helpers';

const apps: INestMicroservice[] = [];
const clients: ClientProxy[] = [];

async function start(controllers: (new (...args: never[]) => unknown)[], options: RabbitRetryServerOptions): Promise<RabbitRetryServer> {
  const moduleRef = await Test.createTestingModule({ controllers }).compile();
  const server = new RabbitRetryServer(options);
  const app = moduleRef.createNestMicroservice({ strategy: server });
  apps.push(app);
  await app.listen();
  return server;
}

function track<T extends ClientProxy>(c: T): T {
  clients.push(c);
  return c;
}

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});
afterAll(closeAmqp);

describe("the context, as Nest's RmqContext gives it", () => {
  it("getMessage() has amqplib's content, fields and properties.headers, and the guard sees an rpc context", async () => {
    const seen: { msg: RabbitRetryRmqMessage; type: string; rpcContext: unknown }[] = [];
    let guarded: string | undefined;

    @Injectable()
    class TypeGuard implements CanActivate {
      canActivate(context: ExecutionContext): boolean {
        guarded = context.getType();
        return true;
      }
    }

    @Controller()
    class Orders {
      @UseGuards(TypeGuard)
      @EventPattern<string>('order_placed')
      placed(@Payload() _data: unknown, @Ctx() ctx: RmqContext): void {
        seen.push({ msg: ctx.getMessage() as RabbitRetryRmqMessage, type: guarded ?? '', rpcContext: ctx });
      }
    }

    const queue = testQueue();
    await start([Orders], { queue });
    const client = track(new RabbitRetryClient({ queue, headers: { 'x-tenant': 'acme' } }));
    await lastValueFrom(client.emit('order_placed', { id: 7 }), { defaultValue: undefined });
    await waitFor(() => seen.length === 1, 10_000, 'the handler');

    const { msg, type, rpcContext } = seen[0];
    expect(type).toBe('rpc');
    expect(rpcContext).toBeInstanceOf(RmqContext);
    expect(msg).toBeInstanceOf(Message);
    expect(JSON.parse(msg.content.toString())).toEqual({ pattern: 'order_placed', data: { id: 7 } });
    expect(msg.fields).toEqual({ exchange: '', routingKey: queue, redelivered: false, deliveryTag: expect.any(Number) as number });
    expect(msg.fields.deliveryTag).toBeGreaterThanOrEqual(1);
    expect(msg.properties.headers).toEqual({ 'x-tenant': 'acme' });
    expect(msg.properties.contentType).toBe('application/json');
    expect(msg.headers).toEqual({ 'x-tenant': 'acme' });
    expect(msg.attempt).toBe(0);
  });
});

describe('wildcards', () => {
  it('binds each pattern, finds the handler by topic pattern; a key no pattern binds is unroutable', async () => {
    const got: string[] = [];

    @Controller()
    class Audit {
      @MessagePattern('audit.*.created')
      created(@Ctx() ctx: RmqContext): string {
        return `created:${ctx.getPattern()}`;
      }

      @EventPattern<string>('audit.#')
      any(@Ctx() ctx: RmqContext): void {
        got.push(ctx.getPattern());
      }
    }

    const queue = testQueue();
    const server = await start([Audit], { queue, wildcards: true });
    const rr = server.unwrap();
    const client = track(new RabbitRetryClient({ queue, wildcards: true }));

    expect(await lastValueFrom(client.send<string>('audit.user.created', {}))).toBe('created:audit.user.created');
    await lastValueFrom(client.emit('audit.user.deleted.hard', {}), { defaultValue: undefined });
    await lastValueFrom(client.emit('audit', {}), { defaultValue: undefined });
    await waitFor(() => got.length === 2, 10_000, 'the events');
    expect(got.sort()).toEqual(['audit', 'audit.user.deleted.hard']);

    // The exchange is named after the queue; a key no binding takes is the broker's to refuse.
    await expect(rr.publish(queue, 'billing.paid', Buffer.from('{}'))).rejects.toMatchObject({ code: 'UNROUTABLE' });
    await rr.deleteExchange(queue);
  });
});

describe("a broadcast's queue of the server's own", () => {
  it("each server of queue: '' gets its own copy, and closing deletes its queues", async () => {
    const exchange = testExchange();
    const pongs: string[] = [];

    @Controller()
    class Pinged {
      @EventPattern<string>('ping')
      ping(@Ctx() ctx: RmqContext): void {
        pongs.push(ctx.getMessage().fields.routingKey);
      }
    }

    const options: RabbitRetryServerOptions = { queue: '', exchange, exchangeType: 'fanout', queueOptions: { exclusive: true } };
    const one = await start([Pinged], options);
    const two = await start([Pinged], options);
    const queues = [one.consumer?.queue, two.consumer?.queue];
    expect(queues[0]).toMatch(new RegExp(`^${exchange}\\.[0-9a-f]{8}$`));
    expect(queues[1]).not.toBe(queues[0]);

    const client = track(new RabbitRetryClient({ exchange }));
    await lastValueFrom(client.emit('ping', 1), { defaultValue: undefined });
    await waitFor(() => pongs.length === 2, 10_000, 'both copies');
    expect(pongs).toEqual(['ping', 'ping']);

    const rr = await connectClient();
    for (const app of apps.splice(0)) await app.close();
    for (const q of queues as string[]) {
      expect(await rr.queueInfo(q)).toBeNull();
      expect(await rr.queueInfo(retryQueueName(q, '5s'))).toBeNull();
      expect(await rr.queueInfo(parkedQueueName(q))).toBeNull();
    }
  });

  it('refuses an exclusive named queue, other queueOptions, and a broadcast without exchange', () => {
    expect(() => new RabbitRetryServer({ queue: 'q', queueOptions: { exclusive: true } })).toThrow(/needs `queue: ''`/);
    expect(() => new RabbitRetryServer({ queue: 'q', queueOptions: { durable: false } } as RabbitRetryServerOptions)).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_OPTION', option: 'queueOptions.durable' }),
    );
    expect(() => new RabbitRetryServer({ queue: '' })).toThrow(/needs `exchange`/);
  });
});

describe('connection errors', () => {
  it("fail send with the OS's code, as Nest's RMQ client does, and keep rabbit-retry's", async () => {
    const url = new URL(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
    url.port = '3333';
    const client = track(new RabbitRetryClient({ url: url.toString(), queue: 'nowhere' }));
    const err = (await lastValueFrom(client.send('sum', [1])).catch((e: unknown) => e)) as RmqConnectionError;
    expect(err).toBeInstanceOf(RmqConnectionError);
    expect(err.code).toBe('ECONNREFUSED');
    expect(err.rabbitRetryCode).toBe('CONNECTION');
    expect(err.cause).toBeInstanceOf(ConnectionError);
    expect(err.message).toContain('connection refused');
  });
});
