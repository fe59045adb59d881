/**
 * Which work queues the console shows: the ones it was told, the ones the
 * process's consumers consume, and, when RabbitMQ's management API answers,
 * every queue with a parked queue beside it (AMQP itself cannot list queues).
 */
import { InvalidOptionsError } from '../errors';
import { queueRole } from '../native';
import { redactIn } from '../redact';

/** A work queue with retry topology, and where the console learned of it. */
export interface KnownQueue {
  /** The work queue. */
  queue: string;
  /** The labels of its retry queues (`5s`, `1m`): `<queue>.retry.<label>`. */
  delays: string[];
  /** `consumer` (this process consumes it), `named` (given in the options) or `management` (listed by the management API). */
  sources: ('consumer' | 'named' | 'management')[];
}

/** Where the management API is, and how to log in; never sent to the page. */
export interface ManagementTarget {
  /** Its base URL without credentials (`http://127.0.0.1:15672`). */
  base: string;
  /** The virtual host whose queues to list. */
  vhost: string;
  /** The user. */
  user: string;
  /** The password. */
  password: string;
}

/** What the page is told of the management API. */
export interface ManagementStatus {
  /** `ok`: it answered; `unavailable`: it did not (see `detail`); `off`: the console was told not to ask. */
  state: 'ok' | 'unavailable' | 'off';
  /** Its address without credentials, and why it did not answer. */
  detail: string;
}

/**
 * The management API of the broker at `brokerUrl` (`amqp://user:pass@host/vhost`):
 * HTTP on port 15672 (HTTPS on 15671 for `amqps`), the same user and
 * password, the same virtual host. `override` (`http://user:pass@host:port`)
 * sets the address, and the credentials when it has them.
 */
export function managementTarget(brokerUrl: string | undefined, override?: string): ManagementTarget | undefined {
  let amqp: URL | undefined;
  try {
    amqp = brokerUrl ? new URL(brokerUrl) : undefined;
  } catch {
    amqp = undefined;
  }
  const vhostPath = amqp ? amqp.pathname.replace(/^\//, '') : '';
  const vhost = vhostPath === '' ? '/' : decodeURIComponent(vhostPath);
  let user = amqp?.username ? decodeURIComponent(amqp.username) : 'guest';
  let password = amqp?.password ? decodeURIComponent(amqp.password) : amqp?.username ? '' : 'guest';
  let base: string;
  if (override !== undefined) {
    let u: URL;
    try {
      u = new URL(override);
    } catch {
      throw new InvalidOptionsError('management must be a URL such as http://user:password@host:15672');
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new InvalidOptionsError(`management must be an http or https URL, got ${u.protocol}`);
    }
    if (u.username) {
      user = decodeURIComponent(u.username);
      password = decodeURIComponent(u.password);
    }
    base = `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
  } else {
    if (!amqp) return undefined;
    const tls = amqp.protocol === 'amqps:';
    base = `${tls ? 'https' : 'http'}://${amqp.hostname.includes(':') && !amqp.hostname.startsWith('[') ? `[${amqp.hostname}]` : amqp.hostname}:${tls ? 15671 : 15672}`;
  }
  return { base, vhost, user, password };
}

/** `target` with its credentials, as a URL: what its password is read from to take it out of an error. */
function withCredentials(target: ManagementTarget): string | undefined {
  try {
    const u = new URL(target.base);
    u.username = target.user;
    u.password = target.password;
    return u.href;
  } catch {
    return undefined;
  }
}

/** Why a request failed, without its URL or credentials. */
function why(err: unknown): string {
  const e = err as { name?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } } | null;
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'no answer in time';
  const code = e?.cause?.code;
  if (typeof code === 'string') return code;
  if (typeof e?.cause?.message === 'string') return e.cause.message;
  return typeof e?.message === 'string' ? e.message : 'failed';
}

/**
 * The names of the queues of `target`'s virtual host, from the management
 * API; rejects with the reason (never the credentials) when it does not answer.
 */
export async function managementQueueNames(target: ManagementTarget, timeoutMs = 2000): Promise<string[]> {
  const url = `${target.base}/api/queues/${encodeURIComponent(target.vhost)}?columns=name`;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { authorization: `Basic ${Buffer.from(`${target.user}:${target.password}`).toString('base64')}`, accept: 'application/json' },
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'error',
    });
  } catch (err) {
    // eslint-disable-next-line preserve-caught-error -- the cause would carry the URL and credentials that the message leaves out.
    throw new Error(redactIn(why(err), [withCredentials(target)]));
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    throw new Error(`HTTP ${res.status}`);
  }
  const rows = (await res.json()) as unknown;
  if (!Array.isArray(rows)) throw new Error('not a list of queues');
  return rows.map((r) => (r as { name?: unknown }).name).filter((n): n is string => typeof n === 'string');
}

/**
 * The work queues among `names` (a virtual host's queues): each queue `Q`
 * with a `Q.parked` beside it, and the labels of its `Q.retry.*` queues.
 */
export function workQueuesOf(names: readonly string[]): { queue: string; delays: string[] }[] {
  const all = new Set(names);
  const roles = names.map(queueRole);
  const byQueue = new Map<string, { queue: string; delays: string[] }>();
  for (const r of roles) if (r.role === 'parked' && all.has(r.queue)) byQueue.set(r.queue, { queue: r.queue, delays: [] });
  for (const r of roles) if (r.role === 'retry') byQueue.get(r.queue)?.delays.push(r.delay);
  return [...byQueue.values()].sort((a, b) => a.queue.localeCompare(b.queue));
}

/** Merges the queues of every source into one list, each queue once, in the order first given. */
export function mergeQueues(lists: { source: KnownQueue['sources'][number]; queues: { queue: string; delays: string[] }[] }[]): KnownQueue[] {
  const byName = new Map<string, KnownQueue>();
  for (const { source, queues } of lists) {
    for (const q of queues) {
      const known = byName.get(q.queue);
      if (!known) {
        byName.set(q.queue, { queue: q.queue, delays: [...q.delays], sources: [source] });
        continue;
      }
      if (!known.sources.includes(source)) known.sources.push(source);
      for (const d of q.delays) if (!known.delays.includes(d)) known.delays.push(d);
    }
  }
  return [...byName.values()];
}
