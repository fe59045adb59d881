/**
 * Closing a consumer, once: stop its deliveries, wait within the bound for
 * the handlers in flight, hand over what they settled, close the channel,
 * then release what the consumer holds. Every call of `close()` gets the same
 * close; a later one may shorten its bound, never lengthen it.
 */
import { checkCloseOptions } from '../options/check';
import { reasonOf } from '../support/error-text';
import type { Log } from '../support/log';
import type { CloseOptions } from '../options';
import { CloseBound } from './close-bound';
import type { CloseResult } from './events';
import type { InFlight, Tracked } from './in-flight';

/** What a close does to its consumer, step by step. */
export interface ShutdownHost {
  /** The work queue. */
  readonly queue: string;
  readonly log: Log;
  /** The handlers running now. */
  readonly running: Pick<InFlight<Tracked>, 'size' | 'idle'>;
  /** Resolves when the native side ended the stream of batches. */
  readonly streamDone: Promise<void>;
  /** Stops what would start work on its own (the alert checks, the circuit's probes, the inbox's cleanup); resolves when the work it had begun is over. */
  quiet(): Promise<void>;
  /** Stops taking deliveries; resolves when none comes any more. */
  stop(): Promise<void>;
  /** Hands over the last settlements, closes the channel, and reports what the native side reported last. */
  finish(): Promise<void>;
  /** Releases what the consumer holds (timers, spans, instruments) and tells its client that it closed. */
  release(): void;
}

/** A consumer's close, and where it stands. */
export class Shutdown {
  #closing?: Promise<CloseResult>;
  /** Resolves when deliveries have stopped, once the close began. */
  #stopped?: Promise<void>;
  /** When the close stops waiting for handlers. */
  readonly #bound = new CloseBound();
  #abandoned = false;
  #finishing = false;
  #closed = false;

  constructor(private readonly host: ShutdownHost) {}

  /** A close began. */
  get began(): boolean {
    return this.#closing !== undefined;
  }

  /** The channel is closing: deliveries that arrive now are not started (the closed channel gives them back). */
  get finishing(): boolean {
    return this.#finishing;
  }

  /** The close stopped waiting with handlers still running: what they settle is dropped. */
  get abandoned(): boolean {
    return this.#abandoned;
  }

  /** The close is over. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Closes the consumer within `options.timeoutMs`; see `Consumer.close`.
   * `fromOwnHandler`: called from one of the consumer's own handlers, it
   * resolves once deliveries stopped, and the close goes on in the background.
   */
  close(options: CloseOptions | undefined, fromOwnHandler: boolean): Promise<CloseResult> {
    let timeoutMs: number;
    try {
      timeoutMs = checkCloseOptions(options);
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on what the check threw (a getter of the options may throw anything)
      return Promise.reject(err);
    }
    if (!this.#closed) this.#bound.by(timeoutMs);
    if (!this.#closing) {
      this.#closing = this.run();
      // Closed from a handler, nobody awaits the shutdown: a failure is logged, never unhandled.
      this.#closing.catch((err: unknown) => {
        if (fromOwnHandler) this.host.log('error', `rabbit-retry: closing the consumer of '${this.host.queue}' failed: ${reasonOf(err)}`);
      });
    }
    if (!fromOwnHandler) return this.#closing;
    return this.deliveriesStopped().then(() => ({ unfinished: 0 }));
  }

  /** Resolves once a close has stopped deliveries (at once when no close began). */
  deliveriesStopped(): Promise<void> {
    return this.#stopped ? this.#bound.within(this.#stopped).catch(() => undefined) : Promise.resolve();
  }

  private async run(): Promise<CloseResult> {
    const { host } = this;
    const bound = this.#bound;
    const quieted = host.quiet();
    try {
      this.#stopped = host.stop();
      await bound.within(this.#stopped);
      await bound.within(host.streamDone);
      await bound.within(host.running.idle());
      // A cleanup already running ends before close() resolves: none writes after it.
      await bound.within(quieted);
      const unfinished = host.running.size;
      if (unfinished > 0) this.#abandoned = true;
      this.#finishing = true;
      await host.finish();
      if (unfinished > 0) {
        host.log(
          'warn',
          `rabbit-retry: closed the consumer of '${host.queue}' with ${unfinished} handler(s) still running; their messages went back to the queue unacked`,
        );
      }
      return { unfinished };
    } finally {
      bound.clear();
      this.#closed = true;
      host.release();
    }
  }
}
