/**
 * The outage story of act one, shared by the Nest service's parts and the
 * requeue baseline: the run's topology, the ledger that follows every order,
 * the clock, and the printed lines.
 */
import { NonRetryableError, parkedQueueName, retryQueueName, type Delay } from '../../lib';
import type { RabbitRetry } from '../../lib';
import type { CarrierStub, Quote, ShipmentOrder } from './carrier';

export const OUTAGE_MS = 6_000;
export const DELAYS: Delay[] = ['1s', '3s', '6s'];
export const PREFETCH = 5;
export const DEADLINE_MS = 50_000;

export const FIRST_ORDER = 48213;
export const ORDER_COUNT = 12;
// Orders trickle in as a shop would send them, so they meet the outage at different points.
export const PUBLISH_EVERY_MS = 500;
export const ORDER_WITHOUT_COUNTRY = 48217;
export const ORDER_THE_CARRIER_CANNOT_RATE = 48220;

export const startedAt = Date.now();

/** When the current run's outage started: the printed times count from here. */
let clockAt = startedAt;

/** Starts the clock of a run (its outage starts now too). */
export function startClock(at: number = Date.now()): void {
  clockAt = at;
}

/** Seconds since the run's outage started, as `+2.3s`. */
export function offset(at: number = Date.now()): string {
  return `+${((at - clockAt) / 1000).toFixed(1)}s`.padStart(6);
}

export function log(orderId: number | string, place: string, text: string, at?: number): void {
  console.log(`${offset(at)}  ${String(orderId).padEnd(5)}  ${place.padEnd(10)}  ${text}`);
}

/** The queues and exchange of one run; the suffix keeps runs apart. */
export interface Topology {
  prefix: string;
  exchange: string;
  queue: string;
  routingKey: string;
  retryQueues: string[];
  parkedQueue: string;
}

export function topologyFor(prefix: string): Topology {
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

/**
 * This run's topology. Decorators read it when the classes load, so it is
 * fixed per process; a real service would name its queues in configuration.
 */
export const TOPOLOGY = topologyFor(process.env.SHIPPING_PREFIX ?? `nest-demo-${startedAt}`);

/** The work queue of the requeue baseline (amqplib), for the run with `prefix`. */
export function requeueQueueFor(prefix: string): string {
  return `${prefix}-requeue.shipment.requested`;
}

type Place = 'work' | 'done' | 'parked' | `retry.${string}`;

interface Tracked {
  orderId: number;
  place: Place;
  attempts: number;
  parkedReason?: string;
  /** When it was rated. */
  doneAt?: number;
}

/** Where every published order is, and how many times it was tried. */
export class Ledger {
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
    if (place === 'done') t.doneAt = Date.now();
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

export function orderIdOf(messageId: string | undefined): number | string {
  const id = Number(messageId?.replace(/^order-/, ''));
  return Number.isInteger(id) ? id : (messageId ?? '(no id)');
}

export function sampleOrder(orderId: number): ShipmentOrder {
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
export function validate(order: ShipmentOrder): void {
  if (!order.address?.country) {
    throw new NonRetryableError(`order ${order.orderId} has no address.country`);
  }
}

export function formatPrice(q: Quote): string {
  return `${(q.priceCents / 100).toFixed(2)} ${q.currency}`;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** What both runs of act one share: the outage and the orders. */
export function printIntro(): void {
  console.log(`act one   a short carrier outage, met twice: by a consumer that requeues, then by rabbit-retry`);
  console.log(`carrier   down (503) for the first ${OUTAGE_MS / 1000} s of each run; never rates order ${ORDER_THE_CARRIER_CANNOT_RATE} in time`);
  console.log(`orders    ${ORDER_COUNT} from ${FIRST_ORDER}, one every ${PUBLISH_EVERY_MS} ms; order ${ORDER_WITHOUT_COUNTRY} has no address.country`);
  console.log();
}

export function printHeader(rr: RabbitRetry, t: Topology): void {
  console.log(`rabbit-retry: the NestJS service (@Consume, @OnFailure), prefetch ${PREFETCH}; a failed order moves to a retry queue`);
  console.log(`broker    ${rr.url}`);
  console.log(`exchange  ${t.exchange} (topic) -> ${t.queue}`);
  console.log(`retries   ${t.retryQueues.join(', ')}`);
  console.log(`parked    ${t.parkedQueue}`);
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

/** What one run of the outage measured, for the side-by-side table. */
export interface OutageNumbers {
  callsDuringOutage: number;
  /** The carrier calls of each order that shipped. */
  callsPerShipped: number[];
  /** Deliveries to the handler, redeliveries included. */
  deliveries: number;
  /** From the carrier's recovery to the last order rated. */
  lastShippedAfterRecoveryMs: number | undefined;
  shipped: number;
  parked: number;
  /** Orders still going round between the queue and the handler when the run stopped. */
  looping: number;
  lost: number;
}

/** The rabbit-retry run's numbers, from its ledger, its carrier and the queues' depths. */
export function numbersOf(ledger: Ledger, carrier: CarrierStub, t: Topology, depths: Map<string, number>): OutageNumbers {
  const all = ledger.all();
  const done = all.filter((o) => o.place === 'done');
  const waiting = [t.queue, ...t.retryQueues].reduce((n, q) => n + (depths.get(q) ?? 0), 0);
  const parked = ledger.count('parked');
  const lastDone = Math.max(...done.map((o) => o.doneAt ?? 0));
  return {
    callsDuringOutage: carrier.callsDuringOutage,
    callsPerShipped: done.map((o) => carrier.callsFor(o.orderId)),
    deliveries: all.reduce((n, o) => n + o.attempts, 0),
    lastShippedAfterRecoveryMs: done.length > 0 ? Math.max(0, lastDone - carrier.recoversAt) : undefined,
    shipped: done.length,
    parked,
    looping: waiting,
    lost: all.length - done.length - parked - waiting,
  };
}

const thousands = (n: number) => n.toLocaleString('en-US');

/** The requeue baseline beside rabbit-retry, both measured in this run. */
export function printComparison(requeue: OutageNumbers, retry: OutageNumbers): void {
  const row = (label: string, a: string, b: string) => console.log(`${label.padEnd(48)}${a.padEnd(26)}${b}`);
  const perOrder = (n: OutageNumbers) => {
    if (n.callsPerShipped.length === 0) return 'n/a';
    const mean = n.callsPerShipped.reduce((x, y) => x + y, 0) / n.callsPerShipped.length;
    return `${mean.toFixed(1)} / ${Math.max(...n.callsPerShipped)}`;
  };
  const after = (n: OutageNumbers) => (n.lastShippedAfterRecoveryMs === undefined ? 'n/a' : `${(n.lastShippedAfterRecoveryMs / 1000).toFixed(1)} s`);
  console.log(`act one, side by side: the same ${OUTAGE_MS / 1000} s outage, the same ${ORDER_COUNT} orders`);
  row('', 'amqplib, nack (requeue)', `rabbit-retry, retry queues ${DELAYS.join(', ')}`);
  row(`carrier calls during the ${OUTAGE_MS / 1000} s outage`, thousands(requeue.callsDuringOutage), thousands(retry.callsDuringOutage));
  row('carrier calls per shipped order, mean / max', perOrder(requeue), perOrder(retry));
  row('deliveries to the handler', thousands(requeue.deliveries), thousands(retry.deliveries));
  row('last order shipped, after the carrier was back', after(requeue), after(retry));
  row(
    'shipped / parked / still in a queue at the end',
    `${requeue.shipped} / ${requeue.parked} / ${requeue.looping}`,
    `${retry.shipped} / ${retry.parked} / ${retry.looping}`,
  );
  row('lost', String(requeue.lost), String(retry.lost));
  console.log(
    `requeue: a failed order is back within milliseconds, so the carrier takes calls as fast as prefetch ${PREFETCH} allows ` +
      `while it is down, and ${ORDER_WITHOUT_COUNTRY} and ${ORDER_THE_CARRIER_CANNOT_RATE} never leave the queue;`,
  );
  console.log(
    `rabbit-retry: the retry queues space the attempts ${DELAYS.join(', ')} apart, so the last orders ship later, ` +
      'and the two that cannot ship are parked with their error',
  );
}

/** Prints the outcome and says whether every order is accounted for, on the broker too. */
export function printSummary(ledger: Ledger, carrier: CarrierStub, t: Topology, depths: Map<string, number>): boolean {
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

export function reportStragglers(ledger: Ledger): void {
  const rest = ledger.unsettled().map((t) => `${t.orderId} (${t.place})`);
  console.log(`${offset()}  gave up after ${DEADLINE_MS / 1000} s; not settled: ${rest.join(', ')}`);
}
