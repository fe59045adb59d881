/**
 * `npm run bench`: rabbit-retry against the seeds' amqplib consumer on the
 * same broker with the same messages.
 *
 * For each scenario (all succeed, all fail once, 10% fail) and each round,
 * the parent publishes BENCH_N persistent 1 KiB messages (confirmed) into a
 * fresh queue, then starts the consumer under test in a child process
 * (child.ts) which consumes until it has seen them all and reports its
 * throughput, CPU, event-loop utilization and peak RSS. Rounds alternate
 * amqplib / rabbit-retry; the tables (report.ts) show the median of the rounds.
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
 * BENCH_AMQPLIB_HEADERS=full: the amqplib client writes rabbit-retry's retry-*
 * headers (the stack among them) instead of the seeds' one `x-last-error`.
 *
 * BENCH_TRACE=<client> (amqplib, rabbit-retry or baseline) runs that client
 * under a registered OpenTelemetry tracer provider whose spans are batched and
 * exported nowhere: BENCH_BASELINE=. BENCH_TRACE=baseline shows what tracing
 * costs rabbit-retry per message, in the same rounds.
 * BENCH_BASELINE=dir adds a third client, `baseline`: rabbit-retry as built in
 * another checkout of this repository (an older commit), its lib/ loaded from
 * there by the child, measured in the same rounds (amqplib first, then this
 * checkout and the baseline, their order swapped every other round), with
 * rr / baseline ratios in the tables and the JSON. The checkout must be built
 * (its binding.js and .node file at its root) and must resolve this
 * repository's packages: `npm ci` there, or a `node_modules` symlink to this
 * checkout's. For example:
 *   git worktree add /tmp/rr-base <commit> && cd /tmp/rr-base
 *   ln -s /path/to/this/checkout/node_modules node_modules
 *   npx napi build --platform --release --js binding.js --dts binding.d.ts
 * (or that commit's own build script, e.g. RELEASE=1 bash scripts/build.sh),
 * then BENCH_BASELINE=/tmp/rr-base npm run bench.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { retryQueueName } from '../lib';
import type { ChildConfig, ChildResult, Lib, Scenario } from './child';
import {
  AMQP_URL,
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
  uniqueName,
  withTimeout,
  waitForQuiet,
  cpuTimes,
  busyBetween,
  brokerCpuS,
  pinCores,
} from './common';
import { report, TARGETS, type LatencyResult, type Measured, type SoakResult } from './report';

const N = envInt('BENCH_N', 20_000);
const ROUNDS = envInt('BENCH_ROUNDS', 3);
const LAT_N = envInt('BENCH_LAT_N', 2_000);
const LAT_WARMUP = 200;
const SOAK = process.env.BENCH_SOAK === '1';
const SOAK_N = envInt('BENCH_SOAK_N', 200_000);
const SOAK_SAMPLE = 10_000;
/** BENCH_SOAK_LIB=amqplib runs the soak on amqplib instead, as a control for the harness. */
const SOAK_LIB: Lib = process.env.BENCH_SOAK_LIB === 'amqplib' ? 'amqplib' : 'rabbit-retry';
const QUIET_WAIT_MS = envInt('BENCH_QUIET_WAIT_S', 30) * 1000;
const BUSY_THRESHOLD = 0.35;
const PREFETCH = envInt('BENCH_PREFETCH', 100);
/** BENCH_CPU_PROF=dir: each child writes a CPU profile of its measured window there (see bench/cpu-top.ts). */
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
const DELAY = '10m';
const ROOT = path.join(__dirname, '..');
/** BENCH_BASELINE=dir: the checkout whose build is measured as `baseline` (see the header). */
const BASELINE_DIR = process.env.BENCH_BASELINE ? path.resolve(process.env.BENCH_BASELINE) : undefined;
const LIBS: Lib[] = BASELINE_DIR ? ['amqplib', 'rabbit-retry', 'baseline'] : ['amqplib', 'rabbit-retry'];
/** The clients of a round, in order: amqplib first, as always; this checkout and the baseline take turns going first. */
const order = (round: number): Lib[] => (BASELINE_DIR && round % 2 === 0 ? ['amqplib', 'baseline', 'rabbit-retry'] : LIBS);
const short = (lib: Lib) => ({ amqplib: 'amqp', 'rabbit-retry': 'rr', baseline: 'base' })[lib];
const ALL_SCENARIOS: Scenario[] = ['all-succeed', 'all-fail-once', 'fail-10pct'];
/** BENCH_SCENARIOS=all-succeed,fail-10pct runs only those (the targets then cover only what ran). */
const SCENARIOS: Scenario[] = process.env.BENCH_SCENARIOS
  ? ALL_SCENARIOS.filter((s) => process.env.BENCH_SCENARIOS?.split(',').includes(s))
  : ALL_SCENARIOS;
/** BENCH_LATENCY=0 skips the latency rounds. */
const LATENCY = process.env.BENCH_LATENCY !== '0';

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
    const queue = uniqueName(`bench-${scenario}-${short(lib)}`);
    const family = queueFamily(queue, [DELAY]);
    remember(family);
    try {
      await declareWorkQueue(queue);
      const pub = await Publisher.open();
      await pub.publishRange(queue, 0, n);
      await pub.close();
      const cfg: ChildConfig = {
        mode: 'throughput',
        lib,
        url: AMQP_URL,
        scenario,
        queue,
        n,
        prefetch: PREFETCH,
        delay: DELAY,
        timeoutMs: 60_000 + n * 5,
        cpuProfDir: CPU_PROF_DIR,
        baselineDir: BASELINE_DIR,
      };
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
      return {
        ...r,
        round,
        workLeft,
        inRetry,
        expectedRetry,
        ok,
        busyBefore: quiet.busy,
        busyDuring,
        brokerCpuS: b0 === null || b1 === null ? null : b1 - b0,
      };
    } finally {
      await deleteQueues(family);
    }
  });
  return { ...value, tries };
}

/** Publishes one message at a time and waits for the child's no-op handler to report it. */
async function measureLatency(lib: Lib, n: number, round: number): Promise<LatencyResult> {
  const queue = uniqueName(`bench-latency-${short(lib)}`);
  const family = queueFamily(queue, [DELAY]);
  remember(family);
  try {
    await declareWorkQueue(queue);
    const cfg: ChildConfig = {
      mode: 'latency',
      lib,
      url: AMQP_URL,
      scenario: 'all-succeed',
      queue,
      n,
      prefetch: 1,
      delay: DELAY,
      timeoutMs: 60_000 + n * 20,
      cpuProfDir: CPU_PROF_DIR,
      baselineDir: BASELINE_DIR,
    };
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

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
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
  const queue = uniqueName(`bench-soak-${short(SOAK_LIB)}`);
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
      url: AMQP_URL,
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

function nativeInfo(root: string): { path: string; mtime: string; bytes: number } | null {
  const p = path.join(root, 'rabbit-retry.linux-x64-gnu.node');
  try {
    const st = statSync(p);
    return { path: path.basename(p), mtime: st.mtime.toISOString(), bytes: st.size };
  } catch {
    return null;
  }
}

function gitCommit(dir: string): string | null {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

/**
 * Fails fast unless `dir` is a checkout of rabbit-retry whose lib loads in a
 * child as the benchmark's children load it; returns its commit, or `dir`.
 */
function checkBaseline(dir: string): string {
  const index = path.join(dir, 'lib', 'index.ts');
  if (!existsSync(index))
    throw new Error(`BENCH_BASELINE=${dir}: ${index} does not exist; it must be a checkout of rabbit-retry (git worktree add <dir> <commit>)`);
  const probe = `if (typeof require(${JSON.stringify(path.join(dir, 'lib'))}).RabbitRetry?.connect !== 'function') throw new Error('no RabbitRetry.connect in its lib')`;
  try {
    execFileSync(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', probe], {
      cwd: ROOT,
      env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (err) {
    const why =
      String((err as { stderr?: Buffer }).stderr ?? '')
        .split('\n')
        .find((l) => /^\w*Error\b.*:/.test(l)) ?? (err as Error).message;
    throw new Error(
      `BENCH_BASELINE=${dir}: its lib does not load (${why.trim()}). The checkout needs its packages (npm ci there, or ln -s ${path.join(ROOT, 'node_modules')} ${path.join(dir, 'node_modules')}) and its built addon (binding.js and the .node file at its root).`,
      { cause: err },
    );
  }
  return gitCommit(dir) ?? dir;
}

async function main(): Promise<void> {
  const baseline = BASELINE_DIR ? checkBaseline(BASELINE_DIR) : undefined;
  if (baseline) log(`bench: baseline: rabbit-retry from ${baseline} (${BASELINE_DIR})`);
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
    `bench: ${N} persistent 1 KiB messages per run, prefetch ${PREFETCH}, ${ROUNDS} rounds alternating ${LIBS.join(' / ')}; ` +
      `${broker}; ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown cpu'}); node ${process.version}`,
  );

  const rounds: Measured[] = [];
  for (const scenario of SCENARIOS) {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const lib of order(round)) {
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
    for (const lib of order(round)) {
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

  const r = report({
    ...{
      n: N,
      rounds: ROUNDS,
      prefetch: PREFETCH,
      latN: LAT_N,
      broker,
      pinning,
      scenarios: SCENARIOS,
      libs: LIBS,
      measured: rounds,
      latency,
      latencyRan: LATENCY,
    },
    ...{ soak, soakLib: SOAK_LIB, soakN: SOAK_N, soakSample: SOAK_SAMPLE, busyThreshold: BUSY_THRESHOLD, quietWaitMs: QUIET_WAIT_MS, baseline },
  });
  const out = r.lines;
  const dir = path.join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `bench-${started.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        started: started.toISOString(),
        finished: new Date().toISOString(),
        config: {
          n: N,
          rounds: ROUNDS,
          prefetch: PREFETCH,
          latencyN: LAT_N,
          latencyWarmup: LAT_WARMUP,
          soak: SOAK,
          soakN: SOAK_N,
          delay: DELAY,
          bodyBytes: 1024,
        },
        machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, memGb: os.totalmem() / 2 ** 30, node: process.version, broker, pinning },
        commit: gitCommit(ROOT),
        native: nativeInfo(ROOT),
        baseline: BASELINE_DIR ? { dir: BASELINE_DIR, commit: baseline, native: nativeInfo(BASELINE_DIR) } : null,
        summary: r.summary,
        latency: r.latency,
        latencyRatio: r.latencyRatio,
        vsBaseline: r.vsBaseline,
        soak,
        targets: r.targets,
        checksOk: r.checksOk,
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
