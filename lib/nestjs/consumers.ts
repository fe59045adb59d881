import type { Consumer } from '../consumer';
import type { ConsumerHealth, ConsumerState } from '../consumer/events';

/** What {@link RabbitRetryConsumers.health} reports. */
export interface ConsumersHealth {
  /** True when every consumer is `connected` and none has a stuck handler. */
  healthy: boolean;
  /** Each work queue's consumer state. */
  consumers: Record<string, ConsumerState>;
  /** Each work queue's consumer in detail: in-flight and stuck handlers, the oldest one's age. */
  details: Record<string, ConsumerHealth>;
}

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

  /**
   * Whether every consumer is consuming with no handler stuck: for a health
   * check (a Terminus indicator, a readiness probe). A consumer that is
   * `recovering` or `closed` (recovery gave up), or that has a handler running
   * for longer than its `stuckAfterMs`, makes it unhealthy.
   */
  health(): ConsumersHealth {
    const consumers: Record<string, ConsumerState> = {};
    const details: Record<string, ConsumerHealth> = {};
    for (const [queue, c] of this.byQueue) {
      const h = c.health();
      consumers[queue] = h.state;
      details[queue] = h;
    }
    return { healthy: Object.values(details).every((h) => h.healthy), consumers, details };
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
