/**
 * The carrier outage from the story, on a real broker: orders arrive while the
 * carrier's rate API answers 503, wait in retry queues instead of looping, and
 * go through once it recovers. A malformed order parks at once; an order the
 * carrier can never rate parks when its retries run out.
 *
 *   AMQP_URL=amqp://user:pass@host:5672 npx ts-node --transpile-only examples/demo/demo.ts
 *
 * Set KEEP_QUEUES=1 to leave the demo's queues and exchange on the broker.
 */
import { randomUUID } from 'node:crypto';

import { connect as amqpConnect, type Channel } from 'amqplib';

import {
  DEFAULT_URL,
  NonRetryableError,
  RabbitRetry,
  parkedQueueName,
  retryQueueName,
  type Consumer,
  type ConsumeOptions,
  type Message,
  type ParkedEvent,
  type RetryEvent,
} from '../../lib';
import { CarrierError, CarrierStub, type Quote, type ShipmentOrder } from './carrier';

const AMQP_URL = process.env.AMQP_URL ?? DEFAULT_URL;
const KEEP_QUEUES = process.env.KEEP_QUEUES === '1';

const OUTAGE_MS = 6_000;
const DELAYS = ['1s', '3s', '6s'];
const PREFETCH = 5;
const DEADLINE_MS = 50_000;

const FIRST_ORDER = 48213;
const ORDER_COUNT = 12;
// Orders trickle in as a shop would send them, so they meet the outage at different points.
const PUBLISH_EVERY_MS = 500;
const ORDER_WITHOUT_COUNTRY = 48217;
const ORDER_THE_CARRIER_CANNOT_RATE = 48220;

const startedAt = Date.now();

/** Seconds since the demo started, as `+2.3s`. */
function offset(): string {
  return `+${((Date.now() - startedAt) / 1000).toFixed(1)}s`.padStart(6);
}

function log(orderId: number | string, place: string, text: string): void {
  console.log(`${offset()}  ${String(orderId).padEnd(5)}  ${place.padEnd(10)}  ${text}`);
}

/** The queues and exchange of one run; the suffix keeps runs apart. */
interface Topology {
  prefix: string;
  exchange: string;
  queue: string;
  routingKey: string;
  retryQueues: string[];
  parkedQueue: string;
}

function topologyFor(prefix: string): Topology {
  const queue = `${prefix}.shipment.requested`;
  return {
    prefix,
    exchange: `${prefix}.shipments`,
    queue,
    routingKey: 'shipment.requested',
    retryQueues: DELAYS.map((d) => retryQueueName(queue, d)),
    parkedQueue: parkedQueueName(queue),
  };
}

type Place = 'work' | 'done' | 'parked' | `retry.${string}`;

interface Tracked {
  orderId: number;
  place: Place;
  attempts: number;
  parkedReason?: string;
}

/** Where every published order is, and how many times it was tried. */
class Ledger {
  private readonly orders = new Map<number, Tracked>();
  private changed = (): void => {};

  published(orderId: number): void {
    this.orders.set(orderId, { orderId, place: 'work', attempts: 0 });
  }

  attempted(orderId: number, attempt: number): void {
    const t = this.get(orderId);
    t.attempts = Math.max(t.attempts, attempt);
  }

  moved(orderId: number, place: Place, parkedReason?: string): void {
    const t = this.get(orderId);
    t.place = place;
    t.parkedReason = parkedReason;
    this.changed();
  }

  isDone(orderId: number): boolean {
    return this.orders.get(orderId)?.place === 'done';
  }

  all(): Tracked[] {
    return [...this.orders.values()].sort((a, b) => a.orderId - b.orderId);
  }

  count(place: Place): number {
    return this.all().filter((t) => t.place === place).length;
  }

  unsettled(): Tracked[] {
    return this.all().filter((t) => t.place !== 'done' && t.place !== 'parked');
  }

  /** Resolves `true` once every order is done or parked, `false` at `deadline`. */
  settled(deadline: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
      this.changed = () => {
        if (this.unsettled().length > 0) return;
        clearTimeout(timer);
        resolve(true);
      };
      this.changed();
    });
  }

  private get(orderId: number): Tracked {
    const t = this.orders.get(orderId);
    if (!t) throw new Error(`order ${orderId} was never published`);
    return t;
  }
}

function orderIdOf(messageId: string | undefined): number | string {
  const id = Number(messageId?.replace(/^order-/, ''));
  return Number.isInteger(id) ? id : (messageId ?? '(no id)');
}

function sampleOrder(orderId: number): ShipmentOrder {
  const addresses = [
    ['DE', '10115', 'Berlin'],
    ['FR', '69002', 'Lyon'],
    ['NL', '3511', 'Utrecht'],
    ['IT', '20121', 'Milano'],
  ];
  const [country, postcode, city] = addresses[orderId % addresses.length];
  const order: ShipmentOrder = { orderId, weightKg: 1 + (orderId % 7) * 0.5, address: { country, postcode, city } };
  if (orderId === ORDER_WITHOUT_COUNTRY) delete order.address.country;
  return order;
}

/** Rejects an order no retry can fix before it costs a carrier call. */
function validate(order: ShipmentOrder): void {
  if (!order.address?.country) {
    throw new NonRetryableError(`order ${order.orderId} has no address.country`);
  }
}

function formatPrice(q: Quote): string {
  return `${(q.priceCents / 100).toFixed(2)} ${q.currency}`;
}

function shipmentHandler(carrier: CarrierStub, ledger: Ledger) {
  return async (msg: Message): Promise<void> => {
    const order = msg.json<ShipmentOrder>();
    // A crash between republish and ack can deliver an order twice; rate it once.
    if (ledger.isDone(order.orderId)) return;
    const attempt = msg.attempt + 1;
    ledger.attempted(order.orderId, attempt);
    validate(order);
    const quote = await carrier.rate(order);
    ledger.moved(order.orderId, 'done');
    log(order.orderId, 'done', `attempt ${attempt}: rated ${formatPrice(quote)}`);
  };
}

function consumeOptions(t: Topology): ConsumeOptions {
  return {
    queue: t.queue,
    exchange: t.exchange,
    routingKey: t.routingKey,
    prefetch: PREFETCH,
    onFailure: {
      delays: DELAYS,
      // Carrier failures pass; anything else is a bug another attempt will not fix.
      retryable: (err) => err instanceof CarrierError,
    },
  };
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function follow(consumer: Consumer, ledger: Ledger): void {
  consumer.on('retry', (e: RetryEvent) => {
    const id = orderIdOf(e.messageId);
    if (typeof id === 'number') ledger.moved(id, `retry.${e.delay}`);
    log(id, `retry.${e.delay}`, `attempt ${e.attempt} failed: ${e.error}`);
  });
  consumer.on('parked', (e: ParkedEvent) => {
    const id = orderIdOf(e.messageId);
    if (typeof id === 'number') ledger.moved(id, 'parked', e.reason);
    log(id, 'parked', `${e.reason} after ${plural(e.attempt + 1, 'attempt')}: ${e.error}`);
  });
  consumer.on('publishFailed', (e) => {
    log(orderIdOf(e.messageId), 'work', `could not move it to ${e.target}, the broker will redeliver it: ${e.error.message}`);
  });
  consumer.on('error', (err) => log('-', '-', `consumer error: ${err.message}`));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function publishOrders(rr: RabbitRetry, t: Topology, ledger: Ledger): Promise<void> {
  for (let i = 0; i < ORDER_COUNT; i++) {
    if (i > 0) await sleep(PUBLISH_EVERY_MS);
    const orderId = FIRST_ORDER + i;
    // Tracked before the publish resolves, because the consumer can finish it first.
    ledger.published(orderId);
    await rr.publish(t.exchange, t.routingKey, sampleOrder(orderId), {
      messageId: `order-${orderId}`,
      correlationId: randomUUID(),
      type: 'shipment.requested',
      appId: 'rabbit-retry-demo',
    });
    log(orderId, 'work', 'published');
  }
}

async function withChannel<T>(use: (ch: Channel) => Promise<T>): Promise<T> {
  const conn = await amqpConnect(AMQP_URL);
  try {
    return await use(await conn.createChannel());
  } finally {
    await conn.close();
  }
}

/** Ready messages per queue; runs once the consumer is closed, so nothing is unacked. */
function queueDepths(t: Topology): Promise<Map<string, number>> {
  return withChannel(async (ch) => {
    const depths = new Map<string, number>();
    for (const q of [t.queue, ...t.retryQueues, t.parkedQueue]) {
      depths.set(q, (await ch.checkQueue(q)).messageCount);
    }
    return depths;
  });
}

function removeTopology(t: Topology): Promise<void> {
  return withChannel(async (ch) => {
    for (const q of [t.queue, ...t.retryQueues, t.parkedQueue]) await ch.deleteQueue(q);
    await ch.deleteExchange(t.exchange);
  });
}

function printHeader(rr: RabbitRetry, t: Topology): void {
  console.log(`broker    ${rr.url}`);
  console.log(`exchange  ${t.exchange} (topic) -> ${t.queue}`);
  console.log(`retries   ${t.retryQueues.join(', ')}`);
  console.log(`parked    ${t.parkedQueue}`);
  console.log(`carrier   down (503) for the first ${OUTAGE_MS / 1000} s; never rates order ${ORDER_THE_CARRIER_CANNOT_RATE} in time`);
  console.log(`orders    ${ORDER_COUNT} from ${FIRST_ORDER}, one every ${PUBLISH_EVERY_MS} ms; order ${ORDER_WITHOUT_COUNTRY} has no address.country`);
  console.log();
}

/** `retry.1s` for `<queue>.retry.1s`, `work` for the work queue. */
function shortName(t: Topology, queue: string): string {
  return queue === t.queue ? 'work' : queue.slice(t.queue.length + 1);
}

function printTable(ledger: Ledger): void {
  console.log(`${'order'.padEnd(7)}${'final state'.padEnd(24)}attempts`);
  for (const t of ledger.all()) {
    const state = t.place === 'parked' ? `parked: ${t.parkedReason}` : t.place === 'done' ? 'done' : `still in ${t.place}`;
    console.log(`${String(t.orderId).padEnd(7)}${state.padEnd(24)}${t.attempts}`);
  }
}

/** Prints the outcome and says whether every order is accounted for, on the broker too. */
function printSummary(ledger: Ledger, carrier: CarrierStub, t: Topology, depths: Map<string, number>): boolean {
  const published = ledger.all().length;
  const done = ledger.count('done');
  const parked = ledger.count('parked');
  const waiting = [t.queue, ...t.retryQueues].reduce((n, q) => n + (depths.get(q) ?? 0), 0);
  const parkedDepth = depths.get(t.parkedQueue) ?? 0;
  const lost = published - done - parked - waiting;

  console.log();
  printTable(ledger);
  console.log();
  console.log(`broker    ${[...depths].map(([q, n]) => `${shortName(t, q)} ${n}`).join(', ')}`);
  console.log(`carrier   ${carrier.calls} calls in all, ${carrier.callsDuringOutage} of them during the ${OUTAGE_MS / 1000} s outage`);

  const ok = waiting === 0 && lost === 0 && parkedDepth === parked;
  if (ok) {
    console.log(`every order accounted for: ${published} published = ${done} done + ${parked} parked, 0 lost`);
  } else {
    console.log(
      `NOT every order settled: ${published} published = ${done} done + ${parked} parked + ${waiting} still waiting, ` +
        `${lost} lost; ${parkedDepth} in ${t.parkedQueue}`,
    );
  }
  return ok;
}

function reportStragglers(ledger: Ledger): void {
  const rest = ledger.unsettled().map((t) => `${t.orderId} (${t.place})`);
  console.log(`${offset()}  gave up after ${DEADLINE_MS / 1000} s; not settled: ${rest.join(', ')}`);
}

async function tidyBroker(t: Topology, parkedDepth: number | undefined): Promise<void> {
  if (KEEP_QUEUES) {
    console.log(`kept      ${t.parkedQueue} (${parkedDepth ?? '?'} parked) and the rest of the demo's queues; KEEP_QUEUES=1`);
    return;
  }
  try {
    await removeTopology(t);
    const parked = parkedDepth === undefined ? '' : `, ${plural(parkedDepth, 'parked order')} with it (KEEP_QUEUES=1 keeps them)`;
    console.log(`removed   ${t.exchange} and its ${2 + t.retryQueues.length} queues${parked}`);
  } catch (err) {
    console.error(`could not remove the demo's queues (${err instanceof Error ? err.message : String(err)}); their names start with ${t.prefix}`);
  }
}

/** Publishes the orders and follows them until each is done or parked, or the deadline passes. */
async function runOutage(rr: RabbitRetry, t: Topology, carrier: CarrierStub, ledger: Ledger): Promise<boolean> {
  try {
    const consumer = await rr.consume(consumeOptions(t), shipmentHandler(carrier, ledger));
    follow(consumer, ledger);
    await publishOrders(rr, t, ledger);
    const settled = await ledger.settled(startedAt + DEADLINE_MS);
    if (!settled) reportStragglers(ledger);
    return settled;
  } finally {
    await rr.close();
  }
}

async function main(): Promise<number> {
  const topology = topologyFor(`demo-${startedAt}`);
  const carrier = new CarrierStub({ startedAt, outageMs: OUTAGE_MS, timesOutOn: [ORDER_THE_CARRIER_CANNOT_RATE] });
  const ledger = new Ledger();
  const rr = await RabbitRetry.connect({ url: AMQP_URL, connectionName: 'rabbit-retry-demo' });
  printHeader(rr, topology);
  let depths: Map<string, number> | undefined;
  try {
    const settled = await runOutage(rr, topology, carrier, ledger);
    depths = await queueDepths(topology);
    const accounted = printSummary(ledger, carrier, topology, depths);
    return settled && accounted ? 0 : 1;
  } finally {
    await tidyBroker(topology, depths?.get(topology.parkedQueue));
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
