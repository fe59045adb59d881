/**
 * The consumer under test, in a process of its own so that its CPU time,
 * event-loop utilization and peak RSS are its own. Started by run.ts with a
 * JSON config as its argument; consumes until it has seen every message and
 * prints its result as one JSON line on stdout (after RESULT_MARK).
 *
 * Modes:
 *  - throughput: the queue holds `n` messages already; count a message done
 *    when it is acked (success) or, on failure, when its republish to the
 *    retry queue is confirmed and the original acked (rabbit-retry: its
 *    `retry` event; amqplib: after the ack in the confirm callback).
 *  - latency: the parent publishes one message at a time; the no-op handler
 *    tells the parent over IPC, which then publishes the next.
 *  - soak: like throughput (all succeed), with the parent topping up the
 *    queue while this consumes; RSS sampled every `sampleEvery` messages.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';

import amqp, { type ConsumeMessage } from 'amqplib';

import type { Delay, Message } from '../lib';
import { RESULT_MARK, threadCpu, threadTicks } from './proc';

/** `baseline`: rabbit-retry from another checkout (BENCH_BASELINE, see run.ts). */
export type Lib = 'amqplib' | 'rabbit-retry' | 'baseline';
export type Scenario = 'all-succeed' | 'all-fail-once' | 'fail-10pct';

export interface ChildConfig {
  mode: 'throughput' | 'latency' | 'soak';
  lib: Lib;
  /** The broker's URL, the parent's AMQP_URL (passed in: importing common.ts here would load this checkout's lib, see proc.ts). */
  url: string;
  scenario: Scenario;
  queue: string;
  /** Messages to see before reporting (throughput, soak). */
  n: number;
  prefetch: number;
  /** The retry delay; long, so that failed messages stay in the retry queue. */
  delay: Delay;
  /** Soak: sample RSS every this many messages. */
  sampleEvery?: number;
  /** The child gives up (and exits non-zero) after this long. */
  timeoutMs: number;
  /**
   * When set (BENCH_CPU_PROF=dir), a V8 CPU profile of the measured window
   * (first delivery to last message done) is written there. Profiling slows
   * the run: its numbers are not comparable.
   */
  cpuProfDir?: string;
  /** The checkout whose lib/ the `baseline` client loads (BENCH_BASELINE). */
  baselineDir?: string;
}

export interface ChildResult {
  lib: Lib;
  scenario: Scenario;
  mode: ChildConfig['mode'];
  n: number;
  /** Messages acked after a successful handler. */
  acked: number;
  /** Messages moved to the retry queue (confirmed republish, then ack). */
  retried: number;
  /** From the first delivery to the last message done, seconds. */
  wallS: number;
  msgsPerS: number;
  /** User + system CPU of the whole process (all threads) over wallS, seconds. */
  cpuS: number;
  /** performance.eventLoopUtilization over wallS. */
  elu: { utilization: number; activeMs: number; idleMs: number };
  /** Busy seconds of the event loop per message, in µs (= utilization × wallS / n). */
  eluUsPerMsg: number;
  /** process.resourceUsage().maxRSS, MB. */
  peakRssMb: number;
  /** RSS at the first delivery, MB (the runtime, ts-node and the client loaded). */
  rssAtStartMb: number;
  /** Closing the consumer and connection after the last message, ms (not in wallS). */
  closeMs: number;
  /** amqplib: mandatory republishes the broker returned (should be 0). */
  returned: number;
  /** Errors the consumer reported. */
  errors: string[];
  /** CPU seconds over wallS by thread name (Linux): where the CPU goes. */
  threads: Record<string, number>;
  /** The CPU profile written (BENCH_CPU_PROF). */
  cpuProfile?: string;
  /** Soak: RSS and heap used after a full GC at the end (the child runs with --expose-gc): what is retained, not garbage. */
  afterGc?: { rssMb: number; heapUsedMb: number };
  /** Soak: [messages done, RSS MB, heap used MB]. */
  samples?: [number, number, number][];
}

const cfg = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;

// The baseline loads only its own lib/ (which loads its own addon), nothing of
// this checkout's; the others load this checkout's, the amqplib child included,
// as it always has (through common.ts before).
if (cfg.lib === 'baseline' && !cfg.baselineDir) throw new Error('child: the baseline client needs baselineDir');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { RabbitRetry } = require(cfg.lib === 'baseline' ? path.join(cfg.baselineDir ?? '', 'lib') : '../lib') as typeof import('../lib');

// BENCH_TRACE=<lib>: that client runs under a registered tracer provider whose
// spans are batched and exported nowhere, to show what tracing costs a message.
if (process.env.BENCH_TRACE === cfg.lib) {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const api = require('@opentelemetry/api') as typeof import('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks') as typeof import('@opentelemetry/context-async-hooks');
  const { W3CTraceContextPropagator } = require('@opentelemetry/core') as typeof import('@opentelemetry/core');
  const sdk = require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const nowhere = { export: (_spans: unknown[], done: (r: { code: number }) => void) => done({ code: 0 }), shutdown: async () => undefined };
  api.trace.setGlobalTracerProvider(new sdk.BasicTracerProvider({ spanProcessors: [new sdk.BatchSpanProcessor(nowhere)] }));
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
}

// ts-node installs source-map-support, whose Error.prepareStackTrace makes
// every `err.stack` cost tens of µs; a compiled app has V8's own formatting.
(Error as { prepareStackTrace?: unknown }).prepareStackTrace = undefined;

function send(msg: unknown): void {
  if (process.send) process.send(msg);
}

function shouldFail(id: number, attempt: number): boolean {
  if (attempt !== 0) return false;
  switch (cfg.scenario) {
    case 'all-fail-once':
      return true;
    case 'fail-10pct':
      return id % 10 === 0;
    default:
      return false;
  }
}

/** The handler both consumers run: a no-op that throws for the messages meant to fail. */
async function work(id: number, attempt: number): Promise<void> {
  await Promise.resolve();
  // The reference harness's error: the same message every time.
  if (shouldFail(id, attempt)) throw new Error('carrier 503');
}

const mb = (bytes: number) => bytes / (1024 * 1024);

let acked = 0;
let retried = 0;
let returned = 0;
const errors: string[] = [];
let started = false;
let t0 = 0;
let cpu0: NodeJS.CpuUsage;
let elu0: ReturnType<typeof performance.eventLoopUtilization>;
let rssAtStart = 0;
const samples: [number, number, number][] = [];
let finished = false;
let resolveDone!: () => void;
const allDone = new Promise<void>((resolve) => (resolveDone = resolve));

let threads0 = new Map<string, number>();

let profiler: Session | undefined;

function startProfiler(): void {
  profiler = new Session();
  profiler.connect();
  profiler.post('Profiler.enable', () => profiler?.post('Profiler.start'));
}

function stopProfiler(dir: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    if (!profiler) {
      resolve(undefined);
      return;
    }
    profiler.post('Profiler.stop', (err, res) => {
      if (err || !res) {
        resolve(undefined);
        return;
      }
      const file = path.join(dir, `${cfg.lib}-${cfg.scenario}-${cfg.mode}-${process.pid}.cpuprofile`);
      writeFileSync(file, JSON.stringify(res.profile));
      resolve(file);
    });
  });
}

function onFirstDelivery(): void {
  if (started) return;
  started = true;
  if (cfg.cpuProfDir) startProfiler();
  rssAtStart = process.memoryUsage().rss;
  threads0 = threadTicks();
  cpu0 = process.cpuUsage();
  elu0 = performance.eventLoopUtilization();
  t0 = performance.now();
}

function onDone(): void {
  const done = acked + retried;
  if (cfg.mode === 'soak' && cfg.sampleEvery && done % cfg.sampleEvery === 0) {
    const m = process.memoryUsage();
    samples.push([done, mb(m.rss), mb(m.heapUsed)]);
    if (process.env.BENCH_MEM_DETAIL === '1') {
      const spaces = getHeapSpaceStatistics()
        .map((sp) => `${sp.space_name.replace('_space', '')} ${mb(sp.space_size).toFixed(1)}/${mb(sp.space_used_size).toFixed(1)}`)
        .join(' ');
      process.stderr.write(
        `mem ${done} rss ${mb(m.rss).toFixed(1)} heapTotal ${mb(m.heapTotal).toFixed(1)} used ${mb(m.heapUsed).toFixed(1)} external ${mb(m.external).toFixed(1)} | ${spaces}\n`,
      );
    }
    send({ type: 'progress', done, rssMb: mb(m.rss) });
  }
  if (cfg.mode !== 'latency' && done >= cfg.n && !finished) {
    finished = true;
    resolveDone();
  }
}

interface Running {
  close(): Promise<void>;
}

/** BENCH_AMQPLIB_HEADERS=full: the amqplib client writes rabbit-retry's headers, not the seeds' one. */
const FULL_HEADERS = process.env.BENCH_AMQPLIB_HEADERS === 'full';

/** The retry-* headers rabbit-retry writes on a retried copy, for an amqplib client. */
function fullHeaders(msg: ConsumeMessage, err: Error, headers: Record<string, unknown>, attempt: number): Record<string, unknown> {
  const now = new Date().toISOString();
  return {
    'retry-attempt': attempt + 1,
    'retry-reason': 'retry',
    'retry-last-error': err.message,
    'retry-error-name': err.name,
    'retry-error-stack': (err.stack ?? '').slice(0, 100_000),
    'retry-failed-at': now,
    'retry-first-failed-at': headers['retry-first-failed-at'] ?? now,
    'retry-original-exchange': headers['retry-original-exchange'] ?? msg.fields.exchange,
    'retry-original-routing-key': headers['retry-original-routing-key'] ?? msg.fields.routingKey,
    'retry-queue': cfg.queue,
  };
}

async function startAmqplib(): Promise<Running> {
  // The seeds connect with amqplib's defaults (Nagle on); BENCH_AMQPLIB_NODELAY=1 turns it off.
  const conn = await amqp.connect(cfg.url, { noDelay: process.env.BENCH_AMQPLIB_NODELAY === '1' });
  conn.on('error', (err: Error) => errors.push(`connection: ${err.message}`));
  const ch = await conn.createConfirmChannel();
  ch.on('error', (err: Error) => errors.push(`channel: ${err.message}`));
  ch.on('return', () => returned++);
  const queue = cfg.queue;
  const retryQueue = `${queue}.retry.${cfg.delay}`;
  // The seeds' topology: a retry queue whose TTL dead-letters back to the work queue.
  await ch.assertQueue(`${queue}.parked`, { durable: true });
  await ch.assertQueue(retryQueue, {
    durable: true,
    arguments: { 'x-message-ttl': 600_000, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue },
  });
  await ch.prefetch(cfg.prefetch);

  const handle = async (msg: ConsumeMessage): Promise<void> => {
    onFirstDelivery();
    const headers = msg.properties.headers ?? {};
    const attempt = typeof headers['retry-attempt'] === 'number' ? headers['retry-attempt'] : 0;
    try {
      await work(Number(msg.properties.messageId), attempt);
      if (cfg.mode === 'latency') send('h');
      ch.ack(msg);
      acked++;
      onDone();
    } catch (e) {
      // The seeds' failure path, as the reference harness measures it: a
      // confirmed republish of the message to the retry queue, its properties as
      // they came with the error's message added, and the ack once confirmed.
      // It never reads the stack; BENCH_AMQPLIB_HEADERS=full adds the retry-*
      // headers rabbit-retry writes, the stack among them.
      const err = e as Error;
      const extra = FULL_HEADERS ? fullHeaders(msg, err, headers, attempt) : { 'x-last-error': err.message };
      ch.publish('', retryQueue, msg.content, { ...msg.properties, headers: { ...headers, ...extra } }, (confirmErr) => {
        if (confirmErr) {
          errors.push(`republish nacked: ${String(confirmErr)}`);
          return; // stays unacked; the broker redelivers it when the channel closes
        }
        ch.ack(msg);
        retried++;
        onDone();
      });
    }
  };
  await ch.consume(queue, (msg) => {
    if (msg) void handle(msg);
  });
  return {
    async close() {
      await ch.close();
      await conn.close();
    },
  };
}

async function startRabbitRetry(): Promise<Running> {
  const rr = await RabbitRetry.connect({
    url: cfg.url,
    logger: { warn: (m) => process.stderr.write(`warn: ${m}\n`), error: (m) => process.stderr.write(`error: ${m}\n`) },
  });
  const handler = async (msg: Message): Promise<void> => {
    onFirstDelivery();
    await work(Number(msg.properties.messageId), msg.attempt);
    if (cfg.mode === 'latency') send('h');
    acked++;
    onDone();
  };
  const consumer = await rr.consume({ queue: cfg.queue, prefetch: cfg.prefetch, onFailure: { delays: [cfg.delay] } }, handler);
  consumer.on('retry', () => {
    retried++;
    onDone();
  });
  consumer.on('error', (err) => errors.push(err.message));
  consumer.on('publishFailed', (e) => errors.push(`publishFailed: ${e.error.message}`));
  return {
    async close() {
      await consumer.close();
      await rr.close();
    },
  };
}

async function main(): Promise<void> {
  const killer = setTimeout(() => {
    process.stderr.write(`child: timed out after ${cfg.timeoutMs} ms with ${acked + retried} of ${cfg.n} done\n`);
    process.exit(3);
  }, cfg.timeoutMs);
  killer.unref();

  const stopped = new Promise<void>((resolve) => {
    process.on('message', (m) => {
      if (m === 'stop') resolve();
    });
  });

  const running = cfg.lib === 'amqplib' ? await startAmqplib() : await startRabbitRetry();
  send({ type: 'ready' });

  await (cfg.mode === 'latency' ? stopped : allDone);
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  const threads = threadCpu(threads0, threadTicks());
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  const n = acked + retried;
  const cpuProfile = cfg.cpuProfDir ? await stopProfiler(cfg.cpuProfDir) : undefined;
  let afterGc: ChildResult['afterGc'];
  const gc = (globalThis as { gc?: () => void }).gc;
  if (cfg.mode === 'soak' && gc) {
    gc();
    gc();
    const m = process.memoryUsage();
    afterGc = { rssMb: mb(m.rss), heapUsedMb: mb(m.heapUsed) };
  }

  const c0 = performance.now();
  await running.close();
  const closeMs = performance.now() - c0;

  const result: ChildResult = {
    lib: cfg.lib,
    scenario: cfg.scenario,
    mode: cfg.mode,
    n,
    acked,
    retried,
    wallS,
    msgsPerS: n / wallS,
    cpuS: (cpu.user + cpu.system) / 1e6,
    elu: { utilization: elu.utilization, activeMs: elu.active, idleMs: elu.idle },
    eluUsPerMsg: ((elu.utilization * wallS) / n) * 1e6,
    peakRssMb,
    rssAtStartMb: mb(rssAtStart),
    closeMs,
    returned,
    errors: errors.slice(0, 20),
    samples: cfg.mode === 'soak' ? samples : undefined,
    afterGc,
    threads,
    cpuProfile,
  };
  process.stdout.write(`${RESULT_MARK}${JSON.stringify(result)}\n`, () => process.exit(0));
}

main().catch((err: unknown) => {
  process.stderr.write(`child: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
