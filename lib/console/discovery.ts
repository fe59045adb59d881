/**
 * Which work queues the console shows: the ones it was told, the ones the
 * process's consumers consume, and, when RabbitMQ's management API answers,
 * every queue with a parked queue beside it (AMQP itself cannot list queues).
 */
import { queueRole } from '../native';

export { type ManagementTarget, managementQueueNames, managementTarget } from './management';

/** A work queue with retry topology, and where the console learned of it. */
export interface KnownQueue {
  /** The work queue. */
  queue: string;
  /** The labels of its retry queues (`5s`, `1m`): `<queue>.retry.<label>`. */
  delays: string[];
  /** `consumer` (this process consumes it), `named` (given in the options) or `management` (listed by the management API). */
  sources: ('consumer' | 'named' | 'management')[];
  /** Set when it retries with the broker's delayed retry (`onFailure.brokerDelay`): no retry queue, delayed messages in the queue itself. */
  brokerDelay?: true;
}

/** A work queue as one source knows it. */
export type SourceQueue = Pick<KnownQueue, 'queue' | 'delays' | 'brokerDelay'>;

/** What the page is told of the management API. */
export interface ManagementStatus {
  /** `ok`: it answered; `unavailable`: it did not (see `detail`); `off`: the console was told not to ask. */
  state: 'ok' | 'unavailable' | 'off';
  /** Its address without credentials, and why it did not answer. */
  detail: string;
}

/**
 * The work queues among `names` (a virtual host's queues): each queue `Q`
 * with a `Q.parked` beside it, and the labels of its `Q.retry.*` queues.
 */
export function workQueuesOf(names: readonly string[]): SourceQueue[] {
  const all = new Set(names);
  const roles = names.map(queueRole);
  const byQueue = new Map<string, SourceQueue>();
  for (const r of roles) if (r.role === 'parked' && all.has(r.queue)) byQueue.set(r.queue, { queue: r.queue, delays: [] });
  for (const r of roles) if (r.role === 'retry') byQueue.get(r.queue)?.delays.push(r.delay);
  return [...byQueue.values()].sort((a, b) => a.queue.localeCompare(b.queue));
}

/** Merges the queues of every source into one list, each queue once, in the order first given. */
export function mergeQueues(lists: { source: KnownQueue['sources'][number]; queues: SourceQueue[] }[]): KnownQueue[] {
  const byName = new Map<string, KnownQueue>();
  for (const { source, queues } of lists) {
    for (const q of queues) {
      const known = byName.get(q.queue);
      if (!known) {
        byName.set(q.queue, { queue: q.queue, delays: [...q.delays], sources: [source], ...(q.brokerDelay ? { brokerDelay: true } : {}) });
        continue;
      }
      if (!known.sources.includes(source)) known.sources.push(source);
      if (q.brokerDelay) known.brokerDelay = true;
      for (const d of q.delays) if (!known.delays.includes(d)) known.delays.push(d);
    }
  }
  return [...byName.values()];
}
