/**
 * The batch codec, end to end: what a producer sent is what the handler gets,
 * whichever way each part crossed (a body in the shared buffer or its own, a
 * short id beside the JSON or in it), for many deliveries in one batch. And
 * the schema: lib/wire.ts's types against what the native side writes.
 */
import type { Message } from '../lib';
import type { NativeBatch } from '../lib/native';
import { type DeliveryMeta, type WireEvent, deliveriesOf, eventsOf, partsOf } from '../lib/wire';
import { DELIVERIES, EVENTS } from './fixtures/wire-schema';
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

/** The keys of every member of a union (`keyof` of a union gives only the shared ones). */
type KeysOf<T> = T extends unknown ? keyof T : never;
/** Per kind, the keys lib/wire.ts declares that no example of that kind has. */
type UnwrittenEventKeys = WireEvent extends infer E
  ? E extends { kind: infer K }
    ? Exclude<keyof E, KeysOf<Extract<(typeof EVENTS)[number], { kind: K }>>>
    : never
  : never;
/** The keys of DeliveryMeta that no example has. */
type UnwrittenMetaKeys = Exclude<keyof DeliveryMeta, KeysOf<(typeof DELIVERIES)[number]>>;

// The fixture (written by `cargo test` from what the native side sends) is
// held to lib/wire.ts by `satisfies` (nothing it sends is undeclared or of
// another type) and here (nothing declared goes unsent): either fails the type
// check.
const everyEventKeyIsSent: [UnwrittenEventKeys] extends [never] ? true : UnwrittenEventKeys = true;
const everyMetaKeyIsSent: [UnwrittenMetaKeys] extends [never] ? true : UnwrittenMetaKeys = true;

describe('the schema across the boundary', () => {
  it('lib/wire.ts declares what the native side sends, and nothing it does not', () => {
    expect([everyEventKeyIsSent, everyMetaKeyIsSent]).toEqual([true, true]);
    expect(new Set(EVENTS.map((e) => e.kind)).size).toBe(EVENTS.length);
  });

  it('a batch as the native side writes it reads back into its parts', () => {
    const large = Buffer.alloc(16 * 1024 + 1, 'x');
    const batch: NativeBatch = {
      meta: JSON.stringify(DELIVERIES),
      bodies: Buffer.from('{"orderId":48213}second'),
      large: [large],
      strings: ['48213'],
      events: JSON.stringify(EVENTS),
      closed: false,
    };
    expect(eventsOf(batch)).toEqual(EVENTS);
    const [first, own, table] = deliveriesOf(batch).map((d) => ({ d, parts: partsOf(d, batch) }));
    const body = (p: typeof first.parts) => p.bytes.subarray(p.start, p.end).toString();
    expect(first.parts).toMatchObject({ exchange: 'shipments', routingKey: 'shipment.requested', redelivered: false, attempt: 1 });
    expect(first.parts.properties.messageId).toBe('48213');
    expect(body(first.parts)).toBe('{"orderId":48213}');
    expect(own.parts.redelivered).toBe(true);
    expect(own.parts.properties.messageId).toBe('order-48213');
    expect(Buffer.compare(own.parts.bytes.subarray(own.parts.start, own.parts.end), large)).toBe(0);
    expect(body(table.parts)).toBe('second');
    expect([first.d.table, own.d.table, table.d.table]).toEqual([undefined, undefined, true]);
  });
});
