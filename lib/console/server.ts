/**
 * The console on its own HTTP server: what `rabbit-retry ui` runs. It
 * listens on 127.0.0.1 unless told otherwise, and on any other address only
 * with a token.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import { InvalidOptionsError } from '../errors';
import { CONSOLE_TOKEN_ENV, type ConsoleOptions, RabbitRetryConsole, isLoopback } from './console';

/** The console's default port: beside the management API's 15672. */
export const DEFAULT_CONSOLE_PORT = 15673;

/** Options of {@link startConsole}. */
export interface StartConsoleOptions extends Omit<ConsoleOptions, 'basePath' | 'allowedHosts'> {
  /** The address to listen on; any but the loopback needs a `token`. @default '127.0.0.1' */
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
  /** Stops its jobs (what they had not moved stays parked), then the server. */
  close(): Promise<void>;
}

/**
 * Serves the console on `host`:`port`. Refuses with an
 * {@link InvalidOptionsError} an address other than the loopback without a
 * token (`token`, or `RABBIT_RETRY_UI_TOKEN`). On the loopback, it answers
 * only requests addressed to the loopback (by `Host`), so that no other
 * site's page can reach it through a DNS name.
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
  if (!loopback && token === undefined) {
    throw new InvalidOptionsError(
      `listening on ${host} needs a token (the token option, --token, or ${CONSOLE_TOKEN_ENV}): every request must carry it`,
    );
  }
  let ui: RabbitRetryConsole | undefined;
  const server = createServer((req, res) => {
    if (ui) ui.handle(req, res);
    else {
      res.writeHead(503);
      res.end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const hostInUrl = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  try {
    ui = new RabbitRetryConsole({
      ...consoleOptions,
      token,
      allowedHosts: loopback ? [`127.0.0.1:${bound}`, `localhost:${bound}`, `[::1]:${bound}`, `${hostInUrl}:${bound}`] : undefined,
    });
  } catch (err) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    throw err;
  }
  const running = ui;
  return {
    url: `http://${hostInUrl}:${bound}/`,
    console: running,
    close: async () => {
      await running.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
