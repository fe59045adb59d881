import type { Consumer } from '../consumer';

/**
 * Writes a consumer's moves to a Nest logger: each retry (warn), each park
 * and each move that failed (error), and the consumer's own errors.
 * @internal
 */
export function logMoves(consumer: Consumer, logger: { warn(m: string): void; error(m: string): void }): void {
  const q = consumer.queue;
  consumer.on('retry', (e) => {
    logger.warn(`retry: queue '${q}', message ${e.messageId ?? '(no id)'}, attempt ${e.attempt} failed, next in ${e.delay} (${e.target}): ${e.error}`);
  });
  consumer.on('parked', (e) => {
    logger.error(`parked: queue '${q}', message ${e.messageId ?? '(no id)'}, ${e.reason} after attempt ${e.attempt + 1} (${e.target}): ${e.error}`);
  });
  consumer.on('publishFailed', (e) => {
    logger.error(
      `queue '${q}', message ${e.messageId ?? '(no id)'}: could not move it to '${e.target}'; the broker will redeliver it: ${e.error.message}`,
    );
  });
  consumer.on('error', (err) => logger.error(`consumer of '${q}': ${err.message}`));
}
