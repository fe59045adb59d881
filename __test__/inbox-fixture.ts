/**
 * What the inbox tests share: the effects table the handlers write, and a
 * wait for a queue to hold nothing, ready or unacked.
 */
import { psql, psqlRows, queueDepth, queueUnacked, waitFor } from './helpers';

/** Creates the table the test handlers write their effects to, in database `db`. */
export function createEffects(db: string): void {
  psql('CREATE TABLE effects (id text PRIMARY KEY, queue text NOT NULL, note text)', db);
}

/** The effects the handlers of `queue` committed in database `db`. */
export function effectsOf(db: string, queue: string): { id: string; note: string | null }[] {
  return psqlRows(`SELECT id, note FROM effects WHERE queue = '${queue}' ORDER BY id`, db);
}

/** The ids the inbox of consumer `consumer` holds in database `db`, in order. */
export function inboxIdsOf(db: string, consumer: string): string[] {
  return psqlRows<{ message_id: string }>(`SELECT message_id FROM rabbit_retry_inbox WHERE consumer = '${consumer}' ORDER BY message_id`, db).map(
    (r) => r.message_id,
  );
}

/** Waits until `queue` holds no message, ready or unacked. */
export async function settled(queue: string): Promise<void> {
  await waitFor(async () => (await queueDepth(queue)) === 0 && (await queueUnacked(queue)) === 0, 15_000, `'${queue}' settled`);
}
