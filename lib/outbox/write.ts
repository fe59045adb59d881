/**
 * The outbox's writer: a message to publish, written as a row of
 * `rabbit_retry_outbox` in the caller's own transaction. It is published by
 * the relay only once that transaction commits, and never if it rolls back.
 */
import { checkObject } from '../options/check';
import { InvalidOptionsError } from '../errors';
import type { PublishOptions } from '../options';
import type { NativeMessageProperties } from '../native';
import { type Body, checkPublishOptions, toBuffer, toNativeProps } from '../messaging/publish';
import { type TransactionLike, isTransactionLike, queryIn } from '../sql';

/** A row about to be written, as the broker's and the database's limits are checked against it. */
export interface OutboxRowCheck {
  exchange: string;
  routingKey: string;
  bodyLength: number;
  orderingKey: string | undefined;
  properties: NativeMessageProperties;
}

/** Options of an outbox write: {@link PublishOptions}, and the ordering key. */
export interface OutboxPublishOptions extends PublishOptions {
  /**
   * Messages with one ordering key are published in the order they were
   * written (their rows' ids), one after the other; messages without one, or
   * with different ones, may be published in any order.
   */
  orderingKey?: string;
}

/** A NUL as JSON escapes it: `\u0000` after an even number of backslashes (an odd one escapes a backslash). */
const JSON_NUL = /(?:^|[^\\])(?:\\\\)*\\u0000/;

const INSERT = 'INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, ordering_key) VALUES ($1, $2, $3, $4::jsonb, $5)';

/**
 * Writes a message to publish into the outbox, in the transaction `tx`: a
 * node-postgres client inside `BEGIN` (an inbox handler's `tx` with
 * `inbox: { pool }`), a TypeORM `EntityManager` of a transaction, or
 * `{ adapter, tx }` for any {@link TransactionAdapter}. The body and options
 * are read as {@link RabbitRetry.publish} reads them, and refused with an
 * {@link InvalidOptionsError} before anything is written. `check` holds the
 * row to what the database and the broker take, and throws (a
 * `PRECONDITION_FAILED` for the broker's limits) before the `INSERT`, so a
 * refused row leaves the caller's transaction as it was.
 * @internal
 */
export async function writeOutbox(
  tx: TransactionLike,
  exchange: string,
  routingKey: string,
  body: Body,
  options: OutboxPublishOptions = {},
  check?: (row: OutboxRowCheck) => void,
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
  const props = toNativeProps(publish, contentType);
  const properties = JSON.stringify(props);
  // JSON writes a NUL as its escape, which PostgreSQL's jsonb refuses (22P05), aborting the caller's transaction.
  if (JSON_NUL.test(properties)) {
    throw new InvalidOptionsError("a property or header holds a NUL character, which the outbox's jsonb column cannot store");
  }
  check?.({ exchange, routingKey, bodyLength: buf.length, orderingKey, properties: props });
  await queryIn(tx, INSERT, [exchange, routingKey, buf, properties, orderingKey ?? null]);
}
