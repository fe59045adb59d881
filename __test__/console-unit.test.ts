/**
 * The console's pure parts, without a broker: the fingerprint that groups
 * parked messages, the body as the page shows it, which queues a broker's
 * queue list makes work queues, where the management API is, the failure
 * timeline's buckets, and the editor's starting point and review.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import { fingerprint, normalizeMessage, userFrame } from '../lib/console/fingerprint';
import { bodyView } from '../lib/console/views';
import { managementTarget, mergeQueues, workQueuesOf } from '../lib/console/discovery';
import { SCRIPTS, STYLES } from '../lib/console/assets';
import { isLoopback } from '../lib/console/auth';
import { assetAt } from '../lib/console/page';
import { timelineOf, timelinesOf } from '../lib/console/timeline';
import { editViewOf, minifyJson, prettyIsFaithful } from '../lib/console/edit-view';
import { checkJson, diffLines, folded, headerChanges } from '../lib/console/assets/diff.js';
import type { ParkedMessage } from '../lib';

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

describe('the failure timeline', () => {
  const now = Date.parse('2026-03-04T10:37:20.000Z');
  const at = (iso: string) => Date.parse(iso);

  test('per minute: 60 buckets ending with the minute of the reading, each message in the minute it parked, by group', () => {
    const t = timelineOf(
      [
        { key: 'a', at: at('2026-03-04T10:37:05.000Z') },
        { key: 'a', at: at('2026-03-04T10:37:59.999Z') },
        { key: 'b', at: at('2026-03-04T10:36:59.999Z') },
        { key: 'a', at: at('2026-03-04T09:38:00.000Z') },
        { key: 'b', at: at('2026-03-04T09:37:59.999Z') },
        { key: 'c', at: null },
        { key: 'c', at: Number.NaN },
      ],
      now,
      'minute',
    );
    expect(t).toMatchObject({
      resolution: 'minute',
      bucketMs: 60_000,
      buckets: 60,
      from: '2026-03-04T09:38:00.000Z',
      to: '2026-03-04T10:38:00.000Z',
      before: 1,
      undated: 2,
    });
    expect(t.groups.map((g) => [g.key, g.total])).toEqual([
      ['a', 3],
      ['b', 1],
    ]);
    const [a, b] = t.groups;
    expect(a.counts).toHaveLength(60);
    expect(a.counts[59]).toBe(2);
    expect(a.counts[0]).toBe(1);
    expect(b.counts[58]).toBe(1);
    expect(a.counts.reduce((x, y) => x + y, 0)).toBe(3);
  });

  test('per hour: 168 buckets, the last holding the hour of the reading; a message from a clock ahead counts in the last', () => {
    const t = timelineOf(
      [
        { key: 'x', at: at('2026-03-04T10:00:00.000Z') },
        { key: 'x', at: at('2026-03-04T10:59:00.000Z') },
        { key: 'x', at: at('2026-03-04T11:30:00.000Z') },
        { key: 'y', at: at('2026-02-25T11:00:00.000Z') },
        { key: 'y', at: at('2026-02-25T10:59:59.999Z') },
        { key: 'z', at: at('2026-03-03T10:15:00.000Z') },
      ],
      now,
      'hour',
    );
    expect(t).toMatchObject({ buckets: 168, from: '2026-02-25T11:00:00.000Z', to: '2026-03-04T11:00:00.000Z', before: 1, undated: 0 });
    const byKey = Object.fromEntries(t.groups.map((g) => [g.key, g.counts]));
    expect(byKey.x[167]).toBe(3);
    expect(byKey.y[0]).toBe(1);
    expect(byKey.z[167 - 24]).toBe(1);
    // Equal totals keep the order in which the groups were first seen.
    expect(t.groups.map((g) => g.key)).toEqual(['x', 'y', 'z']);
  });

  test('both resolutions of the same messages; nothing parked, no group', () => {
    const both = timelinesOf([{ key: 'a', at: now - 2 * 3_600_000 }], now);
    expect(both.minute.groups).toEqual([]);
    expect(both.minute.before).toBe(1);
    expect(both.hour.groups.map((g) => [g.key, g.counts[165]])).toEqual([['a', 1]]);
    expect(timelineOf([], now, 'minute')).toMatchObject({ groups: [], before: 0, undated: 0 });
  });
});

describe("the editor's starting point", () => {
  const message = (body: string, headers: Record<string, unknown> = {}, messageId: string | null = 'm1') =>
    ({ properties: { messageId: messageId ?? undefined }, headers, body: Buffer.from(body) }) as unknown as Pick<
      ParkedMessage,
      'properties' | 'headers' | 'body'
    >;
  const shown = (body: string, type?: string) => bodyView(Buffer.from(body), type);

  test('JSON loses nothing written again: the page edits the pretty text; the headers offered are the operator’s only', () => {
    const raw = '{"order":1,"qty":"two"}';
    const v = editViewOf(message(raw, { tenant: 'us', 'retry-attempt': 3, 'x-death': [], CC: ['a'] }), shown(raw));
    expect(v).toEqual({ editable: true, json: true, text: null, headers: { tenant: 'us' } });
  });

  test('JSON that writing again would change (a number past 2^53, an escape) is edited as it is', () => {
    for (const raw of ['{"id":12345678901234567890}', '{"name":"\\u00e9"}', '{"n":1.0}']) {
      expect(prettyIsFaithful(raw)).toBe(false);
      expect(editViewOf(message(raw), shown(raw))).toMatchObject({ editable: true, json: true, text: raw });
    }
    expect(prettyIsFaithful('{ "a" : [1, 2],\n "b": "x y" }')).toBe(true);
  });

  test('minifyJson drops the spaces between tokens, never inside a string', () => {
    expect(minifyJson('{\n  "a b": "c  d",\n  "e": [ 1, 2 ],\n  "f": "say \\"hi there\\""\n}')).toBe('{"a b":"c  d","e":[1,2],"f":"say \\"hi there\\""}');
    expect(minifyJson('{"id": 12345678901234567890}')).toBe('{"id":12345678901234567890}');
  });

  test('text is edited as text; binary, a body longer than the page shows, and a message without an id are not editable here', () => {
    expect(editViewOf(message('plain words'), shown('plain words'))).toMatchObject({ editable: true, json: false, text: null });
    expect(editViewOf(message('\u0000\u0001'), shown('\u0000\u0001'))).toMatchObject({
      editable: false,
      why: expect.stringContaining('binary') as unknown,
    });
    const big = 'a'.repeat(100_000);
    expect(editViewOf(message(big), shown(big))).toMatchObject({ editable: false, why: expect.stringContaining('longer') as unknown });
    expect(editViewOf(message('{}', {}, null), shown('{}'))).toMatchObject({
      editable: false,
      why: expect.stringContaining('no message id') as unknown,
    });
  });
});

describe("the edit's review", () => {
  test('a changed line shows as removed then added, the lines around it kept', () => {
    const before = '{\n  "order": 1,\n  "qty": "two",\n  "tenant": "us"\n}';
    const after = '{\n  "order": 1,\n  "qty": 2,\n  "tenant": "us"\n}';
    expect(diffLines(before, after)).toEqual([
      { op: 'same', text: '{' },
      { op: 'same', text: '  "order": 1,' },
      { op: 'del', text: '  "qty": "two",' },
      { op: 'add', text: '  "qty": 2,' },
      { op: 'same', text: '  "tenant": "us"' },
      { op: 'same', text: '}' },
    ]);
  });

  test('added and removed lines amid kept ones, and identical texts', () => {
    const ops = (a: string, b: string) => diffLines(a, b).map((l) => `${l.op} ${l.text}`);
    expect(ops('a\nb\nc\nd', 'a\nc\nx\nd\ne')).toEqual(['same a', 'del b', 'same c', 'add x', 'same d', 'add e']);
    expect(ops('same', 'same')).toEqual(['same same']);
    expect(ops('', 'new')).toEqual(['del ', 'add new']);
  });

  test('long runs of unchanged lines are folded to the lines next to a change', () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n');
    const after = before.replace('line 10', 'line ten');
    const shown = folded(diffLines(before, after), 2);
    expect(shown).toEqual([
      { op: 'fold', count: 8 },
      { op: 'same', text: 'line 8' },
      { op: 'same', text: 'line 9' },
      { op: 'del', text: 'line 10' },
      { op: 'add', text: 'line ten' },
      { op: 'same', text: 'line 11' },
      { op: 'same', text: 'line 12' },
      { op: 'fold', count: 7 },
    ]);
  });

  test('headers changed, added and left out, values compared as JSON', () => {
    expect(headerChanges({ tenant: 'us', stale: 'x', n: [1, 2], same: { a: 1 } }, { tenant: 'eu', n: [1, 2], same: { a: 1 }, carrier: 'dhl' })).toEqual([
      { name: 'tenant', op: 'changed', from: 'us', to: 'eu' },
      { name: 'stale', op: 'removed', from: 'x' },
      { name: 'carrier', op: 'added', to: 'dhl' },
    ]);
    expect(headerChanges({ a: 1 }, { a: 1 })).toEqual([]);
  });

  test('checkJson says why a text is not JSON', () => {
    expect(checkJson('{"a":1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(checkJson('{"a":1,}')).toMatchObject({ ok: false, error: expect.any(String) as unknown });
  });
});
