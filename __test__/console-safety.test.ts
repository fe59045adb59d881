/**
 * The console's safety wherever it is served (its own server, a handler
 * mounted in a service, the NestJS module): which `Host` and `Origin` it
 * answers, for its replays and its edits alike, which tokens it takes beyond the loopback; and how fast a replay
 * stops, from the page, on `close()` and on SIGTERM to `rabbit-retry ui`,
 * with what it had not moved still parked.
 */
import 'reflect-metadata';

import { type IncomingMessage, type Server, type ServerResponse, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

import { HttpAdapterHost } from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';

import { InvalidOptionsError, type RabbitRetry, parkedQueueName } from '../lib';
import { type CliIo, run } from '../lib/cli';
import {
  type ConsoleHandler,
  type ConsoleOptions,
  type ConsoleServer,
  type GroupsAnswer,
  type JobView,
  type MessageDetail,
  RabbitRetryConsole,
  startConsole,
} from '../lib/console';
import { RabbitRetryConsoleModule, RabbitRetryModule } from '../lib/nestjs';
import { ConsoleApi } from './console-fixture';
import { AMQP_URL, cleanup, closeAmqp, connectClient, drain, queueDepth, seedParked, startScript, testQueue, waitFor } from './helpers';

/** A token long enough for a console that answers beyond the loopback. */
const TOKEN = 'c0nsole-t0ken-7f3a9e21';

const servers: ConsoleServer[] = [];
const httpServers: Server[] = [];
const consoles: RabbitRetryConsole[] = [];
const apps: TestingModule[] = [];

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  for (const c of consoles.splice(0)) await c.close();
  for (const s of httpServers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});

afterAll(async () => {
  await closeAmqp();
});

/** What an HTTP request answered: its status and its JSON body (when it has one). */
interface Reply {
  status: number;
  body: { error?: { code: string; message: string } } & Record<string, unknown>;
}

/** A request to `url` with the headers of our choosing (`fetch` does not let one set `Host`). */
function send(url: string, o: { method?: string; host?: string; origin?: string; token?: string; body?: unknown } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const data = o.body === undefined ? undefined : Buffer.from(JSON.stringify(o.body));
    const headers: Record<string, string> = {};
    if (o.host !== undefined) headers.host = o.host;
    if (o.origin !== undefined) headers.origin = o.origin;
    if (o.token !== undefined) headers['x-rabbit-retry-token'] = o.token;
    if (data) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(data.length);
    }
    const req = request(url, { method: o.method ?? 'GET', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: Reply['body'] = {};
        if (String(res.headers['content-type']).startsWith('application/json')) body = JSON.parse(text) as Reply['body'];
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** A console mounted on a bare `http.Server` of the test's on 127.0.0.1, as a service would mount it. */
async function mounted(rr: RabbitRetry, options: Omit<ConsoleOptions, 'client'> = {}): Promise<{ ui: RabbitRetryConsole; url: string; port: number }> {
  const ui = new RabbitRetryConsole({ client: rr, management: false, ...options });
  consoles.push(ui);
  const http = createServer((req: IncomingMessage, res: ServerResponse) => ui.handle(req, res));
  httpServers.push(http);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as AddressInfo).port;
  return { ui, url: `http://127.0.0.1:${port}/`, port };
}

/** `n` parked seeds m0..m(n-1). */
function numbered(n: number): { body: { i: number }; messageId: string }[] {
  return Array.from({ length: n }, (_, i) => ({ body: { i }, messageId: `m${i}` }));
}

const ids = (ms: { properties: { messageId?: string } }[]) => ms.map((m) => m.properties.messageId);

/** Job `id` as the console's state shows it. */
async function jobOf(api: ConsoleApi, id: number): Promise<JobView | undefined> {
  const r = await api.get<{ jobs: JobView[] }>('api/state');
  return r.body.jobs.find((j) => j.id === id);
}

/** Starts a replay of every parked message of `queue` at `ratePerSec`, and waits until it has moved its first. */
async function slowReplay(api: ConsoleApi, queue: string, count: number, ratePerSec: number): Promise<JobView> {
  const started = await api.post<{ job: JobView }>(`api/queues/${encodeURIComponent(queue)}/replay`, { scope: 'queue', count, ratePerSec });
  expect(started.status).toBe(202);
  const id = started.body.job.id;
  await waitFor(async () => ((await jobOf(api, id))?.done ?? 0) >= 1, 10_000, 'the first message replayed', 20);
  const job = (await jobOf(api, id)) as JobView;
  // The next one is due seconds later: the stop lands in the wait.
  expect(job).toMatchObject({ state: 'running', done: 1 });
  return job;
}

/** The console's key of parked message `messageId` of `queue` (its group read as the page reads it). */
async function keyOf(api: ConsoleApi, queue: string, messageId: string): Promise<string> {
  const q = encodeURIComponent(queue);
  const groups = await api.get<GroupsAnswer>(`api/queues/${q}/groups?refresh=1`);
  for (const g of groups.body.grouping?.groups ?? []) {
    const r = await api.get<{ messages: MessageDetail[] }>(`api/queues/${q}/groups/${g.key}/messages`);
    const m = r.body.messages.find((x) => x.messageId === messageId);
    if (m) return m.key;
  }
  throw new Error(`no parked message ${messageId} in ${queue}`);
}

/** Every message of `queue`'s work and parked queues, by id: each of the `n` seeded once, the parked ones still in order. */
async function everyMessageOnce(queue: string, n: number): Promise<{ work: string[]; parked: string[] }> {
  const work = ids(await drain(queue)) as string[];
  const parked = ids(await drain(parkedQueueName(queue))) as string[];
  expect([...work, ...parked].sort()).toEqual(
    numbered(n)
      .map((s) => s.messageId)
      .sort(),
  );
  expect(parked).toEqual(
    numbered(n)
      .map((s) => s.messageId)
      .filter((m) => !work.includes(m)),
  );
  return { work, parked };
}

describe('which requests the console answers', () => {
  test('a mounted handler answers only the loopback by default: a foreign Host gets 403 FORBIDDEN_HOST, the token notwithstanding', async () => {
    const rr = await connectClient();
    const { url, port } = await mounted(rr, { token: TOKEN });
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, 'localhost', `LOCALHOST:${port}`]) {
      expect({ host, status: (await send(url, { host })).status }).toEqual({ host, status: 200 });
    }
    expect((await send(`${url}api/state`, { host: `localhost:${port}`, token: TOKEN })).status).toBe(200);
    for (const host of [`attacker.example:${port}`, 'attacker.example', `127.0.0.1.attacker.example:${port}`, `10.0.0.5:${port}`]) {
      const page = await send(url, { host });
      expect({ host, status: page.status, code: page.body.error?.code }).toEqual({ host, status: 403, code: 'FORBIDDEN_HOST' });
      const api = await send(`${url}api/state`, { host, token: TOKEN });
      expect({ host, status: api.status, code: api.body.error?.code }).toEqual({ host, status: 403, code: 'FORBIDDEN_HOST' });
    }
  });

  test('allowedHosts widens it: a name answers on any port, a name with a port on that port only, and the loopback still answers', async () => {
    const rr = await connectClient();
    const { url, port } = await mounted(rr, { token: TOKEN, allowedHosts: ['ops.example.com', 'Console.Example.net:8443', 'fd00::5'] });
    const status = async (host: string) => (await send(`${url}api/state`, { host, token: TOKEN })).status;
    expect(await status('ops.example.com')).toBe(200);
    expect(await status(`ops.example.com:${port}`)).toBe(200);
    expect(await status('console.example.net:8443')).toBe(200);
    expect(await status('[fd00::5]:8080')).toBe(200);
    expect(await status(`127.0.0.1:${port}`)).toBe(200);
    expect(await status('console.example.net:8080')).toBe(403);
    expect(await status('sub.ops.example.com')).toBe(403);
    expect(await status('evil.example')).toBe(403);
    expect(() => new RabbitRetryConsole({ client: rr, allowedHosts: ['https://ops.example.com/'], token: TOKEN })).toThrow(
      /allowedHosts: "https:\/\/ops.example.com\/" is not a host name/,
    );
  });

  test('the CLI’s console has the same rules: it answers the loopback and its allowedHosts, nothing else, on every address it listens on', async () => {
    const rr = await connectClient();
    const server = await startConsole({ client: rr, port: 0, management: false, allowedHosts: ['ops.example.com'], token: TOKEN });
    servers.push(server);
    const port = new URL(server.url).port;
    expect((await send(`${server.url}api/state`, { token: TOKEN })).status).toBe(200);
    expect((await send(`${server.url}api/state`, { host: `ops.example.com:${port}`, token: TOKEN })).status).toBe(200);
    expect(await send(`${server.url}api/state`, { host: `attacker.example:${port}`, token: TOKEN })).toMatchObject({
      status: 403,
      body: { error: { code: 'FORBIDDEN_HOST' } },
    });

    // On every address, it answers the names it was given, not every name.
    const open = await startConsole({ client: rr, host: '0.0.0.0', port: 0, management: false, allowedHosts: ['10.1.2.3'], token: TOKEN });
    servers.push(open);
    const local = `http://127.0.0.1:${new URL(open.url).port}/api/state`;
    expect((await send(local, { token: TOKEN })).status).toBe(200);
    expect((await send(local, { host: `10.1.2.3:${new URL(open.url).port}`, token: TOKEN })).status).toBe(200);
    expect((await send(local, { host: `10.9.9.9:${new URL(open.url).port}`, token: TOKEN })).status).toBe(403);
  });

  test('a request that changes something from a page of another Origin gets 403 FORBIDDEN_ORIGIN and moves nothing; its own origin and allowed hosts act', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(2));
    const { url, port } = await mounted(rr, { queues: [queue], token: TOKEN, allowedHosts: ['ops.example.com'] });
    const replay = `${url}api/queues/${encodeURIComponent(queue)}/replay`;
    const body = { scope: 'queue', count: 2, ratePerSec: 50 };
    const edit = `${url}api/queues/${encodeURIComponent(queue)}/edit`;
    const editBody = { messageId: 'm0', key: await keyOf(new ConsoleApi(url, TOKEN), queue, 'm0'), by: 'ana', body: '{"i":10}' };
    for (const origin of ['https://attacker.example', `http://attacker.example:${port}`, 'null', 'https://ops.example.com.attacker.example']) {
      const r = await send(replay, { method: 'POST', origin, token: TOKEN, body });
      expect({ origin, status: r.status, code: r.body.error?.code }).toEqual({ origin, status: 403, code: 'FORBIDDEN_ORIGIN' });
      const e = await send(edit, { method: 'POST', origin, token: TOKEN, body: editBody });
      expect({ origin, status: e.status, code: e.body.error?.code }).toEqual({ origin, status: 403, code: 'FORBIDDEN_ORIGIN' });
      expect((await send(`${url}api/jobs/1/stop`, { method: 'POST', origin, token: TOKEN, body: {} })).status).toBe(403);
      expect((await send(`${url}api/outbox/delete`, { method: 'POST', origin, token: TOKEN, body: { ids: [1] } })).status).toBe(403);
    }
    // On the CLI's own server too.
    const server = await startConsole({ client: rr, port: 0, management: false, queues: [queue], token: TOKEN });
    servers.push(server);
    const other = await send(`${server.url}api/queues/${encodeURIComponent(queue)}/replay`, {
      method: 'POST',
      origin: 'https://attacker.example',
      token: TOKEN,
      body,
    });
    expect(other).toMatchObject({ status: 403, body: { error: { code: 'FORBIDDEN_ORIGIN' } } });
    const otherEdit = await send(`${server.url}api/queues/${encodeURIComponent(queue)}/edit`, {
      method: 'POST',
      origin: 'https://attacker.example',
      token: TOKEN,
      body: editBody,
    });
    expect(otherEdit).toMatchObject({ status: 403, body: { error: { code: 'FORBIDDEN_ORIGIN' } } });
    expect(await rr.parked(queue).count()).toBe(2);
    expect(await queueDepth(queue)).toBe(0);
    expect(await jobOf(new ConsoleApi(url, TOKEN), 1)).toBeUndefined();

    // Reading is not refused by its Origin (the browser keeps the answer from another site's page).
    expect((await send(`${url}api/state`, { origin: 'https://attacker.example', token: TOKEN })).status).toBe(200);
    // The page's own origin, and an allowed host's, act.
    expect(await send(`${url}api/jobs/99/stop`, { method: 'POST', origin: `http://127.0.0.1:${port}`, token: TOKEN, body: {} })).toMatchObject({
      status: 200,
      body: { stopped: false },
    });
    expect(await send(`${url}api/jobs/99/stop`, { method: 'POST', origin: 'https://ops.example.com', token: TOKEN, body: {} })).toMatchObject({
      status: 200,
      body: { stopped: false },
    });
    expect((await send(replay, { method: 'POST', origin: `http://localhost:${port}`, token: TOKEN, body })).status).toBe(202);
    await waitFor(async () => (await queueDepth(queue)) === 2, 10_000, 'both replayed');
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });
});

describe('which requests may edit', () => {
  test('edit is refused as replay is: without the token 401, for a foreign Host 403 FORBIDDEN_HOST, from a page of another Origin 403 FORBIDDEN_ORIGIN; nothing moves; an allowed page edits', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(2));
    const { url, port } = await mounted(rr, { queues: [queue], token: TOKEN, allowedHosts: ['ops.example.com'] });
    const edit = `${url}api/queues/${encodeURIComponent(queue)}/edit`;
    const editBody = { messageId: 'm0', key: await keyOf(new ConsoleApi(url, TOKEN), queue, 'm0'), by: 'ana', body: '{"i":10}' };
    const replay = `${url}api/queues/${encodeURIComponent(queue)}/replay`;
    const replayBody = { scope: 'queue', count: 2, ratePerSec: 50 };
    for (const [route, body] of [
      [edit, editBody],
      [replay, replayBody],
    ] as const) {
      const refused = async (o: { host?: string; origin?: string; token?: string }) => {
        const r = await send(route, { method: 'POST', body, ...o });
        return { route, status: r.status, code: r.body.error?.code };
      };
      expect(await refused({})).toEqual({ route, status: 401, code: 'UNAUTHORIZED' });
      expect(await refused({ token: `${TOKEN}x` })).toEqual({ route, status: 401, code: 'UNAUTHORIZED' });
      expect(await refused({ host: `attacker.example:${port}`, token: TOKEN })).toEqual({ route, status: 403, code: 'FORBIDDEN_HOST' });
      for (const origin of ['https://attacker.example', 'null', `http://127.0.0.1.attacker.example:${port}`]) {
        expect(await refused({ origin, token: TOKEN })).toEqual({ route, status: 403, code: 'FORBIDDEN_ORIGIN' });
      }
    }
    expect(await queueDepth(queue)).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(2);

    const allowed = await send(edit, { method: 'POST', host: 'ops.example.com', origin: 'https://ops.example.com', token: TOKEN, body: editBody });
    expect(allowed).toMatchObject({ status: 200, body: { messageId: 'm0', changed: ['body'], by: 'ana' } });
    const sent = await drain(queue);
    expect(sent.map((m) => [m.properties.messageId, m.content.toString(), m.headers['retry-edited-by']])).toEqual([['m0', '{"i":10}', 'ana']]);
    expect(ids(await drain(parkedQueueName(queue)))).toEqual(['m1']);
  });
});

describe('which tokens the console takes', () => {
  test('listening beyond the loopback refuses a token shorter than 16 characters, or blank, with INVALID_OPTIONS; the message never shows it', async () => {
    const rr = await connectClient();
    for (const token of ['tok-0a9b', 'fifteen-chars-x', '                ', ' padded-token-of-enough-length ']) {
      const err = await startConsole({ client: rr, host: '0.0.0.0', port: 0, token, management: false }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as InvalidOptionsError).code).toBe('INVALID_OPTIONS');
      expect((err as Error).message).toMatch(/at least 16 characters|blank|begins or ends with spaces/);
      if (token.trim() !== '') expect((err as Error).message).not.toContain(token.trim());
    }
    await expect(startConsole({ client: rr, host: '0.0.0.0', port: 0, token: 'tok-0a9b', management: false })).rejects.toThrow(
      'listening on 0.0.0.0 needs a token of at least 16 characters; the one given (token) has 8',
    );
    const saved = process.env.RABBIT_RETRY_UI_TOKEN;
    process.env.RABBIT_RETRY_UI_TOKEN = 'short-env';
    try {
      await expect(startConsole({ client: rr, host: '0.0.0.0', port: 0, management: false })).rejects.toThrow(
        /the one given \(RABBIT_RETRY_UI_TOKEN\) has 9/,
      );
    } finally {
      if (saved === undefined) delete process.env.RABBIT_RETRY_UI_TOKEN;
      else process.env.RABBIT_RETRY_UI_TOKEN = saved;
    }
    // Exactly 16 will do, and on the loopback a short one still does.
    const open = await startConsole({ client: rr, host: '0.0.0.0', port: 0, token: 'sixteen-chars-ok', management: false });
    servers.push(open);
    expect((await send(`http://127.0.0.1:${new URL(open.url).port}/api/state`, { token: 'sixteen-chars-ok' })).status).toBe(200);
    const local = await startConsole({ client: rr, port: 0, token: 'tok-3d1f', management: false });
    servers.push(local);
  });

  test('a mounted console given allowedHosts beyond the loopback refuses a short or blank token; on the loopback only, a short one is taken', async () => {
    const rr = await connectClient();
    const make = (token: string, allowedHosts: string[]) => () => new RabbitRetryConsole({ client: rr, management: false, token, allowedHosts });
    for (const token of ['tok-0a9b', '   ']) {
      let err: unknown;
      try {
        make(token, ['ops.example.com'])();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as InvalidOptionsError).code).toBe('INVALID_OPTIONS');
    }
    expect(make('tok-0a9b', ['ops.example.com'])).toThrow(
      'answering ops.example.com (allowedHosts beyond the loopback) needs a token of at least 16 characters',
    );
    expect(make('   ', [])).toThrow(/blank/);
    expect(make('tok-0a9b', ['localhost:8080', '127.0.0.1'])).not.toThrow();
    expect(make(TOKEN, ['ops.example.com'])).not.toThrow();
  });

  test('the NestJS module: its handler refuses a foreign Host by default, and a short token with allowedHosts beyond the loopback fails at start-up', async () => {
    const handlerOf = async (options: Parameters<typeof RabbitRetryConsoleModule.forRoot>[0]): Promise<ConsoleHandler> => {
      const moduleRef = await Test.createTestingModule({
        imports: [RabbitRetryModule.forRoot({ url: AMQP_URL }), RabbitRetryConsoleModule.forRoot(options)],
      }).compile();
      apps.push(moduleRef);
      const handlers: ConsoleHandler[] = [];
      const adapterHost = moduleRef.get(HttpAdapterHost);
      adapterHost.httpAdapter = { use: (_p: string, h: ConsoleHandler) => handlers.push(h) } as unknown as typeof adapterHost.httpAdapter;
      await moduleRef.init();
      return handlers[0];
    };
    const handler = await handlerOf({ path: '/ops', management: false });
    const http = createServer((req, res) => handler(req, res));
    httpServers.push(http);
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
    expect((await send(url)).status).toBe(200);
    expect(await send(url, { host: 'attacker.example' })).toMatchObject({ status: 403, body: { error: { code: 'FORBIDDEN_HOST' } } });

    await expect(handlerOf({ path: '/ops', management: false, token: 'tok-0a9b', allowedHosts: ['ops.example.com'] })).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
    });
  });

  test('rabbit-retry ui refuses a short or blank token beyond the loopback, and a bad --allow-host, before it connects', async () => {
    const cli = async (argv: string[]) => {
      const err: string[] = [];
      const io: CliIo = { out: () => undefined, err: (t) => err.push(t), isTTY: false, env: { AMQP_URL: 'amqp://guest:guest@127.0.0.1:1' } };
      return { code: await run(argv, io), err: err.join('') };
    };
    const short = await cli(['ui', '--host', '0.0.0.0', '--token', 'tok-0a9b']);
    expect(short.code).toBe(2);
    expect(short.err).toContain('listening on 0.0.0.0 needs a token of at least 16 characters; the one given (--token) has 8');
    expect(short.err).not.toContain('tok-0a9b');
    expect((await cli(['ui', '--host', '0.0.0.0', '--token', '    '])).err).toContain('is blank');
    expect((await cli(['ui', '--allow-host', 'ops.example.com', '--token', 'tok-0a9b'])).err).toContain(
      'answering ops.example.com (--allow-host beyond the loopback) needs a token of at least 16 characters',
    );
    expect((await cli(['ui', '--allow-host', 'http://ops.example.com', '--token', TOKEN])).err).toContain('is not a host name');
  });
});

describe('stopping a slow replay', () => {
  test("the job's Stop ends it within a second: nothing more moves, and what it had not moved is still parked, in order", async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(10));
    const server = await startConsole({ client: rr, port: 0, management: false, queues: [queue] });
    servers.push(server);
    const api = await ConsoleApi.of(server.url);
    const running = await slowReplay(api, queue, 10, 0.2);

    const t0 = Date.now();
    expect((await api.post<{ stopped: boolean }>(`api/jobs/${running.id}/stop`, {})).body).toEqual({ stopped: true });
    await waitFor(async () => (await jobOf(api, running.id))?.state !== 'running', 10_000, 'the job to end', 20);
    expect(Date.now() - t0).toBeLessThan(3000);
    const job = (await jobOf(api, running.id)) as JobView;
    expect(job).toMatchObject({ state: 'stopped', done: 1, total: 10, left: 9, error: null });

    // Past the time the next message was due: still nothing more moved.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await jobOf(api, running.id))?.done).toBe(1);
    const { work, parked } = await everyMessageOnce(queue, 10);
    expect(work).toEqual(['m0']);
    expect(job.done + (job.left as number)).toBe(10);
    expect(parked).toHaveLength(job.left as number);
  });

  test('close() ends a mounted console’s slow replay within a second and resolves to it; the console then acts no more', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, numbered(10));
    const { ui, url } = await mounted(rr, { queues: [queue], token: TOKEN });
    const api = new ConsoleApi(url, TOKEN);
    const running = await slowReplay(api, queue, 10, 0.2);

    const t0 = Date.now();
    const stopped = await ui.close();
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(stopped).toEqual([expect.objectContaining({ id: running.id, state: 'stopped', done: 1, left: 9 })]);
    expect(await api.post(`api/queues/${encodeURIComponent(queue)}/replay`, { scope: 'queue', count: 9, ratePerSec: 50 })).toMatchObject({
      status: 503,
      body: { error: { code: 'CLOSED' } },
    });

    await new Promise((r) => setTimeout(r, 1500));
    const { work, parked } = await everyMessageOnce(queue, 10);
    expect(work).toEqual(['m0']);
    expect(work.length + parked.length).toBe(10);
  });

  test('rabbit-retry ui ends within a second of SIGTERM during a slow replay; its last line says how many were replayed and how many are left', async () => {
    const queue = testQueue();
    await seedParked(queue, numbered(10));
    const ui = startScript('lib/cli/index.ts', ['ui', queue, '--port', '0', '--no-management']);
    let t0: number;
    try {
      await waitFor(
        () => /rabbit-retry console on (http:\S+)/.test(ui.stdout()) && ui.stdout().includes('Ctrl-C stops it'),
        30_000,
        `the console's URL (stderr: ${ui.stderr()})`,
      );
      const url = /rabbit-retry console on (http:\S+)/.exec(ui.stdout())?.[1] as string;
      await slowReplay(await ConsoleApi.of(url), queue, 10, 0.2);
      t0 = Date.now();
    } finally {
      ui.child.kill('SIGTERM');
    }
    expect((await ui.exited).code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(3000);
    const last = ui.stdout().trimEnd().split('\n').pop();
    expect(last).toBe(`replay of every parked message of ${queue} stopped: 1 of 10 replayed; 9 left in ${parkedQueueName(queue)}`);

    await new Promise((r) => setTimeout(r, 1000));
    const { work } = await everyMessageOnce(queue, 10);
    expect(work).toEqual(['m0']);
  }, 60_000);
});
