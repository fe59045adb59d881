/**
 * `npm run bench:broker-delay`: the failure path on a RabbitMQ 4.3 quorum
 * queue, five ways, in the same run on the same node:
 *
 *  - `brokerDelay`: rabbit-retry with `onFailure.brokerDelay` (a reject with
 *    requeue; the broker holds the message);
 *  - `retry-queue`: rabbit-retry with `onFailure.delays` on quorum queues (a
 *    confirmed copy into the retry queue, then the ack);
 *  - `seeds`: the seeds' amqplib pattern (confirmed publish to a quorum retry
 *    queue, then ack);
 *  - `ceiling`: a bare amqplib consumer rejecting with requeue into the same
 *    delayed-retry quorum queue: the broker's own ceiling;
 *  - `ceiling+handler`: the same, through a handler that throws
 *    `new Error('carrier down')` as rabbit-retry's does: what the handler
 *    itself costs, which the bare ceiling never pays.
 *
 * Each round publishes BENCH_N persistent 1 KiB messages into a fresh queue,
 * then lets the client fail every one once; the delays are long (10 min), so a
 * moved message stays where it went. Measured: failures moved a second (to the
 * last one), the client's CPU per failure (this process), and the broker's CPU
 * per failure (its Erlang VM, from /proc, until the broker is quiet again, less
 * its idle rate), and the bytes it sent to storage per failure (`write_bytes`
 * of its /proc/<pid>/io, less its idle rate: its Raft log and segments), from
 * the first delivery. Clients run in this process one after the other.
 *
 * Pinned as `npm run bench` is (see `pinCores`): the broker on core 0, this
 * process on core 1, so that no client's CPU takes the broker's; BENCH_PIN=0
 * lets them share the cores.
 *
 * Env: AMQP_URL (a 4.3 node on this machine), BENCH_N (5000), BENCH_ROUNDS (3),
 * BENCH_PREFETCH (100), BENCH_PIN (auto).
 */
import { readFileSync, readdirSync } from 'node:fs';

import amqp from 'amqplib';

import { type Delay, type OnFailureOptions, RabbitRetry, parkedQueueName, retryQueueName } from '../lib';
import { AMQP_URL, Publisher, brokerVersion, envInt, fmt, median, pinCores, remember, runBenchmark, sleep, table, uniqueName } from './common';

const N = envInt('BENCH_N', 5_000);
const ROUNDS = envInt('BENCH_ROUNDS', 3);
const PREFETCH = envInt('BENCH_PREFETCH', 100);
const HOLD: Delay = '10m';
const HOLD_MS = 600_000;

/** What the broker does with nobody asking: CPU seconds and bytes written a second. */
interface Idle {
  cpuPerS: number;
  bytesPerS: number;
}

type Client = 'brokerDelay' | 'retry-queue' | 'seeds' | 'ceiling' | 'ceiling+handler';
const CLIENTS: readonly Client[] = ['brokerDelay', 'retry-queue', 'seeds', 'ceiling', 'ceiling+handler'];

interface Measured {
  rate: number;
  clientCpuUs: number;
  brokerCpuUs: number | null;
  /** Bytes the broker sent to storage per failure (`write_bytes` of /proc/<pid>/io), less its idle rate. */
  brokerBytes: number | null;
}

/** The broker's VM: the beam.smp whose command line names the AMQP port of AMQP_URL. */
function brokerPid(): number | null {
  const port = new URL(AMQP_URL).port || '5672';
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.includes('beam.smp') && cmd.includes('rabbit') && cmd.includes(port)) return Number(pid);
    } catch {
      // gone
    }
  }
  return null;
}

/** The broker's CPU seconds so far (utime + stime). */
function brokerCpu(pid: number | null): number | null {
  if (pid === null) return null;
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** Bytes the broker has sent to storage so far (`write_bytes` of /proc/<pid>/io), or null where it cannot be read. */
function brokerWritten(pid: number | null): number | null {
  if (pid === null) return null;
  try {
    const line = readFileSync(`/proc/${pid}/io`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('write_bytes:'));
    return line === undefined ? null : Number(line.split(':')[1]);
  } catch {
    return null; // another user's process, or no task I/O accounting
  }
}

/** Waits until the broker uses less than 1.5× its idle rate over 500 ms (at most 20 s). */
async function brokerQuiet(pid: number | null, idlePerS: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const a = brokerCpu(pid);
    await sleep(500);
    const b = brokerCpu(pid);
    if (a === null || b === null || (b - a) / 0.5 <= Math.max(idlePerS * 1.5, 0.02) || Date.now() > deadline) return;
  }
}

/** The work queue's arguments for `client`, as rabbit-retry declares them (so it is prefilled before consuming). */
function workArgs(client: Client, queue: string): Record<string, unknown> {
  const base = { 'x-queue-type': 'quorum' };
  const delayed = { 'x-delayed-retry-type': 'failed', 'x-delayed-retry-min': HOLD_MS, 'x-delayed-retry-max': HOLD_MS };
  const limit = (n: number) => ({
    'x-delivery-limit': n,
    'x-dead-letter-exchange': '',
    'x-dead-letter-routing-key': parkedQueueName(queue),
    'x-dead-letter-strategy': 'at-least-once',
    'x-overflow': 'reject-publish',
  });
  switch (client) {
    case 'brokerDelay':
      return { ...base, ...delayed, ...limit(7) };
    case 'retry-queue':
      return { ...base, ...limit(6) };
    case 'seeds':
      return base;
    case 'ceiling':
    case 'ceiling+handler':
      return { ...base, ...delayed };
  }
}

/** Runs `client` over a queue of N messages; resolves when every one has been moved once. */
async function consume(client: Client, queue: string, started: () => void, done: () => void): Promise<() => Promise<void>> {
  let moved = 0;
  let first = true;
  const arrived = () => {
    if (first) started();
    first = false;
  };
  const count = () => {
    if (++moved === N) done();
  };
  if (client === 'brokerDelay' || client === 'retry-queue') {
    const rr = await RabbitRetry.connect({ url: AMQP_URL });
    const onFailure: OnFailureOptions = client === 'brokerDelay' ? { brokerDelay: { min: HOLD, max: HOLD, attempts: 5 } } : { delays: [HOLD] };
    const consumer = await rr.consume({ queue, queueType: 'quorum', prefetch: PREFETCH, onFailure }, () => {
      arrived();
      return Promise.reject(new Error('carrier down'));
    });
    // Counted from stats(), as a user without a listener counts them: a
    // `retry` listener would cost an event for every failure.
    const poll = setInterval(() => {
      if (consumer.stats().retried >= N) {
        clearInterval(poll);
        moved = N - 1;
        count();
      }
    }, 2);
    return async () => {
      clearInterval(poll);
      await consumer.close();
      await rr.close();
    };
  }
  const conn = await amqp.connect(AMQP_URL);
  const ch = await conn.createChannel();
  await ch.prefetch(PREFETCH);
  if (client === 'ceiling') {
    await ch.consume(queue, (m) => {
      if (!m) return;
      arrived();
      ch.reject(m, true);
      count();
    });
  } else if (client === 'ceiling+handler') {
    const handler = (): Promise<void> => Promise.reject(new Error('carrier down'));
    await ch.consume(queue, (m) => {
      if (!m) return;
      arrived();
      handler().catch(() => {
        ch.reject(m, true);
        count();
      });
    });
  } else {
    const pub = await conn.createConfirmChannel();
    const retry = retryQueueName(queue, HOLD);
    await ch.consume(queue, (m) => {
      if (!m) return;
      arrived();
      const headers = { ...m.properties.headers, 'x-retry-count': 1, 'x-last-error': 'carrier down' };
      pub.publish('', retry, m.content, { ...m.properties, headers, persistent: true }, (err) => {
        if (err) return;
        ch.ack(m);
        count();
      });
    });
  }
  return async () => {
    await conn.close();
  };
}

async function round(client: Client, pid: number | null, idle: Idle, publisher: Publisher): Promise<Measured> {
  const idlePerS = idle.cpuPerS;
  const queue = uniqueName(`bench-bd-${client}`);
  remember([queue, parkedQueueName(queue), retryQueueName(queue, HOLD)]);
  const conn = await amqp.connect(AMQP_URL);
  const ch = await conn.createChannel();
  await ch.assertQueue(queue, { durable: true, arguments: workArgs(client, queue) });
  await ch.assertQueue(parkedQueueName(queue), { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  if (client === 'retry-queue' || client === 'seeds') {
    const dlx = client === 'retry-queue' ? { 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' } : {};
    await ch.assertQueue(retryQueueName(queue, HOLD), {
      durable: true,
      arguments: { 'x-queue-type': 'quorum', 'x-message-ttl': HOLD_MS, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue, ...dlx },
    });
  }
  await conn.close();
  await publisher.publishRange(queue, 0, N);
  await brokerQuiet(pid, idlePerS);

  // Measured from the first delivery: connecting and declaring are not the failure path.
  let finish: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (finish = resolve));
  let cpu0 = process.cpuUsage();
  let b0 = brokerCpu(pid);
  let w0 = brokerWritten(pid);
  let t0 = performance.now();
  const start = () => {
    cpu0 = process.cpuUsage();
    b0 = brokerCpu(pid);
    w0 = brokerWritten(pid);
    t0 = performance.now();
  };
  const stop = await consume(client, queue, start, finish);
  await all;
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await brokerQuiet(pid, idlePerS);
  const b1 = brokerCpu(pid);
  const w1 = brokerWritten(pid);
  const window = (performance.now() - t0) / 1000;
  await stop();
  return {
    rate: N / elapsed,
    clientCpuUs: (cpu.user + cpu.system) / N,
    brokerCpuUs: b0 === null || b1 === null ? null : (Math.max(0, b1 - b0 - idlePerS * window) * 1e6) / N,
    brokerBytes: w0 === null || w1 === null ? null : Math.max(0, w1 - w0 - idle.bytesPerS * window) / N,
  };
}

async function main(): Promise<void> {
  const version = await brokerVersion();
  if (!/ 4\.(3|[4-9])|[5-9]\.\d/.test(version)) throw new Error(`brokerDelay needs RabbitMQ 4.3 or later; AMQP_URL is ${version}`);
  const pinning = pinCores();
  const pid = brokerPid();
  const i0 = brokerCpu(pid);
  const iw0 = brokerWritten(pid);
  await sleep(2000);
  const i1 = brokerCpu(pid);
  const iw1 = brokerWritten(pid);
  const idlePerS = i0 === null || i1 === null ? 0 : (i1 - i0) / 2;
  const idle: Idle = { cpuPerS: idlePerS, bytesPerS: iw0 === null || iw1 === null ? 0 : (iw1 - iw0) / 2 };
  console.log(
    `${version}, N=${N}, ${ROUNDS} round(s), prefetch ${PREFETCH}; ${pinning}; broker pid ${pid ?? '?'} idles at ${fmt(idlePerS * 100, 1)}% of a core`,
  );
  const publisher = await Publisher.open();
  const results = new Map<Client, Measured[]>(CLIENTS.map((c) => [c, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const client of CLIENTS) {
      const m = await round(client, pid, idle, publisher);
      results.get(client)?.push(m);
      console.log(
        `round ${r + 1} ${client}: ${fmt(m.rate, 0)} msgs/s, client ${fmt(m.clientCpuUs, 0)} µs, broker ${fmt(m.brokerCpuUs, 0)} µs and ${fmt(m.brokerBytes, 0)} bytes written per failure`,
      );
    }
  }
  await publisher.close();
  const med = (c: Client, k: keyof Measured) => median((results.get(c) ?? []).map((m) => m[k] ?? NaN));
  const rows = CLIENTS.map((c) => [
    c,
    fmt(med(c, 'rate'), 0),
    fmt(med(c, 'clientCpuUs'), 0),
    fmt(med(c, 'brokerCpuUs'), 0),
    fmt(med(c, 'brokerBytes'), 0),
    fmt(med(c, 'rate') / med('seeds', 'rate')),
    fmt(med(c, 'brokerCpuUs') / med('seeds', 'brokerCpuUs')),
    fmt(med(c, 'rate') / med('ceiling', 'rate')),
  ]);
  console.log(
    table(
      [
        'client',
        'failures/s',
        'client µs/failure',
        'broker µs/failure',
        'broker bytes written/failure',
        'rate vs seeds',
        'broker CPU vs seeds',
        'rate vs ceiling',
      ],
      rows,
    ),
  );
}

runBenchmark(main);
