/** `ui`: the operators' console, served on this machine until Ctrl-C. */
import { type Command, InvalidArgumentError, Option } from 'commander';

import { DEFAULT_DELAYS, type Delay } from '../options';
import { CONSOLE_TOKEN_ENV, CONSOLE_TOKEN_HEADER, isLoopback } from '../console/console';
import { DEFAULT_CONSOLE_PORT, startConsole } from '../console/server';
import { delayLabel } from '../names';
import { type Cli, UsageError, positiveInt, positiveNumber } from './common';

/** A `--port`: a whole number from 0 to 65535. */
function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a port from 0 to 65535.');
  return n;
}

/** The options of `ui`. */
interface UiOptions {
  host: string;
  port: number;
  token?: string;
  delays: string;
  scanLimit: number;
  rate: number;
  management?: string | false;
}

/** Resolves on the first SIGINT or SIGTERM. */
function stopSignal(): Promise<string> {
  return new Promise((resolve) => {
    const stop = (signal: string) => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve(signal);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

/** `ui [queues...]`: serves the console until SIGINT or SIGTERM. */
export function uiCommand(program: Command, cli: Cli): void {
  const { io } = cli;
  program
    .command('ui')
    .description('the operators\' console in a web page: parked messages grouped by error, replayed or purged by group at a safe rate, the retry table by dependency')
    .argument('[queues...]', 'work queues to show, besides those the management API lists')
    .option('--host <address>', 'address to listen on; any but the loopback needs a token', '127.0.0.1')
    .addOption(new Option('--port <port>', 'port to listen on (0: any free one)').argParser(port).default(DEFAULT_CONSOLE_PORT))
    .option('--token <token>', `token every request must carry (default: $${CONSOLE_TOKEN_ENV})`)
    .option('--delays <list>', "the named queues' delays, comma-separated", DEFAULT_DELAYS.join(','))
    .addOption(new Option('--scan-limit <n>', 'group at most this many parked messages of a queue').argParser(positiveInt).default(10_000))
    .addOption(new Option('--rate <perSec>', 'the replay rate the page offers first').argParser(positiveNumber).default(20))
    .option('--management <url>', "the management API, to list the broker's queues (default: http on the broker's host, port 15672, the broker URL's user and password)")
    .option('--no-management', 'do not ask the management API')
    .action((queues: string[], o: UiOptions) => {
      const token = o.token ?? (io.env[CONSOLE_TOKEN_ENV] || undefined);
      if (!isLoopback(o.host) && token === undefined) {
        throw new UsageError(`listening on ${o.host} needs a token: --token <token> or ${CONSOLE_TOKEN_ENV}`);
      }
      const delays = o.delays.split(',').map((d) => d.trim()).filter(Boolean) as Delay[];
      try {
        for (const d of delays) delayLabel(d);
      } catch (e) {
        throw new UsageError(`--delays: ${(e as Error).message}`);
      }
      // The console shows the retry table when the database is given, and works without it.
      cli.wantsDb = true;
      cli.action = async (rr) => {
        const server = await startConsole({
          client: rr,
          host: o.host,
          port: o.port,
          token,
          queues,
          delays,
          scanLimit: o.scanLimit,
          ratePerSec: o.rate,
          management: o.management,
        });
        if (cli.json()) io.out(JSON.stringify({ url: server.url, broker: rr.url, queues, tokenRequired: server.console.tokenRequired }));
        else {
          io.out(`rabbit-retry console on ${server.url}`);
          io.out(`broker ${rr.url}${queues.length ? `; queues ${queues.join(', ')}` : ''}; the management API lists more when it answers`);
          if (server.console.tokenRequired) io.out(`every request needs the token (the ${CONSOLE_TOKEN_HEADER} header): the page asks for it`);
          io.out('Ctrl-C stops it; a replay under way stops, and what it had not moved stays parked');
        }
        await stopSignal();
        await server.close();
      };
    });
}
