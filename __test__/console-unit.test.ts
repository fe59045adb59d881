/**
 * The console's pure parts, without a broker: the fingerprint that groups
 * parked messages, the body as the page shows it, which queues a broker's
 * queue list makes work queues, and where the management API is.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import { fingerprint, normalizeMessage, userFrame } from '../lib/console/fingerprint';
import { bodyView } from '../lib/console/views';
import { managementTarget, mergeQueues, workQueuesOf } from '../lib/console/discovery';
import { SCRIPTS, STYLES } from '../lib/console/assets';
import { isLoopback } from '../lib/console/auth';
import { assetAt } from '../lib/console/page';

describe('normalizeMessage', () => {
  test.each([
    ['order 48213 has no address', 'order <n> has no address'],
    ['carrier timeout after 3000 ms for order 977', 'carrier timeout after <n> ms for order <n>'],
    ['no rate for ORD-48213 (tenant acme)', 'no rate for <id> (tenant acme)'],
    ['shipment o1 failed', 'shipment <id> failed'],
    ['user_42 is locked', '<id> is locked'],
    ['duplicate key E11000 on 507f1f77bcf86cd799439011', 'duplicate key <id> on <hex>'],
    ['bad pointer 0x7ffe3a2b', 'bad pointer <hex>'],
    ['digest 9f86d081884c7d65 does not match', 'digest <hex> does not match'],
    ['request 3f2504e0-4f89-11d3-9a0c-0305e82c3301 rejected', 'request <uuid> rejected'],
    ['not before 2024-06-01T10:00:00.000Z', 'not before <time>'],
    ['connect ECONNREFUSED 10.0.0.12:5432', 'connect ECONNREFUSED <n>:<n>'],
    ['rate 4294967 of 42949672960 refused', 'rate <n> of <n> refused'],
    ['  several \n lines\tand   spaces ', 'several lines and spaces'],
    ["Cannot read properties of undefined (reading 'rate')", "Cannot read properties of undefined (reading 'rate')"],
  ])('%j becomes %j', (input, expected) => {
    expect(normalizeMessage(input)).toBe(expected);
  });

  test('a long message is cut to 240 characters', () => {
    const out = normalizeMessage('x'.repeat(1000));
    expect(out).toHaveLength(240);
    expect(out.endsWith('…')).toBe(true);
  });
});

describe('userFrame', () => {
  const stack = [
    'Error: carrier timeout for order 12',
    '    at async Object.fetchRate (/srv/app/node_modules/carrier-sdk/dist/client.js:88:11)',
    '    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
    '    at async ShipmentConsumer.rateShipment [as handler] (/srv/app/dist/shipping/shipment.consumer.js:41:9)',
    '    at async Consumer.run (/srv/app/node_modules/rabbit-retry/dist/consumer.js:300:7)',
  ].join('\n');

  test("is the first frame of the application's code, without line and column", () => {
    expect(userFrame(stack)).toBe('ShipmentConsumer.rateShipment (dist/shipping/shipment.consumer.js)');
  });

  test('a handler function the consumer calls is named as the application wrote it', () => {
    expect(userFrame('Error: x\n    at Consumer.rateShipment [as handler] (/srv/app/src/ship.ts:3:9)')).toBe('rateShipment (app/src/ship.ts)');
    expect(userFrame('Error: x\n    at Router.route [as handle] (/srv/app/src/router.ts:3:9)')).toBe('Router.route (app/src/router.ts)');
  });

  test('reads frames without a function name, and file URLs', () => {
    expect(userFrame('Error: x\n    at file:///srv/app/src/jobs/run.mjs:10:3')).toBe('src/jobs/run.mjs');
    expect(userFrame('Error: x\n    at C:\\app\\src\\handler.js:3:1')).toBe('app/src/handler.js');
  });

  test("is '' without a stack or without a frame of the application", () => {
    expect(userFrame(undefined)).toBe('');
    expect(userFrame('Error: x')).toBe('');
    expect(userFrame('Error: x\n    at Array.map (<anonymous>)\n    at node:internal/timers:1:1')).toBe('');
  });
});

describe('fingerprint', () => {
  const at = (line: number) =>
    `Error\n    at rateShipment (/srv/app/src/shipping/rate.ts:${line}:7)\n    at Consumer.run (/srv/app/node_modules/rabbit-retry/dist/consumer.js:1:1)`;

  test('messages that differ only by numbers, ids and line numbers share a key', () => {
    const a = fingerprint({ errorName: 'Error', errorMessage: 'carrier timeout for order 48213', errorStack: at(40) });
    const b = fingerprint({ errorName: 'Error', errorMessage: 'carrier timeout for order 977', errorStack: at(52) });
    expect(a).toEqual(b);
    expect(a).toEqual({
      key: expect.stringMatching(/^[0-9a-f]{16}$/),
      errorName: 'Error',
      message: 'carrier timeout for order <n>',
      frame: 'rateShipment (src/shipping/rate.ts)',
    });
  });

  test('another error name, message or frame makes another key', () => {
    const base = { errorName: 'Error', errorMessage: 'carrier timeout for order 1', errorStack: at(1) };
    const keys = new Set([
      fingerprint(base).key,
      fingerprint({ ...base, errorName: 'TypeError' }).key,
      fingerprint({ ...base, errorMessage: 'order 1 has no address' }).key,
      fingerprint({ ...base, errorStack: 'Error\n    at quote (/srv/app/src/shipping/quote.ts:3:3)' }).key,
    ]);
    expect(keys.size).toBe(4);
  });

  test('a message without error headers groups as Error with an empty message', () => {
    expect(fingerprint({})).toMatchObject({ errorName: 'Error', message: '', frame: '' });
  });
});

describe('bodyView', () => {
  test('JSON is pretty-printed', () => {
    expect(bodyView(Buffer.from('{"order":1,"items":[2]}'), 'application/json')).toEqual({
      kind: 'json',
      text: '{\n  "order": 1,\n  "items": [\n    2\n  ]\n}',
      bytes: 23,
      truncated: false,
    });
  });

  test('text is text, markup included, as it is', () => {
    const html = '<img src=x onerror=alert(1)> hello';
    expect(bodyView(Buffer.from(html), 'text/html')).toEqual({ kind: 'text', text: html, bytes: Buffer.byteLength(html), truncated: false });
  });

  test('binary is a hex dump with offsets and printable characters', () => {
    const v = bodyView(Buffer.from([0x00, 0x01, 0x41, 0x42, 0xff]), undefined);
    expect(v.kind).toBe('hex');
    expect(v.text).toBe(`00000000  00 01 41 42 ff${' '.repeat(47 - 14)}  ..AB.`);
  });

  test('an empty body, and a large one cut', () => {
    expect(bodyView(Buffer.alloc(0), undefined)).toMatchObject({ kind: 'empty', bytes: 0 });
    const big = bodyView(Buffer.alloc(100_000, 'a'), 'text/plain');
    expect(big).toMatchObject({ kind: 'text', bytes: 100_000, truncated: true });
    expect(big.text.length).toBe(64 * 1024);
  });
});

describe('discovery', () => {
  test('a work queue is a queue with a parked queue beside it; its retry queues give its delays', () => {
    const names = [
      'orders',
      'orders.retry.5s',
      'orders.retry.1m',
      'orders.retry.later',
      'orders.parked',
      'plain',
      'audit.parked',
      'refunds',
      'refunds.parked',
      'refunds.retry.60s',
    ];
    expect(workQueuesOf(names)).toEqual([
      { queue: 'orders', delays: ['5s', '1m'] },
      { queue: 'refunds', delays: [] },
    ]);
  });

  test('each queue once, with every source that knows it', () => {
    expect(
      mergeQueues([
        { source: 'consumer', queues: [{ queue: 'a', delays: ['5s'] }] },
        {
          source: 'named',
          queues: [
            { queue: 'b', delays: ['1m'] },
            { queue: 'a', delays: ['1m'] },
          ],
        },
        { source: 'management', queues: [{ queue: 'a', delays: ['5s'] }] },
      ]),
    ).toEqual([
      { queue: 'a', delays: ['5s', '1m'], sources: ['consumer', 'named', 'management'] },
      { queue: 'b', delays: ['1m'], sources: ['named'] },
    ]);
  });

  test("the management API is on the broker's host, with its user, password and virtual host", () => {
    expect(managementTarget('amqp://ops:p%40ss@rabbit.internal:5672/billing')).toEqual({
      base: 'http://rabbit.internal:15672',
      vhost: 'billing',
      user: 'ops',
      password: 'p@ss',
    });
    expect(managementTarget('amqps://rabbit.internal')).toEqual({ base: 'https://rabbit.internal:15671', vhost: '/', user: 'guest', password: 'guest' });
    expect(managementTarget('amqp://ops:secret@h/', 'http://mgmt:8080/')).toEqual({
      base: 'http://mgmt:8080',
      vhost: '/',
      user: 'ops',
      password: 'secret',
    });
    expect(managementTarget('amqp://ops:secret@h/', 'http://admin:other@mgmt:8080')).toMatchObject({ user: 'admin', password: 'other' });
    expect(() => managementTarget('amqp://h', 'ftp://x')).toThrow(/http or https/);
  });

  test('only loopback addresses count as local', () => {
    expect(['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '10.0.0.5', '::', 'example.com'].some(isLoopback)).toBe(false);
  });
});

describe("the page's files", () => {
  test('every script module and style sheet of the page is served, and nothing else beside it', () => {
    const files = readdirSync(join(__dirname, '..', 'lib', 'console', 'assets'));
    const scripts = files.filter((f) => f.endsWith('.js'));
    const styles = files.filter((f) => f.endsWith('.css'));
    expect([...SCRIPTS].sort()).toEqual(scripts.sort());
    expect([...STYLES].sort()).toEqual(styles.sort());
    for (const name of [...scripts, ...styles]) expect(assetAt(`/${name}`)).toBe(name);
    // The page links every style sheet, in the order of STYLES.
    const page = readFileSync(join(__dirname, '..', 'lib', 'console', 'assets', 'index.html'), 'utf8');
    const linked = [...page.matchAll(/<link rel="stylesheet" href="([^"]+)"/g)].map((m) => m[1]);
    expect(linked).toEqual([...STYLES]);
    expect(assetAt('/index.html')).toBeUndefined();
    expect(assetAt('/api.js/x')).toBeUndefined();
    expect(assetAt('console.js')).toBeUndefined();
  });
});
