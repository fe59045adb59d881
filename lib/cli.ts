#!/usr/bin/env node
/**
 * `npx rabbit-retry`: look at a work queue's retry and parked queues, and
 * replay or purge parked messages. Exit codes: 0 ok, 1 broker or runtime
 * error, 2 bad arguments.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';

import { DEFAULT_URL, RabbitRetry } from './client';
import { RabbitRetryError } from './errors';
import { DEFAULT_DELAYS, type Delay } from './options';
import { retryQueueName } from './names';
import type { ParkedFilter, ParkedMessage } from './parked';

/** Where the CLI writes, so tests can capture it. */
export interface CliIo {
  /** Normal output. */
  out: (text: string) => void;
  /** Errors and progress. */
  err: (text: string) => void;
  /** Whether `err` is a terminal (progress bars only then). */
  isTTY: boolean;
  /** The environment (`AMQP_URL`). */
  env: Record<string, string | undefined>;
}

/** Exit codes of the CLI. */
export const EXIT = { ok: 0, runtime: 1, usage: 2 } as const;

class UsageError extends Error {}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1.');
  return n;
}

function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number.');
  return n;
}

/** A plain-text table with aligned columns. */
export function formatTable(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (c ?? '').padEnd(widths[i])).join('  ').trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function cut(s: string | undefined, n: number): string {
  const one = (s ?? '').replace(/\s+/g, ' ');
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}

function filterFrom(o: { reason?: string; error?: string; errorName?: string }): ParkedFilter | undefined {
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
    failedAt: m.headers['retry-failed-at'] ?? null,
    firstFailedAt: m.headers['retry-first-failed-at'] ?? null,
    originalExchange: m.headers['retry-original-exchange'] ?? null,
    originalRoutingKey: m.headers['retry-original-routing-key'] ?? null,
    headers: m.headers,
    body: m.text(),
  };
}

function progressBar(done: number, total: number, width = 30): string {
  const frac = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(frac * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
}

/**
 * Runs the CLI with `argv` (without `node` and the script) and resolves to
 * its exit code.
 */
export async function run(argv: string[], io: CliIo): Promise<number> {
  let action: ((rr: RabbitRetry) => Promise<void>) | undefined;
  let needsDb = false;
  const program = new Command('rabbit-retry')
    .description('Look at and operate the retry and parked queues of rabbit-retry consumers.')
    .option('--url <url>', 'broker URL (default: $AMQP_URL, else amqp://guest:guest@127.0.0.1:5672)')
    .option('--db <postgres-url>', 'retry table database for the table commands (default: $RETRY_TABLE_URL)')
    .option('--json', 'print JSON for machines')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError('(run with --help for usage)');
  const json = () => Boolean(program.opts<{ json?: boolean }>().json);

  program
    .command('status')
    .description('depth of the work queue, each retry queue and the parked queue, and consumers on the work queue')
    .argument('<queue>', 'the work queue')
    .option('--delays <list>', 'the consumer\'s delays, comma-separated', DEFAULT_DELAYS.join(','))
    .action((queue: string, o: { delays: string }) => {
      action = async (rr) => {
        const delays = o.delays.split(',').map((d) => d.trim()).filter(Boolean);
        let names: string[];
        try {
          // retryQueueName refuses what is not a delay, with the error below.
          names = [queue, ...delays.map((d) => retryQueueName(queue, d as Delay)), `${queue}.parked`];
        } catch (e) {
          throw new UsageError(`--delays: ${(e as Error).message}`);
        }
        const rows = [];
        for (const [i, name] of names.entries()) {
          const info = await rr.queueInfo(name);
          const role = i === 0 ? 'work' : i === names.length - 1 ? 'parked' : 'retry';
          rows.push({ queue: name, role, exists: info !== null, messages: info?.messages ?? 0, consumers: info?.consumers ?? 0 });
        }
        if (json()) io.out(JSON.stringify({ queue, queues: rows }, null, 2));
        else
          io.out(
            formatTable(
              ['QUEUE', 'ROLE', 'MESSAGES', 'CONSUMERS'],
              rows.map((r) => [r.queue, r.role, r.exists ? String(r.messages) : 'missing', r.exists ? String(r.consumers) : '-']),
            ),
          );
      };
    });

  const parked = program.command('parked').description('inspect, replay or purge parked messages');
  const filterOptions = (c: Command) =>
    c
      .option('--reason <reason>', 'only messages parked for this reason (exhausted, non-retryable)')
      .option('--error <text>', 'only messages whose error message contains this text')
      .option('--error-name <name>', 'only messages whose error has this name');

  filterOptions(
    parked
      .command('peek')
      .description('show parked messages; every one stays parked')
      .argument('<queue>', 'the work queue')
      .addOption(new Option('--limit <n>', 'at most this many').argParser(positiveInt).default(20)),
  ).action((queue: string, o: { limit: number; reason?: string; error?: string; errorName?: string }) => {
    action = async (rr) => {
      const msgs = await rr.parked(queue).peek({ limit: o.limit, filter: filterFrom(o) });
      if (json()) {
        io.out(JSON.stringify({ queue, parkedQueue: `${queue}.parked`, messages: msgs.map(describeParked) }, null, 2));
        return;
      }
      if (msgs.length === 0) {
        io.out(`no parked messages in ${queue}.parked${filterFrom(o) ? ' match' : ''}`);
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
            String(m.headers['retry-failed-at'] ?? '-'),
          ]),
        ),
      );
    };
  });

  filterOptions(
    parked
      .command('replay')
      .description('move parked messages back to the work queue, at a safe rate')
      .argument('<queue>', 'the work queue')
      .addOption(new Option('--limit <n>', 'at most this many').argParser(positiveInt))
      .addOption(new Option('--rate <perSec>', 'at most this many a second').argParser(positiveNumber).default(50)),
  ).action((queue: string, o: { limit?: number; rate: number; reason?: string; error?: string; errorName?: string }) => {
    action = async (rr) => {
      const showBar = io.isTTY && !json();
      const result = await rr.parked(queue).replay({
        limit: o.limit,
        ratePerSec: o.rate,
        filter: filterFrom(o),
        onProgress: showBar ? (p) => io.err(`\r${progressBar(p.replayed, p.total)}`) : undefined,
      });
      if (showBar) io.err('\n');
      if (json()) io.out(JSON.stringify({ queue, ...result }, null, 2));
      else io.out(`replayed ${result.replayed} message(s) to ${queue} in ${(result.durationMs / 1000).toFixed(1)} s; ${result.skipped} not selected stay parked`);
    };
  });

  parked
    .command('purge')
    .description('delete every parked message')
    .argument('<queue>', 'the work queue')
    .option('--yes', 'confirm: the messages are gone for good')
    .action((queue: string, o: { yes?: boolean }) => {
      if (!o.yes) throw new UsageError(`purging ${queue}.parked deletes its messages for good: add --yes to confirm`);
      action = async (rr) => {
        const purged = await rr.parked(queue).purge();
        if (json()) io.out(JSON.stringify({ queue, parkedQueue: `${queue}.parked`, purged }, null, 2));
        else io.out(`purged ${purged} message(s) from ${queue}.parked`);
      };
    });

  const tableCommand = program
    .command('table')
    .description('look at and operate the retry table (PostgreSQL)')
    .hook('preAction', () => {
      needsDb = true;
    });
  const selectorOptions = (c: Command) =>
    c
      .option('--dependency <name>', 'rows of this dependency')
      .option('--tenant <name>', 'rows of this tenant')
      .option('--error-name <name>', 'rows whose error has this name');
  const selectorFrom = (o: { dependency?: string; tenant?: string; errorName?: string }) => {
    if (o.dependency === undefined && o.tenant === undefined && o.errorName === undefined) {
      throw new UsageError('say which rows: --dependency, --tenant or --error-name');
    }
    return { dependency: o.dependency, tenant: o.tenant, errorName: o.errorName };
  };

  tableCommand
    .command('list')
    .description('rows of the retry table, oldest first')
    .option('--dependency <name>', 'rows of this dependency')
    .option('--tenant <name>', 'rows of this tenant')
    .option('--due', 'only rows due now')
    .addOption(new Option('--limit <n>', 'at most this many').argParser(positiveInt).default(50))
    .action((o: { dependency?: string; tenant?: string; due?: boolean; limit: number }) => {
      action = async (rr) => {
        const rows = await rr.retryTable.list({ dependency: o.dependency, tenant: o.tenant, due: o.due, limit: o.limit });
        if (json()) {
          io.out(JSON.stringify({ rows }, null, 2));
          return;
        }
        if (rows.length === 0) {
          io.out('no rows');
          return;
        }
        io.out(
          formatTable(
            ['ID', 'QUEUE', 'ATTEMPT', 'DEPENDENCY', 'PAUSED', 'NEXT ATTEMPT', 'ERROR'],
            rows.map((r) => [
              String(r.id),
              r.queue,
              String(r.attempt),
              r.dependency ?? '-',
              r.paused ? 'yes' : 'no',
              r.nextAttemptAt ? r.nextAttemptAt.toISOString() : 'held',
              cut(`${r.errorName ?? 'Error'}: ${r.lastError ?? ''}`, 50),
            ]),
          ),
        );
      };
    });

  selectorOptions(tableCommand.command('pause').description('pause rows: the scheduler skips them')).action(
    (o: { dependency?: string; tenant?: string; errorName?: string }) => {
      const sel = selectorFrom(o);
      action = async (rr) => {
        const rows = await rr.retryTable.pause(sel);
        io.out(json() ? JSON.stringify({ paused: rows }, null, 2) : `paused ${rows} row(s)`);
      };
    },
  );

  selectorOptions(tableCommand.command('resume').description('resume rows and make them due now; the scheduler drains them at its rate')).action(
    (o: { dependency?: string; tenant?: string; errorName?: string }) => {
      const sel = selectorFrom(o);
      action = async (rr) => {
        const rows = await rr.retryTable.resume(sel);
        io.out(json() ? JSON.stringify({ resumed: rows }, null, 2) : `resumed ${rows} row(s)`);
      };
    },
  );

  tableCommand
    .command('stats')
    .description('rows by dependency, paused, held and due, and the age of the oldest due row')
    .action(() => {
      action = async (rr) => {
        const st = await rr.retryTable.stats();
        const { schedulerPublished: _p, schedulerPublishFailed: _f, ...counts } = st;
        if (json()) {
          io.out(JSON.stringify(counts, null, 2));
          return;
        }
        io.out(`rows ${st.rows}, paused ${st.paused}, held ${st.held}, due ${st.due}, oldest due ${(st.oldestDueAgeMs / 1000).toFixed(1)} s ago`);
        if (st.byDependency.length) {
          io.out(formatTable(['DEPENDENCY', 'ROWS'], st.byDependency.map((d) => [d.dependency ?? '(none)', String(d.rows)])));
        }
      };
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      return e.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (e instanceof UsageError) {
      io.err(`error: ${e.message}\n`);
      return EXIT.usage;
    }
    throw e;
  }
  if (!action) {
    io.err(program.helpInformation());
    return EXIT.usage;
  }
  const url = program.opts<{ url?: string }>().url ?? io.env.AMQP_URL ?? DEFAULT_URL;
  let rr: RabbitRetry | undefined;
  try {
    const db = program.opts<{ db?: string }>().db ?? io.env.RETRY_TABLE_URL;
    const usesTable = needsDb;
    if (usesTable && !db) throw new UsageError('the table commands need the database: --db postgres://… or RETRY_TABLE_URL');
    // The CLI looks and operates; it never runs a scheduler of its own.
    rr = await RabbitRetry.connect({ url, connectTimeoutMs: 5000, retryTable: usesTable && db ? { url: db, scheduler: false } : undefined });
    await action(rr);
    return EXIT.ok;
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`error: ${e.message}\n`);
      return EXIT.usage;
    }
    const code = e instanceof RabbitRetryError ? ` [${e.code}]` : '';
    const hint =
      e instanceof RabbitRetryError && e.code === 'CONNECTION'
        ? '\nhint: start a broker (npm run broker) or pass --url / set AMQP_URL'
        : '';
    io.err(`error${code}: ${(e as Error).message ?? String(e)}${hint}\n`);
    return EXIT.runtime;
  } finally {
    await rr?.close().catch(() => undefined);
  }
}

if (require.main === module) {
  void run(process.argv.slice(2), {
    out: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
    err: (t) => process.stderr.write(t),
    isTTY: Boolean(process.stderr.isTTY),
    env: process.env,
  }).then((code) => {
    process.exitCode = code;
  });
}
