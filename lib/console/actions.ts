/**
 * What the console does: replays and purges of parked messages, run as
 * jobs in each queue's turn, pauses, resumes and retries of the retry
 * table's dependencies, and retries and deletes of the outbox's parked rows.
 */
import type { RabbitRetry } from '../client';
import type { ParkedMessage } from '../parked';
import { fingerprint } from './fingerprint';
import { type Groupings, checkKey } from './groups';
import { HttpError, checkOpen } from './http';
import type { Job, JobScope, JobView, Jobs } from './jobs';
import type { OutboxReader } from './outbox-view';
import type { ConsoleStateCache } from './state';
import { TABLE_READ, type TableReader } from './table-view';
import { messageKey } from './views';

/** The longest wait for the parked queue's depth once a job ended, ms. */
const DEPTH_AFTER_MS = 2000;

/** What the retry table's actions do to a dependency. */
export type TableAction = 'pause' | 'resume' | 'retry-now';

/** What the outbox's actions do to its parked rows. */
export type OutboxAction = 'retry' | 'delete';

/** The most parked outbox rows one action names. */
const MAX_OUTBOX_IDS = 1000;

/** The scope, key and confirmed count of an action's body. */
function actionOf(body: Record<string, unknown>, scopes: JobScope[]): { scope: JobScope; key: string | null; count: number } {
  const scope = body.scope;
  if (typeof scope !== 'string' || !scopes.includes(scope as JobScope)) {
    throw new HttpError(400, 'BAD_REQUEST', `scope must be one of ${scopes.join(', ')}`);
  }
  let key: string | null = null;
  if (scope !== 'queue') {
    checkKey(body.key);
    key = body.key;
  }
  const count = body.count;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1) {
    throw new HttpError(400, 'BAD_REQUEST', 'count must be the number of messages the operator confirmed (a whole number of at least 1)');
  }
  return { scope: scope as JobScope, key, count: scope === 'message' ? 1 : count };
}

/** What the actions need of their console. */
export interface ActionsHost {
  readonly client: Pick<RabbitRetry, 'parked'>;
  readonly jobs: Pick<Jobs, 'start' | 'view'>;
  /** The groupings: a job's label names its group, and a job's end makes its queue's grouping stale. */
  readonly groupings: Pick<Groupings, 'group' | 'invalidate'>;
  /** The depths, read anew once a job ended. */
  readonly state: Pick<ConsoleStateCache, 'invalidate'>;
  /** The retry table, read anew after an action on it. */
  readonly table: Pick<TableReader, 'retryTable' | 'invalidate'>;
  /** The outbox, read anew after an action on it. */
  readonly outbox: Pick<OutboxReader, 'outbox' | 'invalidate'>;
  /** Aborted when the console closes: it takes no new action. */
  readonly closing: AbortSignal;
}

/** The console's actions on parked messages and on the retry table. */
export class Actions {
  constructor(
    private readonly host: ActionsHost,
    /** The replay rate when the request gives none. */
    private readonly ratePerSec: number,
  ) {}

  /** Starts replaying what `body` selects of the parked messages of `queue` (`scope`, `key`, `count`, `ratePerSec`). */
  replay(queue: string, body: Record<string, unknown>): JobView {
    checkOpen(this.host.closing);
    const { scope, key, count } = actionOf(body, ['queue', 'group', 'message']);
    const rate = body.ratePerSec ?? this.ratePerSec;
    if (typeof rate !== 'number' || !(rate > 0) || rate > 10_000) {
      throw new HttpError(400, 'BAD_REQUEST', 'ratePerSec must be a number above 0 and at most 10000');
    }
    return this.run('replay', queue, scope, key, count, rate);
  }

  /** Starts purging what `body` selects of the parked messages of `queue` (`scope`, `key`, `count`). */
  purge(queue: string, body: Record<string, unknown>): JobView {
    checkOpen(this.host.closing);
    const { scope, key, count } = actionOf(body, ['group', 'message']);
    return this.run('purge', queue, scope, key, count, null);
  }

  /**
   * Starts a job that replays or purges the parked messages of `queue` that
   * `scope` and `key` select, at most `count`, counting each by its group.
   * Once it ends, it reads how many messages the parked queue holds.
   */
  private run(kind: 'replay' | 'purge', queue: string, scope: JobScope, key: string | null, count: number, ratePerSec: number | null): JobView {
    const match = this.matcher(scope, key);
    const { client, jobs } = this.host;
    const job = jobs.start({ kind, queue, scope, key, label: this.label(queue, scope, key), total: count, ratePerSec }, async (j: Job) => {
      try {
        const parked = client.parked(queue);
        j.parkedAtStart = await parked.count();
        await parked.move({
          kind,
          limit: count,
          depth: j.parkedAtStart,
          ratePerSec,
          signal: j.signal,
          select: (m) => {
            if (!match(m)) return false;
            if (scope === 'message') j.label = `message ${m.properties.messageId ?? key}`;
            return true;
          },
          onMoved: (m, moved, skipped) => {
            const group = fingerprint(m).key;
            j.done = moved;
            j.skipped = skipped;
            j.byGroup[group] = (j.byGroup[group] ?? 0) + 1;
          },
        });
      } finally {
        j.left = await this.depthAfter(queue);
        this.host.groupings.invalidate(queue);
        this.host.state.invalidate();
      }
    });
    return jobs.view(job.id) as JobView;
  }

  /** The parked queue's depth after a job, or null when it cannot be read in time. */
  private async depthAfter(queue: string): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const late = new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), DEPTH_AFTER_MS);
      });
      return await Promise.race([this.host.client.parked(queue).count(), late]);
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  /** What the job acts on, in words. */
  private label(queue: string, scope: JobScope, key: string | null): string {
    if (scope === 'queue') return `every parked message of ${queue}`;
    if (scope === 'message') return `message ${key}`;
    const g = this.host.groupings.group(queue, key);
    return g ? `${g.errorName}: ${g.message}` : `group ${key}`;
  }

  /** What the job selects: the whole queue, a group, or a message. */
  private matcher(scope: JobScope, key: string | null): (m: ParkedMessage) => boolean {
    if (scope === 'group') return (m) => fingerprint(m).key === key;
    if (scope === 'message') return (m) => messageKey(m) === key;
    return () => true;
  }

  /**
   * Pauses, resumes or makes due now the retry table's rows of `body.dependency`
   * (or, for `retry-now`, the row `body.id`); resolves to the rows changed.
   */
  async table(action: TableAction, body: Record<string, unknown>): Promise<number> {
    const { closing } = this.host;
    checkOpen(closing);
    const table = this.host.table.retryTable();
    if (!table) throw new HttpError(404, 'NO_RETRY_TABLE', 'the console has no retry table: connect the client with { retryTable: { url } }');
    const { dependency, id } = body;
    this.host.table.invalidate();
    if (action === 'retry-now' && id !== undefined) {
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 1) throw new HttpError(400, 'BAD_REQUEST', 'id must be a row id');
      return (await table.retryNow(id)) ? 1 : 0;
    }
    if (typeof dependency !== 'string' || dependency === '') {
      throw new HttpError(400, 'BAD_REQUEST', action === 'retry-now' ? 'give a dependency or a row id' : 'give a dependency');
    }
    if (action === 'pause') return table.pause({ dependency });
    if (action === 'resume') return table.resume({ dependency });
    let n = 0;
    for (const r of await table.list({ dependency, limit: TABLE_READ })) {
      if (closing.aborted) break;
      if (await table.retryNow(r.id)) n++;
    }
    return n;
  }

  /**
   * Puts the outbox's parked rows `body.ids` back to be published (`retry`)
   * or deletes them (`delete`); resolves to how many of them were parked.
   */
  async outbox(action: OutboxAction, body: Record<string, unknown>): Promise<number> {
    checkOpen(this.host.closing);
    const outbox = this.host.outbox.outbox();
    if (!outbox) throw new HttpError(404, 'NO_OUTBOX', 'the console has no outbox: connect the client with { outbox: { url } }');
    const { ids } = body;
    if (
      !Array.isArray(ids) ||
      ids.length < 1 ||
      ids.length > MAX_OUTBOX_IDS ||
      ids.some((id) => typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1)
    ) {
      throw new HttpError(400, 'BAD_REQUEST', `ids must be the parked rows' ids (1 to ${MAX_OUTBOX_IDS})`);
    }
    this.host.outbox.invalidate();
    const checked = ids as number[];
    return action === 'retry' ? outbox.retryParked(checked) : outbox.deleteParked(checked);
  }
}
