import type { Consumer, ConsumerState } from '../consumer';

/** What {@link RabbitRetryConsumers.health} reports. */
export interface ConsumersHealth {
  /** True when every consumer is `connected`. */
  healthy: boolean;
  /** Each work queue's consumer state. */
  consumers: Record<string, ConsumerState>;
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
   * Whether every consumer is consuming: for a health check (a Terminus
   * indicator, a readiness probe). A consumer that is `recovering` or `closed`
   * (recovery gave up) makes it unhealthy.
   */
  health(): ConsumersHealth {
    const consumers: Record<string, ConsumerState> = {};
    for (const [queue, c] of this.byQueue) consumers[queue] = c.state;
    return { healthy: Object.values(consumers).every((s) => s === 'connected'), consumers };
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
