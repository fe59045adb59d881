/** The commands on the tables in PostgreSQL: `table list`, `table pause`, `table resume`, `table stats`, and `outbox status`. */
import { type Command, Option } from 'commander';

import type { RowSelector } from '../table';
import { type Cli, UsageError, cut, formatTable, positiveInt } from './common';

/** The options of `table pause` and `table resume` that select rows. */
interface SelectorOptions {
  dependency?: string;
  tenant?: string;
  errorName?: string;
}

function selectorOptions(c: Command): Command {
  return c
    .option('--dependency <name>', 'rows of this dependency')
    .option('--tenant <name>', 'rows of this tenant')
    .option('--error-name <name>', 'rows whose error has this name');
}

function selectorFrom(o: SelectorOptions): RowSelector {
  if (o.dependency === undefined && o.tenant === undefined && o.errorName === undefined) {
    throw new UsageError('say which rows: --dependency, --tenant or --error-name');
  }
  return { dependency: o.dependency, tenant: o.tenant, errorName: o.errorName };
}

/** `table list`: rows, oldest first. */
function listCommand(table: Command, cli: Cli): void {
  const { io } = cli;
  table
    .command('list')
    .description('rows of the retry table, oldest first')
    .option('--dependency <name>', 'rows of this dependency')
    .option('--tenant <name>', 'rows of this tenant')
    .option('--due', 'only rows due now')
    .addOption(new Option('--limit <n>', 'at most this many').argParser(positiveInt).default(50))
    .action((o: { dependency?: string; tenant?: string; due?: boolean; limit: number }) => {
      cli.action = async (rr) => {
        const rows = await rr.retryTable.list({ dependency: o.dependency, tenant: o.tenant, due: o.due, limit: o.limit });
        if (cli.json()) {
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
}

/** `table pause`: the scheduler skips the selected rows. */
function pauseCommand(table: Command, cli: Cli): void {
  selectorOptions(table.command('pause').description('pause rows: the scheduler skips them')).action((o: SelectorOptions) => {
    const sel = selectorFrom(o);
    cli.action = async (rr) => {
      const rows = await rr.retryTable.pause(sel);
      cli.io.out(cli.json() ? JSON.stringify({ paused: rows }, null, 2) : `paused ${rows} row(s)`);
    };
  });
}

/** `table resume`: the selected rows run again, due now. */
function resumeCommand(table: Command, cli: Cli): void {
  selectorOptions(table.command('resume').description('resume rows and make them due now; the scheduler drains them at its rate')).action(
    (o: SelectorOptions) => {
      const sel = selectorFrom(o);
      cli.action = async (rr) => {
        const rows = await rr.retryTable.resume(sel);
        cli.io.out(cli.json() ? JSON.stringify({ resumed: rows }, null, 2) : `resumed ${rows} row(s)`);
      };
    },
  );
}

/** `table stats`: counts, and the age of the oldest due row. */
function statsCommand(table: Command, cli: Cli): void {
  const { io } = cli;
  table
    .command('stats')
    .description('rows by dependency, paused, held and due, and the age of the oldest due row')
    .action(() => {
      cli.action = async (rr) => {
        const st = await rr.retryTable.stats();
        const { schedulerPublished: _p, schedulerPublishFailed: _f, ...counts } = st;
        if (cli.json()) {
          io.out(JSON.stringify(counts, null, 2));
          return;
        }
        io.out(`rows ${st.rows}, paused ${st.paused}, held ${st.held}, due ${st.due}, oldest due ${(st.oldestDueAgeMs / 1000).toFixed(1)} s ago`);
        if (st.byDependency.length) {
          io.out(
            formatTable(
              ['DEPENDENCY', 'ROWS'],
              st.byDependency.map((d) => [d.dependency ?? '(none)', String(d.rows)]),
            ),
          );
        }
      };
    });
}

/** `table list|pause|resume|stats`: each needs the database (`--db` or `RETRY_TABLE_URL`). */
export function tableCommands(program: Command, cli: Cli): void {
  const table = program
    .command('table')
    .description('look at and operate the retry table (PostgreSQL)')
    .hook('preAction', () => {
      cli.needsDb = true;
    });
  listCommand(table, cli);
  pauseCommand(table, cli);
  resumeCommand(table, cli);
  statsCommand(table, cli);
}

/** `outbox status`: the outbox's pending and parked rows, its oldest pending row's age, and each consumer's inbox duplicates. */
export function outboxCommands(program: Command, cli: Cli): void {
  const { io } = cli;
  program
    .command('outbox')
    .description('look at the transactional outbox (PostgreSQL)')
    .hook('preAction', () => {
      cli.needsDb = true;
      cli.needsOutbox = true;
    })
    .command('status')
    .description('pending and parked rows, the age of the oldest pending row, and the duplicates each inbox skipped')
    .action(() => {
      cli.action = async (rr) => {
        const { published: _p, parkedByRelay: _r, ...st } = await rr.outbox.stats();
        const inbox = await rr.outbox.inboxDuplicates();
        if (cli.json()) {
          io.out(JSON.stringify({ ...st, inboxDuplicates: inbox }, null, 2));
          return;
        }
        io.out(`outbox: pending ${st.pending}, parked ${st.parked}, oldest pending ${(st.oldestPendingAgeMs / 1000).toFixed(1)} s ago`);
        if (inbox.length === 0) {
          io.out('inbox: no duplicates skipped');
          return;
        }
        io.out(
          formatTable(
            ['CONSUMER', 'DUPLICATES', 'LAST'],
            inbox.map((d) => [d.consumer, String(d.duplicates), d.lastAt.toISOString()]),
          ),
        );
      };
    });
}
