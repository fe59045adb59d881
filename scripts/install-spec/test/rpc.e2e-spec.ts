// The project's RPC after `npm install rabbit-retry`: a @RabbitRPC handler answers
// rr.request and AmqpConnection.request, and its error comes back as a RemoteError.
import 'reflect-metadata';

import { appendFileSync } from 'node:fs';

import { Injectable, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DEFAULT_DELAYS, RabbitRetry, RemoteError, RequestTimeoutError, parkedQueueName, retryQueueName } from 'rabbit-retry';
import { AmqpConnection, InjectRabbitRetry, RabbitRPC, RabbitRetryModule } from 'rabbit-retry/nestjs';
import { uniqueQueueName } from 'rabbit-retry/testing';

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const quotes = uniqueQueueName('install-spec-quotes');
// The script deletes these queues afterwards.
if (process.env.RR_SPEC_QUEUES) {
  appendFileSync(process.env.RR_SPEC_QUEUES, [quotes, ...DEFAULT_DELAYS.map((d) => retryQueueName(quotes, d)), parkedQueueName(quotes)].join('\n') + '\n');
}

interface QuoteRequest {
  weightKg: number;
  slowMs?: number;
}

interface Quote {
  priceCents: number;
}

@Injectable()
class QuoteService {
  @RabbitRPC({ queue: quotes })
  async quote(request: QuoteRequest): Promise<Quote> {
    if (request.slowMs) await new Promise((r) => setTimeout(r, request.slowMs));
    if (request.weightKg <= 0) throw new RangeError(`weight must be positive, got ${request.weightKg}`);
    return { priceCents: 500 + request.weightKg * 120 };
  }
}

@Injectable()
class QuoteClient {
  constructor(
    @InjectRabbitRetry() readonly rr: RabbitRetry,
    readonly amqp: AmqpConnection,
  ) {}
}

@Module({
  imports: [RabbitRetryModule.forRoot({ url, connectionName: 'install-spec-rpc' })],
  providers: [QuoteService, QuoteClient],
})
class QuotesModule {}

let app: INestApplicationContext | undefined;

beforeAll(async () => {
  app = await NestFactory.createApplicationContext(QuotesModule, { logger: ['error', 'warn'], abortOnError: false });
});

afterAll(async () => {
  await app?.close();
});

test('rr.request gets the reply of the @RabbitRPC handler', async () => {
  const { rr } = app!.get(QuoteClient);
  const quote: Quote = await rr.request<Quote>({ routingKey: quotes, payload: { weightKg: 2 } });
  expect(quote).toEqual({ priceCents: 740 });
});

test('AmqpConnection.request gets it too, for every request sent at once', async () => {
  const { amqp } = app!.get(QuoteClient);
  const replies = await Promise.all([1, 2, 3].map((weightKg) => amqp.request<Quote>({ exchange: '', routingKey: quotes, payload: { weightKg } })));
  expect(replies).toEqual([{ priceCents: 620 }, { priceCents: 740 }, { priceCents: 860 }]);
});

test("the handler's error comes back as a RemoteError", async () => {
  const { rr } = app!.get(QuoteClient);
  const failed = await rr.request({ routingKey: quotes, payload: { weightKg: 0 } }).catch((e: unknown) => e);
  expect(failed).toBeInstanceOf(RemoteError);
  expect(failed).toMatchObject({ code: 'REMOTE_ERROR', remoteName: 'RangeError', message: 'weight must be positive, got 0' });
});

test('no reply within the timeout fails with REQUEST_TIMEOUT', async () => {
  const { rr } = app!.get(QuoteClient);
  const late = await rr.request({ routingKey: quotes, payload: { weightKg: 1, slowMs: 1000 }, timeout: 200 }).catch((e: unknown) => e);
  expect(late).toBeInstanceOf(RequestTimeoutError);
  expect(late).toMatchObject({ code: 'REQUEST_TIMEOUT', timeoutMs: 200 });
});
