#!/usr/bin/env node
/**
 * `npx rabbit-retry`: look at a work queue's retry and parked queues,
 * replay or purge parked messages, and serve the operators' console (`ui`).
 * Exit codes: 0 ok, 1 broker or runtime error, 2 bad arguments.
 */
import { Command, CommanderError } from 'commander';

import { DEFAULT_URL, RabbitRetry } from '../client';
import { brokerUrls, splitUrls } from '../options/check';
import { reasonOf } from '../support/error-text';
import { RabbitRetryError } from '../errors';
import { redactIn } from '../support/redact';
import { type Action, type Cli, type CliIo, EXIT, UsageError } from './common';
import { parkedCommands } from './queue-commands';
import { statusCommand } from './status-command';
import { outboxCommands, tableCommands } from './table-commands';
import { uiCommand } from './ui-command';

export { type CliIo, EXIT, formatTable } from './common';

/**
 * What the CLI was given that may hold a password: its arguments, and the
 * URLs of the environment.
 */
function secretSources(argv: readonly string[], env: CliIo['env']): (string | undefined)[] {
  return [...argv, env.AMQP_URL, env.RETRY_TABLE_URL];
}

/** The command line's parser, with every command; what it writes of an error keeps no password of `secrets`. */
function cliProgram(io: CliIo, secrets: readonly (string | undefined)[]): { program: Command; cli: Cli } {
  const program = new Command('rabbit-retry')
    .description('Look at and operate the retry and parked queues of rabbit-retry consumers.')
    .option(
      '--url <url>',
      'broker URL; repeat it, or separate several with commas, for the nodes of a cluster (default: $AMQP_URL, else amqp://guest:guest@127.0.0.1:5672)',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), ...splitUrls(value)],
    )
    .option('--db <postgres-url>', 'database of the retry table and the outbox, for the table and outbox commands (default: $RETRY_TABLE_URL)')
    .option('--json', 'print JSON for machines')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: (text) => io.err(redactIn(text, secrets)) })
    .showHelpAfterError('(run with --help for usage)');
  const cli: Cli = { io, json: () => Boolean(program.opts<{ json?: boolean }>().json), needsDb: false };
  statusCommand(program, cli);
  parkedCommands(program, cli);
  tableCommands(program, cli);
  outboxCommands(program, cli);
  uiCommand(program, cli);
  return { program, cli };
}

/**
 * Connects as the global options say, runs `action`, and resolves to the exit
 * code. An error's message is written without the passwords of `secrets` and
 * of the URLs connected with (rabbit-retry's own errors never hold one).
 */
async function connectAndRun(program: Command, cli: Cli, action: Action, secrets: readonly (string | undefined)[]): Promise<number> {
  const { io } = cli;
  const sources = [...secrets];
  const shown = (e: unknown): string => (e instanceof RabbitRetryError ? e.message : redactIn(reasonOf(e), sources));
  let rr: RabbitRetry | undefined;
  try {
    const url = brokerUrls(program.opts<{ url?: string[] }>().url, io.env.AMQP_URL, DEFAULT_URL);
    const db = program.opts<{ db?: string }>().db ?? io.env.RETRY_TABLE_URL;
    sources.push(url.join(','), db);
    const usesTable = cli.needsDb || (cli.wantsDb === true && db !== undefined && db !== '');
    if (usesTable && !db) throw new UsageError('the table commands need the database: --db postgres://… or RETRY_TABLE_URL');
    // The CLI looks and operates; it never runs a scheduler of its own.
    rr = await RabbitRetry.connect({
      url,
      connectTimeoutMs: 5000,
      retryTable: usesTable && db ? { url: db, scheduler: false } : undefined,
      outbox: cli.needsOutbox && db ? { url: db, relay: false } : undefined,
    });
    await action(rr);
    return EXIT.ok;
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`error: ${shown(e)}\n`);
      return EXIT.usage;
    }
    const code = e instanceof RabbitRetryError ? ` [${e.code}]` : '';
    const hint = e instanceof RabbitRetryError && e.code === 'CONNECTION' ? '\nhint: start a broker (npm run broker) or pass --url / set AMQP_URL' : '';
    io.err(`error${code}: ${shown(e)}${hint}\n`);
    return EXIT.runtime;
  } finally {
    await rr?.close().catch(() => undefined);
  }
}

/**
 * Runs the CLI with `argv` (without `node` and the script) and resolves to
 * its exit code.
 */
export async function run(argv: string[], io: CliIo): Promise<number> {
  const secrets = secretSources(argv, io.env);
  const { program, cli } = cliProgram(io, secrets);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      return e.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (e instanceof UsageError) {
      io.err(`error: ${redactIn(e.message, secrets)}\n`);
      return EXIT.usage;
    }
    throw e;
  }
  if (!cli.action) {
    io.err(program.helpInformation());
    return EXIT.usage;
  }
  return connectAndRun(program, cli, cli.action, secrets);
}

if (require.main === module) {
  void run(process.argv.slice(2), {
    out: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
    err: (t) => process.stderr.write(t),
    // A piped stderr has no isTTY, whatever its type says.
    isTTY: process.stderr.isTTY ?? false,
    env: process.env,
  }).then((code) => {
    process.exitCode = code;
  });
}
