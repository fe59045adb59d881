/**
 * OpenTelemetry metrics through `@opentelemetry/api`, an optional peer
 * dependency: when it is not installed, metrics are off and nothing breaks.
 */
import { type MeterProviderLike, meterProviderOr } from './otel';

interface Counter {
  add(value: number, attributes?: Record<string, string>): void;
}
interface Histogram {
  record(value: number, attributes?: Record<string, string>): void;
}
interface ObservableResult {
  observe(value: number, attributes?: Record<string, string>): void;
}
interface ObservableGauge {
  addCallback(cb: (r: ObservableResult) => void | Promise<void>): void;
  removeCallback(cb: (r: ObservableResult) => void | Promise<void>): void;
}
interface Meter {
  createCounter(name: string, options?: { description?: string; unit?: string }): Counter;
  createHistogram(name: string, options?: { description?: string; unit?: string }): Histogram;
  createObservableGauge(name: string, options?: { description?: string; unit?: string }): ObservableGauge;
}

/** The instruments of one consumer. @internal */
export interface ConsumerMetrics {
  acked(): void;
  /** `n` failed messages went to the retry queue of `delay`. */
  retried(delay: string, n: number): void;
  /** `n` failed messages were parked for `reason`. */
  parked(reason: string, n: number): void;
  publishFailed(): void;
  /** The broker refused the fault event of a parked message (`onFailure.faults`). */
  faultFailed(): void;
  /** The inbox acked a copy of a message handled already. */
  duplicate(): void;
  handlerDuration(ms: number, outcome: 'success' | 'failure'): void;
  /** The consumer's circuit opened. */
  circuitOpened(dependency: string): void;
  stop(): void;
}

/** Each instrument of the no-op meter. */
function nothing(): void {
  // Without a meter provider there is nothing to record.
}

const noop: ConsumerMetrics = {
  acked: nothing,
  retried: nothing,
  parked: nothing,
  publishFailed: nothing,
  faultFailed: nothing,
  duplicate: nothing,
  handlerDuration: nothing,
  circuitOpened: nothing,
  stop: nothing,
};

/** Instruments for `queue`, or no-ops when OpenTelemetry is not there. @internal */
export function consumerMetrics(
  queue: string,
  provider: MeterProviderLike | undefined,
  parkedDepth: () => Promise<number | undefined>,
  circuit?: () => { dependency: string; state: 'closed' | 'open' | 'halfOpen' } | undefined,
): ConsumerMetrics {
  const p = meterProviderOr(provider);
  if (!p) return noop;
  const meter = p.getMeter('rabbit-retry') as Meter;
  const base = { queue };
  const acked = meter.createCounter('rabbit_retry.messages.acked', { description: 'Messages whose handler succeeded and that were acked' });
  const retried = meter.createCounter('rabbit_retry.messages.retried', { description: 'Failed messages sent to a retry queue' });
  const parked = meter.createCounter('rabbit_retry.messages.parked', { description: 'Failed messages sent to the parked queue' });
  const failed = meter.createCounter('rabbit_retry.republish.failed', {
    description: 'Failed messages whose republish failed (left unacked for redelivery)',
  });
  const faultsFailed = meter.createCounter('rabbit_retry.faults.failed', {
    description: 'Fault events of parked messages that the broker refused (the messages parked all the same)',
  });
  const duplicates = meter.createCounter('rabbit_retry.inbox.duplicates', {
    description: 'Copies of already handled messages the inbox acked without calling the handler',
  });
  const duration = meter.createHistogram('rabbit_retry.handler.duration', { description: 'Handler duration', unit: 'ms' });
  const depth = meter.createObservableGauge('rabbit_retry.parked.depth', { description: 'Messages in the parked queue' });
  const observe = async (r: ObservableResult) => {
    const n = await parkedDepth().catch(() => undefined);
    if (n !== undefined) r.observe(n, base);
  };
  depth.addCallback(observe);
  const circuitState = circuit
    ? meter.createObservableGauge('rabbit_retry.circuit.state', { description: "The consumer's circuit: 0 closed, 1 half-open, 2 open" })
    : undefined;
  const circuitOpens = meter.createCounter('rabbit_retry.circuit.opened', { description: "Times the consumer's circuit opened" });
  const observeCircuit = (r: ObservableResult) => {
    const c = circuit?.();
    if (c) r.observe(c.state === 'closed' ? 0 : c.state === 'halfOpen' ? 1 : 2, { ...base, dependency: c.dependency });
  };
  circuitState?.addCallback(observeCircuit);
  // Attribute sets made once: the per-message calls allocate nothing.
  const success = { ...base, outcome: 'success' };
  const failure = { ...base, outcome: 'failure' };
  const byDelay = new Map<string, Record<string, string>>();
  const byReason = new Map<string, Record<string, string>>();
  const attrs = (m: Map<string, Record<string, string>>, key: string, value: string) => {
    let a = m.get(value);
    if (!a) m.set(value, (a = { ...base, [key]: value }));
    return a;
  };
  return {
    acked: () => acked.add(1, base),
    retried: (delay, n) => retried.add(n, attrs(byDelay, 'delay', delay)),
    parked: (reason, n) => parked.add(n, attrs(byReason, 'reason', reason)),
    publishFailed: () => failed.add(1, base),
    faultFailed: () => faultsFailed.add(1, base),
    duplicate: () => duplicates.add(1, base),
    handlerDuration: (ms, outcome) => duration.record(ms, outcome === 'success' ? success : failure),
    circuitOpened: (dependency) => circuitOpens.add(1, { ...base, dependency }),
    stop: () => {
      depth.removeCallback(observe);
      circuitState?.removeCallback(observeCircuit);
    },
  };
}

/** The counts the outbox's instruments read. @internal */
export interface OutboxCounts {
  pending: number;
  parked: number;
  oldestPendingAgeMs: number;
  published: number;
  parkedByRelay: number;
}

/**
 * The outbox's instruments: the gauges `rabbit_retry.outbox.depth`,
 * `rabbit_retry.outbox.parked` and `rabbit_retry.outbox.oldest_age` (ms), and
 * the counters `rabbit_retry.outbox.published` and
 * `rabbit_retry.outbox.parked_by_relay` (this process's relay).
 * @internal
 */
export function outboxMetrics(provider: MeterProviderLike | undefined, read: () => Promise<OutboxCounts | undefined>): void {
  const p = meterProviderOr(provider);
  if (!p) return;
  const meter = p.getMeter('rabbit-retry') as Meter & {
    createObservableCounter(name: string, options?: { description?: string; unit?: string }): ObservableGauge;
  };
  const instruments: [ObservableGauge, keyof OutboxCounts][] = [
    [meter.createObservableGauge('rabbit_retry.outbox.depth', { description: 'Outbox rows waiting to be published' }), 'pending'],
    [meter.createObservableGauge('rabbit_retry.outbox.parked', { description: 'Outbox rows parked' }), 'parked'],
    [
      meter.createObservableGauge('rabbit_retry.outbox.oldest_age', { description: 'Age of the oldest outbox row waiting', unit: 'ms' }),
      'oldestPendingAgeMs',
    ],
    [meter.createObservableCounter('rabbit_retry.outbox.published', { description: "Outbox rows this process's relay published" }), 'published'],
    [meter.createObservableCounter('rabbit_retry.outbox.parked_by_relay', { description: "Outbox rows this process's relay parked" }), 'parkedByRelay'],
  ];
  for (const [instrument, key] of instruments) {
    instrument.addCallback(async (r) => {
      const counts = await read();
      if (counts) r.observe(counts[key]);
    });
  }
}
