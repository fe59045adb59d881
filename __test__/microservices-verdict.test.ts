/**
 * RabbitRetryServer with `retryRequests` asks the one verdict where a failed
 * request goes, and answers its caller exactly when, and only when, the
 * request parks: under `brokerDelay` (RabbitMQ 4.3), under the retry table,
 * and at `deliveryLimit` (parked before its handler). `onFailure.retryable`
 * is asked once per failure.
 */
import 'reflect-metadata';

import { Controller, type INestMicroservice, type LoggerService } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type { ConfirmChannel, ConsumeMessage } from 'amqplib';

import type { RabbitRetry } from '../lib';
import { RabbitRetryServer, type RabbitRetryServerOptions } from '../lib/microservices';
import {
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  dropTestDatabase,
  getOne,
  it43,
  pgUrl,
  psql,
  queueDepth,
  sleep,
  testQueue,
  waitFor,
} from './helpers';
import { amqpConnection } from './broker';

class QuietLogger implements LoggerService {
  log(): void {}
  warn(): void {}
  error(): void {}
}

const apps: INestMicroservice[] = [];
let db: string;

beforeAll(() => {
  db = createTestDatabase('verdict');
});
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});
afterAll(async () => {
  await closeAmqp();
  dropTestDatabase(db);
});

class CarrierError extends Error {}

/** A service whose `quote` handler always fails, counting its calls and the `retryable` predicate's. */
async function failingService(options: RabbitRetryServerOptions) {
  const calls = { handler: 0, retryable: 0 };
  @Controller()
  class QuotesController {
    @MessagePattern({ cmd: 'quote' })
    quote(@Payload() _data: unknown): number {
      calls.handler++;
      throw new CarrierError('carrier 503');
    }
  }
  const moduleRef = await Test.createTestingModule({ controllers: [QuotesController] })
    .setLogger(new QuietLogger())
    .compile();
  const onFailure = {
    ...options.onFailure,
    retryable: () => {
      calls.retryable++;
      return true;
    },
  };
  const app = moduleRef.createNestMicroservice({ strategy: new RabbitRetryServer({ ...options, onFailure, retryRequests: true }) });
  apps.push(app);
  await app.listen();
  return calls;
}

/** A caller as Nest's RMQ client is: direct reply-to on one channel; its answers by request id, with when each came. */
async function caller(): Promise<{ ch: ConfirmChannel; answers: Map<string, { at: number; body: Record<string, unknown> }> }> {
  const conn = await amqpConnection();
  const ch = await conn.createConfirmChannel();
  const answers = new Map<string, { at: number; body: Record<string, unknown> }>();
  await ch.consume(
    'amq.rabbitmq.reply-to',
    (m: ConsumeMessage | null) => {
      if (!m) return;
      const body = JSON.parse(m.content.toString()) as Record<string, unknown>;
      answers.set(String(body.id), { at: Date.now(), body });
    },
    { noAck: true },
  );
  return { ch, answers };
}

function request(ch: ConfirmChannel, queue: string, id: string): void {
  ch.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: { cmd: 'quote' }, data: {}, id })), {
    replyTo: 'amq.rabbitmq.reply-to',
    correlationId: id,
    persistent: true,
  });
}

describe('retryRequests: the caller is answered exactly when the request parks', () => {
  it43('under brokerDelay: not while the broker retries it, once when it parks; retryable asked once per failure', async () => {
    const queue = testQueue();
    const calls = await failingService({
      queue,
      queueType: 'quorum',
      onFailure: { brokerDelay: { min: '200ms', max: '400ms', attempts: 2 } },
    });
    const { ch, answers } = await caller();
    request(ch, queue, 'q-1');
    await waitFor(() => calls.handler === 2, 10_000, 'the second attempt');
    // Two failures, the broker holds it for the third: nobody is answered yet.
    expect(answers.size).toBe(0);
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'parked');
    await waitFor(() => answers.size === 1, 5_000, 'the answer');
    expect(calls).toEqual({ handler: 3, retryable: 3 });
    expect(answers.get('q-1')?.body).toMatchObject({ id: 'q-1', isDisposed: true, err: expect.anything() });
    await sleep(500);
    expect(answers.size).toBe(1);
    await ch.close();
  });

  it('under the retry table: not while its row waits in the table, once when it parks', async () => {
    const rr: RabbitRetry = await connectClient({ retryTable: { url: pgUrl(db) } });
    const queue = testQueue(['100ms']);
    const calls = await failingService({
      client: rr,
      queue,
      onFailure: { delays: ['100ms'], table: { maxAttempts: 1, nextAttemptAt: () => new Date(Date.now() + 1_500) } },
    });
    const { ch, answers } = await caller();
    request(ch, queue, 'q-2');
    await waitFor(() => Number(psql(`SELECT count(*) FROM message_retries WHERE queue = '${queue}'`, db)) === 1, 10_000, 'the row in the table');
    // The retry queue's attempt and the first failure: two calls, and the row waits. No answer.
    expect(calls.handler).toBe(2);
    await sleep(300);
    expect(answers.size).toBe(0);
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 15_000, 'parked after the table');
    await waitFor(() => answers.size === 1, 5_000, 'the answer');
    expect(calls).toEqual({ handler: 3, retryable: 3 });
    const parked = await getOne(`${queue}.parked`);
    expect(parked?.headers).toMatchObject({ 'retry-reason': 'exhausted' });
    await ch.close();
  });

  it('at deliveryLimit: a request parked before its handler answers its caller with why', async () => {
    const queue = testQueue(['100ms']);
    const options: RabbitRetryServerOptions = { queue, queueType: 'quorum', deliveryLimit: 2, onFailure: { delays: ['100ms'] } };
    // The queue is declared by a first start, then the request is taken twice and never settled.
    await failingService(options);
    await apps.pop()?.close();
    const { ch, answers } = await caller();
    request(ch, queue, 'q-3');
    await ch.waitForConfirms();
    const conn = await amqpConnection();
    for (let i = 0; i < 2; i++) {
      const taker = await conn.createChannel();
      await waitFor(async () => (await taker.get(queue, { noAck: false })) !== false, 5_000, 'the request');
      await taker.close();
    }
    const calls = await failingService(options);
    await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'parked at its limit');
    await waitFor(() => answers.size === 1, 5_000, 'the answer');
    expect(calls.handler).toBe(0);
    expect(String(answers.get('q-3')?.body.err)).toMatch(/parked \(delivery-limit\)/);
    await ch.close();
  });
});
