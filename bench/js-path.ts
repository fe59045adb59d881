/**
 * `npm run bench:js-path`: what a delivery costs on JavaScript's thread, with
 * no broker and no native core, so that a change to the TypeScript path shows
 * without the broker's hour-to-hour swings.
 *
 * A consumer (`lib/consumer`) gets its batches from a stand-in for the native
 * consumer: BENCH_BATCH deliveries a batch (13, as the reference harness's
 * runs hand over on average), each with the metadata the native side writes
 * (`DeliveryMeta`) and a 1 KiB body; the stand-in's `settle` counts what comes
 * back. The handler is the reference harness's: it awaits once, then throws
 * `new Error('carrier 503')` (failure path) or returns (success path). A third
 * path throws before its first await, as a handler that refuses a message at
 * once does: its error's stack is taken on the stack the consumer calls it on.
 *
 * Beside it, in the same rounds, the handler alone: the same batches parsed
 * and the same handler awaited and caught, nothing else. The difference is
 * what rabbit-retry's JavaScript adds to each delivery: parsing, the message,
 * the handler scope, the failure's report, the settlement and its JSON.
 *
 * Env: BENCH_JS_N (batches a round, 4000), BENCH_ROUNDS (7), BENCH_BATCH (13).
 */
import { Consumer } from '../lib/consumer';
import { consumerMetrics } from '../lib/telemetry/metrics';
import type { NativeBatch, NativeConsumer } from '../lib/native';
import type { DeliveryMeta } from '../lib/wire';
import { envInt, fmt, median, table } from './common';

const BATCHES = envInt('BENCH_JS_N', 4000);
const ROUNDS = envInt('BENCH_ROUNDS', 7);
const PER = envInt('BENCH_BATCH', 13);
const SIZE = 1024;

/** `fail` throws after an await, `throw` before any (its error's stack is taken on the consumer's stack), `ok` returns. */
type Mode = 'fail' | 'throw' | 'ok';

const handlerOf = (mode: Mode) => async (): Promise<void> => {
  if (mode === 'throw') throw new Error('carrier 503');
  await Promise.resolve();
  if (mode === 'fail') throw new Error('carrier 503');
};

const PATHS: Record<Mode, string> = {
  fail: 'failure path',
  throw: 'failure path, thrown before an await',
  ok: 'success path',
};

const bodies = Buffer.alloc(PER * SIZE, 120);
let nextId = 0;

/** A batch as the native side hands it over: PER deliveries of the work queue `orders`. */
function batch(): NativeBatch {
  const meta: DeliveryMeta[] = [];
  for (let i = 0; i < PER; i++) {
    const id = ++nextId;
    meta.push({
      id,
      exchange: '',
      routingKey: 'orders',
      redelivered: false,
      deliveryTag: id,
      attempt: 0,
      offset: i * SIZE,
      length: SIZE,
      properties: { messageId: String(id), deliveryMode: 2, headers: {} },
    });
  }
  return { meta: JSON.stringify(meta), bodies, large: [], strings: [], events: '[]', closed: false };
}

/** The texts of BATCHES batches, made before a round so that making them is not measured. */
function batches(): NativeBatch[] {
  return Array.from({ length: BATCHES }, batch);
}

/** CPU µs per delivery of `run` over `input`. */
async function measured(run: (input: NativeBatch[]) => Promise<void>): Promise<number> {
  const input = batches();
  const c0 = process.cpuUsage();
  await run(input);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / (BATCHES * PER);
}

/** rabbit-retry's consumer over the batches, each batch settled before the next is handed over. */
async function library(mode: Mode, input: NativeBatch[]): Promise<void> {
  let onBatch: ((b: NativeBatch) => void) | undefined;
  let settled = 0;
  let wanted = 0;
  let wake: (() => void) | undefined;
  const inner = {
    queue: 'orders',
    state: 'connected',
    start(_max: number, cb: (b: NativeBatch) => void) {
      onBatch = cb;
    },
    settle(acked: number[], failed: string) {
      settled += acked.length + (failed === '' ? 0 : (JSON.parse(failed) as unknown[]).length);
      if (settled >= wanted && wake) {
        const w = wake;
        wake = undefined;
        w();
      }
    },
    heard() {},
    release() {},
    // The native side's last batch says the stream is closed.
    stop: () => {
      onBatch?.({ meta: '[]', bodies: Buffer.alloc(0), large: [], strings: [], events: '[]', closed: true });
      return Promise.resolve();
    },
    finish: () => Promise.resolve('[]'),
  };
  const consumer = new Consumer({
    inner: inner as unknown as NativeConsumer,
    handler: handlerOf(mode),
    batchSize: 100,
    url: 'amqp://bench',
    logger: { warn() {}, error() {} },
    metrics: consumerMetrics('orders', undefined, () => Promise.resolve(0)),
    parkedDepth: () => Promise.resolve(0),
    stuckAfterMs: 60_000,
    onClosed() {},
  });
  const deliver = onBatch;
  if (!deliver) throw new Error('the consumer did not start');
  for (const b of input) {
    wanted = settled + PER;
    const all = new Promise<void>((resolve) => (wake = resolve));
    deliver(b);
    await all;
  }
  await consumer.close();
}

/** The handler alone over the same batches: parse, call, await, catch. */
async function handlerAlone(mode: Mode, input: NativeBatch[]): Promise<void> {
  const handler = handlerOf(mode);
  for (const b of input) {
    const ds = JSON.parse(b.meta) as DeliveryMeta[];
    await Promise.all(
      ds.map(async (d) => {
        try {
          await handler();
          return d.id;
        } catch (err) {
          return (err as Error).message;
        }
      }),
    );
  }
}

async function main(): Promise<void> {
  console.log(`JavaScript's thread per delivery, no broker: ${ROUNDS} rounds of ${BATCHES} batches of ${PER}`);
  const rows: string[][] = [];
  for (const mode of ['fail', 'throw', 'ok'] as const) {
    const lib: number[] = [];
    const bare: number[] = [];
    // One round first, not counted: V8 compiles both paths.
    for (let r = 0; r <= ROUNDS; r++) {
      const l = await measured((input) => library(mode, input));
      const h = await measured((input) => handlerAlone(mode, input));
      if (r === 0) continue;
      lib.push(l);
      bare.push(h);
      console.log(`${mode} round ${r}: rabbit-retry ${fmt(l)} µs, the handler alone ${fmt(h)} µs per delivery`);
    }
    const l = median(lib);
    const h = median(bare);
    rows.push([PATHS[mode], fmt(l), fmt(h), fmt(l - h)]);
  }
  console.log(table(['path', 'rabbit-retry µs/delivery', 'the handler alone µs/delivery', "rabbit-retry's own µs/delivery"], rows));
}

void main();
