/**
 * `npm run bench:console`: how long the operators' console takes to group a
 * parked queue of 10,000 messages.
 *
 * Parks BENCH_CONSOLE_MESSAGES (10,000) messages of 1 KiB in a new parked
 * queue, as a consumer parks them: five kinds of failure, each with its
 * error's name, message (with ids and numbers that differ from message to
 * message) and stack, interleaved. Then, BENCH_CONSOLE_ROUNDS (3) times, reads
 * and groups the whole queue (what the page shows for a queue), and once
 * through the console's HTTP API as the page asks for it; after each
 * reading, checks that every message is still parked. Prints each round and
 * the median; deletes its queues.
 *
 * Env: BENCH_CONSOLE_MESSAGES (10000), BENCH_CONSOLE_ROUNDS (3), AMQP_URL.
 */
import { RabbitRetry, parkedQueueName } from '../lib';
import { type GroupsAnswer, startConsole } from '../lib/console';
import { groupParked } from '../lib/console/views';
import { amqpConnection } from '../__test__/broker';
import {
  AMQP_URL,
  BODY,
  cleanupOnSignal,
  closeBroker,
  declareWorkQueue,
  deleteQueues,
  depth,
  envInt,
  fmt,
  median,
  remember,
  table,
  uniqueName,
} from './common';

const MESSAGES = envInt('BENCH_CONSOLE_MESSAGES', 10_000);
const ROUNDS = envInt('BENCH_CONSOLE_ROUNDS', 3);

/** The five failures, and the headers a consumer writes when it parks one (message `i`). */
const FAILURES: ((i: number) => { name: string; message: string; frame: string; reason: string })[] = [
  (i) => ({
    name: 'Error',
    message: `carrier timeout after 3000 ms for order ${48_000 + i}`,
    frame: 'rateShipment (/srv/app/dist/shipping/rate.js:41:9)',
    reason: 'exhausted',
  }),
  (i) => ({
    name: 'NonRetryableError',
    message: `order ${48_000 + i} has no address`,
    frame: 'validate (/srv/app/dist/shipping/validate.js:12:11)',
    reason: 'non-retryable',
  }),
  () => ({
    name: 'TypeError',
    message: "Cannot read properties of undefined (reading 'rate')",
    frame: 'quote (/srv/app/dist/shipping/quote.js:77:20)',
    reason: 'exhausted',
  }),
  (i) => ({
    name: 'FetchError',
    message: `request to https://tax.example/v2/rates/${(i * 2654435761) % 4294967296} failed: ECONNRESET`,
    frame: 'taxFor (/srv/app/dist/tax/client.js:19:5)',
    reason: 'exhausted',
  }),
  (i) => ({
    name: 'ConflictError',
    message: `shipment 3f2504e0-4f89-11d3-9a0c-${String(i).padStart(12, '0')} already booked`,
    frame: 'book (/srv/app/dist/shipping/book.js:30:13)',
    reason: 'non-retryable',
  }),
];

function headersOf(queue: string, i: number): Record<string, unknown> {
  const f = FAILURES[i % FAILURES.length](i);
  const at = new Date(Date.now() - (MESSAGES - i) * 1000).toISOString();
  return {
    'retry-attempt': 3,
    'retry-reason': f.reason,
    'retry-error-name': f.name,
    'retry-last-error': f.message,
    'retry-error-stack': `${f.name}: ${f.message}\n    at ${f.frame}\n    at Consumer.handle (/srv/app/node_modules/rabbit-retry/dist/consumer.js:350:40)\n    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)`,
    'retry-failed-at': at,
    'retry-first-failed-at': at,
    'retry-original-exchange': '',
    'retry-original-routing-key': queue,
    'retry-queue': queue,
  };
}

async function main(): Promise<void> {
  cleanupOnSignal();
  const queue = uniqueName('rr-bench-console');
  const parked = parkedQueueName(queue);
  remember([parked]);
  await declareWorkQueue(queue);
  await declareWorkQueue(parked);
  const t0 = Date.now();
  const ch = await (await amqpConnection()).createConfirmChannel();
  try {
    for (let i = 0; i < MESSAGES; i++) {
      const ok = ch.sendToQueue(parked, BODY, {
        persistent: true,
        messageId: `order-${48_000 + i}`,
        contentType: 'application/octet-stream',
        headers: headersOf(queue, i),
      });
      if (!ok) await new Promise<void>((resolve) => ch.once('drain', () => resolve()));
      if (i % 1000 === 999) await ch.waitForConfirms();
    }
    await ch.waitForConfirms();
  } finally {
    await ch.close().catch(() => undefined);
  }
  console.error(`parked ${MESSAGES} messages of 1 KiB in ${parked} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const rr = await RabbitRetry.connect({ url: AMQP_URL });
  const rows: string[][] = [];
  const times: number[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const g = await groupParked(rr.parked(queue), MESSAGES);
      const after = await depth(parked);
      if (g.scanned !== MESSAGES || after !== MESSAGES) throw new Error(`round ${round}: read ${g.scanned}, ${after} still parked; expected ${MESSAGES}`);
      times.push(g.tookMs);
      rows.push([String(round), 'groupParked', fmt(g.tookMs, 0), String(g.scanned), String(g.groups.length), g.groups.map((x) => x.count).join('/')]);
    }
    const server = await startConsole({ client: rr, port: 0, queues: [queue], management: false, scanLimit: MESSAGES });
    try {
      const html = await (await fetch(server.url)).text();
      const token = /content="([0-9a-f]+)"/.exec(html)?.[1] ?? '';
      const t = Date.now();
      const res = await fetch(`${server.url}api/queues/${encodeURIComponent(queue)}/groups?refresh=1`, { headers: { 'x-rabbit-retry-token': token } });
      const answer = (await res.json()) as GroupsAnswer;
      const ms = Date.now() - t;
      if (answer.grouping?.scanned !== MESSAGES || (await depth(parked)) !== MESSAGES)
        throw new Error('the HTTP reading did not read every message, or lost one');
      rows.push([
        'http',
        'GET …/groups',
        fmt(ms, 0),
        String(answer.grouping.scanned),
        String(answer.grouping.groups.length),
        answer.grouping.groups.map((x) => x.count).join('/'),
      ]);
    } finally {
      await server.close();
    }
  } finally {
    await rr.close();
    await deleteQueues([queue, parked]);
    await closeBroker();
  }
  console.log(table(['ROUND', 'READING', 'MS', 'READ', 'GROUPS', 'COUNTS'], rows));
  console.log(
    `grouping ${MESSAGES} parked messages: median ${fmt(median(times), 0)} ms over ${ROUNDS} rounds (${fmt(MESSAGES / (median(times) / 1000), 0)} messages/s); every message still parked after each`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
