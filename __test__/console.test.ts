/**
 * The operators' console's server against the real broker (and PostgreSQL for
 * the retry table), through its HTTP API as the page uses it: what it shows,
 * what its actions do to the queues, and what it refuses. The page itself is
 * driven in a browser by console-browser.test.ts.
 */
import 'reflect-metadata';

import { type IncomingMessage, type Server, type ServerResponse, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

import { Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';

import { InvalidOptionsError, type Message, type RabbitRetry, parkedQueueName } from '../lib';
import {
  type ConsoleHandler,
  type ConsoleServer,
  type ConsoleState,
  type GroupsAnswer,
  type JobView,
  type MessageDetail,
  startConsole,
} from '../lib/console';
import { type CliIo, run } from '../lib/cli';
import { Consume, OnFailure, RabbitRetryConsoleModule, RabbitRetryModule } from '../lib/nestjs';
import { ConsoleApi, KIND_ERRORS, KINDS, parkThreeKinds } from './console-fixture';
import {
  AMQP_URL,
  BROKER,
  type ParkedSeed,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  drain,
  dropTestDatabase,
  extraQueue,
  pgUrl,
  psql,
  queueDepth,
  seedParked,
  startScript,
  testQueue,
  track,
  waitFor,
  withChannel,
} from './helpers';

const servers: ConsoleServer[] = [];
const httpServers: Server[] = [];
const apps: TestingModule[] = [];
const databases: string[] = [];

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  for (const s of httpServers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});

afterAll(async () => {
  await closeAmqp();
  for (const d of databases) dropTestDatabase(d);
});

async function serve(rr: RabbitRetry, options: Partial<Parameters<typeof startConsole>[0]> = {}): Promise<{ server: ConsoleServer; api: ConsoleApi }> {
  const server = await startConsole({ client: rr, port: 0, management: false, ...options });
  servers.push(server);
  return { server, api: await ConsoleApi.of(server.url) };
}

async function state(api: ConsoleApi): Promise<ConsoleState> {
  const r = await api.get<ConsoleState>('api/state');
  expect(r.status).toBe(200);
  return r.body;
}

async function groups(api: ConsoleApi, queue: string): Promise<GroupsAnswer> {
  const r = await api.get<GroupsAnswer>(`api/queues/${encodeURIComponent(queue)}/groups?refresh=1`);
  expect(r.status).toBe(200);
  return r.body;
}

/** Waits until job `id` has ended; returns it, and every `done` count seen on the way. */
async function waitJob(api: ConsoleApi, id: number, timeoutMs = 20_000): Promise<{ job: JobView; seen: number[] }> {
  const seen: number[] = [];
  let job: JobView | undefined;
  await waitFor(
    async () => {
      job = (await state(api)).jobs.find((j) => j.id === id);
      if (job) seen.push(job.done);
      return job !== undefined && job.state !== 'queued' && job.state !== 'running';
    },
    timeoutMs,
    `job ${id} to end`,
    50,
  );
  return { job: job as JobView, seen };
}

const ids = (ms: { properties: { messageId?: string } }[]) => ms.map((m) => m.properties.messageId);

/** `n` seeds m0..m(n-1); `extra` adds to each. */
function numbered(n: number, extra: (i: number) => Partial<ParkedSeed> = () => ({})): ParkedSeed[] {
  return Array.from({ length: n }, (_, i) => ({ body: { i }, messageId: `m${i}`, ...extra(i) }));
}

/** A request with a Host header of our choosing (fetch does not let one set it). */
function getWithHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('what the console shows', () => {
  test("the process's consumer's queue with its depths, and its 30 parked messages as three groups of 10, each with its reason, frame, failure times and an example; every message stays parked, in its order", async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const { consumer, ids: byKind } = await parkThreeKinds(rr, queue, 10);
    track(consumer);
    const before = ids(await rr.parked(queue).peek({ limit: 100 }));
    const { api } = await serve(rr);

    const st = await state(api);
    expect(st.broker).toBe(rr.url);
    expect(st.management).toEqual({ state: 'off', detail: 'not asked' });
    expect(st.queues).toEqual([
      {
        queue,
        sources: ['consumer'],
        work: { messages: 0, consumers: 1 },
        retry: [],
        // Retry queues, not the broker's delayed retry: no delayed count.
        brokerDelay: false,
        delayed: null,
        parkedQueue: parkedQueueName(queue),
        parked: 30,
        tableRows: null,
        busy: false,
      },
    ]);
    expect(st.table).toBeNull();

    const { grouping, busy } = await groups(api, queue);
    expect(busy).toBe(false);
    expect(grouping).toMatchObject({ queue, depth: 30, scanned: 30, scanLimit: 10_000, truncated: false });
    expect(grouping?.groups.map((g) => g.count)).toEqual([10, 10, 10]);
    for (const kind of KINDS) {
      const want = KIND_ERRORS[kind];
      const g = grouping?.groups.find((x) => x.errorName === want.errorName);
      expect(g).toMatchObject({ message: want.message, reasons: { [want.reason]: 10 }, count: 10 });
      expect(g?.frame).toMatch(/^rateShipment \(.*__test__\/console-fixture\.ts\)$/);
      expect(byKind[kind]).toContain(g?.example.messageId);
      expect(Date.parse(g?.firstFailedAt ?? '')).toBeLessThanOrEqual(Date.parse(g?.lastFailedAt ?? ''));
    }

    // Grouping read every message and gave each back, in its place.
    expect(await queueDepth(parkedQueueName(queue))).toBe(30);
    expect(ids(await drain(parkedQueueName(queue)))).toEqual(before);
  });

  test('reads no more than its bound, and says the queue holds more than it read', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(25));
    const { api } = await serve(rr, { queues: [queue], scanLimit: 10 });

    const st = await state(api);
    expect(st.queues.find((q) => q.queue === queue)).toMatchObject({ sources: ['named'], parked: 25, work: { messages: 0, consumers: 0 } });
    const { grouping } = await groups(api, queue);
    expect(grouping).toMatchObject({ depth: 25, scanned: 10, scanLimit: 10, truncated: true });
    expect(grouping?.groups).toHaveLength(1);
    expect(grouping?.groups[0]).toMatchObject({ count: 10, errorName: 'Error', message: 'boom', example: { messageId: 'm0' } });
    expect(ids(await drain(parkedQueueName(queue)))).toEqual(numbered(25).map((s) => s.messageId));
  });

  test('a group opens to its messages in full: body as pretty JSON, the whole stack, every header, where each stands in the queue', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const { consumer, ids: byKind } = await parkThreeKinds(rr, queue, 4);
    track(consumer);
    const { api } = await serve(rr);
    const { grouping } = await groups(api, queue);
    const address = grouping?.groups.find((g) => g.errorName === 'NonRetryableError');
    const r = await api.get<{ messages: MessageDetail[]; scanned: number; truncated: boolean }>(
      `api/queues/${encodeURIComponent(queue)}/groups/${address?.key}/messages?limit=20`,
    );
    expect(r.status).toBe(200);
    expect(r.body.truncated).toBe(false);
    const { messages } = r.body;
    expect(messages.map((m) => m.messageId).sort()).toEqual([...byKind.address].sort());
    const positions = messages.map((m) => m.position);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    for (const m of messages) {
      expect(m).toMatchObject({
        reason: 'non-retryable',
        errorName: 'NonRetryableError',
        correlationId: `checkout-${m.messageId?.slice('order-'.length)}`,
      });
      expect(m.body.kind).toBe('json');
      expect(JSON.parse(m.body.text)).toMatchObject({ kind: 'address' });
      expect(m.body.text).toContain('\n  "kind": "address"');
      expect(m.stack).toMatch(/^NonRetryableError: order \d+ has no address\n\s+at \S*rateShipment/);
      expect(m.headers['retry-reason']).toBe('non-retryable');
      expect(m.properties).toMatchObject({ contentType: 'application/json', messageId: m.messageId });
    }
    expect(await queueDepth(parkedQueueName(queue))).toBe(12);
  });
});

describe('what the console does', () => {
  test('purging a group deletes no more than the confirmed count, and the other messages stay parked in their order', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const seeds = numbered(12, (i) =>
      i % 2 === 0
        ? { errorMessage: `carrier timeout for order ${i}` }
        : { errorName: 'NonRetryableError', reason: 'non-retryable', errorMessage: `order ${i} has no address` },
    );
    await seedParked(queue, seeds);
    const { api } = await serve(rr, { queues: [queue] });
    const carrier = (await groups(api, queue)).grouping?.groups.find((g) => g.message === 'carrier timeout for order <n>');
    expect(carrier?.count).toBe(6);

    const started = await api.post<{ job: JobView }>(`api/queues/${encodeURIComponent(queue)}/purge`, { scope: 'group', key: carrier?.key, count: 4 });
    expect(started.status).toBe(202);
    expect(started.body.job).toMatchObject({ kind: 'purge', scope: 'group', total: 4, label: 'Error: carrier timeout for order <n>' });
    const { job } = await waitJob(api, started.body.job.id);
    expect(job).toMatchObject({ state: 'done', done: 4, byGroup: { [carrier?.key as string]: 4 }, error: null });

    const left = ids(await drain(parkedQueueName(queue)));
    expect(left).toEqual(['m1', 'm3', 'm5', 'm7', 'm8', 'm9', 'm10', 'm11']);
  });

  test('replaying one message sends it to its work queue with retry-attempt 0 and retry-replayed-at; the others stay parked in their order', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(5));
    const { api } = await serve(rr, { queues: [queue] });
    const g = (await groups(api, queue)).grouping?.groups[0];
    const { body } = await api.get<{ messages: MessageDetail[] }>(`api/queues/${encodeURIComponent(queue)}/groups/${g?.key}/messages`);
    const m2 = body.messages.find((m) => m.messageId === 'm2');

    const started = await api.post<{ job: JobView }>(`api/queues/${encodeURIComponent(queue)}/replay`, {
      scope: 'message',
      key: m2?.key,
      count: 1,
      ratePerSec: 50,
    });
    expect(started.status).toBe(202);
    expect((await waitJob(api, started.body.job.id)).job).toMatchObject({ state: 'done', done: 1 });

    const work = await drain(queue);
    expect(ids(work)).toEqual(['m2']);
    expect(work[0].headers['retry-attempt']).toBe(0);
    expect(typeof work[0].headers['retry-replayed-at']).toBe('string');
    expect(work[0].headers['retry-reason']).toBe('exhausted');
    expect(ids(await drain(parkedQueueName(queue)))).toEqual(['m0', 'm1', 'm3', 'm4']);
  });

  test('a group replays in the server at the rate set, its progress counting up; the handler completes each, and the other groups stay parked', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const { consumer, succeeded, ids: byKind } = await parkThreeKinds(rr, queue, 10);
    track(consumer);
    const { api } = await serve(rr);
    const tax = (await groups(api, queue)).grouping?.groups.find((g) => g.errorName === 'TypeError');

    const t0 = Date.now();
    const started = await api.post<{ job: JobView }>(`api/queues/${encodeURIComponent(queue)}/replay`, {
      scope: 'group',
      key: tax?.key,
      count: 10,
      ratePerSec: 10,
    });
    expect(started.status).toBe(202);
    const { job, seen } = await waitJob(api, started.body.job.id);
    expect(job).toMatchObject({ state: 'done', done: 10, total: 10, ratePerSec: 10, byGroup: { [tax?.key as string]: 10 } });
    // 10 a second: the tenth publish is due 0.9 s after the first.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(seen.some((d) => d > 0 && d < 10)).toBe(true);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);

    await waitFor(() => succeeded.length === 10, 10_000, 'the replayed messages to be handled');
    expect([...succeeded].sort()).toEqual([...byKind.tax].sort());
    expect(await queueDepth(parkedQueueName(queue))).toBe(20);
    const after = (await groups(api, queue)).grouping;
    expect(after?.groups.map((g) => [g.errorName, g.count])).toEqual([
      ['Error', 10],
      ['NonRetryableError', 10],
    ]);
  });

  test('a stopped replay leaves what it had not moved parked, in order: nothing is lost', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(20));
    const { api } = await serve(rr, { queues: [queue] });
    const started = await api.post<{ job: JobView }>(`api/queues/${encodeURIComponent(queue)}/replay`, { scope: 'queue', count: 20, ratePerSec: 5 });
    await waitFor(async () => ((await state(api)).jobs[0]?.done ?? 0) >= 2, 10_000, 'two replayed');
    expect((await api.post<{ stopped: boolean }>(`api/jobs/${started.body.job.id}/stop`, {})).body).toEqual({ stopped: true });
    const { job } = await waitJob(api, started.body.job.id);
    expect(job.state).toBe('stopped');
    expect(job.done).toBeGreaterThanOrEqual(2);
    expect(job.done).toBeLessThan(20);

    const work = ids(await drain(queue));
    const parked = ids(await drain(parkedQueueName(queue)));
    expect(work).toHaveLength(job.done);
    expect([...work, ...parked]).toEqual(numbered(20).map((s) => s.messageId));
  });

  test('refuses an action without a confirmed count or with an unknown scope, and a queue it does not know', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(2));
    const { api } = await serve(rr, { queues: [queue] });
    const key = (await groups(api, queue)).grouping?.groups[0].key;
    const q = encodeURIComponent(queue);
    expect(await api.post(`api/queues/${q}/purge`, { scope: 'group', key })).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    expect(await api.post(`api/queues/${q}/purge`, { scope: 'queue', count: 2 })).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    expect(await api.post(`api/queues/${q}/replay`, { scope: 'group', key, count: 2, ratePerSec: 0 })).toMatchObject({ status: 400 });
    expect(await api.post(`api/queues/not-a-queue-of-ours/replay`, { scope: 'queue', count: 1 })).toMatchObject({
      status: 404,
      body: { error: { code: 'NOT_FOUND' } },
    });
    expect(await api.post(`api/table/pause`, { dependency: 'carrier' })).toMatchObject({ status: 404, body: { error: { code: 'NO_RETRY_TABLE' } } });
    expect(await queueDepth(parkedQueueName(queue))).toBe(2);
  });
});

describe('safety', () => {
  test('every API request needs the token in its header; the page carries one only when none was given', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(1));
    const { server, api } = await serve(rr, { queues: [queue] });
    expect(api.token).toMatch(/^[0-9a-f]{48}$/);
    expect(server.console.tokenRequired).toBe(false);
    const anonymous = new ConsoleApi(server.url, undefined);
    const wrong = new ConsoleApi(server.url, 'not-the-token');
    for (const client of [anonymous, wrong]) {
      expect(await client.get('api/state')).toMatchObject({ status: 401, body: { error: { code: 'UNAUTHORIZED' } } });
      expect(await client.post(`api/queues/${encodeURIComponent(queue)}/replay`, { scope: 'queue', count: 1 })).toMatchObject({ status: 401 });
    }
    // A form post (no JSON content type) cannot act either.
    const form = await fetch(`${server.url}api/queues/${encodeURIComponent(queue)}/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-rabbit-retry-token': api.token as string },
      body: 'scope=queue&count=1',
    });
    expect(form.status).toBe(400);
    expect(await queueDepth(parkedQueueName(queue))).toBe(1);

    const page = await fetch(server.url);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');

    const given = await serve(rr, { queues: [queue], token: 'tok-3d1f' });
    expect(given.server.console.tokenRequired).toBe(true);
    expect(await ConsoleApi.pageToken(given.server.url)).toBeUndefined();
    expect((await new ConsoleApi(given.server.url, 'tok-3d1f').get('api/state')).status).toBe(200);
    expect((await new ConsoleApi(given.server.url, undefined).get('api/state')).status).toBe(401);
  });

  test('listens on another address than the loopback only with a token; on the loopback it answers only to loopback host names', async () => {
    const rr = await connectClient();
    await expect(startConsole({ client: rr, host: '0.0.0.0', port: 0 })).rejects.toThrow(InvalidOptionsError);
    await expect(startConsole({ client: rr, host: '0.0.0.0', port: 0 })).rejects.toThrow(/needs a token/);
    const open = await startConsole({ client: rr, host: '0.0.0.0', port: 0, token: 'tok-0a9b-5c7e-41d2', management: false });
    servers.push(open);
    expect(open.url).toMatch(/^http:\/\/0\.0\.0\.0:\d+\/$/);
    const port = new URL(open.url).port;
    expect((await new ConsoleApi(`http://127.0.0.1:${port}/`, 'tok-0a9b-5c7e-41d2').get('api/state')).status).toBe(200);

    const { server } = await serve(rr);
    expect(await getWithHost(server.url, new URL(server.url).host)).toBe(200);
    expect(await getWithHost(server.url, `localhost:${new URL(server.url).port}`)).toBe(200);
    expect(await getWithHost(server.url, `attacker.example:${new URL(server.url).port}`)).toBe(403);
  });

  test("the broker's and the management API's passwords never reach the page; the management API's queues are listed", async () => {
    const rr = await connectClient();
    const listed = testQueue();
    await seedParked(listed, numbered(2));
    const seenAuth: string[] = [];
    const fake = createServer((req, res) => {
      seenAuth.push(String(req.headers.authorization));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify([{ name: listed }, { name: `${listed}.parked` }, { name: 'unrelated' }]));
    });
    httpServers.push(fake);
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    const mgmt = `http://ops:s3cr3t-mgmt-pw@127.0.0.1:${(fake.address() as AddressInfo).port}`;
    const { server, api } = await serve(rr, { management: mgmt });

    const st = await state(api);
    expect(seenAuth[0]).toBe(`Basic ${Buffer.from('ops:s3cr3t-mgmt-pw').toString('base64')}`);
    expect(st.management).toEqual({ state: 'ok', detail: `http://127.0.0.1:${(fake.address() as AddressInfo).port}: 3 queue(s) in vhost '/'` });
    expect(st.queues).toEqual([expect.objectContaining({ queue: listed, sources: ['management'], parked: 2 })]);
    const texts = [
      JSON.stringify(st),
      JSON.stringify(await groups(api, listed)),
      await (await fetch(server.url)).text(),
      await (await fetch(`${server.url}console.js`)).text(),
    ];
    for (const t of texts) {
      expect(t).not.toContain('s3cr3t-mgmt-pw');
      expect(t).not.toContain('guest:guest');
    }
  });

  test('without the management API the page says why, and still lists the queues it was told', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(1));
    // A port nothing listens on.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const { api } = await serve(rr, { queues: [queue], management: `http://admin:pw-not-shown@127.0.0.1:${port}` });
    const st = await state(api);
    expect(st.management).toEqual({ state: 'unavailable', detail: `http://127.0.0.1:${port}: ECONNREFUSED` });
    expect(JSON.stringify(st)).not.toContain('pw-not-shown');
    expect(st.queues.map((q) => q.queue)).toEqual([queue]);
  });
});

describe('the retry table', () => {
  test('shows rows by dependency with paused, held and due counts; pauses, resumes and retries a dependency now', async () => {
    const db = createTestDatabase('console');
    databases.push(db);
    const rr = await connectClient({ retryTable: { url: pgUrl(db), scheduler: false } });
    const queue = testQueue();
    const consumer = track(
      await rr.consume(
        {
          queue,
          onFailure: {
            delays: [],
            table: {
              dependency: (_err, msg) => msg.json<{ dep: string }>().dep,
              nextAttemptAt: (_err) => null,
            },
          },
        },
        async (msg: Message) => {
          throw new Error(`${msg.json<{ dep: string }>().dep} is down`);
        },
      ),
    );
    for (let i = 0; i < 5; i++) await rr.publish('', queue, { dep: i < 3 ? 'carrier-api' : 'tax-api' }, { messageId: `t${i}` });
    await waitFor(() => consumer.stats().stored === 5, 10_000, '5 rows');
    const { api } = await serve(rr);

    const deps = async () => {
      const t = (await state(api)).table;
      return Object.fromEntries((t?.dependencies ?? []).map((d) => [d.dependency, d]));
    };
    let st = await state(api);
    expect(st.table).toMatchObject({ rows: 5, held: 5, paused: 0, due: 0, read: 5, truncated: false, byQueue: { [queue]: 5 } });
    expect(st.queues.find((q) => q.queue === queue)?.tableRows).toBe(5);
    expect(await deps()).toEqual({
      'carrier-api': { dependency: 'carrier-api', rows: 3, paused: 0, held: 3, due: 0, pauseInForce: false },
      'tax-api': { dependency: 'tax-api', rows: 2, paused: 0, held: 2, due: 0, pauseInForce: false },
    });

    expect((await api.post('api/table/pause', { dependency: 'carrier-api' })).body).toEqual({ rows: 3 });
    expect((await deps())['carrier-api']).toMatchObject({ paused: 3, pauseInForce: true });
    expect((await api.post('api/table/resume', { dependency: 'carrier-api' })).body).toEqual({ rows: 3 });
    expect((await deps())['carrier-api']).toMatchObject({ paused: 0, held: 0, due: 3, pauseInForce: false });
    expect((await api.post('api/table/retry-now', { dependency: 'tax-api' })).body).toEqual({ rows: 2 });
    expect((await deps())['tax-api']).toMatchObject({ held: 0, due: 2 });
    st = await state(api);
    expect(st.table).toMatchObject({ rows: 5, held: 0, due: 5 });
    const row = st.table?.oldest[0];
    expect(row).toMatchObject({ queue, messageId: 't0', dependency: 'carrier-api' });
    expect((await api.post('api/table/retry-now', { id: row?.id })).body).toEqual({ rows: 1 });
  });
});

describe('the outbox', () => {
  /** A test database of its own (the client's connection creates the outbox's tables). */
  function outboxDatabase(): string {
    const db = createTestDatabase('console');
    databases.push(db);
    return db;
  }

  /** Writes `n` rows for `queue` a minute ago, the first `parked` of them parked as unroutable. */
  function writeRows(db: string, queue: string, n: number, parked: number): void {
    psql(
      `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, created_at, parked_at, park_reason, last_error)
       SELECT '', '${queue}', convert_to('m' || i, 'UTF8'), jsonb_build_object('messageId', 'm' || i), now() - interval '1 minute',
              CASE WHEN i <= ${parked} THEN now() END, CASE WHEN i <= ${parked} THEN 'unroutable' END,
              CASE WHEN i <= ${parked} THEN 'no queue is bound to <b>${queue}</b>' END
       FROM generate_series(1, ${n}) i`,
      db,
    );
  }

  test('shows the backlog, the parked rows with their reason and each consumer’s inbox duplicates; parked rows are put back or deleted', async () => {
    const queue = extraQueue();
    const db = outboxDatabase();
    const rr = await connectClient({ outbox: { url: pgUrl(db), relay: false } });
    const { api } = await serve(rr);
    expect((await state(api)).outbox).toMatchObject({ pending: 0, parked: 0, oldestPendingAgeMs: 0, published: 0, parkedRows: [], inboxDuplicates: [] });

    writeRows(db, queue, 5, 2);
    psql("INSERT INTO rabbit_retry_inbox_duplicates (consumer, n) VALUES ('billing', 7), ('shipping', 2)", db);
    // The console reuses a reading for a second.
    await waitFor(async () => (await state(api)).outbox?.pending === 3, 5000, 'the rows written');
    let st = await state(api);
    expect(st.outboxError).toBeNull();
    expect(st.outbox).toMatchObject({ pending: 3, parked: 2, published: 0, parkedByRelay: 0, parkedByReason: { unroutable: 2 }, truncated: false });
    expect(st.outbox?.oldestPendingAgeMs).toBeGreaterThanOrEqual(60_000);
    expect(st.outbox?.parkedRows.map((r) => [r.messageId, r.routingKey, r.parkReason, r.lastError])).toEqual([
      ['m1', queue, 'unroutable', `no queue is bound to <b>${queue}</b>`],
      ['m2', queue, 'unroutable', `no queue is bound to <b>${queue}</b>`],
    ]);
    expect(st.outbox?.inboxDuplicates.map((d) => [d.consumer, d.duplicates]).sort()).toEqual([
      ['billing', 7],
      ['shipping', 2],
    ]);

    const [first, second] = st.outbox?.parkedRows.map((r) => r.id) ?? [];
    expect((await api.post('api/outbox/retry', { ids: [first] })).body).toEqual({ rows: 1 });
    expect((await api.post('api/outbox/delete', { ids: [second] })).body).toEqual({ rows: 1 });
    st = await state(api);
    expect(st.outbox).toMatchObject({ pending: 4, parked: 0, parkedRows: [] });
    expect(psql(`SELECT string_agg(properties->>'messageId', ',' ORDER BY id) FROM rabbit_retry_outbox WHERE parked_at IS NULL`, db)).toBe('m1,m3,m4,m5');
    // A row no longer parked counts for nothing, and a body without ids is refused.
    expect((await api.post('api/outbox/delete', { ids: [first] })).body).toEqual({ rows: 0 });
    for (const body of [{}, { ids: [] }, { ids: ['1'] }, { ids: [0] }]) {
      expect(await api.post('api/outbox/retry', body)).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    }
    expect((await api.get('api/outbox/retry')).status).toBe(405);
    expect(Number(psql('SELECT count(*) FROM rabbit_retry_outbox', db))).toBe(4);
  });

  test("with its relay on, the relay's published count; without an outbox the state has none and its actions answer NO_OUTBOX", async () => {
    const queue = extraQueue();
    await withChannel(async (ch) => {
      await ch.assertQueue(queue, { durable: true });
    });
    const db = outboxDatabase();
    const rr = await connectClient({ outbox: { url: pgUrl(db) } });
    const { api } = await serve(rr);
    writeRows(db, queue, 4, 0);
    await waitFor(async () => (await state(api)).outbox?.published === 4, 20_000, 'four rows published');
    await waitFor(async () => (await queueDepth(queue)) === 4, 5000, 'four messages in the queue');
    expect((await state(api)).outbox).toMatchObject({ pending: 0, parked: 0, oldestPendingAgeMs: 0, published: 4 });

    const plain = await connectClient();
    const { api: without } = await serve(plain);
    const st = await state(without);
    expect({ outbox: st.outbox, outboxError: st.outboxError }).toEqual({ outbox: null, outboxError: null });
    expect(await without.post('api/outbox/delete', { ids: [1] })).toMatchObject({ status: 404, body: { error: { code: 'NO_OUTBOX' } } });
  });
});

describe('mounted in a service', () => {
  test('RabbitRetryConsoleModule serves the console under its path on the application’s HTTP server, with the queues of its @Consume handlers', async () => {
    const queue = testQueue();
    @Injectable()
    class Shipments {
      @Consume({ queue })
      @OnFailure({ delays: ['5s'] })
      async handle(): Promise<void> {
        throw new Error('carrier down');
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL }), RabbitRetryConsoleModule.forRoot({ path: 'ops/rabbit-retry/', management: false })],
      providers: [Shipments],
    }).compile();
    apps.push(moduleRef);
    const mounted: { path: string; handler: ConsoleHandler }[] = [];
    const adapterHost = moduleRef.get(HttpAdapterHost);
    adapterHost.httpAdapter = {
      use: (p: string, h: ConsoleHandler) => mounted.push({ path: p, handler: h }),
    } as unknown as typeof adapterHost.httpAdapter;
    await moduleRef.init();
    expect(mounted.map((m) => m.path)).toEqual(['/ops/rabbit-retry']);

    // An Express-like mount: the request keeps its full path in originalUrl, url without the mount path.
    const http = createServer((req: IncomingMessage, res: ServerResponse) => {
      const full = req.url ?? '/';
      if (!full.startsWith('/ops/rabbit-retry')) {
        res.writeHead(404);
        res.end();
        return;
      }
      Object.assign(req, { originalUrl: full, url: full.slice('/ops/rabbit-retry'.length) || '/' });
      mounted[0].handler(req, res);
    });
    httpServers.push(http);
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const root = `http://127.0.0.1:${(http.address() as AddressInfo).port}/ops/rabbit-retry`;

    const bare = await fetch(root, { redirect: 'manual' });
    expect(bare.status).toBe(308);
    expect(bare.headers.get('location')).toBe('/ops/rabbit-retry/');
    const api = await ConsoleApi.of(`${root}/`);
    expect(api.token).toBeDefined();
    const html = await (await fetch(`${root}/`)).text();
    expect(html).toContain('<script type="module" src="/ops/rabbit-retry/console.js"></script>');
    expect((await fetch(`${root}/console.js`)).status).toBe(200);
    // The modules it imports, named from beside it.
    expect((await fetch(`${root}/render.js`)).status).toBe(200);
    // Both style sheets, named from the mount path.
    expect(html).toContain('<link rel="stylesheet" href="/ops/rabbit-retry/tables.css" />');
    expect((await fetch(`${root}/tables.css`)).status).toBe(200);
    const st = await state(api);
    expect(st.queues).toEqual([expect.objectContaining({ queue, sources: ['consumer'], parked: 0, work: { messages: 0, consumers: 1 } })]);
    expect(st.queues[0].retry).toEqual([{ delay: '5s', queue: `${queue}.retry.5s`, messages: 0 }]);
  });
});

describe('rabbit-retry ui', () => {
  async function cli(argv: string[], env: Record<string, string | undefined> = { AMQP_URL }): Promise<{ code: number; out: string; err: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const io: CliIo = { out: (t) => out.push(t), err: (t) => err.push(t), isTTY: false, env };
    const code = await run(argv, io);
    return { code, out: out.join('\n'), err: err.join('') };
  }

  test('refuses another address than the loopback without a token, and a bad port', async () => {
    const r = await cli(['ui', '--host', '0.0.0.0']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('listening on 0.0.0.0 needs a token: --token <token> or RABBIT_RETRY_UI_TOKEN');
    expect((await cli(['ui', '--port', '70000'])).code).toBe(2);
    expect((await cli(['ui', 'q', '--delays', '5x'])).code).toBe(2);
  });

  test('serves the console for the queues named until SIGINT', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(3));
    const ui = startScript('lib/cli/index.ts', ['ui', queue, '--port', '0', '--no-management']);
    try {
      // Two lines: the URL, then the broker and the queues (each its own write).
      await waitFor(
        () => /rabbit-retry console on (http:\S+)/.test(ui.stdout()) && ui.stdout().includes('; queues '),
        20_000,
        `the console's URL (stderr: ${ui.stderr()})`,
      );
      const url = /rabbit-retry console on (http:\S+)/.exec(ui.stdout())?.[1] as string;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect(ui.stdout()).toContain(`broker amqp://guest:***@${BROKER.hostPort}; queues ${queue}`);
      const api = await ConsoleApi.of(url);
      const st = await state(api);
      expect(st.queues).toEqual([expect.objectContaining({ queue, sources: ['named'], parked: 3 })]);
      expect((await groups(api, queue)).grouping?.groups[0].count).toBe(3);
    } finally {
      ui.child.kill('SIGINT');
    }
    expect((await ui.exited).code).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(3);
  }, 60_000);
});
