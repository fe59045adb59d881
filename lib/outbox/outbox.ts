import type { OutboxParkReason } from '../contract';
import { InvalidOptionsError, native, nativeSync } from '../errors';
import type { NativeOutbox } from '../native';
import type { MeterProviderLike } from '../telemetry/otel';
import { outboxMetrics } from '../telemetry/metrics';
import type { Body } from '../messaging/publish';
import type { TransactionLike } from '../sql';
import { type OutboxPublishOptions, writeOutbox } from './write';

export type { OutboxPublishOptions } from './write';

/** Counts of the outbox, and of this process's relay. */
export interface OutboxStats {
  /** Rows waiting to be published. */
  pending: number;
  /** Rows parked: they will not be published until {@link Outbox.retryParked}. */
  parked: number;
  /** Age in ms of the oldest pending row; 0 when none. When it keeps growing, no relay is publishing: alert on it. */
  oldestPendingAgeMs: number;
  /** Rows this process's relay published (and deleted) since it started. */
  published: number;
  /** Rows this process's relay parked since it started. */
  parkedByRelay: number;
}

export type { OutboxParkReason } from '../contract';

/** A parked row of the outbox (its body stays in the database). */
export interface ParkedOutboxRow {
  /** Row id, for {@link Outbox.retryParked} and {@link Outbox.deleteParked}. */
  id: number;
  /** The exchange it was to be published to. */
  exchange: string;
  /** Its routing key. */
  routingKey: string;
  /** Its ordering key. */
  orderingKey: string | null;
  /** Its `messageId` property. */
  messageId: string | null;
  /** How many times the broker refused it (`basic.nack`). */
  attempts: number;
  /** When it was written. */
  createdAt: Date;
  /** When it was parked. */
  parkedAt: Date;
  /** Why it was parked. */
  parkReason: OutboxParkReason;
  /** The error that parked it. */
  lastError: string | null;
}

/** A consumer's count of deliveries its inbox skipped as already handled. */
export interface InboxDuplicateCount {
  /** The consumer's name in the inbox. */
  consumer: string;
  /** Deliveries skipped as duplicates. */
  duplicates: number;
  /** When the last one was skipped. */
  lastAt: Date;
}

/** The transaction {@link Outbox.publish} writes in: a pg client inside `BEGIN`, a TypeORM `EntityManager` of a transaction, or `{ adapter, tx }`. */
export type OutboxTransaction = TransactionLike;

function checkIds(method: string, ids: unknown): number[] {
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1)) {
    throw new InvalidOptionsError(`${method}: ids must be an array of row ids`);
  }
  return ids as number[];
}

/**
 * The transactional outbox (`rabbit_retry_outbox` in PostgreSQL): messages
 * written in the application's own transaction, published by a relay once
 * it committed. Get it as `rr.outbox` after connecting with `outbox: { url }`.
 */
export class Outbox {
  /** The last stats read, shared by the metrics' callbacks of one collection. */
  private recent?: { at: number; stats: Promise<OutboxStats> };

  /** Keeps the process running while this process's relay publishes: it runs in native threads, which Node does not wait for. */
  private running?: NodeJS.Timeout;

  /** @internal */
  constructor(
    private readonly inner: NativeOutbox,
    relay: boolean,
  ) {
    if (relay) this.running = setInterval(() => undefined, 2 ** 31 - 1);
  }

  /** The relay stopped: the process may end. @internal */
  stopped(): void {
    clearInterval(this.running);
  }

  /**
   * Writes a message into the outbox inside `tx`, the application's open
   * transaction: it is published once `tx` commits, and never when it rolls back.
   */
  publish(tx: OutboxTransaction, exchange: string, routingKey: string, body: Body, options: OutboxPublishOptions = {}): Promise<void> {
    return writeOutbox(tx, exchange, routingKey, body, options, (row) =>
      nativeSync(() => this.inner.check(row.exchange, row.routingKey, row.bodyLength, row.orderingKey, row.properties)),
    );
  }

  /** Pending and parked rows, the oldest pending row's age, and what this process's relay did. */
  async stats(): Promise<OutboxStats> {
    return native(() => this.inner.stats());
  }

  /** Parked rows, oldest first (at most `limit`, default 100). */
  async listParked(limit = 100): Promise<ParkedOutboxRow[]> {
    if (!Number.isInteger(limit) || limit < 1 || limit > 0xffffffff) {
      throw new InvalidOptionsError(`limit must be a whole number of at least 1, got ${String(limit)}`);
    }
    const rows = await native(() => this.inner.listParked(limit));
    return rows.map((r) => ({
      id: r.id,
      exchange: r.exchange,
      routingKey: r.routingKey,
      orderingKey: r.orderingKey ?? null,
      messageId: r.messageId ?? null,
      attempts: r.attempts,
      createdAt: new Date(r.createdAtMs),
      parkedAt: new Date(r.parkedAtMs),
      parkReason: r.parkReason as OutboxParkReason,
      lastError: r.lastError ?? null,
    }));
  }

  /** Puts parked rows back to be published (first of their key, as they keep their ids); resolves to how many were parked. */
  async retryParked(ids: readonly number[]): Promise<number> {
    const checked = checkIds('retryParked', ids);
    return native(() => this.inner.retryParked(checked));
  }

  /** Deletes parked rows; resolves to how many were parked. */
  async deleteParked(ids: readonly number[]): Promise<number> {
    const checked = checkIds('deleteParked', ids);
    return native(() => this.inner.deleteParked(checked));
  }

  /** Each consumer's count of deliveries its inbox skipped as already handled (`rabbit_retry_inbox_duplicates`). */
  async inboxDuplicates(): Promise<InboxDuplicateCount[]> {
    const rows = await native(() => this.inner.inboxDuplicates());
    return rows.map((r) => ({ consumer: r.consumer, duplicates: r.duplicates, lastAt: new Date(r.lastAtMs) }));
  }

  /** Registers the outbox's instruments (see `outboxMetrics`). @internal */
  observe(provider: MeterProviderLike | undefined): void {
    outboxMetrics(provider, () => {
      // One read serves every instrument of a collection.
      if (!this.recent || Date.now() - this.recent.at > 1000) this.recent = { at: Date.now(), stats: this.stats() };
      return this.recent.stats.catch(() => undefined);
    });
  }
}
