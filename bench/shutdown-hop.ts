/**
 * The broker's own hop from a classic retry queue back to its work queue,
 * through a graceful restart (`npm run bench:shutdown-hop`, RabbitMQ 4.3 by
 * default). amqplib alone, no rabbit-retry code: PAIRS pairs of a work queue
 * and a retry queue (TTL 100 ms, dead-lettering to the work queue) take
 * confirmed persistent publishes into the retry queues while `stop_app` runs;
 * after `start_app` every confirmed message must be in a work queue. The
 * baseline, in the same run, publishes to the work queues directly. Prints
 * the confirmed and the missing of each, per restart and in total.
 *
 * It restarts the broker it measures: run it alone, never against a shared one.
 */
import { execFile } from 'node:child_process';

import * as amqp from 'amqplib';

import { RABBITMQCTL } from '../__test__/broker';

const URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const PAIRS = Number(process.env.HOP_PAIRS ?? 60);
const IN_FLIGHT = Number(process.env.HOP_IN_FLIGHT ?? 60);
const ROUNDS = Number(process.env.HOP_ROUNDS ?? 3);
const TTL_MS = 100;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function rabbitmqctl(command: string): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(RABBITMQCTL[0], [...RABBITMQCTL.slice(1), command], { timeout: 120_000 }, (err) => (err ? reject(err) : resolve())),
  );
}

async function connect(): Promise<amqp.ChannelModel> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      return await amqp.connect(URL);
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(300);
    }
  }
}

/** One restart: confirmed publishes into `PAIRS` queues (their retry queues when `hop`) while the broker stops. */
async function round(hop: boolean): Promise<{ confirmed: number; missing: number }> {
  const conn = await connect();
  conn.on('error', () => undefined);
  const ch = await conn.createConfirmChannel();
  ch.on('error', () => undefined);
  const stamp = `${Date.now()}-${process.pid}`;
  const work = Array.from({ length: PAIRS }, (_, k) => `rr-bench-hop-${stamp}-${k}`);
  const retry = (q: string) => `${q}.retry.100ms`;
  for (const q of work) {
    await ch.assertQueue(q, { durable: true });
    await ch.assertQueue(retry(q), {
      durable: true,
      arguments: { 'x-message-ttl': TTL_MS, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': q },
    });
  }
  const confirmed = new Map(work.map((q) => [q, 0]));
  let stopping = false;
  const publisher = async (w: number) => {
    for (let i = 0; !stopping; i++) {
      const q = work[(w + i) % PAIRS];
      const ok = await new Promise<boolean>((resolve) => {
        try {
          ch.sendToQueue(hop ? retry(q) : q, Buffer.alloc(200), { persistent: true }, (err) => resolve(!err));
        } catch {
          resolve(false);
        }
      });
      if (!ok) return;
      confirmed.set(q, (confirmed.get(q) ?? 0) + 1);
    }
  };
  const publishers = Array.from({ length: IN_FLIGHT }, (_, w) => publisher(w));
  await sleep(500);
  await rabbitmqctl('stop_app');
  stopping = true;
  await Promise.race([Promise.all(publishers), sleep(5000)]);
  await sleep(1000);
  await rabbitmqctl('start_app');
  const after = await connect();
  const check = await after.createChannel();
  await sleep(TTL_MS + 2000);
  let total = 0;
  let missing = 0;
  for (const q of work) {
    const there = (await check.checkQueue(q)).messageCount + (await check.checkQueue(retry(q))).messageCount;
    total += confirmed.get(q) ?? 0;
    missing += Math.max(0, (confirmed.get(q) ?? 0) - there);
    await check.deleteQueue(q);
    await check.deleteQueue(retry(q));
  }
  await after.close();
  return { confirmed: total, missing };
}

async function main(): Promise<void> {
  const sum = { hop: { confirmed: 0, missing: 0 }, direct: { confirmed: 0, missing: 0 } };
  for (let r = 1; r <= ROUNDS; r++) {
    for (const kind of ['direct', 'hop'] as const) {
      const { confirmed, missing } = await round(kind === 'hop');
      sum[kind].confirmed += confirmed;
      sum[kind].missing += missing;
      console.log(`restart ${r}, ${kind === 'hop' ? 'through a retry queue' : 'to the work queue'}: confirmed ${confirmed}, missing ${missing}`);
    }
  }
  console.log(
    `total over ${ROUNDS} restarts, ${PAIRS} queue pairs: through a retry queue ${sum.hop.missing} missing of ${sum.hop.confirmed} confirmed; ` +
      `to the work queue (baseline) ${sum.direct.missing} missing of ${sum.direct.confirmed}`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
