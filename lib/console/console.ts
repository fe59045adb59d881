/**
 * The operators' console: an HTTP handler (node's `IncomingMessage` and
 * `ServerResponse`, so Express, Fastify, NestJS or a bare `http.Server` can
 * mount it) that serves the page and its JSON API. The page shows the work
 * queues with retry topology, their parked messages grouped by failure, and
 * the retry table, and the transactional outbox's backlog and the inbox's
 * duplicates; it replays, purges and edits parked messages, pauses, resumes and
 * retries the table's dependencies, and retries or deletes the outbox's
 * parked rows, through the same code as the API.
 *
 * This class wires the parts: {@link RequestGate} (hosts, origins, token),
 * the page ({@link servePage}), the API ({@link serveApi}) over the state
 * ({@link ConsoleStateCache}), the groupings ({@link Groupings}), the
 * actions ({@link Actions}) and the edits ({@link Editor}).
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

import { Actions } from './actions';
import { RequestGate } from './auth';
import { Editor } from './edit';
import { Groupings } from './groups';
import { type ConsoleHandler, HttpError, requestPath, sendError } from './http';
import { type JobView, Jobs, KeyedQueue } from './jobs';
import { KnownQueues } from './known-queues';
import { type ConsoleOptions, consoleSettings } from './options';
import { type PageSetup, assetAt, serveAsset, servePage } from './page';
import { type ApiHost, serveApi } from './routes';
import { OutboxReader } from './outbox-view';
import { ConsoleStateCache } from './state';
import { TableReader } from './table-view';

/**
 * The console. Mount {@link handle} under a path of a service, or serve it
 * with {@link startConsole}; {@link close} stops its jobs (what they had not
 * yet moved stays parked). However it is served, it answers only requests
 * addressed to the loopback or to its `allowedHosts`, and acts for no page
 * of another `Origin`.
 *
 * ```ts
 * const ui = new RabbitRetryConsole({
 *   client: rr,
 *   basePath: '/ops/rabbit-retry',
 *   allowedHosts: ['ops.example.com'], // besides the loopback
 *   token: process.env.RABBIT_RETRY_UI_TOKEN, // 16 characters or more
 * });
 * app.use('/ops/rabbit-retry', ui.handle); // Express; Fastify: reply.hijack(), then ui.handle(request.raw, reply.raw)
 * ```
 */
export class RabbitRetryConsole {
  /** The handler: serves the page (`<path>/`) and its API (`<path>/api/…`). */
  readonly handle: ConsoleHandler;
  /** Whether the operator must give the page the token (it was set); otherwise the page carries it. */
  readonly tokenRequired: boolean;

  readonly #gate: RequestGate;
  readonly #page: PageSetup;
  readonly #jobs: Jobs;
  readonly #api: ApiHost;
  /** Aborted by {@link close}: readings of the parked queues stop taking messages, and no action starts. */
  readonly #closing = new AbortController();

  constructor(options: ConsoleOptions) {
    const s = consoleSettings(options);
    this.tokenRequired = s.token !== undefined;
    const token = s.token ?? randomBytes(24).toString('hex');
    this.#gate = new RequestGate(s.allowedHosts, token);
    this.#page = { token: this.tokenRequired ? undefined : token, basePath: s.basePath };
    const { client } = s;
    const closing = this.#closing.signal;
    // One turn at a time on each parked queue: readings and jobs wait for each other.
    const order = new KeyedQueue();
    const jobs = (this.#jobs = new Jobs(order));
    const table = new TableReader(client);
    const outbox = new OutboxReader(client);
    const queues = new KnownQueues(client, s.named, s.management, s.managementStatus);
    const state = new ConsoleStateCache({ client, jobs, order, queues, table, outbox }, s.scanLimit, s.ratePerSec);
    const groupings = new Groupings({ client, jobs, order, closing }, s.scanLimit);
    const actions = new Actions({ client, jobs, groupings, state, table, outbox, closing }, s.ratePerSec);
    const editor = new Editor({ client, jobs, order, groupings, state, closing }, s.scanLimit);
    this.#api = { state, queues, groupings, actions, editor, jobs };
    this.handle = (req, res) => {
      void this.#serve(req, res);
    };
  }

  /**
   * Stops every replay and purge and waits for them to end, which takes no
   * longer than the broker's answer to the move under way: their waits end
   * at once, they take no message more, and what they had not moved stays
   * parked, in its place. Resolves to the jobs it stopped, as they ended
   * (`done` moved, `left` in the parked queue). Readings of the parked
   * queues under way stop too, and the console takes no new action.
   */
  async close(): Promise<JobView[]> {
    this.#closing.abort();
    return this.#jobs.stopAll();
  }

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await this.#route(req, res);
    } catch (err) {
      sendError(res, err);
    }
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    this.#gate.checkHost(req, method);
    const { sub, full, query } = requestPath(req, this.#page.basePath);
    if (sub === '' || sub === '/' || sub === '/index.html') {
      if (!full.endsWith('/') && sub !== '/index.html') {
        res.writeHead(308, { location: `${full}/`, 'cache-control': 'no-store' });
        res.end();
        return;
      }
      servePage(res, method, this.#page);
      return;
    }
    const name = assetAt(sub);
    if (name !== undefined) {
      serveAsset(res, method, name);
      return;
    }
    if (!sub.startsWith('/api/')) throw new HttpError(404, 'NOT_FOUND', `nothing at ${sub}`);
    this.#gate.authorize(req);
    const parts = sub
      .slice('/api/'.length)
      .split('/')
      .map((p) => {
        try {
          return decodeURIComponent(p);
        } catch {
          throw new HttpError(400, 'BAD_REQUEST', 'a path segment is not valid percent-encoding');
        }
      });
    return serveApi(this.#api, req, res, method, parts, query);
  }
}
