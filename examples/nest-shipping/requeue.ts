/**
 * Act one's baseline: the shipping handler on a plain amqplib consumer that
 * does what most Node services do when it throws, `channel.nack(msg)`, which
 * requeues the message, so it comes straight back. Same outage, same orders
 * as the rabbit-retry run. It stops once every order that can ship has
 * shipped (the two that cannot would go round for ever), counts what is left
 * in its queue and removes the queue (unless KEEP_QUEUES=1).
 */
import { connect, type Channel, type ConsumeMessage } from 'amqplib';

import { DEFAULT_URL } from '../../lib';
import { CarrierStub, type ShipmentOrder } from './carrier';
import {
  FIRST_ORDER,
  ORDER_COUNT,
  ORDER_THE_CARRIER_CANNOT_RATE,
  ORDER_WITHOUT_COUNTRY,
  OUTAGE_MS,
  PREFETCH,
  PUBLISH_EVERY_MS,
  type OutageNumbers,
  log,
  plural,
  sampleOrder,
  startClock,
  validate,
} from './story';

const AMQP_URL = process.env.AMQP_URL ?? DEFAULT_URL;
const KEEP_QUEUES = process.env.KEEP_QUEUES === '1';
/** The orders no retry fixes; the run stops once all the others shipped. */
const CANNOT_SHIP: readonly number[] = [ORDER_WITHOUT_COUNTRY, ORDER_THE_CARRIER_CANNOT_RATE];
/** The run gives up this long after the carrier is back. */
const GIVE_UP_AFTER_RECOVERY_MS = 10_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const thousands = (n: number) => n.toLocaleString('en-US');

/** Polls `done` every `everyMs` until it holds (true) or `deadline` passes (false). */
async function waitUntil(done: () => boolean | Promise<boolean>, deadline: number, everyMs = 20): Promise<boolean> {
  while (Date.now() < deadline) {
    if (await done()) return true;
    await sleep(everyMs);
  }
  return done();
}

/** Runs the baseline on `queue`; resolves to what it measured. */
export async function runRequeueBaseline(queue: string): Promise<OutageNumbers> {
  console.log(`requeue: a plain amqplib consumer, prefetch ${PREFETCH}; on any error nack(msg), which requeues it (amqplib's default)`);
  console.log(`queue     ${queue}`);
  console.log();

  const carrier = new CarrierStub({ outageMs: OUTAGE_MS, timesOutOn: [ORDER_THE_CARRIER_CANNOT_RATE] });
  const conn = await connect(AMQP_URL, { clientProperties: { connection_name: 'rabbit-retry-nest-demo-requeue' } });
  let consuming: Channel | undefined;
  try {
    const publisher = await conn.createConfirmChannel();
    const ch = await conn.createChannel();
    consuming = ch;
    await ch.assertQueue(queue, { durable: true });
    await ch.prefetch(PREFETCH);

    const deliveriesOf = new Map<number, number>();
    const shippedAt = new Map<number, number>();
    let deliveries = 0;
    let inFlight = 0;
    let stopping = false;

    // The same handler as the NestJS service's; only the failure path differs.
    const handle = async (msg: ConsumeMessage): Promise<void> => {
      // Left unacked once the run stops: the broker requeues it when the channel closes.
      if (stopping) return;
      deliveries += 1;
      inFlight += 1;
      try {
        const order = JSON.parse(msg.content.toString('utf8')) as ShipmentOrder;
        deliveriesOf.set(order.orderId, (deliveriesOf.get(order.orderId) ?? 0) + 1);
        try {
          validate(order);
          await carrier.rate(order);
          ch.ack(msg);
          if (!shippedAt.has(order.orderId)) shippedAt.set(order.orderId, Date.now());
        } catch {
          ch.nack(msg);
        }
      } finally {
        inFlight -= 1;
      }
    };

    await ch.consume(queue, (msg) => {
      if (msg) void handle(msg);
    });
    // The outage starts now, with the first order.
    const t0 = Date.now();
    startClock(t0);
    carrier.startOutage(t0);

    const shippable = ORDER_COUNT - CANNOT_SHIP.length;
    const ticker = setInterval(() => {
      const calls = carrier.down ? `${thousands(carrier.calls)} carrier calls, every one a 503` : `${thousands(carrier.calls)} carrier calls`;
      log('-', 'requeue', `${calls}; ${thousands(deliveries)} deliveries; ${shippedAt.size} of ${ORDER_COUNT} orders shipped`);
    }, 1000);
    const recovery = setTimeout(
      () => log('-', 'requeue', `the carrier is back; ${thousands(carrier.callsDuringOutage)} calls while it was down`),
      Math.max(0, carrier.recoversAt - Date.now()),
    );
    let published = 0;
    try {
      for (let i = 0; i < ORDER_COUNT; i++) {
        if (i > 0) await sleep(PUBLISH_EVERY_MS);
        const orderId = FIRST_ORDER + i;
        publisher.sendToQueue(queue, Buffer.from(JSON.stringify(sampleOrder(orderId))), {
          persistent: true,
          messageId: `order-${orderId}`,
          contentType: 'application/json',
          type: 'shipment.requested',
          appId: 'rabbit-retry-nest-demo',
        });
        await publisher.waitForConfirms();
        published += 1;
      }
      await waitUntil(() => shippedAt.size >= shippable, carrier.recoversAt + GIVE_UP_AFTER_RECOVERY_MS);
    } finally {
      clearInterval(ticker);
      clearTimeout(recovery);
    }

    // Stop: let the handlers in flight settle, then close the channel, which requeues what it holds.
    stopping = true;
    const stoppedAt = Date.now();
    await waitUntil(() => inFlight === 0, Date.now() + 2_000);
    const times = (n: number) => (n === 1 ? 'once' : `${thousands(n)} times`);
    const loops = CANNOT_SHIP.map((id) => times(deliveriesOf.get(id) ?? 0)).join(' and ');
    log(
      '-',
      'requeue',
      `${shippedAt.size} of ${ORDER_COUNT} shipped; stopped here, as ${CANNOT_SHIP.join(' and ')} would come back for ever (delivered ${loops})`,
      stoppedAt,
    );
    await ch.close();
    consuming = undefined;

    // Closing requeues on the broker's side; wait until the count adds up, briefly.
    let left = 0;
    await waitUntil(
      async () => {
        left = (await publisher.checkQueue(queue)).messageCount;
        return published - shippedAt.size - left === 0;
      },
      Date.now() + 2_000,
      100,
    );

    const lastShipped = Math.max(...shippedAt.values());
    return {
      callsDuringOutage: carrier.callsDuringOutage,
      callsPerShipped: [...shippedAt.keys()].map((id) => carrier.callsFor(id)),
      deliveries,
      lastShippedAfterRecoveryMs: shippedAt.size > 0 ? Math.max(0, lastShipped - carrier.recoversAt) : undefined,
      shipped: shippedAt.size,
      parked: 0,
      looping: left,
      lost: published - shippedAt.size - left,
    };
  } finally {
    await consuming?.close().catch(() => undefined);
    await removeQueue(conn, queue);
    await conn.close().catch(() => undefined);
  }
}

async function removeQueue(conn: Awaited<ReturnType<typeof connect>>, queue: string): Promise<void> {
  if (KEEP_QUEUES) {
    console.log(`kept      ${queue}; KEEP_QUEUES=1`);
    return;
  }
  try {
    const ch = await conn.createChannel();
    const { messageCount } = await ch.deleteQueue(queue);
    await ch.close();
    console.log(`removed   ${queue}${messageCount > 0 ? `, ${plural(messageCount, 'requeued order')} with it` : ''}`);
  } catch (err) {
    console.error(`could not remove ${queue} (${err instanceof Error ? err.message : String(err)})`);
  }
}
