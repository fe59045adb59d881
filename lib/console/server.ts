/**
 * The console on its own HTTP server: what `rabbit-retry ui` runs. It
 * listens on 127.0.0.1 unless told otherwise, and on any other address only
 * with a token of at least 16 characters.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import { InvalidOptionsError } from '../errors';
import { CONSOLE_TOKEN_ENV, allowedHostsOf, checkConsoleToken, isLoopback } from './auth';
import { RabbitRetryConsole } from './console';
import type { ConsoleOptions } from './options';
import type { JobView } from './jobs';

/** The console's default port: beside the management API's 15672. */
export const DEFAULT_CONSOLE_PORT = 15673;

/** Options of {@link startConsole}. */
export interface StartConsoleOptions extends Omit<ConsoleOptions, 'basePath'> {
  /**
   * The address to listen on. Any but the loopback needs a `token` of at
   * least 16 characters; the console then answers requests addressed to
   * this address too (unless it is 0.0.0.0 or ::, which name no host: list
   * the names operators use in `allowedHosts`). @default '127.0.0.1'
   */
  host?: string;
  /** The port; 0 takes a free one. @default 15673 */
  port?: number;
}

/** A running console server. */
export interface ConsoleServer {
  /** The page's URL (`http://127.0.0.1:15673/`). */
  readonly url: string;
  /** The console it serves. */
  readonly console: RabbitRetryConsole;
  /**
   * Stops its jobs at once (what they had not moved stays parked, in its
   * place), then the server; resolves to the jobs it stopped, as they ended.
   */
  close(): Promise<JobView[]>;
}

/** Whether `host` (an address to listen on) is every address of the machine rather than one. */
function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || /^\[?(::|0*:(0*:)*0*)\]?$/.test(host);
}

/** The address the server listens on as an allowed host, when it names one. */
function ownHost(host: string): string[] {
  if (isLoopback(host) || isWildcard(host)) return [];
  try {
    allowedHostsOf([host]);
    return [host];
  } catch {
    // An address no Host header can name (an IPv6 address with a zone): requests name an allowed host instead.
    return [];
  }
}

/**
 * Serves the console on `host`:`port`. Refuses with an
 * {@link InvalidOptionsError} an address other than the loopback without a
 * token (`token`, or `RABBIT_RETRY_UI_TOKEN`) of at least 16 characters.
 * Like a mounted console, it answers only requests addressed to the
 * loopback, to `allowedHosts` and to the address it listens on (by `Host`),
 * so that no other site's page can reach it through a DNS name, and acts
 * for no page of another `Origin`.
 */
export async function startConsole(options: StartConsoleOptions): Promise<ConsoleServer> {
  if (options === null || typeof options !== 'object') throw new InvalidOptionsError('startConsole needs options such as { client }');
  const { host = '127.0.0.1', port = DEFAULT_CONSOLE_PORT, ...consoleOptions } = options;
  if (typeof host !== 'string' || host === '') throw new InvalidOptionsError('host must be an address to listen on, such as 127.0.0.1');
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new InvalidOptionsError(`port must be a whole number from 0 to 65535, got ${String(port)}`);
  }
  const loopback = isLoopback(host);
  const token = consoleOptions.token ?? (process.env[CONSOLE_TOKEN_ENV] || undefined);
  if (!loopback) {
    if (token === undefined) {
      throw new InvalidOptionsError(
        `listening on ${host} needs a token (the token option, --token, or ${CONSOLE_TOKEN_ENV}): every request must carry it`,
      );
    }
    checkConsoleToken(token, `listening on ${host}`, consoleOptions.token === undefined ? CONSOLE_TOKEN_ENV : 'token');
  }
  allowedHostsOf(consoleOptions.allowedHosts);
  const ui = new RabbitRetryConsole({
    ...consoleOptions,
    token,
    allowedHosts: [...(consoleOptions.allowedHosts ?? []), ...ownHost(host)],
  });
  const server = createServer((req, res) => ui.handle(req, res));
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await ui.close();
    throw err;
  }
  const bound = (server.address() as AddressInfo).port;
  const hostInUrl = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return {
    url: `http://${hostInUrl}:${bound}/`,
    console: ui,
    close: async () => {
      const stopped = await ui.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopped;
    },
  };
}
