/**
 * Running a consumer's handler on one delivery, inside its span and its
 * handler scope, then settling the delivery with how it went.
 */
import type { ProbeResult } from '../circuit';
import { reasonOf } from '../error-text';
import type { NativeBatch } from '../native';
import type { ConsumerTracing } from '../tracing';
import { type DeliveryMeta, messageOf } from '../wire';
import type { Handler } from './events';
import type { FailureReporter } from './failure';
import type { InFlight } from './in-flight';
import { type HandlerRun, inHandler } from './scope';
import { type Settlements, unreadableFailure } from './settlement';
import type { Tally } from './tally';

/** What running a handler needs of its consumer. */
export interface HandlingHost {
  /** The consumer: `this` of its handler, and whose handler the scope says runs. */
  readonly owner: object;
  /** The handler, as the consumer holds it. */
  readonly handler: Handler;
  readonly tracing: Pick<ConsumerTracing, 'process'>;
  /** The handlers running now. */
  readonly running: Pick<InFlight<HandlerRun>, 'add' | 'delete'>;
  readonly settlements: Pick<Settlements, 'ack' | 'fail'>;
  readonly route: Pick<FailureReporter, 'failureOf'>;
  readonly tally: Pick<Tally, 'acked' | 'failed'>;
  /** The consumer's `consumerTag`, which each message carries. */
  readonly consumerTag?: string;
  /** What a handler settles now is dropped: the close gave up on it (the channel took its message back), or the consumer closed. */
  dropped(): boolean;
}

/** Runs a consumer's handler on its deliveries. */
export class Handling {
  // An ES private field: printing or serialising the consumer never goes round from here back to it.
  readonly #host: HandlingHost;

  constructor(host: HandlingHost) {
    this.#host = host;
  }

  /**
   * Runs the handler for one delivery and settles it; resolves to how it
   * went (`failure` for a retryable one). Never rejects.
   */
  async handle(d: DeliveryMeta, batch: NativeBatch): Promise<ProbeResult> {
    const host = this.#host;
    let run: HandlerRun | undefined;
    try {
      const { msg, messageId } = messageOf(d, batch, host.consumerTag);
      const span = host.tracing.process(msg.headers, () => ({
        exchange: d.exchange,
        routingKey: d.routingKey,
        messageId,
        bodySize: msg.body.length,
        attempt: d.attempt,
      }));
      const r: HandlerRun = {
        owner: host.owner,
        startedAt: performance.now(),
        messageId,
        attempt: d.attempt,
        reported: false,
        done: false,
      };
      run = r;
      host.running.add(d.id, r);
      let threw = false;
      let error: unknown;
      // The handler runs with the consumer, which holds it, as `this`: its frame reads `Consumer.<name> [as handler]`.
      const call = () => inHandler(r, () => Reflect.apply(host.handler, host.owner, [msg]));
      try {
        await (span ? span.run(call) : call());
      } catch (err) {
        threw = true;
        error = err;
      }
      r.done = true;
      span?.end(error, threw);
      // The close gave up on this handler and the channel took its message back.
      if (host.dropped()) return 'other';
      if (!threw) {
        host.settlements.ack(d.id);
        host.tally.acked(r.startedAt);
        return 'success';
      }
      const failure = host.route.failureOf(error, msg, d);
      if (span) {
        // The moved copy carries the trace of its move.
        const trace = span.moving(d.id);
        failure.traceparent = trace.traceparent;
        failure.tracestate = trace.tracestate;
      }
      host.settlements.fail(d.id, failure);
      host.tally.failed(r.startedAt);
      return failure.kind === 'retryable' ? 'failure' : 'other';
    } catch (internal) {
      // Nothing above should throw; if it did, the delivery still gets settled.
      if (!host.dropped()) {
        host.settlements.fail(d.id, unreadableFailure(`the message could not be handled: ${reasonOf(internal)}`));
      }
      return 'other';
    } finally {
      if (run) run.done = true;
      host.running.delete(d.id);
    }
  }
}
