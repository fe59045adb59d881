import net from 'node:net';
import { inspect } from 'node:util';

import { type Logger, RabbitRetry, parkedQueueName, retryQueueName, type Delay } from '../lib';
import {
  BROKER,
  brokerUrl,
  cleanup,
  closeAmqp,
  closeOwnConnection,
  connectClient,
  deleteQueue,
  testQueue,
  track,
  uniqueName,
  waitFor,
  withChannel,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

// The broker's URL in these tests, and what must never show: its password.
const URL = brokerUrl();
const LEAKS = [':guest@', 'guest:guest'];

/** Everything a user could print of `value`: JSON (Errors expanded), util.inspect, and String(). */
function everything(value: unknown): string {
  const json = JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof Error) {
      const e = v as Error & { cause?: unknown };
      return { ...e, name: e.name, message: e.message, stack: e.stack, cause: e.cause };
    }
    return v;
  });
  return [json, inspect(value, { depth: 20, showHidden: true }), String(value)].join('\n');
}

function expectNoSecret(text: string, secrets: readonly string[] = LEAKS): void {
  for (const s of secrets) {
    if (text.includes(s)) {
      const at = text.indexOf(s);
      throw new Error(`found '${s}' in: …${text.slice(Math.max(0, at - 120), at + 120)}…`);
    }
  }
}

it('rr.url hides the password and keeps the rest', async () => {
  const rr = await connectClient({ url: URL });
  expectNoSecret(rr.url);
  expect(rr.url).toBe(`amqp://guest:***@${BROKER.hostPort}`);
});

it('printing the client or a consumer (console.log, JSON.stringify) does not show the password', async () => {
  const rr = await connectClient({ url: URL });
  const queue = testQueue(['1m']);
  const consumer = track(await rr.consume({ queue, onFailure: { delays: ['1m'] } }, async () => undefined));
  expectNoSecret(everything(consumer));
  expectNoSecret(everything(rr));
});

describe('connect errors never show the password', () => {
  let closedPort: number;
  let silent: net.Server;
  let silentPort: number;
  const sockets = new Set<net.Socket>();

  beforeAll(async () => {
    // A port nobody listens on.
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    closedPort = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    // A port that accepts TCP and never speaks AMQP, for the connect timeout.
    silent = net.createServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentPort = (silent.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  const cases: [string, () => string, string][] = [
    ['a closed port', () => `amqp://guest:s3cret@127.0.0.1:${closedPort}`, 'CONNECTION'],
    ['a wrong password on the real broker', () => brokerUrl({ password: 's3cret' }), 'CONNECTION'],
    ['a broker that never answers (connect timeout)', () => `amqp://guest:s3cret@127.0.0.1:${silentPort}`, 'CONNECTION'],
    ['a port that is not a number', () => 'amqp://guest:s3cret@127.0.0.1:notaport', 'INVALID_OPTIONS'],
    ['an amqps:// URL to a closed port', () => `amqps://guest:s3cret@127.0.0.1:${closedPort}/vhost`, 'CONNECTION'],
    ['a percent-encoded password', () => `amqp://guest:s3cret%2Fx@127.0.0.1:${closedPort}`, 'CONNECTION'],
    // Base64-made passwords often hold '/' and '+'; unencoded, the URL is invalid, and the error must still hide it.
    ['a password with an unencoded "/"', () => `amqp://guest:s3cret/x+y@127.0.0.1:${closedPort}`, 'INVALID_OPTIONS'],
    ['a URL without its amqp:// scheme', () => `guest:s3cret@127.0.0.1:${closedPort}`, 'INVALID_OPTIONS'],
  ];

  it.each(cases)('%s', async (_label, url, code) => {
    let caught: unknown;
    try {
      const rr = await RabbitRetry.connect({ url: url(), connectTimeoutMs: 1000 });
      await rr.close();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(Error);
    expect(caught).toMatchObject({ code });
    expectNoSecret(everything(caught), ['s3cret']);
  });
});

describe('a running consumer', () => {
  it('never shows the password in events or stats(), through retries, parks, a failed publish and channel and connection losses', async () => {
    const delays: Delay[] = ['200ms'];
    const queue = testQueue(delays);
    const connectionName = uniqueName('rr-test-secrets');
    const rr = await connectClient({ url: URL, connectionName });
    const events: { name: string; payload: unknown }[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays }, recovery: { initialDelayMs: 100, maxDelayMs: 1000 } }, async (msg) => {
        throw new Error(`cannot handle ${msg.properties.messageId ?? '?'}`);
      }),
    );
    for (const name of ['retry', 'parked', 'publishFailed', 'disconnected', 'recovered', 'error', 'alert'] as const) {
      consumer.on(name, (payload: unknown) => events.push({ name, payload }));
    }
    const count = (name: string) => events.filter((e) => e.name === name).length;

    // A retry, then a park.
    await rr.publish('', queue, 'one', { messageId: 'one' });
    await waitFor(() => count('parked') === 1, 10_000, 'the parked event');

    // A failed publish: the retry queue is gone.
    await deleteQueue(retryQueueName(queue, '200ms'));
    await rr.publish('', queue, 'two', { messageId: 'two' });
    await waitFor(() => count('publishFailed') === 1, 10_000, 'the publishFailed event');

    // A channel-level loss: the work queue is deleted under the consumer, which declares it again.
    await deleteQueue(queue);
    await waitFor(() => count('recovered') === 1, 15_000, 'recovery after the queue was deleted');

    // A connection-level loss: the broker closes this client's own connection.
    await closeOwnConnection(connectionName);
    await waitFor(() => count('recovered') === 2, 20_000, 'recovery after the connection was closed');
    expect(consumer.state).toBe('connected');

    expect(events.map((e) => e.name)).toEqual(expect.arrayContaining(['retry', 'parked', 'publishFailed', 'disconnected', 'recovered']));
    expect(count('disconnected')).toBeGreaterThanOrEqual(2);
    for (const e of events) expectNoSecret(`${e.name}: ${everything(e.payload)}`);
    expectNoSecret(JSON.stringify(consumer.stats()));
    expectNoSecret(everything(consumer.stats()));
    expectNoSecret(rr.url);
  }, 60_000);

  it('never shows the password in log lines of a custom logger, up to recovery giving up', async () => {
    const delays: Delay[] = ['200ms'];
    const queue = testQueue(delays);
    const connectionName = uniqueName('rr-test-secrets-log');
    const lines: { level: 'warn' | 'error'; line: string }[] = [];
    const logger: Logger = {
      warn: (line) => lines.push({ level: 'warn', line }),
      error: (line) => lines.push({ level: 'error', line }),
    };
    const rr = await connectClient({ url: URL, connectionName, logger });
    // No listeners: everything the consumer has to say goes to the logger.
    const consumer = track(
      await rr.consume(
        {
          queue,
          onFailure: {
            delays,
            retryable: (_err, msg) => {
              if (msg.properties.messageId === 'predicate') throw new Error('the predicate itself failed');
              return true;
            },
          },
          alert: {
            parkedAbove: 0,
            every: '200ms',
            onAlert: () => {
              throw new Error('the alert hook failed');
            },
          },
          recovery: { initialDelayMs: 1500, maxDelayMs: 3000 },
        },
        async () => {
          throw new Error('always fails');
        },
      ),
    );
    const logged = (level: 'warn' | 'error', text: string) => lines.some((l) => l.level === level && l.line.includes(text));

    // retryable throws: a warning, and the message parks; the alert hook then throws: another warning.
    await rr.publish('', queue, 'p', { messageId: 'predicate' });
    await waitFor(() => logged('warn', 'retryable'), 10_000, 'the retryable warning');
    await waitFor(() => logged('warn', 'onAlert'), 10_000, 'the onAlert warning');

    // A failed publish with no publishFailed listener: a warning.
    await deleteQueue(retryQueueName(queue, '200ms'));
    await rr.publish('', queue, 'f', { messageId: 'failed-publish' });
    await waitFor(() => logged('warn', 'failed-publish'), 10_000, 'the failed-publish warning');

    // A connection-level loss with no disconnected listener: a warning, then recovery.
    const before = lines.length;
    await closeOwnConnection(connectionName);
    await waitFor(() => lines.slice(before).some((l) => l.level === 'warn'), 10_000, 'the disconnect warning');
    await waitFor(() => consumer.state === 'connected', 20_000, 'recovery after the connection was closed');

    // Recovery that cannot succeed: the work queue comes back with other arguments. An error line.
    await deleteQueue(queue);
    await withChannel((ch) => ch.assertQueue(queue, { durable: true, arguments: { 'x-max-length': 7 } }));
    await waitFor(() => lines.some((l) => l.level === 'error'), 20_000, 'the error line when recovery gives up');
    await waitFor(() => consumer.state === 'closed', 5000, 'the consumer to close');

    expect(lines.length).toBeGreaterThanOrEqual(5);
    for (const l of lines) expectNoSecret(`${l.level}: ${l.line}`);
    expectNoSecret(JSON.stringify(consumer.stats()));
    expect(await withChannel(async (ch) => (await ch.checkQueue(parkedQueueName(queue))).messageCount)).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
