/**
 * The batch codec, end to end: what a producer sent is what the handler gets,
 * whichever way each part crossed (a body in the shared buffer or its own, a
 * short id beside the JSON or in it), for many deliveries in one batch.
 */
import type { Message } from '../lib';
import { cleanup, closeAmqp, connectClient, testQueue, track, waitFor, withChannel } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

interface Sent {
  body: Buffer;
  messageId?: string;
  correlationId?: string;
  headers: Record<string, unknown>;
}

/** Bodies around the size where a body stops sharing the batch's buffer (16 KiB). */
const SIZES = [0, 1, 100, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 300_000];

function sent(i: number): Sent {
  const size = SIZES[i % SIZES.length];
  const body = Buffer.alloc(size);
  for (let j = 0; j < size; j++) body[j] = (i * 31 + j) % 251;
  return {
    body,
    // Short ids cross beside the JSON; long ones and ones JSON.parse would not intern inside it.
    messageId: i % 3 === 0 ? `${48213 + i}` : i % 3 === 1 ? `order-${'x'.repeat(40)}-${i}` : undefined,
    correlationId: i % 2 === 0 ? `c${i}` : undefined,
    headers: { n: i, 'ünïcode-名前': `värde ${i}`, nested: { list: [i, 'two', true] } },
  };
}

describe('a batch of deliveries crosses intact', () => {
  it('bodies, ids and headers of 70 deliveries taken in batches', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    const got = new Map<number, Message>();
    track(
      await rr.consume({ queue, prefetch: 50 }, async (msg) => {
        got.set(msg.headers.n as number, msg);
      }),
    );
    const count = 70;
    await withChannel(async (ch) => {
      for (let i = 0; i < count; i++) {
        const s = sent(i);
        ch.sendToQueue(queue, s.body, { messageId: s.messageId, correlationId: s.correlationId, headers: s.headers, persistent: false });
      }
    });
    await waitFor(async () => got.size === count, 20_000, `all ${count} delivered`);
    for (let i = 0; i < count; i++) {
      const s = sent(i);
      const m = got.get(i);
      expect(m).toBeDefined();
      expect(Buffer.compare(m!.body, s.body)).toBe(0);
      expect(m!.properties.messageId).toBe(s.messageId);
      expect(m!.properties.correlationId).toBe(s.correlationId);
      expect(m!.headers).toEqual(s.headers);
      expect(m!.routingKey).toBe(queue);
      expect(m!.attempt).toBe(0);
    }
  });
});
