import type { Consumer } from '../consumer';

/**
 * The consumers a {@link RabbitRetryModule} started, by work queue: inject it
 * to follow their `retry`, `parked` and `alert` events, or to read `stats()`
 * for a health check. Filled on application bootstrap, emptied on shutdown.
 */
export class RabbitRetryConsumers {
  private readonly byQueue = new Map<string, Consumer>();

  /** The consumer of work queue `queue`, if this module started one. */
  get(queue: string): Consumer | undefined {
    return this.byQueue.get(queue);
  }

  /** Every running consumer. */
  all(): Consumer[] {
    return [...this.byQueue.values()];
  }

  /** @internal */
  add(consumer: Consumer): void {
    this.byQueue.set(consumer.queue, consumer);
  }

  /** @internal */
  clear(): void {
    this.byQueue.clear();
  }
}
