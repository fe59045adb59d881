/**
 * `rr.request` against `@RabbitRPC` handlers of rabbit-retry/nestjs, on the real
 * broker: the reply of every request, a timeout and the reply that comes after it,
 * a handler's error as a `RemoteError`, and a failed request on the failure path.
 */
import 'reflect-metadata';

import { Injectable, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { type Message, RabbitRetry, RabbitRetryError, RemoteError, RequestTimeoutError } from '../lib';
import { type RabbitRPCOptions, RabbitRPC, RabbitRetryModule } from '../lib/nestjs';
import { AMQP_URL, closeAmqp, collectUnhandledRejections, deleteQueues, queueDepth, recordingLogger, uniqueName, waitFor } from './helpers';

const unhandled = collectUnhandledRejections();

/** What each test opened; afterEach closes and deletes it. */
const apps: INestApplication[] = [];
const queues: string[] = [];

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
  for (const q of queues.splice(0)) await deleteQueues(q);
  expect(unhandled).toEqual([]);
});
afterAll(closeAmqp);

/** A started application whose one @RabbitRPC handler, on a queue of its own, is `handle`. */
async function rpcApp(handle: (payload: unknown, msg: Message) => unknown, options: Partial<RabbitRPCOptions> = {}) {
  const queue = uniqueName('rr-test-rpc');
  queues.push(queue);
  @Injectable()
  class Rpc {
    @RabbitRPC({ queue, prefetch: 1, ...options })
    handle(payload: unknown, msg: Message): unknown {
      return handle(payload, msg);
    }
  }
  const logger = recordingLogger();
  const moduleRef = await Test.createTestingModule({
    imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, logger })],
    providers: [Rpc],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  apps.push(app);
  await app.init();
  return { queue, rr: app.get(RabbitRetry), logger };
}

/** A promise and what settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

test('every request gets its own reply, and sending the replies logs nothing', async () => {
  const { queue, rr, logger } = await rpcApp((payload) => ({ echo: payload }));
  const replies = await Promise.all(Array.from({ length: 50 }, (_, n) => rr.request({ routingKey: queue, payload: { n } })));
  expect(replies).toEqual(Array.from({ length: 50 }, (_, n) => ({ echo: { n } })));
  expect(logger.warnings).toEqual([]);
  expect(logger.errors).toEqual([]);
});

test('a reply that comes after the timeout is discarded: the request failed with REQUEST_TIMEOUT, the next one gets its own reply', async () => {
  const slow = gate();
  const { queue, rr } = await rpcApp(async (payload) => {
    if ((payload as { slow?: boolean }).slow) await slow.opened;
    return payload;
  });
  const late = await rr.request({ routingKey: queue, payload: { slow: true, n: 1 }, timeout: 300 }).catch((e: unknown) => e);
  expect(late).toBeInstanceOf(RequestTimeoutError);
  expect(late).toBeInstanceOf(RabbitRetryError);
  expect(late).toMatchObject({ code: 'REQUEST_TIMEOUT', timeoutMs: 300, exchange: '', routingKey: queue });
  expect((late as Error).message).toBe(`no reply within 300 ms to the request to exchange '' with routing key '${queue}'`);
  slow.open();
  // Prefetch 1: the next request is handled once the late one was answered and acked.
  await expect(rr.request({ routingKey: queue, payload: { n: 2 } })).resolves.toEqual({ n: 2 });
  expect(await queueDepth(queue)).toBe(0);
});

test("a handler's error reaches the caller as a RemoteError with its class, message and code, and the request is acked", async () => {
  class PaymentDeclined extends Error {
    override name = 'PaymentDeclined';
    readonly code = 'CARD_EXPIRED';
  }
  const { queue, rr, logger } = await rpcApp((payload) => {
    if ((payload as { coded?: boolean }).coded) throw new PaymentDeclined('card 4242 expired in 2020');
    throw new Error('no stock for sku-1');
  });
  const coded = await rr.request({ routingKey: queue, payload: { coded: true } }).catch((e: unknown) => e);
  expect(coded).toBeInstanceOf(RemoteError);
  expect(coded).toMatchObject({ code: 'REMOTE_ERROR', remoteName: 'PaymentDeclined', remoteCode: 'CARD_EXPIRED', message: 'card 4242 expired in 2020' });
  const plain = await rr.request({ routingKey: queue, payload: {} }).catch((e: unknown) => e);
  expect(plain).toBeInstanceOf(RemoteError);
  expect(plain).toMatchObject({ code: 'REMOTE_ERROR', remoteName: 'Error', remoteCode: undefined, message: 'no stock for sku-1' });
  expect(await queueDepth(queue)).toBe(0);
  expect(await queueDepth(`${queue}.parked`)).toBe(0);
  expect(logger.warnings).toEqual([]);
});

test("an errorHandler that nacks without requeue parks the request, and the caller's request times out", async () => {
  const { queue, rr } = await rpcApp(
    () => {
      throw new Error('the ledger is closed');
    },
    { errorHandler: (channel, msg) => channel.nack(msg, false, false) },
  );
  await expect(rr.request({ routingKey: queue, payload: { id: 7 }, timeout: 500 })).rejects.toMatchObject({ code: 'REQUEST_TIMEOUT' });
  await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'the request parked');
  const [parked] = await rr.parked(queue).peek();
  expect(parked?.json()).toEqual({ id: 7 });
  expect(parked?.headers['retry-reason']).toBe('non-retryable');
  expect(String(parked?.headers['retry-last-error'])).toContain('the ledger is closed');
});

test('an errorHandler that nacks with requeue sends the request down the failure path: with no delays, it parks as exhausted', async () => {
  let calls = 0;
  const { queue, rr } = await rpcApp(
    () => {
      calls++;
      throw new Error('the ledger is busy');
    },
    { errorHandler: (channel, msg) => channel.nack(msg), onFailure: { delays: [] } },
  );
  await expect(rr.request({ routingKey: queue, payload: { id: 8 }, timeout: 500 })).rejects.toMatchObject({ code: 'REQUEST_TIMEOUT' });
  await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'the request parked');
  const [parked] = await rr.parked(queue).peek();
  expect(parked?.headers['retry-reason']).toBe('exhausted');
  expect(calls).toBe(1);
});

test('a request without a reply-to whose handler throws takes the failure path', async () => {
  const { queue, rr } = await rpcApp(
    () => {
      throw new Error('nobody to answer');
    },
    { onFailure: { delays: [] } },
  );
  await rr.publish('', queue, { id: 9 });
  await waitFor(async () => (await queueDepth(`${queue}.parked`)) === 1, 10_000, 'the message parked');
  const [parked] = await rr.parked(queue).peek();
  expect(parked?.json()).toEqual({ id: 9 });
  expect(parked?.headers['retry-reason']).toBe('exhausted');
});
