/**
 * The options of a consumer's circuit breaker (`onFailure.circuit`) and the
 * table of their keys; lib/options/check.ts checks them.
 */
import type { Delay } from '../options/delay';
import type { OptionKeys } from '../options/shape';

/** A consumer's circuit breaker (see {@link OnFailureOptions.circuit}). */
export interface CircuitOptions {
  /**
   * What the circuit guards (a carrier, a service). Consumers of one process
   * that name the same dependency share one circuit, with the same options.
   * @default the work queue's name: a circuit of its own
   */
  dependency?: string;
  /**
   * It opens after this many retryable failures (errors the `retryable`
   * predicate retries) within this window. A {@link NonRetryableError} does
   * not count: it says the message is bad, not the dependency.
   * @default { failures: 5, within: '10s' }
   */
  openAfter?: {
    /** Retryable failures that open it. */
    failures: number;
    /** The window they fall in. */
    within: Delay;
  };
  /** While open, a probe this often. @default '5s' */
  probeEvery?: Delay;
  /** Probes that must succeed in a row to close it. @default 1 */
  closeAfter?: number;
  /**
   * A health check of the dependency. When given, it is the probe: called
   * every `probeEvery` while open (no message is spent), `true` closes the
   * circuit. `false`, a throw or a rejection (of any value), an answer that
   * is not a boolean, or no answer within `probeEvery` is a failed check: it
   * keeps the circuit open (with a warning, but for `false`), and the next
   * check comes `probeEvery` later.
   */
  check?: () => Promise<boolean> | boolean;
  /**
   * When it closes, the messages waiting in the consumer's retry queues are
   * sent back to the work queue at once, at this many a second (each acked in
   * its retry queue only after the broker confirmed its copy). @default 50
   */
  returnRate?: number;
}

/** The keys of {@link CircuitOptions}. @internal */
export const CIRCUIT_OPTION_KEYS = {
  dependency: true,
  openAfter: true,
  probeEvery: true,
  closeAfter: true,
  check: true,
  returnRate: true,
} satisfies OptionKeys<CircuitOptions>;
