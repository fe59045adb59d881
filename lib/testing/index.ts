/**
 * Helpers for Jest (or any runner) tests of code that uses rabbit-retry,
 * against a real broker: unique queue names, waiting for a queue's depth,
 * reading parked messages' headers, and removing a test's queues.
 */
import { randomBytes } from 'node:crypto';

import { RabbitRetry } from '../client';
import { InvalidOptionsError } from '../errors';
import { parkedQueueName, retryQueueName } from '../native';
import { checkKeys, checkObject } from '../options/check';
import type { Delay, OptionKeys } from '../options';

/**
 * A queue name no other test, worker or earlier run uses:
 * `<prefix>-<12 hex digits>`.
 */
export function uniqueQueueName(prefix = 'rr-test'): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Waits until `queue` holds exactly `n` ready messages and resolves to `n`.
 * Rejects after `timeoutMs` with the depth it saw last (a missing queue counts
 * as 0). Messages a consumer holds unacked are not counted.
 */
export async function waitForQueueDepth(rr: RabbitRetry, queue: string, n: number, timeoutMs = 10_000): Promise<number> {
  if (!Number.isInteger(n) || n < 0) throw new InvalidOptionsError(`n must be a whole number of messages, got ${String(n)}`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = (await rr.queueInfo(queue))?.messages ?? 0;
    if (last === n) return n;
    if (Date.now() >= deadline) {
      throw new Error(`'${queue}' held ${last} message(s), not ${n}, after waiting ${timeoutMs} ms`);
    }
    await sleep(50);
  }
}

/**
 * The headers (`retry-reason`, `retry-attempt`, `retry-last-error`, ...) of
 * the first `limit` parked messages of work queue `queue`, oldest first.
 * Every message stays parked.
 */
export async function readParked(rr: RabbitRetry, queue: string, limit = 20): Promise<Record<string, unknown>[]> {
  const parked = rr.parked(queue);
  if ((await rr.queueInfo(parked.name)) === null) return [];
  return (await parked.peek({ limit })).map((m) => m.headers);
}

/** Options of {@link deleteTestQueues}. */
export interface DeleteTestQueuesOptions {
  /** An exchange the test declared, deleted after the queues. */
  exchange?: string;
}

/** The keys of {@link DeleteTestQueuesOptions}. */
const DELETE_TEST_QUEUES_OPTION_KEYS = { exchange: true } satisfies OptionKeys<DeleteTestQueuesOptions>;

/**
 * Deletes work queue `queue`, its retry queue for each of `delays` and its
 * parked queue, with their messages; queues that do not exist are skipped.
 * Give a connected client, or a broker URL to connect for the deletion only.
 * Close the test's consumers first: the broker deletes a queue even while
 * someone consumes it.
 */
export async function deleteTestQueues(
  urlOrRr: string | RabbitRetry,
  queue: string,
  delays: readonly Delay[] = [],
  options: DeleteTestQueuesOptions = {},
): Promise<void> {
  checkObject('deleteTestQueues options', options, 'an object such as { exchange }');
  checkKeys('deleteTestQueues', options, DELETE_TEST_QUEUES_OPTION_KEYS);
  const names = [queue, ...delays.map((d) => retryQueueName(queue, d)), parkedQueueName(queue)];
  const rr = typeof urlOrRr === 'string' ? await RabbitRetry.connect({ url: urlOrRr, connectionName: 'rabbit-retry-testing' }) : urlOrRr;
  try {
    for (const name of names) await rr.deleteQueue(name);
    if (options.exchange !== undefined) await rr.deleteExchange(options.exchange);
  } finally {
    if (typeof urlOrRr === 'string') await rr.close();
  }
}
