/**
 * Docs that cannot drift: the README stays short, and every table of the
 * docs that lists a reason, a code or an option lists exactly the ones the
 * code declares (lib/contract.ts, written by cargo test from the native
 * side's own lists; lib/errors.ts for the codes only JavaScript raises).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { NATIVE_ERROR_CODES, OUTBOX_PARK_REASONS, PARK_REASONS } from '../lib/contract';
import { JS_ERROR_CODES } from '../lib/errors';

const root = join(__dirname, '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/** The rows of the markdown table of `file` whose header row is `header`, each split into its cells. */
function tableRows(file: string, header: string): string[][] {
  const lines = read(file).split('\n');
  const start = lines.findIndex((l) => l.trim() === header);
  if (start < 0) throw new Error(`${file} has no table headed ${header}`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

/** The first backticked name of each row's cell `column`. */
function names(rows: string[][], column = 0): string[] {
  return rows.map((r) => /`([^`]+)`/.exec(r[column] ?? '')?.[1] ?? r[column]);
}

const sorted = (xs: readonly string[]) => [...xs].sort();

describe('the docs', () => {
  it('README.md stays within 300 lines', () => {
    const lines = read('README.md').split('\n').length;
    expect(lines).toBeLessThanOrEqual(300);
  });

  it("failure-path.md's table of parked reasons lists every retry-reason a parked copy can carry, and no other", () => {
    expect(sorted(names(tableRows('docs/failure-path.md', '| `retry-reason` | when |')))).toEqual(sorted(PARK_REASONS));
  });

  it("failure-path.md's header table names every retry-reason a copy can carry", () => {
    const row = tableRows('docs/failure-path.md', '| header | value |').find((r) => r[0] === '`retry-reason`');
    const listed = [...(row?.[1] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    expect(sorted(listed)).toEqual(sorted(['retry', 'retry-table', ...PARK_REASONS]));
  });

  it("api.md's error table lists every error code, native and JavaScript's own, once", () => {
    const codes = names(tableRows('docs/api.md', '| class | code | when |'), 1);
    expect(sorted(codes)).toEqual(sorted([...NATIVE_ERROR_CODES, ...JS_ERROR_CODES]));
  });

  it("outbox.md's table of parked rows lists every park_reason of the relay", () => {
    expect(sorted(names(tableRows('docs/outbox.md', '| `park_reason` | when |')))).toEqual(sorted(OUTBOX_PARK_REASONS));
  });
});
