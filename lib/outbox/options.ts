/**
 * The options of the transactional outbox (`ConnectOptions.outbox`) and the
 * table of their keys; lib/options/check.ts checks them.
 */
/**
 * The transactional outbox in PostgreSQL: messages written into the table
 * `rabbit_retry_outbox` inside the application's own transaction, and the
 * relay that publishes them once that transaction committed (see
 * docs/inbox-outbox.md).
 */
export interface OutboxOptions {
  /** `postgres://user:password@host:5432/database`: the database of the application's transactions. The table is created there. */
  url: string;
  /**
   * Rows the relay publishes in one batch (one transaction, at most one
   * batch published twice after a crash).
   * @default 200
   */
  batchSize?: number;
  /**
   * Publish the rows of one ordering key in the order they were written, one
   * relay at a time per key; rows without a key are not ordered.
   * @default false
   */
  ordered?: boolean;
  /** Whether this process runs a relay. Run it in every process that writes, or in one process of its own. @default true */
  relay?: boolean;
  /** The longest wait, in milliseconds, between two looks at an empty outbox (the relay looks sooner right after rows came). @default 100 */
  pollIntervalMs?: number;
}

/** The keys of {@link OutboxOptions}. @internal */
export const OUTBOX_OPTION_KEYS = {
  url: true,
  batchSize: true,
  ordered: true,
  relay: true,
  pollIntervalMs: true,
} satisfies Record<keyof OutboxOptions, true>;
