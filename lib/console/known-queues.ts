/**
 * The work queues the console knows of: those its client's consumers
 * consume, those named in its options, and those the management API lists,
 * asked again every 10 s (30 s after a failure); and, from the management
 * API, the delayed messages of those that retry with the broker's delay.
 */
import type { RabbitRetry } from '../client';
import { HttpError } from './http';
import { type KnownQueue, type ManagementStatus, mergeQueues, workQueuesOf } from './discovery';
import { type ManagementQueueRow, type ManagementTarget, isBrokerDelay, managementQueue, managementQueues } from './management';
import { reasonOf } from '../support/error-text';

/** The work queues of every source, and what the page is told of the management API. */
export class KnownQueues {
  /** What the page is told of the management API. */
  status: ManagementStatus;
  private rows: ManagementQueueRow[] = [];
  private at = 0;
  private ask?: Promise<void>;

  constructor(
    private readonly client: Pick<RabbitRetry, 'consumedQueues'>,
    private readonly named: readonly { queue: string; delays: string[] }[],
    private readonly target: ManagementTarget | undefined,
    status: ManagementStatus,
  ) {
    this.status = status;
  }

  /** Every work queue the console knows of. */
  async list(): Promise<KnownQueue[]> {
    await this.refreshManagement();
    const consumed = this.client.consumedQueues();
    const delayedRetry = new Set(this.rows.filter((r) => isBrokerDelay(r.arguments)).map((r) => r.name));
    const listed = workQueuesOf(this.rows.map((r) => r.name)).map((q) => (delayedRetry.has(q.queue) ? { ...q, brokerDelay: true as const } : q));
    return mergeQueues([
      { source: 'consumer', queues: consumed },
      { source: 'named', queues: [...this.named] },
      { source: 'management', queues: listed },
    ]);
  }

  /**
   * The messages queue `name` holds in the broker's delayed state, from the
   * management API; null when it is not asked, does not answer, or does not
   * know the queue.
   */
  async delayed(name: string): Promise<number | null> {
    if (!this.target || this.status.state !== 'ok') return null;
    return (await managementQueue(this.target, name).catch(() => null))?.delayed ?? null;
  }

  /** `name`, when it is a work queue the console knows of; otherwise an HTTP 404. */
  async known(name: string): Promise<string> {
    if (!(await this.list()).some((q) => q.queue === name)) {
      throw new HttpError(404, 'NOT_FOUND', `the console does not know a work queue '${name}'`);
    }
    return name;
  }

  /**
   * Asks the management API again when its answer is older than 10 s (30 s
   * after a failure): the first time it waits for the answer, later it uses
   * the last one while the next is on its way.
   */
  private async refreshManagement(): Promise<void> {
    const target = this.target;
    if (!target) return;
    const first = this.at === 0;
    const age = Date.now() - this.at;
    if (age < (this.status.state === 'ok' ? 10_000 : 30_000)) return;
    this.ask ??= managementQueues(target)
      .then(
        (rows) => {
          this.rows = rows;
          this.status = { state: 'ok', detail: `${target.base}: ${rows.length} queue(s) in vhost '${target.vhost}'` };
        },
        (err: unknown) => {
          this.rows = [];
          this.status = { state: 'unavailable', detail: `${target.base}: ${reasonOf(err)}` };
        },
      )
      .finally(() => {
        this.at = Date.now();
        this.ask = undefined;
      });
    if (first) await this.ask;
  }
}
