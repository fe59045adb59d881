import { execFile, execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { runInThisContext } from 'node:vm';

import type { MessageProperties as AmqpProperties } from 'amqplib';

import { RabbitRetry, type ConnectOptions, type Consumer, type Delay, type Logger, parkedQueueName, retryQueueName } from '../lib';
import {
  AMQP_URL,
  RABBITMQCTL,
  amqpConnection,
  brokerAtLeast as brokerAtLeastNow,
  deleteExchange,
  deleteQueue,
  queueDepth,
  queueFamily,
  sleep,
  uniqueName,
  withChannel,
} from './broker';

export {
  AMQP_URL,
  BROKER,
  brokerAtLeast,
  brokerVersion,
  RABBITMQCTL,
  brokerUrl,
  closeAmqp,
  deleteExchange,
  deleteQueue,
  queueDepth,
  queueExists,
  sleep,
  uniqueName,
  withChannel,
} from './broker';

let at43: Promise<boolean> | undefined;

/** Whether the broker under test is RabbitMQ 4.3 or later (asked once per test file). */
export function brokerIs43(): Promise<boolean> {
  at43 ??= brokerAtLeastNow(4, 3);
  return at43;
}

/** `it` on RabbitMQ 4.3 or later; on an older broker it passes at once, having said why it did nothing. */
export function it43(name: string, fn: () => Promise<void>, timeout?: number): void {
  it(
    name,
    async () => {
      if (!(await brokerIs43())) {
        console.warn(`skipped on a broker older than 4.3: ${name}`);
        return;
      }
      await fn();
    },
    timeout,
  );
}

/** Polls `predicate` until it holds; rejects with `what` when `timeoutMs` passes first. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition', intervalMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

export interface GotMessage {
  content: Buffer;
  properties: AmqpProperties;
  headers: Record<string, unknown>;
  exchange: string;
  routingKey: string;
}

/** A message amqplib got, as the tests read it. */
function got(m: { content: Buffer; properties: AmqpProperties; fields: { exchange: string; routingKey: string } }): GotMessage {
  return {
    content: m.content,
    properties: m.properties,
    headers: m.properties.headers ?? {},
    exchange: m.fields.exchange,
    routingKey: m.fields.routingKey,
  };
}

/** Takes one message off the queue (basic.get, then ack); null when it is empty. */
export async function getOne(name: string): Promise<GotMessage | null> {
  return withChannel(async (ch) => {
    const m = await ch.get(name, { noAck: false });
    if (m === false) return null;
    ch.ack(m);
    return got(m);
  });
}

/** Waits until the queue holds a message, then takes it. */
export async function waitForOne(name: string, timeoutMs = 10_000): Promise<GotMessage> {
  await waitFor(async () => (await queueDepth(name)) > 0, timeoutMs, `a message in '${name}'`);
  const m = await getOne(name);
  if (m === null) throw new Error(`'${name}' was emptied by someone else`);
  return m;
}

/** Deletes Q, its retry queue for each delay, Q.parked, and Q.circuit (a circuit's state queue). */
export async function deleteQueues(base: string, delays: readonly Delay[] = []): Promise<void> {
  for (const n of [...queueFamily(base, delays), `${base}.circuit`]) await deleteQueue(n);
}

/** Depths of Q, each retry queue, and Q.parked. */
export async function topologyDepths(base: string, delays: readonly Delay[]): Promise<{ work: number; retry: Record<string, number>; parked: number }> {
  const retry: Record<string, number> = {};
  for (const d of delays) {
    const name = retryQueueName(base, d);
    retry[name] = await queueDepth(name);
  }
  return { work: await queueDepth(base), retry, parked: await queueDepth(parkedQueueName(base)) };
}

// What each test created; cleanup() (afterEach) closes and deletes it all.
const clients: RabbitRetry[] = [];
const consumers: Consumer[] = [];
const queues: { base: string; delays: readonly Delay[] }[] = [];
const extraQueues: string[] = [];
const exchanges: string[] = [];

/** Connects a client that cleanup() closes. */
export async function connectClient(options: ConnectOptions = {}): Promise<RabbitRetry> {
  const rr = await RabbitRetry.connect({ url: AMQP_URL, ...options });
  clients.push(rr);
  return rr;
}

/** Registers a consumer that cleanup() closes before its client. */
export function track(consumer: Consumer): Consumer {
  consumers.push(consumer);
  return consumer;
}

/** A unique work queue whose whole topology cleanup() deletes. */
export function testQueue(delays: readonly Delay[] = []): string {
  const base = uniqueName();
  queues.push({ base, delays });
  return base;
}

/** A unique name for a queue outside a retry topology, deleted by cleanup(). */
export function extraQueue(): string {
  const name = uniqueName('rr-test-extra');
  extraQueues.push(name);
  return name;
}

/** A durable queue outside a retry topology, declared now and deleted by cleanup(). */
export async function durableQueue(): Promise<string> {
  const q = extraQueue();
  await withChannel(async (ch) => {
    await ch.assertQueue(q, { durable: true });
  });
  return q;
}

/** A unique exchange name, deleted by cleanup(). */
export function testExchange(): string {
  const name = uniqueName('rr-test-ex');
  exchanges.push(name);
  return name;
}

export async function cleanup(): Promise<void> {
  for (const c of consumers.splice(0)) await c.close().catch(() => undefined);
  for (const rr of clients.splice(0)) await rr.close().catch(() => undefined);
  for (const q of queues.splice(0)) await deleteQueues(q.base, q.delays);
  for (const q of extraQueues.splice(0)) await deleteQueue(q);
  for (const e of exchanges.splice(0)) await deleteExchange(e);
}

/** A message to put in a parked queue as the consumer would have parked it. */
export interface ParkedSeed {
  body?: unknown;
  messageId?: string;
  correlationId?: string;
  /** `retry-reason`. @default 'exhausted' */
  reason?: string;
  /** `retry-error-name`. @default 'Error' */
  errorName?: string;
  /** `retry-last-error`. @default 'boom' */
  errorMessage?: string;
  /** `retry-attempt`. @default 2 */
  attempt?: number;
  /** Other application headers. */
  headers?: Record<string, unknown>;
}

/** The `retry-*` headers the consumer writes when it parks a message of `queue`. */
export function parkedHeaders(queue: string, s: ParkedSeed): Record<string, unknown> {
  const at = new Date().toISOString();
  return {
    ...(s.headers ?? {}),
    'retry-attempt': s.attempt ?? 2,
    'retry-reason': s.reason ?? 'exhausted',
    'retry-error-name': s.errorName ?? 'Error',
    'retry-last-error': s.errorMessage ?? 'boom',
    'retry-error-stack': `${s.errorName ?? 'Error'}: ${s.errorMessage ?? 'boom'}\n    at handler (test.ts:1:1)`,
    'retry-failed-at': at,
    'retry-first-failed-at': at,
    'retry-original-exchange': '',
    'retry-original-routing-key': queue,
    'retry-queue': queue,
  };
}

/**
 * Declares work queue `queue` and `queue.parked` (durable, as consume does)
 * and publishes `seeds` to the parked queue with publisher confirms, in order.
 */
export async function seedParked(queue: string, seeds: readonly ParkedSeed[]): Promise<void> {
  const ch = await (await amqpConnection()).createConfirmChannel();
  try {
    await ch.assertQueue(queue, { durable: true });
    await ch.assertQueue(parkedQueueName(queue), { durable: true });
    for (const s of seeds) {
      ch.sendToQueue(parkedQueueName(queue), Buffer.from(JSON.stringify(s.body ?? {}), 'utf8'), {
        persistent: true,
        contentType: 'application/json',
        messageId: s.messageId,
        correlationId: s.correlationId,
        headers: parkedHeaders(queue, s),
      });
    }
    await ch.waitForConfirms();
  } finally {
    await ch.close().catch(() => undefined);
  }
  await waitFor(async () => (await queueDepth(parkedQueueName(queue))) >= seeds.length, 5000, `${seeds.length} messages in '${parkedQueueName(queue)}'`);
}

/** Takes every message off the queue (basic.get and ack, one by one, on one channel), in order. */
export async function drain(name: string): Promise<GotMessage[]> {
  return withChannel(async (ch) => {
    const out: GotMessage[] = [];
    for (;;) {
      const m = await ch.get(name, { noAck: false });
      if (m === false) return out;
      ch.ack(m);
      out.push(got(m));
    }
  });
}

/** The messages of `queue`'s parked queue, taken and put back in their order: a look that leaves the queue as it was. */
export async function parkedNow(queue: string): Promise<GotMessage[]> {
  const msgs = await drain(parkedQueueName(queue));
  const ch = await (await amqpConnection()).createConfirmChannel();
  try {
    for (const m of msgs) ch.sendToQueue(parkedQueueName(queue), m.content, { ...m.properties, headers: m.headers });
    await ch.waitForConfirms();
  } finally {
    await ch.close();
  }
  return msgs;
}

/** A queue as `rabbitmqctl list_queues` shows it. */
export interface BrokerQueue {
  name: string;
  type: string;
  /**
   * Its arguments, name to value, as declared: without the `x-queue-type: classic` that
   * RabbitMQ 4.x lists for every classic queue (`type` says it on every version).
   */
  arguments: Record<string, unknown>;
  /** Its arguments, name to the broker's type name (`longstr`, `long`, ...). */
  argumentTypes: Record<string, string>;
  /** The policy applied to it, '' when none. */
  policy: string;
}

/** Reads `rabbitmqctl list_queues` (read-only) and returns the named queues that exist. */
export function brokerQueues(names: readonly string[]): Promise<Record<string, BrokerQueue>> {
  return new Promise((resolve, reject) => {
    execFile(
      RABBITMQCTL[0],
      [...RABBITMQCTL.slice(1), 'list_queues', '-q', '--formatter', 'json', 'name', 'type', 'arguments', 'policy'],
      { maxBuffer: 64 * 1024 * 1024 },
      (err, stdout) => {
        if (err) {
          reject(err);
          return;
        }
        const rows = JSON.parse(stdout.slice(stdout.indexOf('['))) as {
          name: string;
          type: string;
          arguments: [string, string, unknown][];
          policy?: string;
        }[];
        const out: Record<string, BrokerQueue> = {};
        for (const row of rows) {
          if (!names.includes(row.name)) continue;
          out[row.name] = {
            name: row.name,
            type: row.type,
            arguments: Object.fromEntries(row.arguments.filter(([k, , v]) => !(k === 'x-queue-type' && v === 'classic')).map(([k, , v]) => [k, v])),
            argumentTypes: Object.fromEntries(row.arguments.map(([k, t]) => [k, t])),
            policy: typeof row.policy === 'string' ? row.policy : '',
          };
        }
        resolve(out);
      },
    );
  });
}

/** Runs `rabbitmqctl` (RABBITMQCTL: the node under test) with `args`; resolves to its stdout. */
export function rabbitmqctl(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(RABBITMQCTL[0], [...RABBITMQCTL.slice(1), ...args], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`rabbitmqctl ${args.join(' ')} failed: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/** A TypeScript script running as a child process, with its output so far. */
export interface Script {
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `script` (a .ts file) with ts-node in a child process; the caller kills it. */
export function startScript(script: string, args: readonly string[] = [], env: Record<string, string> = {}): Script {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', script, ...args], {
    cwd: path.resolve(__dirname, '..'),
    env: { ...process.env, AMQP_URL, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  return { child, stdout: () => out, stderr: () => err, exited };
}

/**
 * Closes, from the broker's side, the one connection whose client named itself
 * `connectionName` (and no other): a connection loss that disturbs nobody else.
 */
export async function closeOwnConnection(connectionName: string, reason = 'closed by a test'): Promise<void> {
  const pid = await connectionPid(connectionName);
  if (pid === undefined) throw new Error(`expected one connection named '${connectionName}', found none`);
  await rabbitmqctl(['close_connection', pid, reason]);
}

/** The broker's process for the connection named `name` (it changes when the client connects again), or undefined when there is none. */
export async function connectionPid(name: string): Promise<string | undefined> {
  const listing = await rabbitmqctl(['list_connections', '-q', '--no-table-headers', 'pid', 'client_properties']);
  const lines = listing.split('\n').filter((l) => l.includes(`{"connection_name","${name}"}`));
  if (lines.length > 1) throw new Error(`expected one connection named '${name}', found ${lines.length}`);
  return lines[0]?.split('\t')[0];
}

// ---------------------------------------------------------------------------
// PostgreSQL, for the retry table (psql against the machine's server; no pg package).

export const PG_HOST = process.env.PGHOST_TEST ?? '127.0.0.1';
export const PG_PORT = process.env.PGPORT_TEST ?? '5432';
export const PG_USER = process.env.PGUSER_TEST ?? 'postgres';

/** Runs `sql` with psql in database `db`; returns its unaligned, tuples-only output, trimmed. Throws on an SQL error. */
export function psql(sql: string, db = 'postgres'): string {
  return execFileSync('psql', ['-h', PG_HOST, '-p', PG_PORT, '-U', PG_USER, '-d', db, '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql], {
    encoding: 'utf8',
    env: { ...process.env, PGCONNECT_TIMEOUT: '5' },
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

/** A psql session that holds `lock` on database `db` in an open transaction until release(). */
export async function holdLock(db: string, lock: string): Promise<{ release: () => Promise<void> }> {
  const child = spawn('psql', ['-h', PG_HOST, '-p', PG_PORT, '-U', PG_USER, '-d', db, '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  child.stdin.write(`BEGIN;\n${lock};\nSELECT 'locked';\n`);
  await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`psql exited: ${err}`);
      return out.includes('locked');
    },
    10_000,
    'psql to take the lock',
  );
  return {
    release: async () => {
      child.stdin.end('COMMIT;\n\\q\n');
      await exited;
    },
  };
}

/** Runs a query in `db` and parses its rows as JSON objects (one per row). */
export function psqlRows<T = Record<string, unknown>>(sql: string, db: string): T[] {
  const out = psql(`SELECT coalesce(json_agg(t), '[]'::json) FROM (${sql}) t`, db);
  return JSON.parse(out) as T[];
}

/** The URL of database `db` on the test server. */
export function pgUrl(db: string): string {
  return `postgres://${PG_USER}@${PG_HOST}:${PG_PORT}/${db}`;
}

/** Creates an empty database `rr_test_<random>` (or `rr_test_<random>_<suffix>`) and returns its name. */
export function createTestDatabase(suffix?: string): string {
  const name = `rr_test_${randomBytes(5).toString('hex')}${suffix ? `_${suffix}` : ''}`;
  psql(`CREATE DATABASE ${name}`);
  return name;
}

/** Ends every session of `db`, then drops it. */
export function dropTestDatabase(db: string): void {
  if (!/^rr_test_[a-z0-9_]+$/.test(db)) throw new Error(`refusing to drop '${db}': not a test database`);
  psql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${db}' AND pid <> pg_backend_pid()`);
  psql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
}

/** Messages delivered to consumers of `queue` and not yet acked (from `rabbitmqctl list_queues`). */
export async function queueUnacked(queue: string): Promise<number> {
  const out = await rabbitmqctl(['list_queues', '-q', '--no-table-headers', 'name', 'messages_unacknowledged']);
  for (const line of out.split('\n')) {
    const [name, n] = line.split('\t');
    if (name === queue) return Number(n);
  }
  return 0;
}

/**
 * Takes every message off the queue quickly (one no-ack consumer instead of a
 * basic.get per message): returns once no message came for `quietMs`.
 */
export async function drainAll(name: string, quietMs = 300): Promise<GotMessage[]> {
  return withChannel(async (ch) => {
    const out: GotMessage[] = [];
    let last = Date.now();
    const { consumerTag } = await ch.consume(
      name,
      (m) => {
        if (!m) return;
        last = Date.now();
        out.push(got(m));
      },
      { noAck: true },
    );
    while (Date.now() - last < quietMs) await sleep(50);
    await ch.cancel(consumerTag);
    return out;
  });
}

/** A logger that keeps what it was told. */
export function recordingLogger(): Logger & { warnings: string[]; errors: string[] } {
  const warnings: string[] = [];
  const errors: string[] = [];
  return { warnings, errors, warn: (m) => warnings.push(m), error: (m) => errors.push(m) };
}

/**
 * What the process would die of: every unhandled rejection during each test
 * of the calling file, collected (and emptied before each test).
 */
export function collectUnhandledRejections(): unknown[] {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  // Jest hands a test file a copy of `process` whose listeners never fire: listen on the real one.
  const realProcess = runInThisContext('process') as NodeJS.Process;
  beforeAll(() => realProcess.on('unhandledRejection', onUnhandled));
  afterAll(() => realProcess.off('unhandledRejection', onUnhandled));
  beforeEach(() => unhandled.splice(0));
  return unhandled;
}
