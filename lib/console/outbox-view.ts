/**
 * The transactional outbox and the inbox as the page shows them: the
 * outbox's backlog, its parked rows with their reasons, this process's
 * relay, and each consumer's inbox duplicates, read at most once a second.
 */
import type { RabbitRetry } from '../client';
import type { Outbox, OutboxParkReason, ParkedOutboxRow } from '../outbox/outbox';
import { CachedReading } from './cached';

/** Parked rows of the outbox read for the page. */
export const OUTBOX_PARKED_READ = 100;

/** A parked row of the outbox, as the page reads it. */
export type ParkedOutboxRowView = Omit<ParkedOutboxRow, 'createdAt' | 'parkedAt'> & {
  /** When it was written, ISO 8601. */
  createdAt: string;
  /** When it was parked, ISO 8601. */
  parkedAt: string;
};

/** A consumer's inbox duplicates, as the page reads them. */
export interface InboxDuplicatesView {
  /** The consumer's name in the inbox. */
  consumer: string;
  /** Deliveries its inbox skipped as already handled. */
  duplicates: number;
  /** When the last one was skipped, ISO 8601. */
  lastAt: string;
}

/** The outbox and the inbox, as the page shows them. */
export interface OutboxView {
  /** Rows waiting to be published. */
  pending: number;
  /** Rows parked. */
  parked: number;
  /** Age of the oldest pending row, ms; 0 when none. */
  oldestPendingAgeMs: number;
  /** Rows this process's relay published since it started. */
  published: number;
  /** Rows this process's relay parked since it started. */
  parkedByRelay: number;
  /** Parked rows by reason (among those read). */
  parkedByReason: Partial<Record<OutboxParkReason, number>>;
  /** The oldest parked rows, up to 100. */
  parkedRows: ParkedOutboxRowView[];
  /** Whether more rows are parked than were read. */
  truncated: boolean;
  /** Each consumer's inbox duplicates. */
  inboxDuplicates: InboxDuplicatesView[];
}

/** The outbox's last reading, and what went wrong with it. */
export class OutboxReader {
  private readonly reading = new CachedReading<OutboxView>();

  constructor(private readonly client: Pick<RabbitRetry, 'outbox'>) {}

  /** The client's outbox, or undefined when it was connected without one. */
  outbox(): Outbox | undefined {
    try {
      return this.client.outbox;
    } catch {
      return undefined;
    }
  }

  /** The last reading; null before the first, and without an outbox. */
  get view(): OutboxView | null {
    return this.outbox() ? this.reading.value : null;
  }

  /** Why the last reading failed; null when it did not, and without an outbox. */
  get error(): string | null {
    return this.outbox() ? this.reading.error : null;
  }

  /** The next {@link refresh} reads the outbox anew (an action changed it). */
  invalidate(): void {
    this.reading.invalidate();
  }

  /** Reads the outbox again when the last reading is older than a second; one reading at a time. */
  async refresh(): Promise<void> {
    const outbox = this.outbox();
    if (!outbox) return;
    await this.reading.refresh(async () => {
      const [stats, rows, duplicates] = await Promise.all([outbox.stats(), outbox.listParked(OUTBOX_PARKED_READ), outbox.inboxDuplicates()]);
      const parkedByReason: OutboxView['parkedByReason'] = {};
      for (const r of rows) parkedByReason[r.parkReason] = (parkedByReason[r.parkReason] ?? 0) + 1;
      return {
        ...stats,
        parkedByReason,
        parkedRows: rows.map((r) => ({ ...r, createdAt: r.createdAt.toISOString(), parkedAt: r.parkedAt.toISOString() })),
        truncated: stats.parked > rows.length,
        inboxDuplicates: duplicates.map((d) => ({ consumer: d.consumer, duplicates: d.duplicates, lastAt: d.lastAt.toISOString() })),
      };
    });
  }
}
