/**
 * The parked messages of a queue grouped by failure, read in the queue's
 * turn (never beside a replay or purge of it) and kept until a job changes
 * the queue or the page asks again; and a group's messages, in full.
 */
import type { RabbitRetry } from '../client';
import { fingerprint } from './fingerprint';
import { HttpError, checkOpen } from './http';
import type { Jobs, KeyedQueue } from './jobs';
import { type Grouping, type MessageDetail, detailOf, groupParked } from './views';

/** What `GET api/queues/<queue>/groups` answers. */
export interface GroupsAnswer {
  /** The grouping; null when the queue is busy and was not grouped yet. */
  grouping: Grouping | null;
  /** Jobs with an id from this one on started after the grouping: the page takes what they did off its counts. */
  jobsFrom: number;
  /** Whether a job is acting on the queue (the grouping is then the last one made before it). */
  busy: boolean;
}

/** Checks a group's or a message's key. */
export function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || !/^[0-9a-f]{16,24}$/.test(key)) throw new HttpError(400, 'BAD_REQUEST', 'key must be a group or message key');
}

/** What the groupings need of their console. */
export interface GroupsHost {
  readonly client: Pick<RabbitRetry, 'parked'>;
  /** The queues' jobs: no reading while one acts on the queue. */
  readonly jobs: Pick<Jobs, 'active' | 'nextJobId'>;
  /** The queues' turns, which readings take as jobs do. */
  readonly order: Pick<KeyedQueue, 'run'>;
  /** Aborted when the console closes: readings stop taking messages. */
  readonly closing: AbortSignal;
}

/** The last grouping of each queue, and the readings under way. */
export class Groupings {
  private readonly last = new Map<string, { grouping: Grouping; jobsFrom: number; stale: boolean }>();
  private readonly reading = new Map<string, Promise<GroupsAnswer>>();

  constructor(
    private readonly host: GroupsHost,
    private readonly scanLimit: number,
  ) {}

  /** The group `key` of the last grouping of `queue`, if it has one. */
  group(queue: string, key: string | null): Grouping['groups'][number] | undefined {
    return this.last.get(queue)?.grouping.groups.find((x) => x.key === key);
  }

  /** The next reading of `queue` reads it anew. */
  invalidate(queue: string): void {
    const cached = this.last.get(queue);
    if (cached) cached.stale = true;
  }

  /** The queue's grouping: the last one, or a new reading when asked, when there is none, or after a job. */
  async read(queue: string, refresh: boolean): Promise<GroupsAnswer> {
    const cached = this.last.get(queue);
    const { client, jobs, order, closing } = this.host;
    const busy = jobs.active(queue);
    if (busy || (cached && !refresh && !cached.stale)) {
      return { grouping: cached?.grouping ?? null, jobsFrom: cached?.jobsFrom ?? jobs.nextJobId, busy };
    }
    let reading = this.reading.get(queue);
    if (!reading) {
      reading = order
        .run(queue, async () => {
          const jobsFrom = jobs.nextJobId;
          const grouping = await groupParked(client.parked(queue), this.scanLimit, closing);
          checkOpen(closing);
          this.last.set(queue, { grouping, jobsFrom, stale: false });
          return { grouping, jobsFrom, busy: false };
        })
        .finally(() => this.reading.delete(queue));
      this.reading.set(queue, reading);
    }
    return reading;
  }

  /** Up to `limit` messages of group `key`, in full, read in the queue's turn. */
  async messages(queue: string, key: string, limit: number): Promise<{ messages: MessageDetail[]; scanned: number; truncated: boolean }> {
    checkKey(key);
    const { client, jobs, order, closing } = this.host;
    if (jobs.active(queue)) {
      throw new HttpError(409, 'BUSY', `a replay or purge of '${queue}' is running; its messages open when it ends`);
    }
    return order.run(queue, async () => {
      const messages: MessageDetail[] = [];
      const parked = client.parked(queue);
      const depth = await parked.count();
      const scanned = await parked.scan(this.scanLimit, (m, position) => {
        if (fingerprint(m).key === key) messages.push(detailOf(m, position));
        return messages.length < limit && !closing.aborted;
      });
      checkOpen(closing);
      return { messages, scanned, truncated: messages.length < limit && depth > scanned };
    });
  }
}
