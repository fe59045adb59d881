/**
 * Running a consumer's handler on one delivery, inside its span and under
 * the consumer's handler mark, then settling the delivery with how it went.
 */
import type { ProbeResult } from '../circuit';
import { reasonOf } from '../support/error-text';
import type { NativeBatch } from '../native';
import type { ConsumerTracing, ProcessSpan } from '../telemetry/tracing';
import type { Message } from '../message';
import { type DeliveryMeta, messageOf } from '../wire';
import type { Handler } from './events';
import type { FailureReporter } from './failure';
import type { InFlight, Tracked } from './in-flight';
import type { MoveWatch } from './moves';
import { handlerMark, named } from './scope';
import { type Settlements, unreadableFailure } from './settlement';
import type { Tally } from './tally';

/** What running a handler needs of its consumer. */
export interface HandlingHost {
  /** The consumer: `this` of its handler, and whose handler its mark names. */
  readonly owner: object;
  /** The handler, as the consumer holds it. */
  readonly handler: Handler;
  readonly tracing: Pick<ConsumerTracing, 'process'>;
  /** The handlers running now. */
  readonly running: Pick<InFlight<Tracked>, 'add' | 'delete'>;
  readonly settlements: Pick<Settlements, 'ack' | 'fail'>;
  readonly route: Pick<FailureReporter, 'failureOf'>;
  readonly tally: Pick<Tally, 'acked' | 'failed'>;
  /** The consumer's `consumerTag`, which each message carries. */
  readonly consumerTag?: string;
  /** What a handler settles now is dropped: the close gave up on it (the channel took its message back), or the consumer closed. */
  dropped(): boolean;
  /** Hears each failure that goes to the native side, when a part waits on where it goes. */
  readonly moves?: Pick<MoveWatch, 'failed'>;
}

/** One delivery made ready for its handler: its message, its span and its run. */
interface Ready {
  readonly d: DeliveryMeta;
  readonly msg: Message;
  readonly span: ProcessSpan | undefined;
  readonly run: Tracked;
  /** What the handler returned, once it was called. */
  value: unknown;
  /** Whether the handler failed (its call threw, or what it returned rejected), and with what. */
  threw: boolean;
  error: unknown;
}

/** A batch's deliveries made ready, and who hears each one's outcome. */
interface ReadyBatch {
  readonly ready: readonly Ready[];
  readonly outcome?: (r: ProbeResult) => void;
}

/** Runs a consumer's handler on its deliveries. */
export class Handling {
  // An ES private field: printing or serialising the consumer never goes round from here back to it.
  readonly #host: HandlingHost;
  /**
   * Calls the handler on a message, with the consumer as `this`: the one
   * frame of ours under the handler's, named with the consumer's mark.
   */
  readonly #call: (msg: Message) => unknown;
  /**
   * Waits for the handler of `r` and settles its delivery with how it went;
   * never rejects. Its frame, named with the consumer's mark, awaits the
   * handler: what the handler awaits runs under it.
   */
  readonly #finish: (r: Ready) => Promise<ProbeResult>;

  constructor(host: HandlingHost) {
    this.#host = host;
    const mark = handlerMark(host.owner);
    const { handler, owner } = host;
    this.#call = named(mark, (msg: Message) => Reflect.apply(handler, owner, [msg]));
    this.#finish = named(mark, async (r: Ready): Promise<ProbeResult> => {
      if (!r.threw) {
        try {
          await r.value;
        } catch (err) {
          r.threw = true;
          r.error = err;
        }
      }
      return this.settle(r);
    });
  }

  /**
   * Handles a batch's deliveries: each is made ready now (it counts as
   * running from here), and their handlers are called in one microtask, on a
   * stack of their own. An error a handler makes before its first `await`
   * captures its stack there over a few small frames rather than over the
   * consumer's: V8 takes apart every optimised frame it captures, a few
   * microseconds for each large one. `outcome` gets each delivery's result.
   * Speed, bought: a handler that throws before its first `await` costs
   * JavaScript's thread 0.81x (`npm run bench:js-path`, "thrown before an
   * await"; docs/performance.md, "A handler's error, captured on a short
   * stack"); `../shared/bench/pinned.sh`'s handler awaits first, and does
   * not take this path.
   */
  handleAll(ds: readonly DeliveryMeta[], batch: NativeBatch, outcome?: (r: ProbeResult) => void): void {
    const ready: Ready[] = [];
    for (const d of ds) {
      const r = this.prepare(d, batch);
      if (r) ready.push(r);
      else outcome?.('other');
    }
    if (ready.length > 0) void Promise.resolve({ ready, outcome }).then(this.#callAll);
  }

  /**
   * The deliveries of `ds` the verdict refused before their handler (they
   * park): each is told to the move watch, with its message, and left out of
   * what is returned, which are the deliveries to handle.
   */
  watchRefused(ds: readonly DeliveryMeta[], batch: NativeBatch): DeliveryMeta[] {
    const host = this.#host;
    const handled: DeliveryMeta[] = [];
    for (const d of ds) {
      if (d.refused !== true) {
        handled.push(d);
        continue;
      }
      try {
        host.moves?.failed(d.id, messageOf(d, batch, host.consumerTag).msg);
      } catch {
        // A message that cannot be read is parked all the same; nobody is told of it.
      }
    }
    return handled;
  }

  /**
   * Runs the handler for one delivery and settles it; resolves to how it
   * went (`failure` for a retryable one). Never rejects.
   */
  handle(d: DeliveryMeta, batch: NativeBatch): Promise<ProbeResult> {
    const r = this.prepare(d, batch);
    if (!r) return Promise.resolve('other');
    return new Promise((outcome) => this.#callAll({ ready: [r], outcome }));
  }

  /**
   * Calls each handler, inside its span and under the consumer's mark, then
   * waits for it and settles its delivery. Under a handler's frame, ours are
   * only this one and the mark's.
   */
  readonly #callAll = ({ ready, outcome }: ReadyBatch): void => {
    const call = this.#call;
    for (const r of ready) {
      try {
        // The handler runs with the consumer, which holds it, as `this`: its frame reads `Consumer.<name> [as handler]`.
        r.value = r.span ? r.span.run(() => call(r.msg)) : call(r.msg);
      } catch (err) {
        r.threw = true;
        r.error = err;
      }
      const done = this.#finish(r);
      if (outcome) void done.then(outcome);
    }
  };

  /** `d` with its message, span and run, counted as running; undefined when it could not be (then it is settled). */
  private prepare(d: DeliveryMeta, batch: NativeBatch): Ready | undefined {
    const host = this.#host;
    try {
      const { msg, messageId } = messageOf(d, batch, host.consumerTag);
      const span = host.tracing.process(msg.headers, () => ({
        exchange: d.exchange,
        routingKey: d.routingKey,
        messageId,
        bodySize: msg.body.length,
        attempt: d.attempt,
      }));
      const run: Tracked = {
        startedAt: performance.now(),
        messageId,
        attempt: d.attempt,
        reported: false,
      };
      host.running.add(d.id, run);
      // Every field from the start: one shape for every delivery.
      return { d, msg, span, run, value: undefined, threw: false, error: undefined };
    } catch (internal) {
      host.running.delete(d.id);
      this.unhandled(d, internal);
      return undefined;
    }
  }

  /** Settles the delivery of `r`, whose handler is over, with how it went. Never throws. */
  private settle(r: Ready): ProbeResult {
    const host = this.#host;
    const { d, msg, span, run } = r;
    try {
      const { threw, error } = r;
      span?.end(error, threw);
      // The close gave up on this handler and the channel took its message back.
      if (host.dropped()) return 'other';
      if (!threw) {
        host.settlements.ack(d.id);
        host.tally.acked(run.startedAt);
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
      host.moves?.failed(d.id, msg);
      host.tally.failed(run.startedAt);
      return failure.kind === 'retryable' ? 'failure' : 'other';
    } catch (internal) {
      this.unhandled(d, internal);
      return 'other';
    } finally {
      host.running.delete(d.id);
    }
  }

  /** Nothing here should throw; if something did, the delivery is still settled. */
  private unhandled(d: DeliveryMeta, internal: unknown): void {
    const host = this.#host;
    if (!host.dropped()) {
      host.settlements.fail(d.id, unreadableFailure(`the message could not be handled: ${reasonOf(internal)}`));
    }
  }
}
