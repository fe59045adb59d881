/**
 * What the fault and cluster suites share: a consumer of the ledger plan in
 * a child process (consumer-process.ts) that a test can kill, the files it
 * writes, and waits on its progress.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

import type { Channel } from 'amqplib';

import { type Delay, parkedQueueName, retryQueueName } from '../../lib';
import { expectedOutcome } from './plan';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** One run of the ledger: its queue, the consumer's files and events. */
export interface Run {
  queue: string;
  dir: string;
  /** Every handler call, one id a line. */
  callsFile: string;
  /** Every success, written before the ack. */
  successFile: string;
  /** Every confirmed move to a retry queue: `id target ms`. */
  retriesFile: string;
  child?: ChildProcess;
  /** The consumer's event lines (JSON). */
  events: string[];
}

/** A run with a unique queue named after `name`, and empty files. */
export function newRun(name: string): Run {
  const dir = mkdtempSync(join(tmpdir(), 'rr-fault-'));
  const run: Run = {
    queue: `rr-fault-${name}-${randomBytes(4).toString('hex')}`,
    dir,
    callsFile: join(dir, 'calls'),
    successFile: join(dir, 'success'),
    retriesFile: join(dir, 'retries'),
    events: [],
  };
  for (const f of [run.callsFile, run.successFile, run.retriesFile]) writeFileSync(f, '');
  return run;
}

export function lines(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

/** Starts the consumer of `run` with `delays` (and `env`), and waits until it is ready. */
export async function startConsumer(run: Run, delays: readonly Delay[], env: Record<string, string> = {}): Promise<void> {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'consumer-process.ts')], {
    env: {
      ...process.env,
      FAULT_QUEUE: run.queue,
      CALLS_FILE: run.callsFile,
      SUCCESS_FILE: run.successFile,
      RETRIES_FILE: run.retriesFile,
      FAULT_DELAYS: delays.join(','),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  run.child = child;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the consumer did not start within 30 s')), 30_000);
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter(Boolean)) {
        run.events.push(line);
        if (line.includes('"ready"')) {
          clearTimeout(timer);
          resolve();
        }
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the consumer exited with ${code} before it was ready`));
    });
  });
}

export async function stopConsumer(run: Run, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  const child = run.child;
  if (child?.exitCode !== null || child.signalCode !== null) return;
  let timer: NodeJS.Timeout | undefined;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  await Promise.race([exited, new Promise<void>((r) => (timer = setTimeout(r, 20_000)))]);
  clearTimeout(timer);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** The consumer's events of kind `event`, parsed, in order. */
export function eventsOf(run: Run, event: string): Record<string, unknown>[] {
  return run.events.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === event);
}

/** Waits until the consumer reported at least `count` event lines containing `text`. */
export async function waitForEvent(run: Run, text: string, count = 1, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (run.events.filter((e) => e.includes(text)).length < count) {
    if (Date.now() > deadline) throw new Error(`the consumer reported no ${text} event within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/** Waits until `successes` distinct messages succeeded. */
export async function waitForProgress(run: Run, successes: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (new Set(lines(run.successFile)).size < successes) {
    if (Date.now() > deadline) throw new Error(`no progress to ${successes} successes in time`);
    await sleep(100);
  }
}

/** Handler calls the plan needs for `ids` when nothing goes wrong: more are duplicates. */
export function callsNeeded(ids: readonly string[], delays: readonly Delay[]): number {
  const calls = { success: 1, flaky: 2, 'non-retryable': 1, exhausted: delays.length + 1 } as const;
  return ids.reduce((n, id) => n + calls[expectedOutcome(id)], 0);
}

/** Takes every message of `queue`'s parked queue: each id with the reasons of its copies. */
export async function drainParked(ch: Channel, queue: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (;;) {
    const m = await ch.get(parkedQueueName(queue), { noAck: true });
    if (!m) return out;
    const id = String(m.properties.messageId);
    out.set(id, [...(out.get(id) ?? []), String(m.properties.headers?.['retry-reason'])]);
  }
}

/** Deletes `queue`, its retry queues for `delays` and its parked queue. */
export async function deleteFamily(ch: Channel, queue: string, delays: readonly Delay[]): Promise<void> {
  for (const q of [queue, parkedQueueName(queue), ...delays.map((d) => retryQueueName(queue, d))]) {
    await ch.deleteQueue(q).catch(() => undefined);
  }
}
