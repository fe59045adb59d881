/**
 * The second act's story: the carrier down for "ninety minutes" (scaled), the
 * same orders sent to two services, one with retry queues only and one with
 * the retry table; the topology, the carriers, the order books and the
 * numbers they are compared by.
 */
import { retryQueueName, parkedQueueName, type Delay } from '../../lib';
import { CarrierStub, type Quote, type ShipmentOrder } from './carrier';
import { CarrierClient } from './carrier.client';

/** Ninety minutes, scaled: 1 s here stands for 7.5 min. */
export const OUTAGE_MS = 12_000;
export const ORDER_COUNT = 40;
export const FIRST_ORDER = 48301;
export const PUBLISH_EVERY_MS = 75;
/** Both services take this many orders at once, so the burst is bounded by the same prefetch. */
export const PREFETCH = 10;
/** The act gives up after this long (its own clock). */
export const DEADLINE_MS = 45_000;

/** Service A: retry queues only. */
export const A_DELAYS: Delay[] = ['1s', '2s', '3s'];
/** Service B: one retry queue, then the retry table. */
export const B_DELAYS: Delay[] = ['1s'];
export const B_DUE_IN_MS = 2_000;
export const TABLE_RATE_PER_SEC = 10;
export const CHECK_EVERY = '500ms';
export const FAILURES_BEFORE_PAUSE = 3;
export const DEPENDENCY = 'carrier';

/** The retry table's database: a new one each run, dropped at its end. */
export const DEMO_DATABASE = 'rabbit_retry_demo';

export interface ServiceTopology {
  queue: string;
  retryQueues: string[];
  parkedQueue: string;
}

export interface ActTwoTopology {
  prefix: string;
  exchange: string;
  routingKey: string;
  /** Retry queues only. */
  a: ServiceTopology;
  /** The retry table. */
  b: ServiceTopology;
}

function service(prefix: string, name: string, delays: readonly Delay[]): ServiceTopology {
  const queue = `${prefix}.${name}.shipment.requested`;
  return { queue, retryQueues: delays.map((d) => retryQueueName(queue, d)), parkedQueue: parkedQueueName(queue) };
}

export function actTwoTopology(prefix: string): ActTwoTopology {
  return {
    prefix,
    exchange: `${prefix}.shipments`,
    routingKey: 'shipment.requested',
    a: service(prefix, 'queues', A_DELAYS),
    b: service(prefix, 'table', B_DELAYS),
  };
}

/** Fixed per process, as the decorators read it when the classes load. */
export const TOPOLOGY_2 = actTwoTopology(process.env.SHIPPING_PREFIX ? `${process.env.SHIPPING_PREFIX}-act2` : `nest-demo-act2-${Date.now()}`);

/** The act's clock: set when the outage starts. */
let actStartedAt = Date.now();

export function startClock(at: number): void {
  actStartedAt = at;
}

export function since(at: number = Date.now()): string {
  return `+${((at - actStartedAt) / 1000).toFixed(1)}s`;
}

export function say(side: 'A' | 'B' | '-', text: string, at?: number): void {
  console.log(`${since(at).padStart(6)}  ${side}  ${text}`);
}

export const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/**
 * The carrier as one service sees it: the CarrierStub with the
 * act's outage, a health endpoint, and the time of every rate call.
 */
export class OutageCarrier extends CarrierClient {
  readonly callTimes: number[] = [];
  private stub?: CarrierStub;
  private backAt = 0;

  /** The outage starts now and lasts `outageMs`. */
  start(at: number, outageMs: number): void {
    this.stub = new CarrierStub({ startedAt: at, outageMs });
    this.backAt = at + outageMs;
  }

  get recoversAt(): number {
    return this.backAt;
  }

  /** The carrier's health endpoint: not a rate call, not counted. */
  healthy(): boolean {
    return this.started().down === false;
  }

  rate(order: ShipmentOrder): Promise<Quote> {
    this.callTimes.push(Date.now());
    return this.started().rate(order);
  }

  get calls(): number {
    return this.stub?.calls ?? 0;
  }

  get callsDuringOutage(): number {
    return this.stub?.callsDuringOutage ?? 0;
  }

  /** The most rate calls in any one second from `from` on. */
  peakPerSecond(from: number): number {
    const t = this.callTimes.filter((x) => x >= from).sort((x, y) => x - y);
    let best = 0;
    for (let i = 0, j = 0; i < t.length; i++) {
      while (t[i] - t[j] >= 1000) j++;
      best = Math.max(best, i - j + 1);
    }
    return best;
  }

  /** Calls a second from the first to the last call after `from`: the pace of the drain. */
  paceAfter(from: number): number {
    const t = this.callTimes.filter((x) => x >= from);
    if (t.length < 2) return t.length;
    return ((t.length - 1) * 1000) / (Math.max(...t) - Math.min(...t));
  }

  private started(): CarrierStub {
    if (!this.stub) throw new Error('the carrier was called before the act started');
    return this.stub;
  }
}

export type Where = 'work' | 'retry' | 'table' | 'parked' | 'done';

interface Entry {
  where: Where;
  calls: number;
  at: number;
}

/** Where one service's orders are, and how often each was tried. */
export class OrderBook {
  private readonly orders = new Map<number, Entry>();

  published(orderId: number): void {
    this.orders.set(orderId, { where: 'work', calls: 0, at: Date.now() });
  }

  tried(orderId: number): void {
    const e = this.orders.get(orderId);
    if (e) e.calls++;
  }

  moved(orderId: number | string, where: Where): void {
    const e = typeof orderId === 'number' ? this.orders.get(orderId) : undefined;
    if (!e) return;
    e.where = where;
    e.at = Date.now();
  }

  isDone(orderId: number): boolean {
    return this.orders.get(orderId)?.where === 'done';
  }

  get size(): number {
    return this.orders.size;
  }

  count(where: Where): number {
    let n = 0;
    for (const e of this.orders.values()) if (e.where === where) n++;
    return n;
  }

  /** When the last order reached `where` (all of them must be there). */
  lastAt(where: Where): number {
    let t = 0;
    for (const e of this.orders.values()) if (e.where === where) t = Math.max(t, e.at);
    return t;
  }

  maxCalls(): number {
    let n = 0;
    for (const e of this.orders.values()) n = Math.max(n, e.calls);
    return n;
  }
}

export function orderIdOf(messageId: string | undefined): number | string {
  const id = Number(messageId?.replace(/^order-/, ''));
  return Number.isInteger(id) ? id : (messageId ?? '(no id)');
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `done` every `everyMs` until it holds (true) or `deadline` passes (false). */
export async function waitFor(done: () => boolean | Promise<boolean>, deadline: number, everyMs = 50): Promise<boolean> {
  while (Date.now() < deadline) {
    if (await done()) return true;
    await sleep(everyMs);
  }
  return done();
}
