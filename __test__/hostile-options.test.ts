import { inspect } from 'node:util';

import { type ConnectOptions, type ConsumeOptions, InvalidOptionsError, type PublishOptions, RabbitRetry } from '../lib';
import { native, nativeSync } from '../lib/errors';
import { binding } from '../lib/native';
import { AMQP_URL, cleanup, closeAmqp, connectClient, queueExists, testQueue } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

/** Everything a user could print of an error: message, stack, util.inspect, JSON, and its cause. */
function everything(err: unknown): string {
  const e = err as { message?: unknown; stack?: unknown; cause?: unknown };
  return [String(e.message), String(e.stack), inspect(err, { depth: 10, showHidden: true }), JSON.stringify(err), inspect(e.cause)].join('\n');
}

/** Expects an INVALID_OPTIONS error whose message names `option` and shows none of `secrets`. */
function expectRefused(err: unknown, option: string, secrets: readonly string[]): void {
  expect(err).toBeInstanceOf(InvalidOptionsError);
  expect(err).toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining(option) });
  const text = everything(err);
  for (const s of secrets) expect(text).not.toContain(s);
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('connect options of the wrong type', () => {
  const cases: [string, ConnectOptions, string, string[]][] = [
    ['url as an array of URLs', { url: ['amqp://u:secret1@h', 'amqp://u:secret2@h'] as never }, 'url', ['secret1', 'secret2']],
    ['url as an object', { url: { href: 'amqp://u:secret3@h' } as never }, 'url', ['secret3']],
    ['connectionName as a number', { url: AMQP_URL, connectionName: 42 as never }, 'connectionName', []],
    ['heartbeat as a string', { url: AMQP_URL, heartbeat: 'amqp://u:secret4@h' as never }, 'heartbeat', ['secret4']],
    ['connectTimeoutMs as an array', { url: AMQP_URL, connectTimeoutMs: ['secret5'] as never }, 'connectTimeoutMs', ['secret5']],
    ['tls as a string', { url: AMQP_URL, tls: 'secret6' as never }, 'tls', ['secret6']],
    ['tls.ca as a number', { url: AMQP_URL, tls: { ca: 5 as never } }, 'tls.ca', []],
    ['tls.keyFile as an object', { url: AMQP_URL, tls: { certFile: 'c.pem', keyFile: { pem: 'secret7' } as never } }, 'tls.keyFile', ['secret7']],
    ['retryTable.url as an object with a password', { url: AMQP_URL, retryTable: { url: { password: 'secret8' } as never } }, 'retryTable.url', ['secret8']],
    ['retryTable.ratePerSec as a string', { url: AMQP_URL, retryTable: { url: 'postgres://a@h/db', ratePerSec: 'fast' as never } }, 'retryTable.ratePerSec', ['fast']],
    ['retryTable.scheduler as a string', { url: AMQP_URL, retryTable: { url: 'postgres://a@h/db', scheduler: 'secret9' as never } }, 'retryTable.scheduler', ['secret9']],
    ['logger as a string', { url: AMQP_URL, logger: 'secret10' as never }, 'logger', ['secret10']],
    ['logger without error()', { url: AMQP_URL, logger: { warn: () => undefined } as never }, 'logger', []],
    ['meterProvider without getMeter', { url: AMQP_URL, meterProvider: { token: 'secret11' } as never }, 'meterProvider', ['secret11']],
  ];

  it.each(cases)('%s: INVALID_OPTIONS naming the option, without the value', async (_label, options, option, secrets) => {
    const err = await caught(RabbitRetry.connect(options));
    expectRefused(err, option, secrets);
  });

  it('the options themselves as a string', async () => {
    expectRefused(await caught(RabbitRetry.connect('amqp://u:secret12@h' as never)), 'connect options', ['secret12']);
  });
});

describe('consume options of the wrong type', () => {
  const cases: [string, (queue: string) => ConsumeOptions, string, string[]][] = [
    ['queue as an array', () => ({ queue: ['secret1'] as never }), 'queue', ['secret1']],
    ['exchange as an object', (queue) => ({ queue, exchange: { name: 'secret2' } as never }), 'exchange', ['secret2']],
    ['routingKey as a number', (queue) => ({ queue, routingKey: 7 as never }), 'routingKey', []],
    ['prefetch as a string', (queue) => ({ queue, prefetch: 'secret3' as never }), 'prefetch', ['secret3']],
    ['queueType as an unknown string', (queue) => ({ queue, queueType: 'secret4' as never }), 'queueType', ['secret4']],
    ['exchangeType as an array', (queue) => ({ queue, exchangeType: ['secret13'] as never }), 'exchangeType', ['secret13']],
    ['deliveryLimit as a string', (queue) => ({ queue, queueType: 'quorum', deliveryLimit: 'secret5' as never }), 'deliveryLimit', ['secret5']],
    ['onFailure as a string', (queue) => ({ queue, onFailure: 'secret6' as never }), 'onFailure', ['secret6']],
    ['onFailure.delays as a string', (queue) => ({ queue, onFailure: { delays: 'secret7' as never } }), 'onFailure.delays', ['secret7']],
    ['onFailure.retryable as a boolean', (queue) => ({ queue, onFailure: { retryable: true as never } }), 'onFailure.retryable', []],
    ['onFailure.table.maxAttempts as a string', (queue) => ({ queue, onFailure: { table: { maxAttempts: 'secret8' as never } } }), 'onFailure.table.maxAttempts', ['secret8']],
    ['alert.every as an object', (queue) => ({ queue, alert: { parkedAbove: 1, every: { secret: 'secret9' } as never } }), 'alert.every', ['secret9']],
    ['alert.onTableAlert as a string', (queue) => ({ queue, alert: { parkedAbove: 1, onTableAlert: 'secret10' as never } }), 'alert.onTableAlert', ['secret10']],
    ['recovery as null', (queue) => ({ queue, recovery: null as never }), 'recovery', []],
    ['recovery.initialDelayMs as a string', (queue) => ({ queue, recovery: { initialDelayMs: 'secret11' as never } }), 'recovery.initialDelayMs', ['secret11']],
    ['stuckAfterMs as a string', (queue) => ({ queue, stuckAfterMs: 'secret12' as never }), 'stuckAfterMs', ['secret12']],
  ];

  it.each(cases)('%s: INVALID_OPTIONS naming the option, without the value, and nothing declared', async (_label, make, option, secrets) => {
    const queue = testQueue();
    const rr = await connectClient();
    expectRefused(await caught(rr.consume(make(queue), async () => undefined)), option, secrets);
    expect(await queueExists(queue)).toBe(false);
  });
});

describe('publish options of the wrong type', () => {
  const cases: [string, PublishOptions, string, string[]][] = [
    ['headers as a string', { headers: 'secret1' as never }, 'headers', ['secret1']],
    ['headers as an array', { headers: ['secret2'] as never }, 'headers', ['secret2']],
    ['messageId as an object with a token', { messageId: { token: 'secret3' } as never }, 'messageId', ['secret3']],
    ['correlationId as a number', { correlationId: 5 as never }, 'correlationId', []],
    ['replyTo as an array', { replyTo: ['secret4'] as never }, 'replyTo', ['secret4']],
    ['priority as a string', { priority: 'secret5' as never }, 'priority', ['secret5']],
    ['persistent as a string', { persistent: 'secret6' as never }, 'persistent', ['secret6']],
    ['timestamp as a string', { timestamp: 'secret7' as never }, 'timestamp', ['secret7']],
    ['expiration as an object', { expiration: { ms: 'secret8' } as never }, 'expiration', ['secret8']],
  ];

  it.each(cases)('%s: INVALID_OPTIONS naming the option, without the value', async (_label, options, option, secrets) => {
    const queue = testQueue();
    const rr = await connectClient();
    expectRefused(await caught(rr.publish('', queue, { orderId: 1 }, options)), option, secrets);
  });

  it('the options themselves as a string', async () => {
    const rr = await connectClient();
    expectRefused(await caught(rr.publish('', testQueue(), 'x', 'secret9' as never)), 'publish options', ['secret9']);
  });
});

describe('a conversion error of the native layer', () => {
  it('becomes INVALID_OPTIONS naming the field, without the value, for an async call', async () => {
    const call = () => binding.connect({ url: ['amqp://u:secret1@h', 'amqp://u:secret2@h'] } as never);
    expectRefused(await caught(native(call)), 'url', ['secret1', 'secret2']);
  });

  it('names the public option of a renamed field', async () => {
    const call = () => binding.connect({ url: AMQP_URL, retryTableUrl: { password: 'secret3' } } as never);
    const err = await caught(native(call));
    expectRefused(err, 'retryTable.url', ['secret3']);
    expect((err as Error).message).toMatch(/must be a string/);
  });

  it('becomes INVALID_OPTIONS for a synchronous call too', () => {
    let err: unknown;
    try {
      nativeSync(() => binding.parseDelays([{ secret: 'secret4' }] as never));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect(everything(err)).not.toContain('secret4');
  });
});
