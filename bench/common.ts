/**
 * Helpers shared by the benchmark parents (run.ts, outage.ts): publishing the
 * test messages, queue bookkeeping, running one measurement in a child
 * process, and small statistics. The broker connection, channels, depths and
 * queue names are the tests' own (__test__/broker.ts).
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import type { ConfirmChannel } from 'amqplib';

import { amqpConnection, closeAmqp, deleteQueue, readyMessages, sleep, withChannel } from '../__test__/broker';
import { procStat, RESULT_MARK } from './proc';

export { AMQP_URL, queueFamily, sleep, uniqueName } from '../__test__/broker';
export { RESULT_MARK, threadCpu, threadTicks } from './proc';
/**
 * BENCH_LONG_IDS=1: message ids like `message-id-12345` instead of `12345`.
 * With the short ids the consumer's V8 heap keeps committing memory for
 * old-generation garbage that only a full collection frees; with the long
 * ones it stays flat. The soak can be run both ways to compare.
 */
export const LONG_IDS = process.env.BENCH_LONG_IDS === '1';

/** The body every benchmark message carries: 1 KiB. */
export const BODY = Buffer.alloc(1024, 'x');

export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = Number(raw);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number, got '${raw}'`);
  return Math.floor(v);
}

/** Queues this process created, deleted on exit even when a run fails. */
const created = new Set<string>();

export async function closeBroker(): Promise<void> {
  await closeAmqp().catch(() => undefined);
}

/** Declares a durable classic queue with no arguments, as rabbit-retry declares its work queue. */
export async function declareWorkQueue(queue: string): Promise<void> {
  created.add(queue);
  await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
}

export function remember(queues: string[]): void {
  for (const q of queues) created.add(q);
}

/** Ready messages in `queue`, or null when it does not exist (or cannot be read). */
export async function depth(queue: string): Promise<number | null> {
  return readyMessages(queue).catch(() => null);
}

export async function deleteQueues(queues: string[]): Promise<void> {
  for (const q of queues) {
    await deleteQueue(q).catch(() => undefined);
    created.delete(q);
  }
}

export async function deleteCreated(): Promise<void> {
  await deleteQueues([...created]);
}

/** A confirm channel for publishing the test messages. */
export class Publisher {
  private constructor(private readonly ch: ConfirmChannel) {}

  static async open(): Promise<Publisher> {
    const ch = await (await amqpConnection()).createConfirmChannel();
    ch.on('error', () => undefined);
    return new Publisher(ch);
  }

  /**
   * Publishes messages `from`..`from+count-1` (persistent, 1 KiB, messageId =
   * the sequence number) to `queue` and waits for every confirm.
   */
  async publishRange(queue: string, from: number, count: number, headers?: Record<string, unknown>): Promise<void> {
    const chunk = 1000;
    for (let start = from; start < from + count; start += chunk) {
      const end = Math.min(from + count, start + chunk);
      for (let i = start; i < end; i++) {
        const ok = this.ch.publish('', queue, BODY, {
          persistent: true,
          messageId: LONG_IDS ? `message-id-${i}` : String(i),
          contentType: 'application/octet-stream',
          headers,
        });
        if (!ok) await new Promise<void>((resolve) => this.ch.once('drain', () => resolve()));
      }
      await withTimeout(this.ch.waitForConfirms(), 60_000, 'publisher confirms');
    }
  }

  /** Publishes one message and waits for its confirm. */
  async publishOne(queue: string, messageId: string, headers: Record<string, unknown>): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.ch.publish('', queue, BODY, { persistent: true, messageId, contentType: 'application/octet-stream', headers, mandatory: true }, (err) =>
        err ? reject(err) : resolve(),
      );
    });
  }

  /** Publishes one message without waiting for its confirm (for the latency scenario). */
  send(queue: string, messageId: string): void {
    this.ch.publish('', queue, BODY, { persistent: true, messageId, contentType: 'application/octet-stream' });
  }

  async close(): Promise<void> {
    await this.ch.close().catch(() => undefined);
  }
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** A running child: its process, and its result (the JSON it prints on stdout). */
export interface RunningChild<R> {
  proc: ChildProcess;
  result: Promise<R>;
}

/**
 * Starts `script` (a .ts file in bench/) in a child process under ts-node
 * with `config` as its argument, an IPC channel for pacing messages, and a
 * hard time limit; the result is the JSON after {@link RESULT_MARK} on its stdout.
 */
export function startChild<R>(script: string, config: unknown, timeoutMs: number, nodeArgs: string[] = []): RunningChild<R> {
  const proc = fork(path.join(__dirname, script), [JSON.stringify(config)], {
    // BENCH_NODE_ARGS: extra node flags for the child, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
    execArgv: ['-r', 'ts-node/register/transpile-only', ...nodeArgs, ...(process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean)],
    env: { ...process.env, TS_NODE_TRANSPILE_ONLY: 'true' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    if (process.env.BENCH_CHILD_STDERR === '1') process.stderr.write(d);
    if (stderr.length > 200_000) stderr = stderr.slice(-100_000);
  });
  const result = new Promise<R>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${script} did not finish within ${timeoutMs} ms; stderr: ${stderr.slice(-2000)}`));
    }, timeoutMs);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split('\n').find((l) => l.startsWith(RESULT_MARK));
      if (code === 0 && line) {
        resolve(JSON.parse(line.slice(RESULT_MARK.length)) as R);
      } else {
        reject(new Error(`${script} exited with ${signal ?? code}; stderr: ${stderr.slice(-2000)}`));
      }
    });
  });
  return { proc, result };
}

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Nearest-rank percentile (p in 0..100). */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length)));
  return s[rank - 1];
}

export function fmt(x: number | null | undefined, digits = 2): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return 'n/a';
  return x.toFixed(digits);
}

/** A markdown table. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

/** Deletes what this process created when it is interrupted. */
export function cleanupOnSignal(): void {
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      unpin?.();
      console.error(`\n${sig}: deleting the benchmark's queues`);
      void withTimeout(deleteCreated(), 10_000, 'queue cleanup')
        .catch(() => undefined)
        .finally(() => process.exit(130));
    });
  }
}

/** The PIDs of the local RabbitMQ VMs (`beam.smp` running rabbit). */
function brokerPids(): number[] {
  const pids: number[] = [];
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        if (procStat(`/proc/${pid}/stat`).comm !== 'beam.smp') continue;
        if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('rabbit')) pids.push(Number(pid));
      } catch {
        // the process went away
      }
    }
  } catch {
    // no /proc: not Linux
  }
  return pids;
}

/** Puts the pinning back; set while the broker is pinned. */
let unpin: (() => void) | undefined;

/**
 * The pinned mode: the local broker's VM (every thread) on core 0 and this
 * process, with every child it starts, on core 1, so that a client's CPU
 * cannot take the broker's and the broker's cannot take the client's.
 * Used when `taskset` exists, the broker is local and the machine has at
 * least 2 cores, unless BENCH_PIN=0; BENCH_PIN=1 insists. The broker's own
 * affinity is put back at exit. Returns what was pinned, or why not.
 */
export function pinCores(): string {
  const want = process.env.BENCH_PIN ?? 'auto';
  if (want === '0') return 'not pinned (BENCH_PIN=0)';
  const why = (reason: string) => {
    if (want === '1') throw new Error(`BENCH_PIN=1 but the cores cannot be pinned: ${reason}`);
    return `not pinned: ${reason}`;
  };
  if (os.cpus().length < 2) return why('fewer than 2 cores');
  const pids = brokerPids();
  if (pids.length === 0) return why('no local RabbitMQ process');
  const taskset = (args: string[]) => execFileSync('taskset', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  let saved: { pid: number; mask: string }[];
  try {
    saved = pids.map((pid) => ({ pid, mask: /:\s*([0-9a-f]+)\s*$/i.exec(taskset(['-p', String(pid)]))?.[1] ?? '' }));
    for (const { pid } of saved) taskset(['-a', '-p', '-c', '0', String(pid)]);
    taskset(['-a', '-p', '-c', '1', String(process.pid)]);
  } catch (err) {
    return why(`taskset failed (${(err as Error).message.split('\n')[0]})`);
  }
  unpin = () => {
    unpin = undefined;
    for (const { pid, mask } of saved) {
      try {
        if (mask) taskset(['-a', '-p', mask, String(pid)]);
      } catch {
        // the broker went away
      }
    }
  };
  process.once('exit', () => unpin?.());
  return `pinned: broker (pid ${pids.join(', ')}) on core 0, clients on core 1`;
}

/** The broker's product and version, as it announced them. */
export async function brokerVersion(): Promise<string> {
  const p = (await amqpConnection()).connection.serverProperties;
  return `${p.product} ${p.version}`;
}

/** Machine-wide CPU jiffies from /proc/stat (Linux), or null elsewhere. */
export function cpuTimes(): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + (f[4] ?? 0);
    const total = f.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/** The fraction of the machine's CPU that was busy between two {@link cpuTimes} readings. */
export function busyBetween(a: ReturnType<typeof cpuTimes>, b: ReturnType<typeof cpuTimes>): number | null {
  if (!a || !b || b.total === a.total) return null;
  return (b.busy - a.busy) / (b.total - a.total);
}

/**
 * Waits (at most `maxWaitMs`) until the machine is mostly idle: other work on
 * a 2-core machine (a build) skews every number. Resolves to the busy
 * fraction last seen and how long it waited.
 */
export async function waitForQuiet(maxWaitMs: number, threshold = 0.35): Promise<{ busy: number | null; waitedMs: number }> {
  const start = Date.now();
  for (;;) {
    const a = cpuTimes();
    await sleep(500);
    const busy = busyBetween(a, cpuTimes());
    const waitedMs = Date.now() - start;
    if (busy === null || busy <= threshold || waitedMs >= maxWaitMs) return { busy, waitedMs };
  }
}

/**
 * CPU seconds the local broker's Erlang VM has used so far (user + system of
 * every `beam.smp` process running RabbitMQ), or null when no local broker is
 * visible (not Linux, or the broker runs elsewhere). The difference of two
 * readings is what a client asked of the broker in between.
 */
export function brokerCpuS(): number | null {
  const pids = brokerPids();
  let ticks = 0;
  for (const pid of pids) {
    try {
      ticks += procStat(`/proc/${pid}/stat`).ticks;
    } catch {
      // the process went away
    }
  }
  return pids.length > 0 ? ticks / 100 : null;
}

/**
 * Runs a benchmark's `main`: prints its error and sets exit code 1 when it
 * fails, and always deletes the queues it created and closes the broker connection.
 */
export function runBenchmark(main: () => Promise<void>): void {
  main()
    .catch((err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : err);
      process.exitCode = 1;
    })
    .finally(async () => {
      await withTimeout(deleteCreated(), 20_000, 'queue cleanup').catch(() => undefined);
      await closeBroker();
    });
}
