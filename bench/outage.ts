/**
 * `npm run bench:outage`: the seeds' outage scenario as a measurement.
 *
 * 500 orders wait in the work queue; one consumer at prefetch 1 calls a
 * carrier stub that does ~2 ms of work per call and is down (throws) for
 * everyone during the first OUTAGE_SECS after the consumer starts. During the
 * outage the parent publishes 5 healthy orders behind the failing ones and
 * measures their latency from publish to success. For
 *   (a) amqplib with the client default on failure: nack(requeue=true),
 *   (b) rabbit-retry with delays scaled down (OUTAGE_DELAYS, default 2s,5s,15s: together longer than the default outage, so orders wait out the outage instead of parking),
 *   (c) the same with a circuit (`onFailure.circuit`): it opens after
 *       OUTAGE_CIRCUIT_FAILURES (5) failures within 10 s, probes every
 *       OUTAGE_PROBE_EVERY (250ms), and closes on a probe that succeeds,
 * it reports carrier calls during the outage, the healthy orders' latency,
 * messages lost (published - acked - parked - left in a queue), duplicates
 * (succeeded more than once), and the time to drain after the carrier
 * recovers. Each run stops at the outage + OUTAGE_DRAIN_SECS (60) and reports
 * what remained.
 *
 * Env: OUTAGE_SECS (20), OUTAGE_DRAIN_SECS (60), OUTAGE_ORDERS (500),
 * OUTAGE_HEALTHY (5), OUTAGE_DELAYS (2s,5s,15s), OUTAGE_PROBE_EVERY (250ms),
 * OUTAGE_CIRCUIT_FAILURES (5), AMQP_URL.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import type { Delay } from '../lib';
import type { OutageChildResult, OutageConfig } from './outage-child';
import {
  Publisher,
  runBenchmark,
  brokerVersion,
  cleanupOnSignal,
  declareWorkQueue,
  deleteQueues,
  depth,
  envInt,
  fmt,
  percentile,
  queueFamily,
  remember,
  sleep,
  startChild,
  table,
  uniqueName,
  waitForQuiet,
  withTimeout,
} from './common';

const OUTAGE_MS = envInt('OUTAGE_SECS', 20) * 1000;
const DRAIN_MS = envInt('OUTAGE_DRAIN_SECS', 60) * 1000;
const ORDERS = envInt('OUTAGE_ORDERS', 500);
const HEALTHY = envInt('OUTAGE_HEALTHY', 5);
// Checked when the consumer starts: a delay the library refuses stops the drill with its error.
const DELAYS = (process.env.OUTAGE_DELAYS ?? '2s,5s,15s')
  .split(',')
  .map((d) => d.trim())
  .filter(Boolean) as Delay[];
const WORK_MS = 2;
const PROBE_EVERY = (process.env.OUTAGE_PROBE_EVERY ?? '250ms') as Delay;
const CIRCUIT_FAILURES = envInt('OUTAGE_CIRCUIT_FAILURES', 5);
/** What every drill of the run shares. */
const SETTINGS = {
  orders: ORDERS,
  healthy: HEALTHY,
  outageMs: OUTAGE_MS,
  drainMs: DRAIN_MS,
  delays: DELAYS,
  workMs: WORK_MS,
  probeEvery: PROBE_EVERY,
  circuitFailures: CIRCUIT_FAILURES,
};

interface Drill {
  lib: OutageConfig['lib'];
  child: OutageChildResult;
  published: number;
  /** Healthy orders: publish → success, seconds (only those that succeeded). */
  healthyLatencyS: number[];
  healthySucceeded: number;
  healthyParked: number;
  /** Ready messages left in the work queue and the retry queues after the run. */
  leftInQueues: number;
  inParkedQueue: number;
  lost: number;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function drill(lib: OutageConfig['lib']): Promise<Drill> {
  const queue = uniqueName(`bench-outage-${lib === 'amqplib' ? 'amqp' : lib === 'rabbit-retry' ? 'rr' : 'rrc'}`);
  const family = queueFamily(queue, DELAYS);
  const stateQueue = `${queue}.circuit`;
  remember([...family, stateQueue]);
  try {
    await declareWorkQueue(queue);
    const pub = await Publisher.open();
    const orders = Array.from({ length: ORDERS }, (_, i) => i);
    await Promise.all(orders.map((i) => pub.publishOne(queue, `order-${i}`, { kind: 'order' })));
    await waitForQuiet(20_000);
    const cfg: OutageConfig = { lib, queue, ...SETTINGS };
    const child = startChild<OutageChildResult>('outage-child.ts', cfg, OUTAGE_MS + DRAIN_MS + 90_000);
    const started = new Promise<number>((resolve) => {
      child.proc.on('message', (m) => {
        const msg = m as { type?: string; t0?: number };
        if (msg.type === 'started' && msg.t0 !== undefined) resolve(msg.t0);
      });
    });
    const t0 = await withTimeout(Promise.race([started, child.result.then(() => NaN)]), 60_000, 'the outage child to start');
    log(`  ${lib}: consumer started; carrier down for ${OUTAGE_MS / 1000} s`);

    // The healthy orders, spread over the outage, behind the failing ones.
    const publishedAt = new Map<string, number>();
    for (let k = 0; k < HEALTHY; k++) {
      const at = t0 + (OUTAGE_MS * (k + 1)) / (HEALTHY + 1);
      await sleep(Math.max(0, at - Date.now()));
      const id = `healthy-${k}`;
      const now = Date.now();
      publishedAt.set(id, now);
      await pub.publishOne(queue, id, { kind: 'healthy', 'published-at': now });
    }
    await pub.close();
    const r = await child.result;
    log(`  ${lib}: stopped ${fmt((r.stoppedAt - r.outageEndAt) / 1000, 1)} s after the carrier recovered`);

    const depths = await Promise.all(family.map((q) => depth(q)));
    const inParkedQueue = depths[depths.length - 1] ?? 0;
    const leftInQueues = depths.slice(0, -1).reduce<number>((a, d) => a + (d ?? 0), 0);
    const published = ORDERS + publishedAt.size;
    const healthyLatencyS: number[] = [];
    for (const h of r.healthy) {
      const p = publishedAt.get(h.id) ?? h.publishedAt;
      if (h.succeededAt !== null && p !== null && p !== undefined) healthyLatencyS.push((h.succeededAt - p) / 1000);
    }
    return {
      lib,
      child: r,
      published,
      healthyLatencyS,
      healthySucceeded: r.healthy.filter((h) => h.succeededAt !== null).length,
      healthyParked: r.healthy.filter((h) => h.parked).length,
      leftInQueues,
      inParkedQueue,
      lost: published - r.succeeded - inParkedQueue - leftInQueues,
    };
  } finally {
    await deleteQueues([...family, stateQueue]);
  }
}

async function main(): Promise<void> {
  cleanupOnSignal();
  const started = new Date();
  const broker = await brokerVersion();
  log(
    `outage drill: ${ORDERS} orders, prefetch 1, carrier down ${OUTAGE_MS / 1000} s (~${WORK_MS} ms of work per call), ` +
      `${HEALTHY} healthy orders published during the outage; stop at outage + ${DRAIN_MS / 1000} s; ${broker}`,
  );
  const a = await drill('amqplib');
  const b = await drill('rabbit-retry');
  const c = await drill('rabbit-retry-circuit');
  const all = [a, b, c];

  const s = (ms: number | null) => (ms === null ? 'n/a' : `${fmt(ms / 1000, 1)} s`);
  const lat = (d: Drill) =>
    d.healthyLatencyS.length === 0 ? 'n/a' : `${fmt(percentile(d.healthyLatencyS, 50), 1)} s / ${fmt(percentile(d.healthyLatencyS, 99), 1)} s`;
  const drain = (d: Drill) =>
    d.child.drainMs !== null ? s(d.child.drainMs) : `not drained within ${DRAIN_MS / 1000} s (${d.child.unfinished} unfinished)`;
  const each = (f: (d: Drill) => string) => all.map(f);
  const circuit = c.child.circuit;
  const rows: string[][] = [
    [`carrier calls during the ${OUTAGE_MS / 1000} s outage`, ...each((d) => String(d.child.carrierCallsDuringOutage))],
    ['consumer process CPU during the outage', ...each((d) => `${fmt(d.child.cpuDuringOutageS, 1)} s`)],
    ['carrier calls in all', ...each((d) => String(d.child.carrierCalls))],
    ['healthy orders: latency p50 / p99 (publish → success)', ...each(lat)],
    ['healthy orders: succeeded / parked', ...each((d) => `${d.healthySucceeded}/${HEALTHY} / ${d.healthyParked}`)],
    ['orders published', ...each((d) => String(d.published))],
    ['orders succeeded', ...each((d) => String(d.child.succeeded))],
    ['parked (retries ran out; replayable)', ...each((d) => String(d.inParkedQueue))],
    ['left in the work and retry queues at the stop', ...each((d) => String(d.leftInQueues))],
    ['lost (published − succeeded − parked − left)', ...each((d) => String(d.lost))],
    ['duplicates (succeeded more than once)', ...each((d) => String(d.child.duplicates))],
    ['time to drain after the carrier recovers', ...each(drain)],
  ];
  // The circuit's targets, against requeue in the same run.
  const p99 = (d: Drill) => (d.healthyLatencyS.length === HEALTHY ? percentile(d.healthyLatencyS, 99) : Infinity);
  const callBound = circuit ? circuit.probes + circuit.openingFailures : 0;
  const targets: [string, boolean, string][] = [
    [
      'carrier calls during the outage ≤ probes + failures that opened it',
      circuit !== undefined && c.child.carrierCallsDuringOutage <= callBound,
      `${c.child.carrierCallsDuringOutage} ≤ ${circuit?.probes ?? '?'} + ${circuit?.openingFailures ?? '?'}`,
    ],
    ["healthy-order p99 ≤ requeue's", p99(c) <= p99(a), `${fmt(p99(c), 1)} s ≤ ${fmt(p99(a), 1)} s`],
    [
      "drain after recovery within 1.5x requeue's",
      c.child.drainMs !== null && a.child.drainMs !== null && c.child.drainMs <= 1.5 * a.child.drainMs,
      `${s(c.child.drainMs)} ≤ 1.5 × ${s(a.child.drainMs)}`,
    ],
    ['0 lost and 0 parked', c.lost === 0 && c.inParkedQueue === 0, `${c.lost} lost, ${c.inParkedQueue} parked`],
  ];
  const out: string[] = [];
  out.push('');
  out.push(
    `### Outage drill: ${ORDERS} orders, one consumer at prefetch 1, carrier down ${OUTAGE_MS / 1000} s, ${HEALTHY} healthy orders published during the outage`,
  );
  out.push('');
  out.push(
    table(
      [
        '',
        'amqplib, nack(requeue=true)',
        `rabbit-retry, delays ${DELAYS.join(', ')}`,
        `rabbit-retry with a circuit (opens after ${CIRCUIT_FAILURES} failures, probes every ${PROBE_EVERY})`,
      ],
      rows,
    ),
  );
  out.push('');
  out.push(
    `Carrier: ~${WORK_MS} ms of work per call, down for every order until ${OUTAGE_MS / 1000} s after the consumer starts. ` +
      `Drain: from the carrier's recovery until every order has succeeded or parked. Runs stop at the outage + ${DRAIN_MS / 1000} s. ` +
      `${broker}, ${os.cpus().length} cores, node ${process.version}. Reproduce: npm run bench:outage (OUTAGE_SECS, OUTAGE_DELAYS, OUTAGE_PROBE_EVERY, OUTAGE_DRAIN_SECS).`,
  );
  if (circuit) {
    out.push('');
    out.push(
      `The circuit: opened ${circuit.opens} time(s) from closed, ${circuit.probes} message probes, ${circuit.openingFailures} failures opened it, ` +
        `${circuit.released} deliveries given back unstarted, ${circuit.returnedEarly} messages sent back early from the retry queues.`,
    );
  }
  out.push('');
  out.push(
    table(
      ['circuit target (same run)', 'met', ''],
      targets.map(([what, met, detail]) => [what, met ? 'yes' : 'NO', detail]),
    ),
  );
  const byThread = (d: Drill) =>
    Object.entries(d.child.threadsDuringOutage ?? {})
      .sort((x, y) => y[1] - x[1])
      .map(([name, v]) => `${name} ${fmt(v, 2)} s`)
      .join(', ') || 'n/a';
  out.push('');
  out.push(`Consumer CPU during the outage by thread: amqplib: ${byThread(a)}; rabbit-retry: ${byThread(b)}; with a circuit: ${byThread(c)}.`);
  const problems = all.flatMap((d) => d.child.errors.map((e) => `${d.lib}: ${e}`));
  if (problems.length) out.push(`\nErrors reported: ${problems.join('; ')}`);

  const dir = path.join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `outage-${started.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        started: started.toISOString(),
        config: { ...SETTINGS, prefetch: 1 },
        machine: { cpus: os.cpus().length, node: process.version, broker },
        amqplib: a,
        rabbitRetry: b,
        rabbitRetryCircuit: c,
      },
      null,
      2,
    )}\n`,
  );
  out.push('');
  out.push(`results: ${path.relative(process.cwd(), file)}`);
  console.log(out.join('\n'));
}

runBenchmark(main);
