/**
 * A consumer in its circuit: what the circuit may ask of it (pause, resume,
 * probe with one message, send the retry queues back early, record the
 * circuit's state), and what the consumer tells the circuit (how each
 * handler went).
 */
import type { Circuit, CircuitMember, CircuitStatus, ProbeResult } from '../circuit';
import { native } from '../errors';
import type { Log } from '../support/log';
import type { NativeBatch, NativeConsumer } from '../native';
import { type DeliveryMeta, deliveriesOf } from '../wire';
import type { CircuitIo } from './circuit-io';

/** What circuit membership needs of its consumer. */
export interface MemberHost {
  /** The work queue. */
  readonly queue: string;
  readonly inner: Pick<NativeConsumer, 'pause' | 'resume' | 'probe'>;
  readonly log: Log;
  /** After this many milliseconds a probe's handler counts as failed. */
  readonly stuckAfterMs: number;
  /** A close began: the circuit no longer pauses or resumes the channel. */
  closing(): boolean;
  /** The consumer is closed. */
  closed(): boolean;
  /** The channel is closing: a delivery that arrives now is not started. */
  finishing(): boolean;
  /** Runs the handler on one delivery and settles it; never rejects. */
  handle(d: DeliveryMeta, batch: NativeBatch): Promise<ProbeResult>;
  /** Counts the messages the circuit sent back early. */
  returnedEarly(n: number): void;
  /** Tells the consumer's listeners of a change of the circuit. */
  notify: CircuitMember['notify'];
}

/** A consumer's membership of its circuit. */
export class Membership {
  /** The consumer as its circuit sees it. */
  private readonly member: CircuitMember;

  constructor(
    private readonly circuit: Circuit,
    private readonly io: Pick<CircuitIo, 'restore' | 'record' | 'returnEarly'>,
    host: MemberHost,
  ) {
    this.member = {
      queue: host.queue,
      pause: () => (host.closing() ? Promise.resolve() : native(() => host.inner.pause())),
      resume: () => (host.closing() ? Promise.resolve() : native(() => host.inner.resume())),
      probe: () => probe(host),
      returnEarly: async (rate, go) => {
        try {
          const n = await io.returnEarly(rate, () => go() && !host.closing());
          host.returnedEarly(n);
          return n;
        } catch (err) {
          // Closing took the channel away: what was not sent back waits out its delay.
          if (host.closing()) return 0;
          throw err;
        }
      },
      record: (r) => io.record(r),
      notify: host.notify,
      warn: (line) => host.log('warn', `rabbit-retry: ${line}`),
    };
  }

  /**
   * Joins the circuit: reads its state queue (a circuit left open, or a probe
   * that never finished, starts it open) and pauses when it is open.
   */
  async join(): Promise<void> {
    const restored = await this.io.restore();
    await this.circuit.join(this.member, restored);
  }

  /** Leaves the circuit: it no longer pauses, resumes or probes this consumer. */
  leave(): void {
    this.circuit.leave(this.member);
  }

  /** Whether the circuit lets deliveries start now. */
  get admits(): boolean {
    return this.circuit.admits;
  }

  /** Tells the circuit how a handler went. */
  outcome(r: ProbeResult): void {
    if (r === 'failure') this.circuit.failure();
    else if (r === 'success') this.circuit.success();
  }

  /** The circuit's state, for `stats()` and `health()`. */
  status(): CircuitStatus {
    return this.circuit.status();
  }
}

/**
 * Takes one message of the paused work queue and runs the handler on it. A
 * handler still running after `stuckAfterMs` counts as a failed probe: one
 * message that hangs does not hold the circuit. It goes on running, and its
 * message is settled when it ends.
 */
async function probe(host: MemberHost): Promise<ProbeResult> {
  if (host.closing() || host.closed()) return 'empty';
  const p = await native(() => host.inner.probe());
  if (p.outcome === 'empty') return 'empty';
  const [d] = p.batch ? deliveriesOf(p.batch) : [];
  if (!d || !p.batch || host.finishing()) return 'other';
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<ProbeResult>((resolve) => {
    timer = setTimeout(() => resolve('failure'), host.stuckAfterMs);
    timer.unref();
  });
  try {
    return await Promise.race([host.handle(d, p.batch), stuck]);
  } finally {
    clearTimeout(timer);
  }
}
