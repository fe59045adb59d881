/**
 * What the page polls: the work queues with the depths of their retry and
 * parked queues (or, with the broker's delayed retry, the messages it holds
 * delayed), the jobs, and the retry table, read at most once a second
 * however many pages poll.
 */
import type { RabbitRetry } from '../client';
import { parkedQueueName, retryQueueName } from '../native';
import type { KnownQueue, ManagementStatus } from './discovery';
import type { JobView, Jobs, KeyedQueue } from './jobs';
import type { KnownQueues } from './known-queues';
import type { OutboxReader, OutboxView } from './outbox-view';
import { FRESH_MS } from './cached';
import type { TableReader, TableView } from './table-view';

/** A work queue's depths, as the page shows them. */
export interface QueueView {
  /** The work queue. */
  queue: string;
  /** Where the console learned of it. */
  sources: KnownQueue['sources'];
  /** The work queue's ready messages and consumers; null when it does not exist. */
  work: {
    /** Ready messages. */
    messages: number;
    /** Consumers on it. */
    consumers: number;
  } | null;
  /** Each retry queue that exists: its delay's label, name and ready messages. */
  retry: {
    /** The delay's label (`5s`). */
    delay: string;
    /** The retry queue's name. */
    queue: string;
    /** Messages waiting in it. */
    messages: number;
  }[];
  /** Whether it retries with the broker's delayed retry (`onFailure.brokerDelay`): no retry queues, see `delayed`. */
  brokerDelay: boolean;
  /**
   * With `brokerDelay`: the messages the broker holds in the work queue's
   * delayed state (not counted in `work.messages`), from the management API;
   * null when the management API does not answer, or without `brokerDelay`.
   */
  delayed: number | null;
  /** The parked queue's name. */
  parkedQueue: string;
  /** Parked messages; null when the parked queue does not exist. */
  parked: number | null;
  /** Rows of the retry table for this queue (among those read), or null without a table. */
  tableRows: number | null;
  /** Whether a replay or purge of its parked messages is queued or running. */
  busy: boolean;
}

/** What the page polls: everything but the groups. */
export interface ConsoleState {
  /** The broker's URL, password hidden. */
  broker: string;
  /** Whether the management API answered. */
  management: ManagementStatus;
  /** The most parked messages grouped per queue. */
  scanLimit: number;
  /** The replay rate the page offers first. */
  ratePerSec: number;
  /** The work queues. */
  queues: QueueView[];
  /** Replays and purges, oldest first. */
  jobs: JobView[];
  /** The retry table; null when the client has none. */
  table: TableView | null;
  /** Why the table could not be read. */
  tableError: string | null;
  /** The transactional outbox and the inbox's duplicates; null when the client has no outbox. */
  outbox: OutboxView | null;
  /** Why the outbox could not be read. */
  outboxError: string | null;
  /** When this was read, ISO 8601. */
  at: string;
}

/** What the state needs of its console. */
export interface StateHost {
  readonly client: Pick<RabbitRetry, 'url' | 'queueInfo'>;
  /** The queues' jobs: a running one holds parked messages unacked. */
  readonly jobs: Pick<Jobs, 'active' | 'running' | 'views'>;
  /** The queues' turns: a reading of the parked queue holds its messages unacked. */
  readonly order: Pick<KeyedQueue, 'busy'>;
  readonly queues: Pick<KnownQueues, 'list' | 'status' | 'delayed'>;
  readonly table: Pick<TableReader, 'refresh' | 'view' | 'error'>;
  readonly outbox: Pick<OutboxReader, 'refresh' | 'view' | 'error'>;
}

/** The work queues' depths, read at most once a second, and the state built from them. */
export class ConsoleStateCache {
  private depths = new Map<string, QueueView>();
  private depthsAt = 0;
  private depthsAsk?: Promise<void>;

  constructor(
    private readonly host: StateHost,
    private readonly scanLimit: number,
    private readonly ratePerSec: number,
  ) {}

  /** The next reading of the depths reads them anew (a job ended). */
  invalidate(): void {
    this.depthsAt = 0;
  }

  /** Everything the page polls. */
  async state(): Promise<ConsoleState> {
    const { client, jobs, table: reader, outbox } = this.host;
    const queues = await this.host.queues.list();
    await Promise.all([this.refresh(queues), reader.refresh(), outbox.refresh()]);
    const table = reader.view;
    return {
      broker: client.url,
      management: this.host.queues.status,
      scanLimit: this.scanLimit,
      ratePerSec: this.ratePerSec,
      queues: queues.map((q) => {
        const d = this.depths.get(q.queue);
        return {
          queue: q.queue,
          sources: q.sources,
          work: d?.work ?? null,
          retry: d?.retry ?? [],
          brokerDelay: q.brokerDelay === true,
          delayed: d?.delayed ?? null,
          parkedQueue: parkedQueueName(q.queue),
          parked: d?.parked ?? null,
          tableRows: table ? (table.byQueue[q.queue] ?? 0) : null,
          busy: jobs.active(q.queue),
        };
      }),
      jobs: jobs.views(),
      table,
      tableError: reader.error,
      outbox: outbox.view,
      outboxError: outbox.error,
      at: new Date().toISOString(),
    };
  }

  private async refresh(queues: KnownQueue[]): Promise<void> {
    if (Date.now() - this.depthsAt < FRESH_MS && queues.every((q) => this.depths.has(q.queue))) return;
    this.depthsAsk ??= (async () => {
      const next = new Map<string, QueueView>();
      // One queue the console cannot read (another connection's exclusive queue, one deleted meanwhile) costs only its own row.
      const info = (name: string) => this.host.client.queueInfo(name).catch(() => null);
      for (let i = 0; i < queues.length; i += 8) {
        await Promise.all(
          queues.slice(i, i + 8).map(async (q) => {
            const parkedQueue = parkedQueueName(q.queue);
            const reading = this.host.order.busy(q.queue) && !this.host.jobs.active(q.queue);
            const [work, delayed, read, ...retry] = await Promise.all([
              info(q.queue),
              q.brokerDelay ? this.host.queues.delayed(q.queue) : null,
              // A reading holds the parked messages unacked for a moment: keep the depth read before it.
              reading && this.depths.has(q.queue) ? Promise.resolve(undefined) : info(parkedQueue),
              ...q.delays.map((d) => info(retryQueueName(q.queue, d))),
            ]);
            // A job holds up to the queue's depth unacked while it works: what is parked is what it had not yet moved.
            const job = this.host.jobs.running(q.queue);
            const parked = read && job?.parkedAtStart !== undefined ? { ...read, messages: Math.max(read.messages, job.parkedAtStart - job.done) } : read;
            next.set(q.queue, {
              queue: q.queue,
              sources: q.sources,
              work,
              retry: q.delays.flatMap((d, j) => (retry[j] ? [{ delay: d, queue: retryQueueName(q.queue, d), messages: retry[j].messages }] : [])),
              brokerDelay: q.brokerDelay === true,
              delayed,
              parkedQueue,
              parked: parked === undefined ? (this.depths.get(q.queue)?.parked ?? null) : (parked?.messages ?? null),
              tableRows: null,
              busy: false,
            });
          }),
        );
      }
      this.depths = next;
      this.depthsAt = Date.now();
    })().finally(() => {
      this.depthsAsk = undefined;
    });
    await this.depthsAsk;
  }
}
