/**
 * The broker helpers the tests (through helpers.ts) and the benchmarks
 * (through bench/common.ts) share: one amqplib connection per process, a
 * channel per operation, queue depths, deleting queues and exchanges, and the
 * names of a work queue's queues. Nothing here uses Jest.
 */
import { randomBytes } from 'node:crypto';

import amqp, { type Channel, type ChannelModel } from 'amqplib';

import { type Delay, parkedQueueName, retryQueueName } from '../lib';

export const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** The broker under test, from AMQP_URL alone (its first node when it lists several). */
export const BROKER = (() => {
  const u = new URL(AMQP_URL.split(',')[0]);
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: Number(u.port || (u.protocol === 'amqps:' ? 5671 : 5672)),
    user: decodeURIComponent(u.username || 'guest'),
    password: decodeURIComponent(u.password || 'guest'),
    /** `host:port`, as the URL writes it. */
    hostPort: `${u.hostname}:${u.port || (u.protocol === 'amqps:' ? 5671 : 5672)}`,
  };
})();

/** An AMQP URL of the broker under test with other credentials and/or virtual host. */
export function brokerUrl(o: { user?: string; password?: string; vhost?: string } = {}): string {
  const user = encodeURIComponent(o.user ?? BROKER.user);
  const password = encodeURIComponent(o.password ?? BROKER.password);
  const vhost = o.vhost === undefined ? '' : `/${encodeURIComponent(o.vhost)}`;
  return `amqp://${user}:${password}@${BROKER.hostPort}${vhost}`;
}

/**
 * The command line that runs `rabbitmqctl` against the node under test: RABBITMQCTL
 * (words split on spaces, quotes kept together; default `rabbitmqctl`).
 */
export const RABBITMQCTL: readonly string[] = (() => {
  const line = process.env.RABBITMQCTL?.trim() || 'rabbitmqctl';
  const words = line.match(/"[^"]*"|'[^']*'|\S+/g) ?? ['rabbitmqctl'];
  return words.map((w) => (/^(["']).*\1$/.test(w) ? w.slice(1, -1) : w));
})();

/** A queue name no other test, benchmark or earlier run uses. */
export function uniqueName(prefix = 'rr-test'): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// One amqplib connection per process (per test file under Jest); opened on first use, closed by closeAmqp().
let connection: Promise<ChannelModel> | undefined;

/** The process's amqplib connection. */
export function amqpConnection(): Promise<ChannelModel> {
  connection ??= amqp.connect(AMQP_URL, { noDelay: true }).then((c) => {
    // A failed passive declare closes only its channel; the connection must not crash the run.
    c.on('error', () => undefined);
    return c;
  });
  return connection;
}

/** The broker's version as it tells it at connection start, e.g. [4, 3, 6]. */
export async function brokerVersion(): Promise<[number, number, number]> {
  const c = (await amqpConnection()) as unknown as { connection: { serverProperties?: { version?: unknown } } };
  const version = c.connection.serverProperties?.version;
  const v = typeof version === 'string' || Buffer.isBuffer(version) ? version.toString() : '0.0.0';
  const [major = 0, minor = 0, patch = 0] = v.split('.').map((p) => Number.parseInt(p, 10) || 0);
  return [major, minor, patch];
}

/** Whether the broker under test is `major.minor` or later. */
export async function brokerAtLeast(major: number, minor: number): Promise<boolean> {
  const [a, b] = await brokerVersion();
  return a > major || (a === major && b >= minor);
}

export async function closeAmqp(): Promise<void> {
  const c = connection;
  connection = undefined;
  if (c) await (await c).close();
}

/**
 * Runs `f` on a fresh channel and closes it. A broker error (404 on a missing
 * queue, 406 on a mismatch) closes the channel, so each operation gets its own.
 */
export async function withChannel<T>(f: (ch: Channel) => Promise<T>): Promise<T> {
  const ch = await (await amqpConnection()).createChannel();
  ch.on('error', () => undefined);
  let closed = false;
  ch.on('close', () => {
    closed = true;
  });
  try {
    return await f(ch);
  } finally {
    if (!closed) await ch.close().catch(() => undefined);
  }
}

function isNotFound(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 404;
}

/** Ready messages in the queue; null when the queue does not exist. */
export async function readyMessages(name: string): Promise<number | null> {
  try {
    return (await withChannel((ch) => ch.checkQueue(name))).messageCount;
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/** Whether the queue exists. */
export async function queueExists(name: string): Promise<boolean> {
  return (await readyMessages(name)) !== null;
}

/** Ready messages in the queue; 0 when the queue does not exist. */
export async function queueDepth(name: string): Promise<number> {
  return (await readyMessages(name)) ?? 0;
}

/** Deletes the queue; one that does not exist is no error. */
export async function deleteQueue(name: string): Promise<void> {
  try {
    await withChannel((ch) => ch.deleteQueue(name));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/** Deletes the exchange; one that does not exist is no error. */
export async function deleteExchange(name: string): Promise<void> {
  try {
    await withChannel((ch) => ch.deleteExchange(name));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/** The queues of work queue `base`: itself, its retry queue for each delay, and its parked queue, in that order. */
export function queueFamily(base: string, delays: readonly Delay[]): string[] {
  return [base, ...delays.map((d) => retryQueueName(base, d)), parkedQueueName(base)];
}
