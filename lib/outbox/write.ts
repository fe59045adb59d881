/**
 * The outbox's writer: a message to publish, written as a row of
 * `rabbit_retry_outbox` in the caller's own transaction. It is published by
 * the relay only once that transaction commits, and never if it rolls back.
 */
import { checkObject } from '../check-options';
import { InvalidOptionsError } from '../errors';
import type { PublishOptions } from '../options';
import { type Body, checkPublishOptions, toBuffer, toNativeProps } from '../publish';
import { type TransactionLike, isTransactionLike, queryIn } from '../sql';

/** Options of an outbox write: {@link PublishOptions}, and the ordering key. */
export interface OutboxPublishOptions extends PublishOptions {
  /**
   * Messages with one ordering key are published in the order they were
   * written (their rows' ids), one after the other; messages without one, or
   * with different ones, may be published in any order.
   */
  orderingKey?: string;
}

const INSERT = 'INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, ordering_key) VALUES ($1, $2, $3, $4::jsonb, $5)';

/**
 * Writes a message to publish into the outbox, in the transaction `tx`: a
 * node-postgres client inside `BEGIN` (an inbox handler's `tx` with
 * `inbox: { pool }`), a TypeORM `EntityManager` of a transaction, or
 * `{ adapter, tx }` for any {@link TransactionAdapter}. The body and options
 * are read as {@link RabbitRetry.publish} reads them, and refused with an
 * {@link InvalidOptionsError} before anything is written.
 * @internal
 */
export async function writeOutbox(
  tx: TransactionLike,
  exchange: string,
  routingKey: string,
  body: Body,
  options: OutboxPublishOptions = {},
): Promise<void> {
  if (!isTransactionLike(tx)) {
    throw new InvalidOptionsError('tx must be a transaction: a pg client inside BEGIN, a TypeORM EntityManager, or { adapter, tx }');
  }
  if (typeof exchange !== 'string') throw new InvalidOptionsError("exchange must be a string ('' is the default exchange)");
  if (typeof routingKey !== 'string') throw new InvalidOptionsError('routingKey must be a string');
  checkObject('publish options', options, 'an object such as { messageId, orderingKey }');
  const { orderingKey, ...publish } = options;
  if (orderingKey !== undefined && typeof orderingKey !== 'string') throw new InvalidOptionsError('orderingKey must be a string');
  checkPublishOptions(publish);
  const { buf, contentType } = toBuffer(body, publish);
  const properties = JSON.stringify(toNativeProps(publish, contentType));
  await queryIn(tx, INSERT, [exchange, routingKey, buf, properties, orderingKey ?? null]);
}
