/**
 * What the CLI's commands share: where they write, the exit codes, the
 * parsers of numeric arguments, and the plain-text table.
 */
import { InvalidArgumentError } from 'commander';

import type { RabbitRetry } from '../client';

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

/** A mistake on the command line: exit code 2. */
export class UsageError extends Error {}

/** What the command given on the command line does, once connected. */
export type Action = (rr: RabbitRetry) => Promise<void>;

/** What the commands share with `run()`: each sets `action` when commander parses it. */
export interface Cli {
  readonly io: CliIo;
  /** Whether `--json` was given. */
  json(): boolean;
  /** The chosen command's action. */
  action?: Action;
  /** The chosen command needs the retry table's database. */
  needsDb: boolean;
  /** The chosen command uses the retry table's database when one is given. */
  wantsDb?: boolean;
  /** The chosen command reads the outbox in that database. */
  needsOutbox?: boolean;
}

/** A `--limit`: a whole number of at least 1. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1.');
  return n;
}

/** A `--rate`: a positive number. */
export function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number.');
  return n;
}

/** A plain-text table with aligned columns. */
export function formatTable(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (c ?? '').padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** `s` on one line, cut to `n` characters. */
export function cut(s: string | undefined, n: number): string {
  const one = (s ?? '').replace(/\s+/g, ' ');
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}

/**
 * Aborts `controller` on the first SIGINT or SIGTERM, and remembers which; the
 * returned function removes the handlers (call it when the work is done).
 */
export function abortOnSignals(controller: AbortController): { signal: () => string | undefined; done: () => void } {
  let got: string | undefined;
  const stop = (signal: NodeJS.Signals) => {
    got = signal;
    controller.abort();
  };
  const done = () => {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return { signal: () => got, done };
}
