import { inspect } from 'node:util';

import { type ConnectOptions, type ConsumeOptions, InvalidOptionsError, type PublishOptions, RabbitRetry, retryQueueName } from '../lib';
import { native, nativeSync } from '../lib/errors';
import { binding } from '../lib/native';
import {
  AMQP_URL,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  dropTestDatabase,
  extraQueue,
  pgUrl,
  psql,
  queueDepth,
  queueExists,
  testQueue,
  waitFor,
  withChannel,
} from './helpers';

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
    ['url as a list holding a number', { url: ['amqp://u:secret1@h', 5, 'amqp://u:secret2@h'] as never }, 'url[1]', ['secret1', 'secret2']],
    ['url as an object', { url: { href: 'amqp://u:secret3@h' } as never }, 'url', ['secret3']],
    ['connectionName as a number', { url: AMQP_URL, connectionName: 42 as never }, 'connectionName', []],
    ['heartbeat as a string', { url: AMQP_URL, heartbeat: 'amqp://u:secret4@h' as never }, 'heartbeat', ['secret4']],
    ['connectTimeoutMs as an array', { url: AMQP_URL, connectTimeoutMs: ['secret5'] as never }, 'connectTimeoutMs', ['secret5']],
    ['tls as a string', { url: AMQP_URL, tls: 'secret6' as never }, 'tls', ['secret6']],
    ['tls.ca as a number', { url: AMQP_URL, tls: { ca: 5 as never } }, 'tls.ca', []],
    ['tls.keyFile as an object', { url: AMQP_URL, tls: { certFile: 'c.pem', keyFile: { pem: 'secret7' } as never } }, 'tls.keyFile', ['secret7']],
    [
      'retryTable.url as an object with a password',
      { url: AMQP_URL, retryTable: { url: { password: 'secret8' } as never } },
      'retryTable.url',
      ['secret8'],
    ],
    [
      'retryTable.ratePerSec as a string',
      { url: AMQP_URL, retryTable: { url: 'postgres://a@h/db', ratePerSec: 'fast' as never } },
      'retryTable.ratePerSec',
      ['fast'],
    ],
    [
      'retryTable.scheduler as a string',
      { url: AMQP_URL, retryTable: { url: 'postgres://a@h/db', scheduler: 'secret9' as never } },
      'retryTable.scheduler',
      ['secret9'],
    ],
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
    [
      'onFailure.table.maxAttempts as a string',
      (queue) => ({ queue, onFailure: { table: { maxAttempts: 'secret8' as never } } }),
      'onFailure.table.maxAttempts',
      ['secret8'],
    ],
    ['alert.every as an object', (queue) => ({ queue, alert: { parkedAbove: 1, every: { secret: 'secret9' } as never } }), 'alert.every', ['secret9']],
    [
      'alert.onTableAlert as a string',
      (queue) => ({ queue, alert: { parkedAbove: 1, onTableAlert: 'secret10' as never } }),
      'alert.onTableAlert',
      ['secret10'],
    ],
    ['recovery as null', (queue) => ({ queue, recovery: null as never }), 'recovery', []],
    [
      'recovery.initialDelayMs as a string',
      (queue) => ({ queue, recovery: { initialDelayMs: 'secret11' as never } }),
      'recovery.initialDelayMs',
      ['secret11'],
    ],
    ['stuckAfterMs as a string', (queue) => ({ queue, stuckAfterMs: 'secret12' as never }), 'stuckAfterMs', ['secret12']],
    ['consumerTag as an object', (queue) => ({ queue, consumerTag: { tag: 'secret14' } as never }), 'consumerTag', ['secret14']],
    ['consumerTag over 255 bytes', (queue) => ({ queue, consumerTag: `secret15${'x'.repeat(300)}` }), 'consumerTag', ['secret15']],
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

describe('publish headers and bodies that would reach the broker changed are refused, and nothing is published', () => {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  const cases: [string, unknown, PublishOptions, string][] = [
    ['a Date header value', 'x', { headers: { sent: new Date(0) } }, 'headers["sent"] must be a plain object'],
    ['a Map header value', 'x', { headers: { m: new Map([['k', 1]]) } }, 'headers["m"] must be a plain object'],
    ['a RegExp nested in a table', 'x', { headers: { t: { r: /secret10/ } } }, 'headers["t"]["r"] must be a plain object'],
    ['a Uint8Array in an array', 'x', { headers: { list: [1, new Uint8Array([1, 2])] } }, 'headers["list"][1] must be a plain object'],
    ['NaN', 'x', { headers: { n: Number.NaN } }, 'headers["n"] must be a finite number'],
    ['Infinity', 'x', { headers: { n: Number.POSITIVE_INFINITY } }, 'headers["n"] must be a finite number'],
    ['a function', 'x', { headers: { f: () => 'secret11' } }, 'headers["f"] must be a string, a number'],
    ['a cycle', 'x', { headers: { c: cyclic } }, 'headers["c"]["self"] refers to itself'],
    ['a name with a lone surrogate', 'x', { headers: { '\udc00': 1 } }, 'headers has a name that is not well-formed UTF-16'],
    ['a value with a lone surrogate', 'x', { headers: { s: 'a\ud800b' } }, 'headers["s"] is not well-formed UTF-16'],
    ['a cyclic body', cyclic, {}, 'the body cannot be sent as JSON: '],
    ['a BigInt in the body', { n: 10n }, {}, 'the body cannot be sent as JSON: '],
    [
      'a body whose toJSON throws',
      {
        toJSON: () => {
          throw new Error('secret12');
        },
      },
      {},
      'the body cannot be sent as JSON: ',
    ],
  ];

  it.each(cases)('%s: INVALID_OPTIONS saying where', async (_label, body, options, message) => {
    const queue = testQueue();
    const rr = await connectClient();
    await rr.consume({ queue }, () => undefined).then((c) => c.close());
    const err = await caught(rr.publish('', queue, body as never, options));
    expect(err).toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining(message) });
    expect((err as Error).message).not.toMatch(/secret1[01]/);
    expect(await queueDepth(queue)).toBe(0);
    // The client stays usable.
    await rr.publish('', queue, { ok: true }, { headers: { nested: { list: [1, 'two', null, true] } } });
    await waitFor(async () => (await queueDepth(queue)) === 1, 5000, 'the good message');
  });
});

describe('a conversion error of the native layer', () => {
  it('becomes INVALID_OPTIONS naming the field, without the value, for an async call', async () => {
    const call = () => binding.connect({ urls: 'amqp://u:secret1@h,amqp://u:secret2@h' } as never);
    expectRefused(await caught(native(call)), 'url', ['secret1', 'secret2']);
  });

  it('names the public option of a renamed field', async () => {
    const call = () => binding.connect({ urls: [AMQP_URL], retryTableUrl: { password: 'secret3' } } as never);
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

/** Expects the INVALID_OPTIONS error a user sees for an unknown key: its class, its code and its whole message. */
function expectUnknownKey(err: unknown, message: string | RegExp): void {
  expect(err).toBeInstanceOf(InvalidOptionsError);
  expect(err).toMatchObject({ code: 'INVALID_OPTIONS', name: 'InvalidOptionsError' });
  if (typeof message === 'string') expect((err as Error).message).toBe(message);
  else expect((err as Error).message).toMatch(message);
}

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('unknown options are refused, naming the key, where it is and the nearest known key', () => {
  describe('connect', () => {
    const cases: [string, ConnectOptions, string | RegExp][] = [
      [
        'a typo',
        { url: AMQP_URL, connectionNmae: 'orders' } as never,
        '`connectionNmae` is not an option of RabbitRetry.connect; did you mean `connectionName`?',
      ],
      ['another case', { URL: AMQP_URL } as never, '`URL` is not an option of RabbitRetry.connect; did you mean `url`?'],
      [
        'no near neighbour: the options are listed',
        { url: AMQP_URL, vhost: '/' } as never,
        '`vhost` is not an option of RabbitRetry.connect; its options are `url`, `hostOrder`, `connectionName`, `heartbeat`, `connectTimeoutMs`, `confirmTimeoutMs`, `tls`, `retryTable`, `outbox`, `logger`, `meterProvider`',
      ],
      ['tls', { url: AMQP_URL, tls: { caFiel: 'ca.pem' } } as never, '`caFiel` is not an option of tls; did you mean `caFile`?'],
      [
        'retryTable',
        { url: AMQP_URL, retryTable: { url: 'postgres://a@h/db', schedular: false } } as never,
        '`schedular` is not an option of retryTable; did you mean `scheduler`?',
      ],
      [
        'two unknown keys',
        { url: AMQP_URL, heartbeats: 5, prefetch: 10 } as never,
        '`heartbeats` is not an option of RabbitRetry.connect; did you mean `heartbeat`? (also not an option: `prefetch`)',
      ],
    ];
    it.each(cases)('%s', async (_label, options, message) => {
      expectUnknownKey(await caught(RabbitRetry.connect(options)), message);
    });

    it('shows key names only, never a value', async () => {
      const err = await caught(RabbitRetry.connect({ url: AMQP_URL, password: 'secret-pw-1', tls: { ca: 'x' } } as never));
      expectUnknownKey(err, /^`password` is not an option of RabbitRetry\.connect; its options are /);
      expect(everything(err)).not.toContain('secret-pw-1');
    });
  });

  describe('consume: nothing is declared and no consumer starts', () => {
    const cases: [string, (queue: string) => ConsumeOptions, string | RegExp][] = [
      ['onFailure.delay', (queue) => ({ queue, onFailure: { delay: ['5s'] } }) as never, '`delay` is not an option of onFailure; did you mean `delays`?'],
      ['Prefetch', (queue) => ({ queue, Prefetch: 5 }) as never, '`Prefetch` is not an option of consume; did you mean `prefetch`?'],
      ['queueName', (queue) => ({ queueName: queue }) as never, /^`queueName` is not an option of consume; its options are `queue`, `exchange`, /],
      [
        'durable (no near neighbour)',
        (queue) => ({ queue, durable: true }) as never,
        /^`durable` is not an option of consume; its options are .*`stuckAfterMs`, `inbox`$/,
      ],
      [
        'onFailure.table',
        (queue) => ({ queue, onFailure: { table: { dependancy: () => 'carrier' } } }) as never,
        '`dependancy` is not an option of onFailure.table; did you mean `dependency`?',
      ],
      ['alert', (queue) => ({ queue, alert: { parkedAbove: 0, evry: '1m' } }) as never, '`evry` is not an option of alert; did you mean `every`?'],
      [
        'alert without a known threshold',
        (queue) => ({ queue, alert: { parkedabove: 0 } }) as never,
        '`parkedabove` is not an option of alert; did you mean `parkedAbove`?',
      ],
      [
        'recovery',
        (queue) => ({ queue, recovery: { maxRetries: 3 } }) as never,
        /^`maxRetries` is not an option of recovery; its options are `initialDelayMs`, `maxDelayMs`, `maxAttempts`, `stepTimeoutMs`$/,
      ],
    ];
    it.each(cases)('%s', async (_label, make, message) => {
      const queue = testQueue();
      const rr = await connectClient();
      expectUnknownKey(await caught(rr.consume(make(queue), async () => undefined)), message);
      expect(await queueExists(queue)).toBe(false);
    });
  });

  describe('publish', () => {
    const cases: [string, PublishOptions, string | RegExp][] = [
      ['another case', { messageID: 'order-1' } as never, '`messageID` is not an option of publish; did you mean `messageId`?'],
      [
        'a typo',
        { correlationid: 'c', presistent: false } as never,
        '`correlationid` is not an option of publish; did you mean `correlationId`? (also not an option: `presistent`)',
      ],
      [
        'deliveryMode',
        { deliveryMode: 1 } as never,
        '`deliveryMode` is not an option of publish; use `persistent: false` for a transient message (delivery mode 1); messages are persistent by default',
      ],
      ['mandatory (no near neighbour)', { mandatory: false } as never, /^`mandatory` is not an option of publish; its options are `messageId`, /],
    ];
    it.each(cases)('%s: nothing is published', async (_label, options, message) => {
      const queue = extraQueue();
      await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
      const rr = await connectClient();
      expectUnknownKey(await caught(rr.publish('', queue, { orderId: 1 }, options)), message);
      expect(await queueDepth(queue)).toBe(0);
    });
  });

  describe('close', () => {
    it('of a consumer, and of the client, which stay open', async () => {
      const queue = testQueue();
      const rr = await connectClient();
      const consumer = await rr.consume({ queue }, async () => undefined);
      expectUnknownKey(await caught(consumer.close({ timeoutMS: 100 } as never)), '`timeoutMS` is not an option of close; did you mean `timeoutMs`?');
      expect(consumer.state).toBe('connected');
      expectUnknownKey(await caught(rr.close({ timeout: 100 } as never)), '`timeout` is not an option of close; did you mean `timeoutMs`?');
      expect(await rr.queueInfo(queue)).toMatchObject({ consumers: 1 });
    });
  });

  describe('parked', () => {
    it('peek, its filter, replay and its target; no message moves', async () => {
      const queue = testQueue();
      const rr = await connectClient();
      const parked = rr.parked(queue);
      await withChannel((ch) => ch.assertQueue(parked.name, { durable: true }));
      await rr.publish('', parked.name, { orderId: 1 }, { headers: { 'retry-reason': 'exhausted' } });
      expectUnknownKey(await caught(parked.peek({ limt: 5 } as never)), '`limt` is not an option of peek; did you mean `limit`?');
      expectUnknownKey(
        await caught(parked.peek({ filter: { reasons: 'exhausted' } } as never)),
        '`reasons` is not an option of peek filter; did you mean `reason`?',
      );
      expectUnknownKey(await caught(parked.replay({ ratePersec: 10 } as never)), '`ratePersec` is not an option of replay; did you mean `ratePerSec`?');
      expectUnknownKey(
        await caught(parked.replay({ to: { exchange: '', routing_key: queue } } as never)),
        '`routing_key` is not an option of replay to; did you mean `routingKey`?',
      );
      expectUnknownKey(
        await caught(parked.replay({ filter: { error: '503' } } as never)),
        /^`error` is not an option of replay filter; its options are `reason`, `errorName`, `errorMessage`, `headers`, `where`$/,
      );
      expect(await parked.count()).toBe(1);
      expect(await queueExists(queue)).toBe(false);
    });
  });
});

describe('a delay forced past its type', () => {
  it("'5 seconds' as onFailure.delays: INVALID_OPTIONS at run time, nothing declared", async () => {
    const queue = testQueue();
    const rr = await connectClient();
    const err = await caught(rr.consume({ queue, onFailure: { delays: ['5 seconds' as never] } }, async () => undefined));
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect(err).toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('"5 seconds" is not valid') });
    expect(await queueExists(queue)).toBe(false);
  });

  it("'5 seconds' as alert.every, and in retryQueueName", async () => {
    const queue = testQueue();
    const rr = await connectClient();
    const err = await caught(rr.consume({ queue, alert: { parkedAbove: 0, every: '5 seconds' as never } }, async () => undefined));
    expect(err).toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('"5 seconds" is not valid') });
    // The message names the option that was wrong, not onFailure.delays.
    expect((err as Error).message).toMatch(/^alert\.every: /);
    const sync = thrown(() => retryQueueName(queue, '5sec' as never));
    expect(sync).toBeInstanceOf(InvalidOptionsError);
    expect(sync).toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringContaining('"5sec" is not valid') });
    expect((sync as Error).message).toMatch(/^delay: /);
  });
});

describe('unknown options of the retry table methods', () => {
  let db: string;
  beforeAll(() => {
    db = createTestDatabase('keys');
  });
  afterAll(() => dropTestDatabase(db));

  it('pause, resume, isPaused, list and pauseWhen', async () => {
    const rr = await connectClient({ retryTable: { url: pgUrl(db), scheduler: false } });
    const table = rr.retryTable;
    expectUnknownKey(await caught(table.pause({ tenent: 'acme' } as never)), '`tenent` is not an option of pause; did you mean `tenant`?');
    expectUnknownKey(
      await caught(table.resume({ Dependency: 'carrier' } as never)),
      '`Dependency` is not an option of resume; did you mean `dependency`?',
    );
    expectUnknownKey(
      await caught(table.isPaused({ dependency: 'carrier', queue: 'q' } as never)),
      '`queue` is not an option of isPaused; its options are `dependency`, `tenant`, `errorName`',
    );
    expectUnknownKey(await caught(table.list({ limits: 5 } as never)), '`limits` is not an option of list; did you mean `limit`?');
    const err = thrown(() => table.pauseWhen('carrier', () => true, { failuresBeforePaused: 2 } as never));
    expectUnknownKey(err, '`failuresBeforePaused` is not an option of pauseWhen; did you mean `failuresBeforePause`?');
    expect(await table.isPaused({ tenant: 'acme' })).toBe(false);
    expect(psql('SELECT count(*) FROM rabbit_retry_pauses', db)).toBe('0');
  });
});
