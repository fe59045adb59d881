/**
 * The console's options, and what the console makes of them: each checked,
 * with its default.
 */
import { type RabbitRetry, brokerUrlsOf } from '../client';
import { checkKeys, checkObject, checkString } from '../options/check';
import { InvalidOptionsError } from '../errors';
import { delayLabel } from '../native';
import { DEFAULT_DELAYS, type Delay, type OptionKeys } from '../options';
import { type AllowedHost, allowedHostsOf, consoleToken } from './auth';
import { type ManagementStatus, type ManagementTarget, managementTarget } from './discovery';

/** Options of {@link RabbitRetryConsole}. */
export interface ConsoleOptions {
  /** The connected client the console reads and acts through (its broker, and its retry table when it has one). */
  client: RabbitRetry;
  /**
   * Work queues to show, besides those the client's consumers consume and
   * those the management API lists.
   */
  queues?: string[];
  /** The delays of `queues`, which name their retry queues. @default ['5s', '1m', '10m'] */
  delays?: Delay[];
  /** Group at most this many parked messages of a queue; the page says when a queue holds more. @default 10000 */
  scanLimit?: number;
  /** The replay rate the page offers first, messages a second. @default 20 */
  ratePerSec?: number;
  /**
   * The token every API request must carry in the `X-Rabbit-Retry-Token`
   * header; the page asks the operator for it. @default $RABBIT_RETRY_UI_TOKEN,
   * else a random one the console writes into its own page: then requests
   * from another site cannot act (they cannot read the page), but anyone
   * who can load the page can; put the console behind the service's own
   * authentication, or give a token.
   *
   * A token is never blank, and does not begin or end with spaces. When
   * `allowedHosts` names a host beyond the loopback, it has at least
   * {@link index!CONSOLE_MIN_TOKEN_LENGTH} (16) characters: the console refuses a
   * shorter one with an {@link InvalidOptionsError}.
   */
  token?: string;
  /**
   * RabbitMQ's management API, to list the broker's queues: its URL
   * (`http://user:password@host:15672`; without credentials, the broker
   * URL's are used), or `false` not to ask it. The credentials stay in the
   * server. @default http on the broker's host, port 15672, with the broker URL's user and password
   */
  management?: string | false;
  /**
   * The path the console is mounted at (`/ops/rabbit-retry`), read from
   * `req.originalUrl` or `req.url`; leave it out when the framework strips
   * it from `req.url` (Express's `app.use(path, handler)`).
   */
  basePath?: string;
  /**
   * The host names, beyond the loopback's, the console answers to: a name
   * (`ops.example.com`: any port) or a name and a port
   * (`ops.example.com:8443`). The console answers a request only when its
   * `Host` header is `127.0.0.1`, `localhost` or `[::1]` (any port) or one
   * of these, so that a page of another site cannot reach it through a DNS
   * name pointed at it; and it refuses a request that changes anything
   * (every method but GET, HEAD and OPTIONS) whose `Origin` is another host.
   * Both refusals are HTTP 403 (`FORBIDDEN_HOST`, `FORBIDDEN_ORIGIN`).
   * A host beyond the loopback here needs a `token` of at least 16
   * characters when a token is given.
   * @default [] (the loopback only)
   */
  allowedHosts?: string[];
}

/** The keys of {@link ConsoleOptions}. */
const CONSOLE_OPTION_KEYS = {
  client: true,
  queues: true,
  delays: true,
  scanLimit: true,
  ratePerSec: true,
  token: true,
  management: true,
  basePath: true,
  allowedHosts: true,
} satisfies OptionKeys<ConsoleOptions>;

/** The console's options, checked, with their defaults. */
export interface ConsoleSettings {
  /** The client it reads and acts through. */
  readonly client: RabbitRetry;
  /** The queues named in the options, with the labels of their delays. */
  readonly named: { queue: string; delays: string[] }[];
  /** The most parked messages grouped per queue. */
  readonly scanLimit: number;
  /** The replay rate the page offers first. */
  readonly ratePerSec: number;
  /** The hosts answered beside the loopback's. */
  readonly allowedHosts: readonly AllowedHost[];
  /** The token given or read from the environment; none when the console makes its own. */
  readonly token: string | undefined;
  /** The mount path, without a trailing slash: `''` or `/ops/rabbit-retry`. */
  readonly basePath: string;
  /** The management API to ask, if any. */
  readonly management?: ManagementTarget;
  /** What the page is told of the management API before it is asked. */
  readonly managementStatus: ManagementStatus;
}

/** Checks `options`, throwing an {@link InvalidOptionsError} at the first one wrong. */
export function consoleSettings(options: ConsoleOptions): ConsoleSettings {
  checkObject('console options', options, 'an object such as { client }');
  checkKeys('RabbitRetryConsole', options, CONSOLE_OPTION_KEYS);
  if (options.client === null || typeof options.client !== 'object' || typeof options.client.parked !== 'function') {
    throw new InvalidOptionsError('client must be a connected RabbitRetry client');
  }
  const client = options.client;
  if (options.queues !== undefined && (!Array.isArray(options.queues) || options.queues.some((q) => typeof q !== 'string' || q === ''))) {
    throw new InvalidOptionsError('queues must be an array of work queue names');
  }
  // The delays' labels (`5s`), refusing what is not a delay.
  const delays = (options.delays ?? DEFAULT_DELAYS).map((d) => delayLabel(d));
  const named = (options.queues ?? []).map((queue) => ({ queue, delays }));
  const scanLimit = options.scanLimit ?? 10_000;
  if (!Number.isInteger(scanLimit) || scanLimit < 1) {
    throw new InvalidOptionsError(`scanLimit must be a whole number of at least 1, got ${String(options.scanLimit)}`);
  }
  const ratePerSec = options.ratePerSec ?? 20;
  if (typeof ratePerSec !== 'number' || !(ratePerSec > 0) || !Number.isFinite(ratePerSec)) {
    throw new InvalidOptionsError(`ratePerSec must be a positive number, got ${String(options.ratePerSec)}`);
  }
  const allowedHosts = allowedHostsOf(options.allowedHosts);
  checkString('token', options.token, { nonEmpty: true });
  const token = consoleToken(options.token, allowedHosts);
  checkString('basePath', options.basePath);
  let basePath = (options.basePath ?? '').replace(/\/+$/, '');
  if (basePath !== '' && !basePath.startsWith('/')) basePath = `/${basePath}`;
  const settings = { client, named, scanLimit, ratePerSec, allowedHosts, token, basePath };
  if (options.management === false) return { ...settings, managementStatus: { state: 'off', detail: 'not asked' } };
  if (options.management !== undefined && typeof options.management !== 'string') {
    throw new InvalidOptionsError('management must be a URL such as http://user:password@host:15672, or false');
  }
  const management = managementTarget(brokerUrlsOf(client)[0], options.management);
  return {
    ...settings,
    management,
    managementStatus: management
      ? { state: 'unavailable', detail: `${management.base}: not asked yet` }
      : { state: 'off', detail: 'no broker URL to derive it from' },
  };
}
