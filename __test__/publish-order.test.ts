/**
 * Publishes made one after another without awaiting each reach the broker in
 * the order they were made, with their confirms awaited together: through
 * `rr.publish`, golevelup's `AmqpConnection.publish`, and `rr.request`.
 */
import type { Message } from '../lib';
import { AmqpConnection } from '../lib/nestjs';
import { cleanup, closeAmqp, connectClient, testQueue, track, waitFor } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

/** How many publishes each test makes before awaiting any. */
const COUNT = 500;

/** The `n` of each message the consumer of `queue` handles, in the order it handles them. */
async function consumeInOrder(queue: string): Promise<number[]> {
  const rr = await connectClient();
  const seen: number[] = [];
  track(await rr.consume({ queue, prefetch: 1 }, (msg: Message) => void seen.push(msg.json<{ n: number }>().n)));
  return seen;
}

const inOrder = Array.from({ length: COUNT }, (_, i) => i);

test(`${COUNT} rr.publish calls not awaited one by one reach the consumer in call order`, async () => {
  const queue = testQueue();
  const seen = await consumeInOrder(queue);
  const rr = await connectClient();
  await Promise.all(inOrder.map((n) => rr.publish('', queue, { n })));
  await waitFor(() => seen.length === COUNT, 20_000, `${COUNT} messages handled`);
  expect(seen).toEqual(inOrder);
});

test(`${COUNT} AmqpConnection.publish calls not awaited one by one reach the consumer in call order`, async () => {
  const queue = testQueue();
  const seen = await consumeInOrder(queue);
  const amqp = new AmqpConnection(await connectClient());
  await Promise.all(inOrder.map((n) => amqp.publish('', queue, { n })));
  await waitFor(() => seen.length === COUNT, 20_000, `${COUNT} messages handled`);
  expect(seen).toEqual(inOrder);
});

test('publishes interleaved with a failing one keep their order, and the failing one fails alone', async () => {
  const queue = testQueue();
  const seen = await consumeInOrder(queue);
  const rr = await connectClient();
  const sends = inOrder.map((n) => (n === 250 ? rr.publish('', `${queue}.nowhere`, { n }) : rr.publish('', queue, { n })));
  const settled = await Promise.allSettled(sends);
  const failed = settled.flatMap((s, n) => (s.status === 'rejected' ? [{ n, code: (s.reason as { code?: unknown }).code }] : []));
  expect(failed).toEqual([{ n: 250, code: 'UNROUTABLE' }]);
  await waitFor(() => seen.length === COUNT - 1, 20_000, `${COUNT - 1} messages handled`);
  expect(seen).toEqual(inOrder.filter((n) => n !== 250));
});

test('of many publishes in flight, exactly the returned ones fail, each with its own UNROUTABLE', async () => {
  const queue = testQueue();
  const seen = await consumeInOrder(queue);
  const rr = await connectClient();
  // Every seventh goes nowhere; the broker confirms many publishes with one ack, returns first.
  const nowhere = (n: number) => n % 7 === 3;
  const many = Array.from({ length: COUNT * 4 }, (_, i) => i);
  const sends = many.map((n) => rr.publish('', nowhere(n) ? `${queue}.nowhere` : queue, { n }));
  const settled = await Promise.allSettled(sends);
  const failed = settled.flatMap((s, n) => (s.status === 'rejected' ? [{ n, code: (s.reason as { code?: unknown }).code }] : []));
  expect(failed).toEqual(many.filter(nowhere).map((n) => ({ n, code: 'UNROUTABLE' })));
  const routed = many.filter((n) => !nowhere(n));
  await waitFor(() => seen.length === routed.length, 20_000, `${routed.length} messages handled`);
  expect(seen).toEqual(routed);
});

test(`${COUNT / 5} requests not awaited one by one reach the handler in call order`, async () => {
  const queue = testQueue();
  const seen: number[] = [];
  const server = await connectClient();
  track(
    await server.consume({ queue, prefetch: 1 }, async (msg: Message) => {
      const { n } = msg.json<{ n: number }>();
      seen.push(n);
      await server.reply(msg.properties.replyTo as string, Buffer.from(JSON.stringify({ n })), { correlationId: msg.properties.correlationId as string });
    }),
  );
  const rr = await connectClient();
  const count = COUNT / 5;
  const replies = await Promise.all(Array.from({ length: count }, (_, n) => rr.request<{ n: number }>({ routingKey: queue, payload: { n } })));
  expect(replies.map((r) => r.n)).toEqual(inOrder.slice(0, count));
  expect(seen).toEqual(inOrder.slice(0, count));
});
