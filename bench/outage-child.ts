/**
 * The consumer of the outage drill (outage.ts), in a process of its own: one
 * consumer at prefetch 1 calling a carrier stub that is down for everyone for
 * `outageMs` after the consumer starts. Prints its result as one JSON line on
 * stdout (after RESULT_MARK).
 *
 *  - amqplib: the client default on failure, `nack(msg, false, true)` (requeue).
 *  - rabbit-retry: `onFailure.delays` scaled down to the drill.
 *  - rabbit-retry-circuit: the same, with `onFailure.circuit`: it opens after
 *    `circuitFailures` failures, probes every `probeEvery`, and closes on the
 *    first probe that succeeds.
 */
import amqp, { type ConsumeMessage } from 'amqplib';

import { RabbitRetry, type Delay, type Message } from '../lib';
import { AMQP_URL, RESULT_MARK, sleep, threadCpu, threadTicks } from './common';

export interface OutageConfig {
  lib: 'amqplib' | 'rabbit-retry' | 'rabbit-retry-circuit';
  queue: string;
  /** Orders published before the consumer starts. */
  orders: number;
  /** Healthy orders the parent publishes during the outage. */
  healthy: number;
  outageMs: number;
  /** How long after the outage the run may go on draining. */
  drainMs: number;
  /** rabbit-retry's delays. */
  delays: Delay[];
  /** The carrier's "work" per call, ms. */
  workMs: number;
  /** The circuit's probe interval and the failures that open it (rabbit-retry-circuit). */
  probeEvery: Delay;
  circuitFailures: number;
}

export interface HealthyOutcome {
  id: string;
  publishedAt: number | null;
  succeededAt: number | null;
  parked: boolean;
}

export interface OutageChildResult {
  lib: OutageConfig['lib'];
  t0: number;
  outageEndAt: number;
  carrierCalls: number;
  carrierCallsDuringOutage: number;
  /** Consumer CPU seconds (user + system, all threads) during the outage, and in all. */
  cpuDuringOutageS: number;
  cpuTotalS: number;
  /** CPU seconds during the outage by thread name (Linux). */
  threadsDuringOutage: Record<string, number>;
  /** Distinct orders handled successfully. */
  succeeded: number;
  /** Orders handled successfully more than once. */
  duplicates: number;
  /** Orders rabbit-retry parked (retries ran out during the outage). */
  parked: number;
  /** ms from the carrier's recovery until every order had succeeded or parked; null if not by the deadline. */
  drainMs: number | null;
  /** Orders neither succeeded nor parked when the run stopped. */
  unfinished: number;
  stoppedAt: number;
  healthy: HealthyOutcome[];
  errors: string[];
  /** The circuit's doing (rabbit-retry-circuit): times it opened from closed, message probes, the failures before it first opened, deliveries given back unstarted, messages sent back early from the retry queues. */
  circuit?: { opens: number; probes: number; openingFailures: number; released: number; returnedEarly: number };
}

const cfg = JSON.parse(process.argv[2] ?? '{}') as OutageConfig;

// ts-node installs source-map-support, whose Error.prepareStackTrace makes
// every `err.stack` cost tens of µs; a compiled app has V8's own formatting.
(Error as { prepareStackTrace?: unknown }).prepareStackTrace = undefined;
const total = cfg.orders + cfg.healthy;

let t0 = 0;
let downUntil = Infinity;
let carrierCalls = 0;
let carrierCallsDuringOutage = 0;
const successes = new Map<string, number>();
const succeededAt = new Map<string, number>();
const parkedIds = new Set<string>();
const publishedAt = new Map<string, number>();
const errors: string[] = [];
let drainedAt: number | null = null;
let resolveDone!: () => void;
const done = new Promise<void>((resolve) => (resolveDone = resolve));

/** The carrier stub: ~2 ms of work, then an error while it is down. */
async function carrier(): Promise<void> {
  carrierCalls++;
  const down = Date.now() < downUntil;
  if (down) carrierCallsDuringOutage++;
  await sleep(cfg.workMs);
  if (down) throw new Error('carrier: 503 Service Unavailable');
}

function checkDone(): void {
  if (drainedAt === null && successes.size + parkedIds.size >= total) {
    drainedAt = Date.now();
    resolveDone();
  }
}

function succeeded(id: string, headers: Record<string, unknown> | undefined): void {
  successes.set(id, (successes.get(id) ?? 0) + 1);
  if (!succeededAt.has(id)) succeededAt.set(id, Date.now());
  const p = headers?.['published-at'];
  if (typeof p === 'number') publishedAt.set(id, p);
  checkDone();
}

interface Running {
  close(): Promise<void>;
}

async function startAmqplib(): Promise<Running> {
  const conn = await amqp.connect(AMQP_URL);
  conn.on('error', (err: Error) => errors.push(`connection: ${err.message}`));
  const ch = await conn.createChannel();
  ch.on('error', (err: Error) => errors.push(`channel: ${err.message}`));
  await ch.prefetch(1);
  const handle = async (msg: ConsumeMessage): Promise<void> => {
    try {
      await carrier();
      ch.ack(msg);
      succeeded(String(msg.properties.messageId), msg.properties.headers);
    } catch {
      ch.nack(msg, false, true);
    }
  };
  start();
  await ch.consume(cfg.queue, (msg) => {
    if (msg) void handle(msg);
  });
  return {
    async close() {
      await ch.close().catch(() => undefined);
      await conn.close().catch(() => undefined);
    },
  };
}

let circuitCounts: OutageChildResult['circuit'];

async function startRabbitRetry(withCircuit: boolean): Promise<Running> {
  const rr = await RabbitRetry.connect({
    url: AMQP_URL,
    logger: { warn: (m) => process.stderr.write(`warn: ${m}\n`), error: (m) => process.stderr.write(`error: ${m}\n`) },
  });
  start();
  const circuit = withCircuit ? { openAfter: { failures: cfg.circuitFailures, within: '10s' as const }, probeEvery: cfg.probeEvery } : undefined;
  const consumer = await rr.consume({ queue: cfg.queue, prefetch: 1, onFailure: { delays: cfg.delays, circuit } }, async (msg: Message) => {
    await carrier();
    succeeded(String(msg.properties.messageId), msg.headers);
  });
  if (withCircuit) {
    const c = (circuitCounts = { opens: 0, probes: 0, openingFailures: 0, released: 0, returnedEarly: 0 });
    consumer.on('circuitOpen', (e) => {
      // Opened from closed; a failed probe keeps it open (cause 'probe').
      if (e.cause !== 'failures') return;
      c.opens++;
      c.openingFailures += e.failures;
    });
    consumer.on('circuitHalfOpen', (e) => {
      if (e.probe === 'message') c.probes++;
    });
  }
  consumer.on('parked', (e) => {
    parkedIds.add(String(e.messageId));
    checkDone();
  });
  consumer.on('error', (err) => errors.push(err.message));
  consumer.on('publishFailed', (e) => errors.push(`publishFailed: ${e.error.message}`));
  return {
    async close() {
      if (circuitCounts) {
        const st = consumer.stats();
        circuitCounts.released = st.released;
        circuitCounts.returnedEarly = st.returnedEarly;
      }
      await consumer.close();
      await rr.close();
    },
  };
}

let cpu0: NodeJS.CpuUsage;
let cpuOutage: NodeJS.CpuUsage | undefined;
let threads0 = new Map<string, number>();
let threadsOutage: Record<string, number> = {};

/** The consumer starts now: the carrier is down from here for outageMs. */
function start(): void {
  t0 = Date.now();
  downUntil = t0 + cfg.outageMs;
  cpu0 = process.cpuUsage();
  threads0 = threadTicks();
  setTimeout(() => {
    cpuOutage = process.cpuUsage(cpu0);
    threadsOutage = threadCpu(threads0, threadTicks());
  }, cfg.outageMs);
  process.send?.({ type: 'started', t0 });
}

async function main(): Promise<void> {
  const running = cfg.lib === 'amqplib' ? await startAmqplib() : await startRabbitRetry(cfg.lib === 'rabbit-retry-circuit');
  const deadline = new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, t0 + cfg.outageMs + cfg.drainMs - Date.now())));
  await Promise.race([done, deadline]);
  const stoppedAt = Date.now();
  const cpuTotal = process.cpuUsage(cpu0);
  await running.close();
  const secs = (u: NodeJS.CpuUsage | undefined) => (u ? (u.user + u.system) / 1e6 : NaN);
  const healthy: HealthyOutcome[] = [];
  for (let k = 0; k < cfg.healthy; k++) {
    const id = `healthy-${k}`;
    healthy.push({ id, publishedAt: publishedAt.get(id) ?? null, succeededAt: succeededAt.get(id) ?? null, parked: parkedIds.has(id) });
  }
  const result: OutageChildResult = {
    lib: cfg.lib,
    t0,
    outageEndAt: downUntil,
    carrierCalls,
    carrierCallsDuringOutage,
    cpuDuringOutageS: secs(cpuOutage),
    cpuTotalS: secs(cpuTotal),
    threadsDuringOutage: threadsOutage,
    succeeded: successes.size,
    duplicates: [...successes.values()].filter((c) => c > 1).length,
    parked: parkedIds.size,
    drainMs: drainedAt === null ? null : Math.max(0, drainedAt - downUntil),
    unfinished: total - successes.size - parkedIds.size,
    stoppedAt,
    healthy,
    errors: errors.slice(0, 20),
    circuit: circuitCounts,
  };
  process.stdout.write(`${RESULT_MARK}${JSON.stringify(result)}\n`, () => process.exit(0));
}

main().catch((err: unknown) => {
  process.stderr.write(`outage child: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
