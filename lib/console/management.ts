/**
 * RabbitMQ's management API, where AMQP cannot look: the list of a virtual
 * host's queues, and a queue's arguments and counts, among them the messages
 * a quorum queue holds in its delayed state (`onFailure.brokerDelay`), which
 * a passive declare does not count.
 */
import { InvalidOptionsError } from '../errors';
import { redactIn } from '../support/redact';

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

/** A queue as the management API lists it: its name and arguments. */
export interface ManagementQueueRow {
  /** The queue's name. */
  name: string;
  /** Its arguments (`x-queue-type`, `x-delayed-retry-type`…). */
  arguments: Record<string, unknown>;
}

/** A queue's counts from the management API (refreshed by the broker every few seconds). */
export interface ManagementQueueCounts extends ManagementQueueRow {
  /** Every message the queue holds: ready, unacknowledged and delayed. */
  messages: number;
  /** Messages ready to be delivered. */
  ready: number;
  /** Messages delivered and not yet acknowledged. */
  unacked: number;
  /** Messages the broker holds in the delayed state before it delivers them again (RabbitMQ 4.3's delayed retry); 0 otherwise. */
  delayed: number;
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
 * GETs `path` (after `/api/`) of the management API and parses its JSON;
 * null on HTTP 404; rejects with the reason (never the credentials) otherwise.
 */
async function get(target: ManagementTarget, path: string, timeoutMs: number): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${target.base}/api/${path}`, {
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
    if (res.status === 404) return null;
    throw new Error(`HTTP ${res.status}`);
  }
  return res.json();
}

const COUNT_COLUMNS = 'name,arguments,messages,messages_ready,messages_unacknowledged,messages_delayed';

/** `value` as a count: a whole number, else 0. */
function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function argumentsOf(row: Record<string, unknown>): Record<string, unknown> {
  const args = row.arguments;
  return args !== null && typeof args === 'object' && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
}

/**
 * The queues of `target`'s virtual host with their arguments; rejects with
 * the reason (never the credentials) when the API does not answer.
 */
export async function managementQueues(target: ManagementTarget, timeoutMs = 2000): Promise<ManagementQueueRow[]> {
  const rows = await get(target, `queues/${encodeURIComponent(target.vhost)}?columns=name,arguments`, timeoutMs);
  if (!Array.isArray(rows)) throw new Error('not a list of queues');
  return rows.flatMap((r: Record<string, unknown>) => (typeof r.name === 'string' ? [{ name: r.name, arguments: argumentsOf(r) }] : []));
}

/** The names of the queues of `target`'s virtual host (see {@link managementQueues}). */
export async function managementQueueNames(target: ManagementTarget, timeoutMs = 2000): Promise<string[]> {
  return (await managementQueues(target, timeoutMs)).map((r) => r.name);
}

/**
 * Queue `name`'s arguments and counts, null when it does not exist; rejects
 * with the reason (never the credentials) when the API does not answer. The
 * delayed count is the broker's `messages_delayed`, or, from a broker that
 * does not report it, what is neither ready nor unacknowledged.
 */
export async function managementQueue(target: ManagementTarget, name: string, timeoutMs = 2000): Promise<ManagementQueueCounts | null> {
  const row = await get(target, `queues/${encodeURIComponent(target.vhost)}/${encodeURIComponent(name)}?columns=${COUNT_COLUMNS}`, timeoutMs);
  if (row === null) return null;
  if (typeof row !== 'object' || Array.isArray(row)) throw new Error('not a queue');
  const r = row as Record<string, unknown>;
  const messages = count(r.messages);
  const ready = count(r.messages_ready);
  const unacked = count(r.messages_unacknowledged);
  const delayed = typeof r.messages_delayed === 'number' ? r.messages_delayed : Math.max(0, messages - ready - unacked);
  return { name, arguments: argumentsOf(r), messages, ready, unacked, delayed };
}

/** Whether a queue with these arguments retries with the broker's delayed retry (`onFailure.brokerDelay`): it has `x-delayed-retry-type`. */
export function isBrokerDelay(args: Record<string, unknown>): boolean {
  return args['x-delayed-retry-type'] !== undefined;
}
