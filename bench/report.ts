/**
 * The tables `npm run bench` prints (bench/run.ts measures, this summarizes):
 * throughput, CPU by thread, latency, RSS flatness and the targets, with the
 * columns and ratios of the baseline build when BENCH_BASELINE is set.
 */
import os from 'node:os';

import type { ChildResult, Lib, Scenario } from './child';
import { fmt, median, table } from './common';

export const TARGETS = {
  allSucceedRatio: 1.4,
  allFailRatio: 1.3,
  /** Client CPU per message, rabbit-retry over the seeds' pattern: at most this on the failure path. */
  allFailCpuRatio: 0.8,
  /** Broker CPU per message on the failure path, rabbit-retry over the seeds' pattern. */
  allFailBrokerCpuRatio: 1.05,
  /** Client CPU per message on the success path, rabbit-retry over amqplib. */
  allSucceedCpuRatio: 0.9,
  latencyOverheadRatio: 1.5,
  /** RSS counts as flat when its slope stays under this many MB per 100k messages. */
  soakSlopeMbPer100k: 2,
};

export interface Measured extends ChildResult {
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

export interface LatencyResult {
  lib: Lib;
  round: number;
  n: number;
  meanUs: number;
  p50Us: number;
  p99Us: number;
  busyBefore: number | null;
  child: ChildResult;
}

export interface SoakResult {
  n: number;
  samples: [number, number, number][];
  firstMb: number;
  lastMb: number;
  maxMb: number;
  slopeMbPer100k: number;
  msgsPerS: number;
  peakRssMb: number;
  afterGc: ChildResult['afterGc'];
  flat: boolean;
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

/** One scenario's medians by client; `baseline` only with BENCH_BASELINE. */
interface BySide<T> {
  amqplib: T;
  'rabbit-retry': T;
  baseline?: T;
}

interface Latency {
  meanUs: number;
  p50Us: number;
  p99Us: number;
}

export interface ReportInput {
  n: number;
  rounds: number;
  prefetch: number;
  latN: number;
  broker: string;
  pinning: string;
  scenarios: Scenario[];
  libs: Lib[];
  measured: Measured[];
  latency: LatencyResult[];
  latencyRan: boolean;
  soak: SoakResult | null;
  soakLib: Lib;
  soakN: number;
  soakSample: number;
  busyThreshold: number;
  quietWaitMs: number;
  /** The baseline build's commit (or directory) when BENCH_BASELINE is set. */
  baseline?: string;
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

const met = (ok: boolean) => (ok ? 'met' : 'not met');
const times = (r: number) => `${fmt(r, 2)}x`;

/** The medians by scenario and client, the ratios, the targets, and the lines to print. */
export function report(input: ReportInput) {
  const { scenarios: SCENARIOS, measured: rounds, latency } = input;
  const base = input.baseline !== undefined;
  const who = base ? '(amqplib / rr / baseline)' : '(amqplib / rr)';
  const only = <T>(xs: T[]) => (base ? xs : []);
  const sides = <T>(s: BySide<T>): T[] => [s.amqplib, s['rabbit-retry'], ...(s.baseline ? [s.baseline] : [])];

  const summaries: Record<string, BySide<Summary>> = {};
  const rows: string[][] = [];
  for (const scenario of SCENARIOS) {
    const of = (lib: Lib) => summarize(rounds.filter((r) => r.scenario === scenario && r.lib === lib));
    const s: BySide<Summary> = { amqplib: of('amqplib'), 'rabbit-retry': of('rabbit-retry'), ...(base ? { baseline: of('baseline') } : {}) };
    summaries[scenario] = s;
    const [a, b, c] = [s.amqplib, s['rabbit-retry'], s.baseline];
    const each = (f: (x: Summary) => number, d: number) =>
      sides(s)
        .map((x) => fmt(f(x), d))
        .join(' / ');
    rows.push([
      scenario,
      fmt(a.msgsPerS, 0),
      fmt(b.msgsPerS, 0),
      ...only([fmt(c?.msgsPerS, 0)]),
      times(b.msgsPerS / a.msgsPerS),
      ...only([times(b.msgsPerS / (c?.msgsPerS ?? NaN))]),
      each((x) => x.cpuSPer10k, 3),
      times(b.cpuSPer10k / a.cpuSPer10k),
      ...only([times(b.cpuSPer10k / (c?.cpuSPer10k ?? NaN))]),
      each((x) => x.brokerCpuSPer10k, 3),
      times(b.brokerCpuSPer10k / a.brokerCpuSPer10k),
      ...only([times(b.brokerCpuSPer10k / (c?.brokerCpuSPer10k ?? NaN))]),
      each((x) => x.eluUsPerMsg, 1),
      each((x) => x.eluUtilization, 2),
      each((x) => x.peakRssMb, 0),
    ]);
  }
  const latOf = (lib: Lib): Latency => {
    const ls = latency.filter((l) => l.lib === lib);
    return { meanUs: median(ls.map((l) => l.meanUs)), p50Us: median(ls.map((l) => l.p50Us)), p99Us: median(ls.map((l) => l.p99Us)) };
  };
  const lat: BySide<Latency> = { amqplib: latOf('amqplib'), 'rabbit-retry': latOf('rabbit-retry'), ...(base ? { baseline: latOf('baseline') } : {}) };
  const latRatio = lat['rabbit-retry'].meanUs / lat.amqplib.meanUs;

  const ratio = (s: Scenario) => (summaries[s] ? summaries[s]['rabbit-retry'].msgsPerS / summaries[s].amqplib.msgsPerS : NaN);
  const ran = (s: Scenario) => SCENARIOS.includes(s);
  /** rabbit-retry over amqplib of one median, NaN when the scenario did not run. */
  const over = (s: Scenario, f: (x: Summary) => number) => (summaries[s] ? f(summaries[s]['rabbit-retry']) / f(summaries[s].amqplib) : NaN);
  const atMost = (s: Scenario, what: string, f: (x: Summary) => number, limit: number) => ({
    target: `${s} ${what} <= ${limit}x amqplib`,
    measured: ran(s) ? times(over(s, f)) : 'not run',
    met: ran(s) ? over(s, f) <= limit : null,
  });
  const eluBelow = SCENARIOS.every((s) => summaries[s]['rabbit-retry'].eluUsPerMsg < summaries[s].amqplib.eluUsPerMsg);
  const { soak, soakLib } = input;
  const targets = [
    {
      target: `all-succeed >= ${TARGETS.allSucceedRatio}x amqplib`,
      measured: ran('all-succeed') ? times(ratio('all-succeed')) : 'not run',
      met: ran('all-succeed') ? ratio('all-succeed') >= TARGETS.allSucceedRatio : null,
    },
    {
      target: `all-fail-once >= ${TARGETS.allFailRatio}x amqplib`,
      measured: ran('all-fail-once') ? times(ratio('all-fail-once')) : 'not run',
      met: ran('all-fail-once') ? ratio('all-fail-once') >= TARGETS.allFailRatio : null,
    },
    atMost('all-succeed', 'client CPU per message', (x) => x.cpuSPer10k, TARGETS.allSucceedCpuRatio),
    atMost('all-fail-once', 'client CPU per message', (x) => x.cpuSPer10k, TARGETS.allFailCpuRatio),
    atMost('all-fail-once', 'broker CPU per message', (x) => x.brokerCpuSPer10k, TARGETS.allFailBrokerCpuRatio),
    {
      target: "ELU per message below amqplib's (every scenario)",
      measured: SCENARIOS.map((s) => `${s} ${times(summaries[s]['rabbit-retry'].eluUsPerMsg / summaries[s].amqplib.eluUsPerMsg)}`).join(', '),
      met: eluBelow,
    },
    {
      target: `latency overhead at prefetch 1 <= ${TARGETS.latencyOverheadRatio}x amqplib`,
      measured: input.latencyRan ? times(latRatio) : 'not run',
      met: input.latencyRan ? latRatio <= TARGETS.latencyOverheadRatio : null,
    },
    soak
      ? {
          target: `RSS flat over ${soak.n} messages (slope <= ${TARGETS.soakSlopeMbPer100k} MB per 100k)`,
          measured: `${fmt(soak.slopeMbPer100k, 2)} MB per 100k${soakLib === 'amqplib' ? ' (amqplib control run)' : ''}`,
          met: soakLib === 'amqplib' ? null : soak.flat,
        }
      : { target: 'RSS flat over 200,000 messages', measured: 'not run (BENCH_SOAK=1 npm run bench)', met: null },
  ];
  /** rabbit-retry over the baseline by scenario (lower is better for CPU, higher for msgs/s). */
  const vsBaseline = base
    ? Object.fromEntries(
        SCENARIOS.map((sc) => {
          const [b, c] = [summaries[sc]['rabbit-retry'], summaries[sc].baseline as Summary];
          return [
            sc,
            { msgsPerS: b.msgsPerS / c.msgsPerS, cpuSPer10k: b.cpuSPer10k / c.cpuSPer10k, brokerCpuSPer10k: b.brokerCpuSPer10k / c.brokerCpuSPer10k },
          ];
        }),
      )
    : null;

  const checksOk = rounds.every((r) => r.ok);
  const starts = [...rounds.map((r) => r.busyBefore), ...latency.map((l) => l.busyBefore)];
  const busyStarts = starts.filter((b) => b !== null && b > input.busyThreshold).length;
  const cores = `${os.cpus().length} cores, node ${process.version}`;
  const out: string[] = [];
  out.push('');
  out.push(
    `## Throughput: ${input.n} persistent 1 KiB messages, prefetch ${input.prefetch}, median of ${input.rounds} alternating rounds (${input.broker}, ${cores}; ${input.pinning})`,
  );
  out.push('');
  out.push(
    table(
      [
        'scenario',
        'msgs/s amqplib',
        'msgs/s rabbit-retry',
        ...only(['msgs/s baseline']),
        'rr / amqplib',
        ...only(['rr / baseline']),
        `CPU s per 10k ${who}`,
        'CPU rr / amqplib',
        ...only(['CPU rr / baseline']),
        `broker CPU s per 10k ${who}`,
        'broker CPU rr / amqplib',
        ...only(['broker CPU rr / baseline']),
        `ELU µs per msg ${who}`,
        `ELU ${who}`,
        `peak RSS MB ${who}`,
      ],
      rows,
    ),
  );
  out.push('');
  out.push(
    'CPU: user+system of the consumer process, all threads. Broker CPU: user+system of the local RabbitMQ VM while the consumer ran, what the client asked of the broker (n/a when the broker is not local). ELU µs per msg: event-loop busy time per message (utilization × wall / N). ' +
      'Peak RSS: the child process (node, ts-node and the client loaded).' +
      (base ? ` baseline: rabbit-retry built from ${input.baseline}; rr / baseline above 1 is better for msgs/s, below 1 for CPU.` : '') +
      (checksOk
        ? ' Every run: work queue empty afterwards, retry queue holding exactly the failed messages.'
        : ' SOME RUNS FAILED THEIR CHECKS: see the JSON.'),
  );
  out.push('');
  out.push('Where the consumer process spends its CPU, seconds per 10k messages by thread (median of rounds):');
  out.push('');
  const threadRows: string[][] = [];
  for (const scenario of SCENARIOS) {
    for (const lib of input.libs) {
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
  out.push(`## Handler latency at prefetch 1: one message at a time, no-op handler, ${input.latN} round trips (median of ${input.rounds} rounds)`);
  out.push('');
  const latRow = (name: string, l: Latency) => [name, fmt(l.meanUs, 0), fmt(l.p50Us, 0), fmt(l.p99Us, 0)];
  const latRatioRow = (name: string, x: Latency, y: Latency) => [name, times(x.meanUs / y.meanUs), times(x.p50Us / y.p50Us), times(x.p99Us / y.p99Us)];
  const rr = lat['rabbit-retry'];
  out.push(
    table(
      ['client', 'mean µs per message', 'p50 µs', 'p99 µs'],
      [
        latRow('amqplib', lat.amqplib),
        latRow('rabbit-retry', rr),
        ...(lat.baseline ? [latRow('baseline', lat.baseline)] : []),
        latRatioRow('rr / amqplib', rr, lat.amqplib),
        ...(lat.baseline ? [latRatioRow('rr / baseline', rr, lat.baseline)] : []),
      ],
    ),
  );
  out.push('');
  out.push("Round trip: the parent publishes, the child's handler runs and tells the parent over IPC, the parent publishes the next.");
  out.push('');
  out.push(`## RSS flatness (${soakLib})`);
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
    out.push(`RSS every ${input.soakSample} messages: ${soak.samples.map((s) => fmt(s[1], 0)).join(', ')}`);
    out.push(`JS heap used every ${input.soakSample} messages: ${soak.samples.map((s) => fmt(s[2], 0)).join(', ')}`);
  } else {
    out.push(`Not run. Run it with: BENCH_SOAK=1 npm run bench   (BENCH_SOAK_N=${input.soakN} messages; BENCH_N=2000 BENCH_ROUNDS=1 shortens the rest)`);
  }
  out.push('');
  if (busyStarts > 0) {
    out.push(
      `Note: ${busyStarts} of ${starts.length} measurements started while other work kept the machine more than ${input.busyThreshold * 100}% busy ` +
        `(after waiting up to ${input.quietWaitMs / 1000} s for it to calm down); their numbers are noisier. See busyBefore in the JSON.`,
    );
    out.push('');
  }
  out.push("## Targets against the seeds' amqplib pattern");
  out.push('');
  out.push(
    table(
      ['target', 'measured', ''],
      targets.map((t) => [t.target, t.measured, t.met === null ? 'not measured' : met(t.met)]),
    ),
  );
  if (vsBaseline) {
    out.push('');
    out.push(
      `vs baseline (${input.baseline}): client CPU s per 10k, rr / baseline: ${SCENARIOS.map((s) => `${s} ${times(vsBaseline[s].cpuSPer10k)}`).join(', ')}`,
    );
  }
  return { lines: out, summary: summaries, latency: lat, latencyRatio: latRatio, vsBaseline, targets, checksOk };
}
