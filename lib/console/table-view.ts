/**
 * The retry table as the page shows it: its counts, by dependency and by
 * queue, and its oldest rows, read at most once a second.
 */
import type { RabbitRetry } from '../client';
import type { RetryRow, RetryTable } from '../table';
import { CachedReading } from './cached';

/** Rows of the retry table read to count them by dependency and queue. */
export const TABLE_READ = 10_000;

/** A dependency of the retry table, with its rows counted. */
export interface DependencyView {
  /** The dependency; null for rows without one. */
  dependency: string | null;
  /** Its rows. */
  rows: number;
  /** Rows paused (among those read). */
  paused: number;
  /** Rows waiting for a person (among those read). */
  held: number;
  /** Rows due now and not paused (among those read). */
  due: number;
  /** Whether a pause of the dependency is in force (rows stored later are paused too). */
  pauseInForce: boolean;
}

/** A retry-table row, as the page reads it. */
export type RowView = Omit<RetryRow, 'nextAttemptAt' | 'firstFailedAt' | 'updatedAt'> & {
  /** When it is due, ISO 8601; null waits for a person. */
  nextAttemptAt: string | null;
  /** When it failed first, ISO 8601. */
  firstFailedAt: string;
  /** Last change, ISO 8601. */
  updatedAt: string;
};

/** The retry table, as the page shows it. */
export interface TableView {
  /** Rows in all. */
  rows: number;
  /** Paused rows. */
  paused: number;
  /** Rows waiting for a person. */
  held: number;
  /** Rows due now and not paused. */
  due: number;
  /** Age of the oldest due row, ms. */
  oldestDueAgeMs: number;
  /** Rows read to count by dependency and queue (the oldest first). */
  read: number;
  /** Whether the table holds more rows than were read. */
  truncated: boolean;
  /** Its dependencies, the most rows first. */
  dependencies: DependencyView[];
  /** Rows by work queue (among those read). */
  byQueue: Record<string, number>;
  /** The oldest rows, up to 25. */
  oldest: RowView[];
}

/** A row with its dates as ISO 8601. */
function rowView(r: RetryRow): RowView {
  return {
    ...r,
    nextAttemptAt: r.nextAttemptAt ? r.nextAttemptAt.toISOString() : null,
    firstFailedAt: r.firstFailedAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
  };
}

/** The retry table's last reading, and what went wrong with it. */
export class TableReader {
  private readonly reading = new CachedReading<TableView>();

  constructor(private readonly client: Pick<RabbitRetry, 'retryTable'>) {}

  /** The client's retry table, or undefined when it has none. */
  retryTable(): RetryTable | undefined {
    try {
      return this.client.retryTable;
    } catch {
      return undefined;
    }
  }

  /** The last reading; null before the first, and without a table. */
  get view(): TableView | null {
    return this.reading.value;
  }

  /** Why the last reading failed; null when it did not, and without a table. */
  get error(): string | null {
    return this.retryTable() ? this.reading.error : null;
  }

  /** The next {@link refresh} reads the table anew (an action changed it). */
  invalidate(): void {
    this.reading.invalidate();
  }

  /** Reads the table again when the last reading is older than a second; one reading at a time. */
  async refresh(): Promise<void> {
    const table = this.retryTable();
    if (!table) return;
    await this.reading.refresh(async () => {
      const [stats, rows] = await Promise.all([table.stats(), table.list({ limit: TABLE_READ })]);
      const byDependency = new Map<string | null, DependencyView>();
      for (const d of stats.byDependency) {
        byDependency.set(d.dependency, { dependency: d.dependency, rows: d.rows, paused: 0, held: 0, due: 0, pauseInForce: false });
      }
      const byQueue: Record<string, number> = {};
      const now = Date.now();
      for (const r of rows) {
        byQueue[r.queue] = (byQueue[r.queue] ?? 0) + 1;
        let d = byDependency.get(r.dependency);
        if (!d) {
          d = { dependency: r.dependency, rows: 0, paused: 0, held: 0, due: 0, pauseInForce: false };
          byDependency.set(r.dependency, d);
        }
        if (r.paused) d.paused++;
        if (r.nextAttemptAt === null) d.held++;
        else if (!r.paused && r.nextAttemptAt.getTime() <= now) d.due++;
      }
      const dependencies = [...byDependency.values()].sort((a, b) => b.rows - a.rows);
      await Promise.all(
        dependencies.map(async (d) => {
          if (d.dependency !== null) d.pauseInForce = await table.isPaused({ dependency: d.dependency });
        }),
      );
      return {
        rows: stats.rows,
        paused: stats.paused,
        held: stats.held,
        due: stats.due,
        oldestDueAgeMs: stats.oldestDueAgeMs,
        read: rows.length,
        truncated: stats.rows > rows.length,
        dependencies,
        byQueue,
        oldest: rows.slice(0, 25).map(rowView),
      };
    });
  }
}
