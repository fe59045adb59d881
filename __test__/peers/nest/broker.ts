/*
 * The broker and names the ported NestJS specs use (upstream: amqp://localhost:5672 and
 * the queues `test`, `test2` and the exchange `test.fanout`), and their cleanup.
 */
import { AMQP_URL } from '../../broker';
import { DEFAULT_DELAYS, retryQueueName } from '../../../lib';
import { connectClient } from '../../helpers';

export { AMQP_URL };

/** Upstream's `test` queue. */
export const QUEUE = 'peer-nest.test';
/** Upstream's `test2` queue (and, with `wildcards`, its exchange). */
export const QUEUE2 = 'peer-nest.test2';
/** Upstream's `test.fanout` exchange. */
export const FANOUT_EXCHANGE = 'peer-nest.test.fanout';

/** AMQP_URL on another port, where no broker listens (upstream: amqp://localhost:5671). */
export function urlOnPort(port: number): string {
  const u = new URL(AMQP_URL.split(',')[0]);
  u.port = String(port);
  return u.toString();
}

/** Deletes the queues (with their retry and parked queues) and exchanges a spec file declared. */
export async function removeTopology(queues: readonly string[], exchanges: readonly string[] = []): Promise<void> {
  const rr = await connectClient();
  try {
    for (const q of queues) {
      for (const name of [q, ...DEFAULT_DELAYS.map((d) => retryQueueName(q, d)), `${q}.parked`]) await rr.deleteQueue(name);
    }
    for (const e of exchanges) await rr.deleteExchange(e);
  } finally {
    await rr.close();
  }
}
