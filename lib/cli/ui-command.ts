/** `ui`: the operators' console, served on this machine until Ctrl-C. */
import { type Command, InvalidArgumentError, Option } from 'commander';

import { DEFAULT_DELAYS, type Delay } from '../options';
import { CONSOLE_TOKEN_ENV, CONSOLE_TOKEN_HEADER, allowedHostsOf, checkConsoleToken, isLoopback } from '../console/auth';
import type { JobView } from '../console/jobs';
import { DEFAULT_CONSOLE_PORT, startConsole } from '../console/server';
import { InvalidOptionsError } from '../errors';
import { reasonOf } from '../support/error-text';
import { delayLabel, parkedQueueName } from '../native';
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
  allowHost: string[];
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

/** What a job the console's stop ended had done, on one line. */
function stoppedLine(j: JobView): string {
  const verb = j.kind === 'replay' ? 'replayed' : 'purged';
  const left = j.left === null ? `what it had not moved stays in ${parkedQueueName(j.queue)}` : `${j.left} left in ${parkedQueueName(j.queue)}`;
  return `${j.kind} of ${j.label} ${j.state}: ${j.done} of ${j.total} ${verb}; ${left}`;
}

/** Checks the token and the allowed hosts before connecting: a mistake in them is a usage error. */
function checkSafety(o: UiOptions, token: string | undefined, fromEnv: boolean): void {
  try {
    const hosts = allowedHostsOf(o.allowHost);
    const beyond = o.allowHost.filter((_, i) => !isLoopback(hosts[i].name));
    const why = !isLoopback(o.host)
      ? `listening on ${o.host}`
      : beyond.length > 0
        ? `answering ${beyond.join(', ')} (--allow-host beyond the loopback)`
        : undefined;
    checkConsoleToken(token, why, fromEnv ? CONSOLE_TOKEN_ENV : '--token');
  } catch (e) {
    if (e instanceof InvalidOptionsError) throw new UsageError(e.message);
    throw e;
  }
}

/** `ui [queues...]`: serves the console until SIGINT or SIGTERM. */
export function uiCommand(program: Command, cli: Cli): void {
  const { io } = cli;
  program
    .command('ui')
    .description(
      "the operators' console in a web page: parked messages grouped by error, replayed or purged by group at a safe rate, the retry table by dependency",
    )
    .argument('[queues...]', 'work queues to show, besides those the management API lists')
    .option('--host <address>', 'address to listen on; any but the loopback needs a token of 16 characters or more', '127.0.0.1')
    .addOption(new Option('--port <port>', 'port to listen on (0: any free one)').argParser(port).default(DEFAULT_CONSOLE_PORT))
    .option('--token <token>', `token every request must carry, 16 characters or more off the loopback (default: $${CONSOLE_TOKEN_ENV})`)
    .option(
      '--allow-host <host>',
      'a host name (name, or name:port) the console answers to besides the loopback and --host; repeat it for several',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option('--delays <list>', "the named queues' delays, comma-separated", DEFAULT_DELAYS.join(','))
    .addOption(new Option('--scan-limit <n>', 'group at most this many parked messages of a queue').argParser(positiveInt).default(10_000))
    .addOption(new Option('--rate <perSec>', 'the replay rate the page offers first').argParser(positiveNumber).default(20))
    .option(
      '--management <url>',
      "the management API, to list the broker's queues (default: http on the broker's host, port 15672, the broker URL's user and password)",
    )
    .option('--no-management', 'do not ask the management API')
    .action((queues: string[], o: UiOptions) => {
      const token = o.token ?? (io.env[CONSOLE_TOKEN_ENV] || undefined);
      if (!isLoopback(o.host) && token === undefined) {
        throw new UsageError(`listening on ${o.host} needs a token: --token <token> or ${CONSOLE_TOKEN_ENV}`);
      }
      checkSafety(o, token, o.token === undefined);
      const delays = o.delays
        .split(',')
        .map((d) => d.trim())
        .filter(Boolean) as Delay[];
      try {
        for (const d of delays) delayLabel(d);
      } catch (e) {
        throw new UsageError(`--delays: ${reasonOf(e)}`);
      }
      // The console shows the retry table when the database is given, and works without it.
      cli.wantsDb = true;
      cli.action = async (rr) => {
        const server = await startConsole({
          client: rr,
          host: o.host,
          port: o.port,
          token,
          allowedHosts: o.allowHost,
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
          io.out('Ctrl-C stops it; a replay under way stops at once, and what it had not moved stays parked');
        }
        await stopSignal();
        const stopped = await server.close();
        if (cli.json()) {
          io.out(
            JSON.stringify({
              stopped: stopped.map((j) => ({
                id: j.id,
                kind: j.kind,
                queue: j.queue,
                parkedQueue: parkedQueueName(j.queue),
                label: j.label,
                state: j.state,
                done: j.done,
                total: j.total,
                left: j.left,
              })),
            }),
          );
        } else if (stopped.length === 0) io.out('stopped; no replay or purge was running');
        else for (const j of stopped) io.out(stoppedLine(j));
      };
    });
}
