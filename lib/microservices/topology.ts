/**
 * What the server consumes, worked out from `Transport.RMQ`'s options: a
 * queue of its own for a broadcast (`queue: ''`), the exchange of
 * `wildcards`, and the topic patterns its handlers are found by.
 */
import type { ConsumeOptions } from '../options';
import { InvalidOptionsError, UnsupportedOptionError } from '../errors';
import { ownQueueArguments, ownQueueName } from '../nestjs/own-queue';
import type { RabbitRetryServerOptions } from './options';

/** The one `queueOptions` key the server takes, and what the others are to be written as. @internal */
const QUEUE_OPTIONS_ADVICE = 'the work queue is durable; put its `arguments` in `queueArguments`, and `x-queue-type` in `queueType`';

/**
 * The queue, exchange and binding a server consumes, from its options: a
 * broadcast (`queue: ''`, Nest's server-named queue) gets a queue of its own,
 * `<exchange>.<8 hex digits>`, that the broker deletes 5 minutes after its
 * instance is gone (`x-expires`, unless `queueArguments` sets it);
 * `wildcards` consumes through the exchange named after the queue (or
 * `exchange`), a topic exchange unless `exchangeType` says otherwise.
 * @internal
 */
export function consumeTarget(options: RabbitRetryServerOptions, consume: ConsumeOptions): { consume: ConsumeOptions; broadcast: boolean } {
  const queueOptions = options.queueOptions ?? {};
  for (const key of Object.keys(queueOptions)) {
    if (key !== 'exclusive') {
      throw new UnsupportedOptionError(
        `queueOptions.${key}`,
        `\`queueOptions.${key}\` of RabbitRetryServer has no meaning in rabbit-retry: ${QUEUE_OPTIONS_ADVICE}`,
      );
    }
  }
  const broadcast = options.queue === '';
  if (queueOptions.exclusive === true && !broadcast) {
    throw new UnsupportedOptionError(
      'queueOptions.exclusive',
      "`queueOptions.exclusive` of RabbitRetryServer needs `queue: ''`: a broadcast's queue is named by the server, and deleted when it closes; a named queue is durable and shared",
    );
  }
  if (!broadcast) {
    if (options.wildcards !== true) return { consume, broadcast };
    return { consume: { ...consume, exchange: options.exchange ?? options.queue }, broadcast };
  }
  if (options.exchange === undefined || options.exchange === '') {
    throw new InvalidOptionsError("queue: '' (a queue of the server's own) needs `exchange`: the broadcast it receives comes through it");
  }
  return { consume: { ...consume, queue: ownQueueName(options.exchange), queueArguments: ownQueueArguments(options.queueArguments) }, broadcast };
}
