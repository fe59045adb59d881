/**
 * `npm run bench`: rabbit-retry against the seeds' amqplib consumer on the
 * same broker with the same messages.
 *
 * For each scenario (all succeed, all fail once, 10% fail) and each round,
 * the parent publishes BENCH_N persistent 1 KiB messages (confirmed) into a
 * fresh queue, then starts the consumer under test in a child process
 * (child.ts) which consumes until it has seen them all and reports its
 * throughput, CPU, event-loop utilization and peak RSS. Rounds alternate
 * amqplib / rabbit-retry; the tables show the median of the rounds.
 *
 * Then the handler's latency at prefetch 1 (one message at a time), and, with
 * BENCH_SOAK=1, rabbit-retry's RSS across BENCH_SOAK_N messages.
 *
 * Env: BENCH_N (20000), BENCH_ROUNDS (3), BENCH_LAT_N (2000), BENCH_SOAK=1,
 * BENCH_SOAK_N (200000), AMQP_URL; BENCH_SCENARIOS (a comma list of
 * scenarios to run), BENCH_LATENCY=0 (skip the latency rounds), BENCH_PREFETCH
 * (100), BENCH_LONG_IDS=1 (see common.ts), BENCH_CHILD_STDERR=1 (pass the
 * children's stderr through), BENCH_MEM_DETAIL=1 (soak: print the V8 heap's
 * committed and used sizes with each sample).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { retryQueueName } from '../lib';
import type { ChildConfig, ChildResult, Lib, Scenario } from './child';
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
  median,
  percentile,
  queueFamily,
  remember,
  sleep,
  startChild,
  table,
  uniqueName,
  withTimeout,
  waitForQuiet,
  cpuTimes,
  busyBetween,
  brokerCpuS,
  pinCores,
} from './common';

const N = envInt('BENCH_N', 20_000);
const ROUNDS = envInt('BENCH_ROUNDS', 3);
const LAT_N = envInt('BENCH_LAT_N', 2_000);
const LAT_WARMUP = 200;
const SOAK = process.env.BENCH_SOAK === '1';
const SOAK_N = envInt('BENCH_SOAK_N', 200_000);
const SOAK_SAMPLE = 10_000;
/** BENCH_SOAK_LIB=amqplib runs the soak on the baseline instead, as a control for the harness. */
const SOAK_LIB: Lib = process.env.BENCH_SOAK_LIB === 'amqplib' ? 'amqplib' : 'rabbit-retry';
const QUIET_WAIT_MS = envInt('BENCH_QUIET_WAIT_S', 30) * 1000;
const BUSY_THRESHOLD = 0.35;
const PREFETCH = envInt('BENCH_PREFETCH', 100);
/** BENCH_CPU_PROF=dir: each child writes a CPU profile of its measured window there (see bench/cpu-top.ts). */
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
const DELAY = '10m';
const LIBS: Lib[] = ['amqplib', 'rabbit-retry'];
const ALL_SCENARIOS: Scenario[] = ['all-succeed', 'all-fail-once', 'fail-10pct'];
/** BENCH_SCENARIOS=all-succeed,fail-10pct runs only those (the targets then cover only what ran). */
const SCENARIOS: Scenario[] = process.env.BENCH_SCENARIOS
  ? ALL_SCENARIOS.filter((s) => process.env.BENCH_SCENARIOS?.split(',').includes(s))
  : ALL_SCENARIOS;
/** BENCH_LATENCY=0 skips the latency rounds. */
const LATENCY = process.env.BENCH_LATENCY !== '0';

const TARGETS = {
  allSucceedRatio: 1.4,
  allFailRatio: 1.3,
  latencyOverheadRatio: 1.5,
  /** RSS counts as flat when its slope stays under this many MB per 100k messages. */
  soakSlopeMbPer100k: 2,
};

interface Measured extends ChildResult {
  round: number;
  /** Messages left in the work queue after the child closed (should be 0). */
  workLeft: number | null;
  /** Messages in the retry queue after the run, and how many there should be. */
  inRetry: number | null;
  expectedRetry: number;
  /** Whether the broker's counts match what the child reported. */
  ok: boolean;
  /** Tries it took (a child that crashed is run once more). */
  tries: number;
  /** Machine-wide CPU busy fraction just before the child started (others' work), and during its run. */
  busyBefore: number | null;
  busyDuring: number | null;
  /** CPU seconds the broker used while the child ran (start-up and close included), or null. */
  brokerCpuS: number | null;
}

function expectedRetries(scenario: Scenario, n: number): number {
  if (scenario === 'all-fail-once') return n;
  if (scenario === 'fail-10pct') return Math.ceil(n / 10);
  return 0;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Runs `f` once more when it throws (the native binary may be rebuilt under us). */
async function twice<T>(what: string, f: () => Promise<T>): Promise<{ value: T; tries: number }> {
  try {
    return { value: await f(), tries: 1 };
  } catch (err) {
    log(`  ${what} failed, running it once more: ${(err as Error).message.split('\n')[0]}`);
    await sleep(2_000);
    return { value: await f(), tries: 2 };
  }
}

async function measureThroughput(lib: Lib, scenario: Scenario, n: number, round: number): Promise<Measured> {
  const { value, tries } = await twice(`${scenario} ${lib}`, async () => {
    const queue = uniqueName(`bench-${scenario}-${lib === 'amqplib' ? 'amqp' : 'rr'}`);
    const family = queueFamily(queue, [DELAY]);
    remember(family);
    try {
      await declareWorkQueue(queue);
      const pub = await Publisher.open();
      await pub.publishRange(queue, 0, n);
      await pub.close();
      const cfg: ChildConfig = { mode: 'throughput', lib, scenario, queue, n, prefetch: PREFETCH, delay: DELAY, timeoutMs: 60_000 + n * 5, cpuProfDir: CPU_PROF_DIR };
      const quiet = await waitForQuiet(QUIET_WAIT_MS, BUSY_THRESHOLD);
      const c0 = cpuTimes();
      const b0 = brokerCpuS();
      const r = await startChild<ChildResult>('child.ts', cfg, cfg.timeoutMs + 30_000).result;
      const b1 = brokerCpuS();
      const busyDuring = busyBetween(c0, cpuTimes());
      const workLeft = await depth(queue);
      const inRetry = await depth(retryQueueName(queue, DELAY));
      const expectedRetry = expectedRetries(scenario, n);
      const ok = workLeft === 0 && inRetry === expectedRetry && r.retried === expectedRetry && r.returned === 0 && r.errors.length === 0;
      return { ...r, round, workLeft, inRetry, expectedRetry, ok, busyBefore: quiet.busy, busyDuring, brokerCpuS: b0 === null || b1 === null ? null : b1 - b0 };
    } finally {
      await deleteQueues(family);
    }
  });
  return { ...value, tries };
}

interface LatencyResult {
  lib: Lib;
  round: number;
  n: number;
  meanUs: number;
  p50Us: number;
  p99Us: number;
  busyBefore: number | null;
  child: ChildResult;
}

/** Publishes one message at a time and waits for the child's no-op handler to report it. */
async function measureLatency(lib: Lib, n: number, round: number): Promise<LatencyResult> {
  const queue = uniqueName(`bench-latency-${lib === 'amqplib' ? 'amqp' : 'rr'}`);
  const family = queueFamily(queue, [DELAY]);
  remember(family);
  try {
    await declareWorkQueue(queue);
    const cfg: ChildConfig = { mode: 'latency', lib, scenario: 'all-succeed', queue, n, prefetch: 1, delay: DELAY, timeoutMs: 60_000 + n * 20, cpuProfDir: CPU_PROF_DIR };
    const child = startChild<ChildResult>('child.ts', cfg, cfg.timeoutMs + 30_000);
    let onHandled: (() => void) | undefined;
    const ready = new Promise<void>((resolve) => {
      child.proc.on('message', (m) => {
        if (m === 'h') onHandled?.();
        else if ((m as { type?: string }).type === 'ready') resolve();
      });
    });
    await withTimeout(Promise.race([ready, child.result.then(() => undefined)]), 30_000, 'the latency child to start');
    const quiet = await waitForQuiet(QUIET_WAIT_MS, BUSY_THRESHOLD);
    const pub = await Publisher.open();
    const times: number[] = [];
    try {
      for (let i = 0; i < LAT_WARMUP + n; i++) {
        const handled = new Promise<void>((resolve) => (onHandled = resolve));
        const t = process.hrtime.bigint();
        pub.send(queue, String(i));
        await withTimeout(handled, 5_000, `message ${i} to be handled`);
        if (i >= LAT_WARMUP) times.push(Number(process.hrtime.bigint() - t) / 1e3);
      }
    } finally {
      onHandled = undefined;
      child.proc.send('stop');
      await pub.close();
    }
    const r = await child.result;
    return {
      lib,
      round,
      n,
      meanUs: times.reduce((a, b) => a + b, 0) / times.length,
      p50Us: percentile(times, 50),
      p99Us: percentile(times, 99),
      busyBefore: quiet.busy,
      child: r,
    };
  } finally {
    await deleteQueues(family);
  }
}

interface SoakResult {
  n: number;
  samples: Array<[number, number, number]>;
  firstMb: number;
  lastMb: number;
  maxMb: number;
  slopeMbPer100k: number;
  msgsPerS: number;
  peakRssMb: number;
  afterGc: ChildResult['afterGc'];
  flat: boolean;
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((a, p) => a + p[0], 0) / n;
  const my = points.reduce((a, p) => a + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return num / den;
}

/** rabbit-retry (or BENCH_SOAK_LIB) consuming SOAK_N messages while the parent tops the queue up in chunks. */
async function measureSoak(n: number): Promise<SoakResult> {
  const queue = uniqueName(`bench-soak-${SOAK_LIB === 'amqplib' ? 'amqp' : 'rr'}`);
  const family = queueFamily(queue, [DELAY]);
  remember(family);
  try {
    await declareWorkQueue(queue);
    const pub = await Publisher.open();
    const chunk = SOAK_SAMPLE;
    let published = Math.min(n, 3 * chunk);
    await pub.publishRange(queue, 0, published);
    const cfg: ChildConfig = {
      mode: 'soak',
      lib: SOAK_LIB,
      scenario: 'all-succeed',
      queue,
      n,
      prefetch: PREFETCH,
      delay: DELAY,
      sampleEvery: SOAK_SAMPLE,
      timeoutMs: 120_000 + n * 2,
    };
    const child = startChild<ChildResult>('child.ts', cfg, cfg.timeoutMs + 30_000, ['--expose-gc']);
    let done = 0;
    let exited = false;
    child.proc.on('message', (m) => {
      const p = m as { type?: string; done?: number; rssMb?: number };
      if (p.type === 'progress' && p.done !== undefined) {
        done = p.done;
        log(`  soak: ${p.done} messages, RSS ${fmt(p.rssMb, 1)} MB`);
      }
    });
    child.proc.on('exit', () => (exited = true));
    const deadline = Date.now() + cfg.timeoutMs;
    while (published < n && !exited && Date.now() < deadline) {
      if (published - done <= 2 * chunk) {
        const count = Math.min(chunk, n - published);
        await pub.publishRange(queue, published, count);
        published += count;
      } else {
        await sleep(20);
      }
    }
    await pub.close();
    const r = await child.result;
    const samples = r.samples ?? [];
    const rss = samples.map((s) => s[1]);
    const s = slope(samples.slice(1).map((p) => [p[0], p[1]])) * 100_000;
    return {
      n: r.n,
      samples,
      firstMb: rss[0],
      lastMb: rss[rss.length - 1],
      maxMb: Math.max(...rss),
      slopeMbPer100k: s,
      msgsPerS: r.msgsPerS,
      peakRssMb: r.peakRssMb,
      afterGc: r.afterGc,
      flat: Number.isFinite(s) && s <= TARGETS.soakSlopeMbPer100k,
    };
  } finally {
    await deleteQueues(family);
  }
}

interface Summary {
  msgsPerS: number;
  cpuSPer10k: number;
  eluUsPerMsg: number;
  eluUtilization: number;
  peakRssMb: number;
  /** The broker's CPU seconds per 10k messages, or NaN when it could not be read. */
  brokerCpuSPer10k: number;
}

function summarize(rs: Measured[]): Summary {
  return {
    msgsPerS: median(rs.map((r) => r.msgsPerS)),
    cpuSPer10k: median(rs.map((r) => (r.cpuS / r.n) * 10_000)),
    eluUsPerMsg: median(rs.map((r) => r.eluUsPerMsg)),
    eluUtilization: median(rs.map((r) => r.elu.utilization)),
    peakRssMb: median(rs.map((r) => r.peakRssMb)),
    brokerCpuSPer10k: rs.every((r) => r.brokerCpuS !== null) ? median(rs.map((r) => ((r.brokerCpuS as number) / r.n) * 10_000)) : NaN,
  };
}

function nativeInfo(): { path: string; mtime: string; bytes: number } | null {
  const p = path.join(__dirname, '..', 'rabbit-retry.linux-x64-gnu.node');
  try {
    const st = statSync(p);
    return { path: path.basename(p), mtime: st.mtime.toISOString(), bytes: st.size };
  } catch {
    return null;
  }
}

function gitCommit(): string | null {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: path.join(__dirname, '..'), encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

const met = (ok: boolean) => (ok ? 'met' : 'not met');

async function main(): Promise<void> {
  cleanupOnSignal();
  const pinning = pinCores();
  log(`bench: ${pinning}`);
  if (CPU_PROF_DIR) {
    mkdirSync(CPU_PROF_DIR, { recursive: true });
    log(`bench: writing CPU profiles to ${CPU_PROF_DIR} (profiling slows the runs: do not compare these numbers)`);
  }
  const started = new Date();
  const broker = await brokerVersion();
  log(
    `bench: ${N} persistent 1 KiB messages per run, prefetch ${PREFETCH}, ${ROUNDS} rounds alternating amqplib / rabbit-retry; ` +
      `${broker}; ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown cpu'}); node ${process.version}`,
  );

  const rounds: Measured[] = [];
  for (const scenario of SCENARIOS) {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const lib of LIBS) {
        const r = await measureThroughput(lib, scenario, N, round);
        rounds.push(r);
        log(
          `  ${scenario} round ${round} ${lib}: ${fmt(r.msgsPerS, 0)} msg/s, CPU ${fmt(r.cpuS, 2)} s, ELU ${fmt(r.elu.utilization, 2)}, ` +
            `peak RSS ${fmt(r.peakRssMb, 0)} MB${r.ok ? '' : ` CHECK FAILED (work left ${r.workLeft}, in retry ${r.inRetry}/${r.expectedRetry}, retried ${r.retried}, returned ${r.returned}, errors ${r.errors.join('; ')})`}`,
        );
      }
    }
  }

  const latency: LatencyResult[] = [];
  for (let round = 1; LATENCY && round <= ROUNDS; round++) {
    for (const lib of LIBS) {
      const { value } = await twice(`latency ${lib}`, () => measureLatency(lib, LAT_N, round));
      latency.push(value);
      log(`  latency round ${round} ${lib}: mean ${fmt(value.meanUs, 0)} µs, p50 ${fmt(value.p50Us, 0)} µs, p99 ${fmt(value.p99Us, 0)} µs`);
    }
  }

  let soak: SoakResult | null = null;
  if (SOAK) {
    log(`  soak: ${SOAK_LIB} consuming ${SOAK_N} messages`);
    soak = await measureSoak(SOAK_N);
  }

  // Tables.
  const summaries: Record<string, Record<Lib, Summary>> = {};
  const rows: string[][] = [];
  for (const scenario of SCENARIOS) {
    const a = summarize(rounds.filter((r) => r.scenario === scenario && r.lib === 'amqplib'));
    const b = summarize(rounds.filter((r) => r.scenario === scenario && r.lib === 'rabbit-retry'));
    summaries[scenario] = { amqplib: a, 'rabbit-retry': b };
    rows.push([
      scenario,
      fmt(a.msgsPerS, 0),
      fmt(b.msgsPerS, 0),
      `${fmt(b.msgsPerS / a.msgsPerS, 2)}x`,
      `${fmt(a.cpuSPer10k, 3)} / ${fmt(b.cpuSPer10k, 3)}`,
      `${fmt(a.brokerCpuSPer10k, 3)} / ${fmt(b.brokerCpuSPer10k, 3)}`,
      `${fmt(a.eluUsPerMsg, 1)} / ${fmt(b.eluUsPerMsg, 1)}`,
      `${fmt(a.eluUtilization, 2)} / ${fmt(b.eluUtilization, 2)}`,
      `${fmt(a.peakRssMb, 0)} / ${fmt(b.peakRssMb, 0)}`,
    ]);
  }
  const latA = latency.filter((l) => l.lib === 'amqplib');
  const latB = latency.filter((l) => l.lib === 'rabbit-retry');
  const lat = {
    amqplib: { meanUs: median(latA.map((l) => l.meanUs)), p50Us: median(latA.map((l) => l.p50Us)), p99Us: median(latA.map((l) => l.p99Us)) },
    'rabbit-retry': { meanUs: median(latB.map((l) => l.meanUs)), p50Us: median(latB.map((l) => l.p50Us)), p99Us: median(latB.map((l) => l.p99Us)) },
  };
  const latRatio = lat['rabbit-retry'].meanUs / lat.amqplib.meanUs;

  const ratio = (s: Scenario) => (summaries[s] ? summaries[s]['rabbit-retry'].msgsPerS / summaries[s].amqplib.msgsPerS : NaN);
  const ran = (s: Scenario) => SCENARIOS.includes(s);
  const eluBelow = SCENARIOS.every((s) => summaries[s]['rabbit-retry'].eluUsPerMsg < summaries[s].amqplib.eluUsPerMsg);
  const targets = [
    { target: `all-succeed >= ${TARGETS.allSucceedRatio}x amqplib`, measured: ran('all-succeed') ? `${fmt(ratio('all-succeed'), 2)}x` : 'not run', met: ran('all-succeed') ? ratio('all-succeed') >= TARGETS.allSucceedRatio : null },
    { target: `all-fail-once >= ${TARGETS.allFailRatio}x amqplib`, measured: ran('all-fail-once') ? `${fmt(ratio('all-fail-once'), 2)}x` : 'not run', met: ran('all-fail-once') ? ratio('all-fail-once') >= TARGETS.allFailRatio : null },
    {
      target: "ELU per message below amqplib's (every scenario)",
      measured: SCENARIOS.map((s) => `${s} ${fmt(summaries[s]['rabbit-retry'].eluUsPerMsg / summaries[s].amqplib.eluUsPerMsg, 2)}x`).join(', '),
      met: eluBelow,
    },
    {
      target: `latency overhead at prefetch 1 <= ${TARGETS.latencyOverheadRatio}x amqplib`,
      measured: LATENCY ? `${fmt(latRatio, 2)}x` : 'not run',
      met: LATENCY ? latRatio <= TARGETS.latencyOverheadRatio : null,
    },
    soak
      ? {
          target: `RSS flat over ${soak.n} messages (slope <= ${TARGETS.soakSlopeMbPer100k} MB per 100k)`,
          measured: `${fmt(soak.slopeMbPer100k, 2)} MB per 100k${SOAK_LIB === 'amqplib' ? ' (amqplib control run)' : ''}`,
          met: SOAK_LIB === 'amqplib' ? null : soak.flat,
        }
      : { target: 'RSS flat over 200,000 messages', measured: 'not run (BENCH_SOAK=1 npm run bench)', met: null },
  ];

  const checksOk = rounds.every((r) => r.ok);
  const starts = [...rounds.map((r) => r.busyBefore), ...latency.map((l) => l.busyBefore)];
  const busyStarts = starts.filter((b) => b !== null && b > BUSY_THRESHOLD).length;
  const out: string[] = [];
  out.push('');
  out.push(
    `## Throughput: ${N} persistent 1 KiB messages, prefetch ${PREFETCH}, median of ${ROUNDS} alternating rounds (${broker}, ${os.cpus().length} cores, node ${process.version}; ${pinning})`,
  );
  out.push('');
  out.push(
    table(
      ['scenario', 'msgs/s amqplib', 'msgs/s rabbit-retry', 'rr / amqplib', 'CPU s per 10k (amqplib / rr)', 'broker CPU s per 10k (amqplib / rr)', 'ELU µs per msg (amqplib / rr)', 'ELU (amqplib / rr)', 'peak RSS MB (amqplib / rr)'],
      rows,
    ),
  );
  out.push('');
  out.push(
    'CPU: user+system of the consumer process, all threads. Broker CPU: user+system of the local RabbitMQ VM while the consumer ran, what the client asked of the broker (n/a when the broker is not local). ELU µs per msg: event-loop busy time per message (utilization × wall / N). ' +
      'Peak RSS: the child process (node, ts-node and the client loaded).' +
      (checksOk ? ' Every run: work queue empty afterwards, retry queue holding exactly the failed messages.' : ' SOME RUNS FAILED THEIR CHECKS: see the JSON.'),
  );
  out.push('');
  out.push('Where the consumer process spends its CPU, seconds per 10k messages by thread (median of rounds):');
  out.push('');
  const threadRows: string[][] = [];
  for (const scenario of SCENARIOS) {
    for (const lib of LIBS) {
      const rs = rounds.filter((r) => r.scenario === scenario && r.lib === lib);
      const names = [...new Set(rs.flatMap((r) => Object.keys(r.threads ?? {})))];
      const per = names
        .map((name) => [name, median(rs.map((r) => ((r.threads?.[name] ?? 0) / r.n) * 10_000))] as const)
        .filter(([, v]) => v >= 0.005)
        .sort((x, y) => y[1] - x[1]);
      threadRows.push([scenario, lib, per.map(([name, v]) => `${name} ${fmt(v, 2)}`).join(', ') || 'n/a']);
    }
  }
  out.push(table(['scenario', 'client', 'CPU s per 10k msgs by thread'], threadRows));
  out.push('');
  out.push(`## Handler latency at prefetch 1: one message at a time, no-op handler, ${LAT_N} round trips (median of ${ROUNDS} rounds)`);
  out.push('');
  out.push(
    table(
      ['client', 'mean µs per message', 'p50 µs', 'p99 µs'],
      [
        ['amqplib', fmt(lat.amqplib.meanUs, 0), fmt(lat.amqplib.p50Us, 0), fmt(lat.amqplib.p99Us, 0)],
        ['rabbit-retry', fmt(lat['rabbit-retry'].meanUs, 0), fmt(lat['rabbit-retry'].p50Us, 0), fmt(lat['rabbit-retry'].p99Us, 0)],
        ['rr / amqplib', `${fmt(latRatio, 2)}x`, `${fmt(lat['rabbit-retry'].p50Us / lat.amqplib.p50Us, 2)}x`, `${fmt(lat['rabbit-retry'].p99Us / lat.amqplib.p99Us, 2)}x`],
      ],
    ),
  );
  out.push('');
  out.push('Round trip: the parent publishes, the child\'s handler runs and tells the parent over IPC, the parent publishes the next.');
  out.push('');
  out.push(`## RSS flatness (${SOAK_LIB})`);
  out.push('');
  if (soak) {
    out.push(
      table(
        ['messages', 'first MB', 'last MB', 'max MB', 'slope MB per 100k msgs', 'after a full GC: RSS / heap MB', 'msgs/s'],
        [
          [
            String(soak.n),
            fmt(soak.firstMb, 1),
            fmt(soak.lastMb, 1),
            fmt(soak.maxMb, 1),
            fmt(soak.slopeMbPer100k, 2),
            soak.afterGc ? `${fmt(soak.afterGc.rssMb, 1)} / ${fmt(soak.afterGc.heapUsedMb, 1)}` : 'n/a',
            fmt(soak.msgsPerS, 0),
          ],
        ],
      ),
    );
    out.push('');
    out.push(`RSS every ${SOAK_SAMPLE} messages: ${soak.samples.map((s) => fmt(s[1], 0)).join(', ')}`);
    out.push(`JS heap used every ${SOAK_SAMPLE} messages: ${soak.samples.map((s) => fmt(s[2], 0)).join(', ')}`);
  } else {
    out.push(`Not run. Run it with: BENCH_SOAK=1 npm run bench   (BENCH_SOAK_N=${SOAK_N} messages; BENCH_N=2000 BENCH_ROUNDS=1 shortens the rest)`);
  }
  out.push('');
  if (busyStarts > 0) {
    out.push(
      `Note: ${busyStarts} of ${starts.length} measurements started while other work kept the machine more than ${BUSY_THRESHOLD * 100}% busy ` +
        `(after waiting up to ${QUIET_WAIT_MS / 1000} s for it to calm down); their numbers are noisier. See busyBefore in the JSON.`,
    );
    out.push('');
  }
  out.push('## Targets (issue 6)');
  out.push('');
  out.push(table(['target', 'measured', ''], targets.map((t) => [t.target, t.measured, t.met === null ? 'not measured' : met(t.met)])));

  const dir = path.join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `bench-${started.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        started: started.toISOString(),
        finished: new Date().toISOString(),
        config: { n: N, rounds: ROUNDS, prefetch: PREFETCH, latencyN: LAT_N, latencyWarmup: LAT_WARMUP, soak: SOAK, soakN: SOAK_N, delay: DELAY, bodyBytes: 1024 },
        machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, memGb: os.totalmem() / 2 ** 30, node: process.version, broker, pinning },
        commit: gitCommit(),
        native: nativeInfo(),
        summary: summaries,
        latency: lat,
        latencyRatio: latRatio,
        soak,
        targets,
        checksOk,
        rounds,
        latencyRounds: latency,
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
