// The microservice's own e2e spec after moving from Transport.RMQ to
// rabbit-retry/microservices: events retry and park, requests are answered,
// a pattern without a handler is parked, on the local broker.
import 'reflect-metadata';

import { appendFileSync } from 'node:fs';

import type { INestMicroservice } from '@nestjs/common';
import { RabbitRetry } from 'rabbit-retry';
import { RabbitRetryClient } from 'rabbit-retry/microservices';
import { readParked, uniqueQueueName, waitForQueueDepth } from 'rabbit-retry/testing';
import { lastValueFrom } from 'rxjs';

import { createMicroservice, seen } from '../src/microservice';

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const queue = uniqueQueueName('install-spec-ms');
// The script deletes these queues afterwards.
if (process.env.RR_SPEC_QUEUES) {
  appendFileSync(process.env.RR_SPEC_QUEUES, [queue, `${queue}.retry.200ms`, `${queue}.retry.400ms`, `${queue}.parked`].join('\n') + '\n');
}

let app: INestMicroservice | undefined;
let client: RabbitRetryClient;
let rr: RabbitRetry;

beforeAll(async () => {
  app = await createMicroservice(url, queue);
  await app.listen();
  client = new RabbitRetryClient({ url, queue });
  rr = await RabbitRetry.connect({ url });
});

afterAll(async () => {
  await client?.close();
  await app?.close();
  await rr?.close();
});

test('a request is answered over direct reply-to; a handler that acks its message itself runs unchanged', async () => {
  expect(await lastValueFrom(client.send<number>({ cmd: 'sum' }, [1, 2, 3]))).toBe(6);
  expect(await lastValueFrom(client.send<number>('notifications', [1, 2]))).toBe(2);
  expect(seen.patterns).toEqual(['notifications']);
});

test('an event is handled and acked', async () => {
  await lastValueFrom(client.emit('user_created', { email: 'ada@example.com' }), { defaultValue: undefined });
  for (let i = 0; i < 100 && seen.created.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
  expect(seen.created).toEqual(['ada@example.com']);
  await waitForQueueDepth(rr, queue, 0);
});

test('an event whose handler throws retries through the delay queues, then parks with its error', async () => {
  await lastValueFrom(client.emit('user_deleted', { email: 'grace@example.com' }), { defaultValue: undefined });
  await waitForQueueDepth(rr, `${queue}.parked`, 1, 15_000);
  const [headers] = await readParked(rr, queue);
  expect(headers).toMatchObject({
    'retry-reason': 'exhausted',
    'retry-attempt': 2,
    'retry-last-error': 'the directory is down (grace@example.com)',
    'retry-error-name': 'Error',
    'retry-queue': queue,
  });
});

test('an event whose pattern has no handler is parked as no-handler', async () => {
  await lastValueFrom(client.emit('user_renamed', { email: 'x@example.com' }), { defaultValue: undefined });
  await waitForQueueDepth(rr, `${queue}.parked`, 2, 15_000);
  const reasons = (await readParked(rr, queue)).map((h) => h['retry-reason']);
  expect(reasons.sort()).toEqual(['exhausted', 'no-handler']);
});

test('app.close() returns promptly and leaves nothing unacked', async () => {
  const started = Date.now();
  await app!.close();
  app = undefined;
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(await rr.queueInfo(queue)).toEqual({ messages: 0, consumers: 0 });
});
