/**
 * The commands on a work queue's parked queue: `parked peek`, `parked replay`,
 * `parked edit` and `parked purge`.
 */
import { readFile } from 'node:fs/promises';

import { PARK_REASONS } from '../contract';
import { type Command, InvalidArgumentError, Option } from 'commander';

import { HEADERS, parkedQueueName } from '../native';
import type { ParkedFilter, ParkedMessage } from '../parked';
import { type Cli, UsageError, abortOnSignals, cut, formatTable, positiveInt, positiveNumber } from './common';

/** The options of `parked peek` and `parked replay` that select messages. */
interface FilterOptions {
  reason?: string;
  error?: string;
  errorName?: string;
}

function filterOptions(c: Command): Command {
  return c
    .option('--reason <reason>', `only messages parked for this reason (${PARK_REASONS.join(', ')})`)
    .option('--error <text>', 'only messages whose error message contains this text')
    .option('--error-name <name>', 'only messages whose error has this name');
}

function filterFrom(o: FilterOptions): ParkedFilter | undefined {
  const f: ParkedFilter = {};
  if (o.reason) f.reason = o.reason;
  if (o.error) f.errorMessage = o.error;
  if (o.errorName) f.errorName = o.errorName;
  return Object.keys(f).length ? f : undefined;
}

function describeParked(m: ParkedMessage) {
  return {
    messageId: m.properties.messageId ?? null,
    correlationId: m.properties.correlationId ?? null,
    reason: m.reason ?? null,
    attempt: m.attempt,
    errorName: m.errorName ?? null,
    error: m.errorMessage ?? null,
    failedAt: m.headers[HEADERS.failedAt] ?? null,
    firstFailedAt: m.headers[HEADERS.firstFailedAt] ?? null,
    originalExchange: m.headers[HEADERS.originalExchange] ?? null,
    originalRoutingKey: m.headers[HEADERS.originalRoutingKey] ?? null,
    headers: m.headers,
    body: m.text(),
  };
}

function progressBar(done: number, total: number, width = 30): string {
  const frac = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(frac * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
}

/** `parked peek <queue>`: parked messages, left parked. */
function peekCommand(parked: Command, cli: Cli): void {
  const { io } = cli;
  filterOptions(
    parked
      .command('peek')
      .description('show parked messages; every one stays parked')
      .argument('<queue>', 'the work queue')
      .addOption(new Option('--limit <n>', 'at most this many').argParser(positiveInt).default(20)),
  ).action((queue: string, o: { limit: number } & FilterOptions) => {
    cli.action = async (rr) => {
      const msgs = await rr.parked(queue).peek({ limit: o.limit, filter: filterFrom(o) });
      if (cli.json()) {
        io.out(JSON.stringify({ queue, parkedQueue: parkedQueueName(queue), messages: msgs.map(describeParked) }, null, 2));
        return;
      }
      if (msgs.length === 0) {
        io.out(`no parked messages in ${parkedQueueName(queue)}${filterFrom(o) ? ' match' : ''}`);
        return;
      }
      io.out(
        formatTable(
          ['MESSAGE ID', 'REASON', 'ATTEMPT', 'ERROR', 'FAILED AT'],
          msgs.map((m) => [
            m.properties.messageId ?? '-',
            m.reason ?? '-',
            String(m.attempt),
            cut(`${m.errorName ?? 'Error'}: ${m.errorMessage ?? ''}`, 60),
            // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a header of any type shows as its text
            String(m.headers[HEADERS.failedAt] ?? '-'),
          ]),
        ),
      );
    };
  });
}

/** `parked replay <queue>`: parked messages back to the work queue, at a rate. */
function replayCommand(parked: Command, cli: Cli): void {
  const { io } = cli;
  filterOptions(
    parked
      .command('replay')
      .description('move parked messages back to the work queue, at a safe rate')
      .argument('<queue>', 'the work queue')
      .addOption(new Option('--limit <n>', 'at most this many').argParser(positiveInt))
      .addOption(new Option('--rate <perSec>', 'at most this many a second').argParser(positiveNumber).default(50)),
  ).action((queue: string, o: { limit?: number; rate: number } & FilterOptions) => {
    cli.action = async (rr) => {
      const showBar = io.isTTY && !cli.json();
      // SIGINT or SIGTERM ends the replay at once: nothing moves after it, the rest stays parked.
      const controller = new AbortController();
      const stop = abortOnSignals(controller);
      const parkedQueue = rr.parked(queue);
      let result;
      try {
        result = await parkedQueue.replay({
          limit: o.limit,
          ratePerSec: o.rate,
          filter: filterFrom(o),
          onProgress: showBar ? (p) => io.err(`\r${progressBar(p.replayed, p.total)}`) : undefined,
          signal: controller.signal,
        });
      } finally {
        stop.done();
      }
      if (showBar) io.err('\n');
      const left = result.stopped ? await parkedQueue.count() : undefined;
      if (cli.json()) io.out(JSON.stringify({ queue, ...result, ...(result.stopped ? { stoppedBy: stop.signal(), left } : {}) }, null, 2));
      else if (result.stopped) {
        io.out(
          `replay of ${queue} stopped by ${stop.signal() ?? 'a signal'}: ${result.replayed} message(s) replayed in ${(result.durationMs / 1000).toFixed(1)} s; ${left} left in ${parkedQueueName(queue)}`,
        );
      } else
        io.out(
          `replayed ${result.replayed} message(s) to ${queue} in ${(result.durationMs / 1000).toFixed(1)} s; ${result.skipped} not selected stay parked`,
        );
    };
  });
}

/** A `--header name=value`, added to those given before it. */
function headerPair(value: string, earlier: Record<string, string> = {}): Record<string, string> {
  const at = value.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError('expected name=value.');
  return { ...earlier, [value.slice(0, at)]: value.slice(at + 1) };
}

/** A `--remove-header name`, added to those given before it. */
function headerName(value: string, earlier: string[] = []): string[] {
  if (value.length === 0) throw new InvalidArgumentError('expected a header name.');
  return [...earlier, value];
}

/** `parked edit <queue> <messageId>`: one parked message, edited, back to the work queue. */
function editCommand(parked: Command, cli: Cli): void {
  const { io } = cli;
  parked
    .command('edit')
    .description('send one parked message back to the work queue with a new body or headers, and an audit trail of the edit')
    .argument('<queue>', 'the work queue')
    .argument('<messageId>', 'the parked message’s id')
    .option('--body-file <file>', 'the new body: the file’s bytes, as they are')
    .option('--header <name=value>', 'set a header (repeat for more)', headerPair)
    .option('--remove-header <name>', 'leave a header out of the copy (repeat for more)', headerName)
    .requiredOption('--by <name>', 'who edits: the copy’s retry-edited-by')
    .action((queue: string, messageId: string, o: { bodyFile?: string; header?: Record<string, string>; removeHeader?: string[]; by: string }) => {
      if (o.bodyFile === undefined && o.header === undefined && o.removeHeader === undefined) {
        throw new UsageError('give the edit: --body-file, --header or --remove-header');
      }
      cli.action = async (rr) => {
        const headers: Record<string, string | undefined> | undefined =
          o.header || o.removeHeader ? { ...o.header, ...Object.fromEntries((o.removeHeader ?? []).map((n) => [n, undefined])) } : undefined;
        let body: Buffer | undefined;
        if (o.bodyFile !== undefined) {
          try {
            body = await readFile(o.bodyFile);
          } catch (e) {
            throw new UsageError(`cannot read --body-file ${o.bodyFile}: ${(e as Error).message}`);
          }
        }
        const edit = { ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) };
        const result = await rr.parked(queue).edit(messageId, edit, { by: o.by });
        if (cli.json()) io.out(JSON.stringify({ ...result, parkedQueue: parkedQueueName(queue), by: o.by }, null, 2));
        else {
          const what = result.changed.length ? result.changed.join(', ') : 'nothing (the copy is the original’s)';
          io.out(`edited ${messageId} (changed: ${what}) and sent it to ${queue}; the other parked messages stay in ${parkedQueueName(queue)}`);
        }
      };
    });
}

/** `parked purge <queue> --yes`: every parked message deleted. */
function purgeCommand(parked: Command, cli: Cli): void {
  const { io } = cli;
  parked
    .command('purge')
    .description('delete every parked message')
    .argument('<queue>', 'the work queue')
    .option('--yes', 'confirm: the messages are gone for good')
    .action((queue: string, o: { yes?: boolean }) => {
      if (!o.yes) throw new UsageError(`purging ${parkedQueueName(queue)} deletes its messages for good: add --yes to confirm`);
      cli.action = async (rr) => {
        const purged = await rr.parked(queue).purge();
        if (cli.json()) io.out(JSON.stringify({ queue, parkedQueue: parkedQueueName(queue), purged }, null, 2));
        else io.out(`purged ${purged} message(s) from ${parkedQueueName(queue)}`);
      };
    });
}

/** `parked peek|replay|edit|purge`. */
export function parkedCommands(program: Command, cli: Cli): void {
  const parked = program.command('parked').description('inspect, replay, edit or purge parked messages');
  peekCommand(parked, cli);
  replayCommand(parked, cli);
  editCommand(parked, cli);
  purgeCommand(parked, cli);
}
