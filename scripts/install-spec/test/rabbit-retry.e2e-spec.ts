// The project's own e2e spec after `npm install rabbit-retry`: a failing
// handler retries and parks, a succeeding one acks, on the local broker.
import 'reflect-metadata';

import { appendFileSync } from 'node:fs';

import { Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { type Delay, type Message, RabbitRetry } from 'rabbit-retry';
import { Consume, InjectRabbitRetry, OnFailure, RabbitRetryModule } from 'rabbit-retry/nestjs';
import { readParked, uniqueQueueName, waitForQueueDepth } from 'rabbit-retry/testing';

import { AppModule, AppService } from '../src/app.module';

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const okQueue = uniqueQueueName('install-spec-ok');
const failingQueue = uniqueQueueName('install-spec-failing');
const delays: Delay[] = ['200ms', '400ms'];
// The script deletes these queues afterwards.
if (process.env.RR_SPEC_QUEUES) {
  appendFileSync(process.env.RR_SPEC_QUEUES, [okQueue, ...delays.map((d) => `${okQueue}.retry.${d}`), `${okQueue}.parked`].join('\n') + '\n');
  appendFileSync(
    process.env.RR_SPEC_QUEUES,
    [failingQueue, ...delays.map((d) => `${failingQueue}.retry.${d}`), `${failingQueue}.parked`].join('\n') + '\n',
  );
}

interface Order {
  orderId: number;
}

const rated: number[] = [];
const attempts: number[] = [];

@Injectable()
class ShipmentConsumer {
  constructor(private readonly app: AppService) {}

  @Consume({ queue: okQueue })
  @OnFailure({ delays })
  async rate(order: Order): Promise<void> {
    expect(this.app.getHello()).toBe('Hello World!');
    rated.push(order.orderId);
  }

  @OnFailure({ delays })
  @Consume({ queue: failingQueue })
  async rateWithBrokenCarrier(order: Order, msg: Message): Promise<void> {
    attempts.push(msg.attempt);
    throw new Error(`carrier down for order ${order.orderId}`);
  }
}

@Injectable()
class OrdersPublisher {
  constructor(@InjectRabbitRetry() readonly rr: RabbitRetry) {}
}

@Module({
  imports: [AppModule, RabbitRetryModule.forRoot({ url, connectionName: 'install-spec' })],
  providers: [ShipmentConsumer, OrdersPublisher],
})
class ShippingModule {}

let app: INestApplicationContext | undefined;

beforeAll(async () => {
  app = await NestFactory.createApplicationContext(ShippingModule, { logger: ['error', 'warn'], abortOnError: false });
  app.enableShutdownHooks();
});

afterAll(async () => {
  await app?.close();
});

test('a succeeding handler acks', async () => {
  const rr = app!.get(OrdersPublisher).rr;
  await rr.publish('', okQueue, { orderId: 1 }, { messageId: 'order-1' });
  await waitForQueueDepth(rr, okQueue, 0);
  await new Promise((r) => setTimeout(r, 300));
  expect(rated).toEqual([1]);
  expect(await rr.queueInfo(`${okQueue}.parked`)).toEqual({ messages: 0, consumers: 0 });
});

test('a failing handler retries, then parks with its error', async () => {
  const rr = app!.get(OrdersPublisher).rr;
  await rr.publish('', failingQueue, { orderId: 2 }, { messageId: 'order-2' });
  await waitForQueueDepth(rr, `${failingQueue}.parked`, 1, 15_000);
  expect(attempts).toEqual([0, 1, 2]);
  const [headers] = await readParked(rr, failingQueue);
  expect(headers).toMatchObject({
    'retry-reason': 'exhausted',
    'retry-attempt': 2,
    'retry-last-error': 'carrier down for order 2',
    'retry-error-name': 'Error',
    'retry-queue': failingQueue,
  });
});

test('after the app closed, nothing was left unacked', async () => {
  await app!.close();
  app = undefined;
  const rr = await RabbitRetry.connect({ url });
  try {
    expect(await rr.queueInfo(okQueue)).toEqual({ messages: 0, consumers: 0 });
    expect(await rr.queueInfo(failingQueue)).toEqual({ messages: 0, consumers: 0 });
    expect((await rr.queueInfo(`${failingQueue}.parked`))?.messages).toBe(1);
  } finally {
    await rr.close();
  }
});
