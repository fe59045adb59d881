/**
 * A queue of one instance's own, which RabbitRetryServer's broadcast (`queue: ''`) and a
 * `@RabbitSubscribe` without `queue` but with `queueOptions: { exclusive: true }` (or
 * `autoDelete: true`) consume: named after its owner with 8 random hex digits, durable (its
 * retry queues dead-letter back to it) with `x-expires`, so that the broker deletes it 5
 * minutes after an instance that never closed is gone; deleted, with its retry queues, when
 * the instance closes.
 */
import { randomBytes } from 'node:crypto';

import type { RabbitRetry } from '../client';
import { parkedQueueName, retryQueueName } from '../native';
import { type ConsumeOptions, DEFAULT_DELAYS, type QueueArguments } from '../options';

/** How long the broker keeps a queue of an instance's own that nobody consumes (its instance is gone): 5 minutes. */
export const OWN_QUEUE_EXPIRES_MS = 300_000;

/** `<base>.<8 hex digits>`: a new name at every start. @internal */
export function ownQueueName(base: string): string {
  return `${base}.${randomBytes(4).toString('hex')}`;
}

/** The arguments of a queue of an instance's own: `x-expires` of {@link OWN_QUEUE_EXPIRES_MS}, unless `given` sets it. @internal */
export function ownQueueArguments(given?: QueueArguments): QueueArguments {
  return { 'x-expires': OWN_QUEUE_EXPIRES_MS, ...given };
}

/**
 * Deletes a queue of an instance's own when the instance closes: the work queue and its retry
 * queues, with the messages still in them; the parked queue only when it is empty, so that a
 * parked message stays until it is replayed or purged.
 * @internal
 */
export async function removeOwnQueues(rr: Pick<RabbitRetry, 'deleteQueue' | 'queueInfo'>, consume: ConsumeOptions): Promise<void> {
  const delays = consume.onFailure?.brokerDelay ? [] : (consume.onFailure?.delays ?? DEFAULT_DELAYS);
  for (const name of [consume.queue, ...delays.map((d) => retryQueueName(consume.queue, d))]) await rr.deleteQueue(name);
  const parked = parkedQueueName(consume.queue);
  if ((await rr.queueInfo(parked))?.messages === 0) await rr.deleteQueue(parked);
}
