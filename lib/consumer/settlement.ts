/**
 * Handing the settled deliveries (acked, or failed with their failure) to the
 * native consumer: one call per turn of the event loop, and one call per
 * delivery when the call for the whole batch is refused.
 */
import { ClosedError, fromNativeCall } from '../errors';
import type { NativeConsumer, NativeFailureInfo } from '../native';
import { reasonOf } from '../support/error-text';
import type { FailureInfo } from './failure';
import type { Log } from '../support/log';

/** The failure passed to the native side when nothing better can be. */
export const UNREADABLE_FAILURE: FailureInfo = {
  name: 'Error',
  message: 'the handler failed, and its error could not be passed on',
  stack: '',
  kind: 'non-retryable',
};

/** The failure passed to the native side when nothing better can be, saying `message`. */
export function unreadableFailure(message: string): FailureInfo {
  return { name: UNREADABLE_FAILURE.name, message, stack: UNREADABLE_FAILURE.stack, kind: UNREADABLE_FAILURE.kind };
}

/**
 * `failure` with the delivery's `id`, built field by field: V8 copies a
 * spread object on a slow path, which costs about a microsecond a failure.
 */
function withId(id: number, f: FailureInfo): NativeFailureInfo {
  const out: NativeFailureInfo = { id, name: f.name, message: f.message, stack: f.stack, kind: f.kind };
  if (f.table !== undefined) out.table = f.table;
  if (f.traceparent !== undefined) out.traceparent = f.traceparent;
  if (f.tracestate !== undefined) out.tracestate = f.tracestate;
  return out;
}

/** A failure every field of which the native side takes. */
function sanitized(f: NativeFailureInfo): NativeFailureInfo {
  try {
    const str = (v: unknown, fallback: string) => (typeof v === 'string' ? v : fallback);
    return {
      id: f.id,
      name: str(f.name, 'Error'),
      message: str(f.message, UNREADABLE_FAILURE.message),
      stack: str(f.stack, ''),
      // The native side names the kinds it takes; one it refuses leaves the minimal failure.
      kind: typeof f.kind === 'string' ? f.kind : UNREADABLE_FAILURE.kind,
    };
  } catch {
    return withId(f.id, UNREADABLE_FAILURE);
  }
}

function isClosedError(err: unknown): boolean {
  return err instanceof ClosedError;
}

/** What the settlements need of their consumer. */
export interface SettlementHost {
  /** The work queue, for log lines. */
  readonly queue: string;
  readonly inner: Pick<NativeConsumer, 'settle'>;
  readonly log: Log;
  /** A close began. */
  closing(): boolean;
  /** The consumer is closed: its channel gave the unsettled messages back. */
  closed(): boolean;
  /** Reports a settle the native side refused. */
  fail(err: unknown): void;
}

/** The deliveries settled since the last flush. */
export class Settlements {
  private acked: number[] = [];
  private failed: NativeFailureInfo[] = [];
  private reportedClosed = false;

  constructor(private readonly host: SettlementHost) {}

  /** Delivery `id`'s handler resolved. */
  ack(id: number): void {
    this.acked.push(id);
    this.queueFlush();
  }

  /** Delivery `id`'s handler threw `failure`. */
  fail(id: number, failure: FailureInfo): void {
    this.failed.push(withId(id, failure));
    this.queueFlush();
  }

  /**
   * Settlements go to the native side in one call per turn of the event
   * loop: the handlers that finished in the same turn share it.
   */
  private queueFlush(): void {
    if (this.acked.length + this.failed.length === 1) setImmediate(this.flush);
  }

  /**
   * Hands the settled deliveries to the native side. If the call for the
   * whole batch fails, the acks are settled on their own and each failure on
   * its own (with a sanitized failure if needed), so one bad entry cannot
   * leave the others unacked. Only a closed consumer drops settlements: its
   * channel gave their messages back.
   */
  readonly flush = (): void => {
    if (this.acked.length + this.failed.length === 0) return;
    const { acked, failed } = this;
    this.acked = [];
    this.failed = [];
    const { host } = this;
    if (host.closed()) return;
    let batchErr: unknown;
    try {
      host.inner.settle(acked, failed);
      return;
    } catch (err) {
      batchErr = fromNativeCall(err);
    }
    if (isClosedError(batchErr)) {
      this.refused(batchErr);
      return;
    }
    host.log(
      'warn',
      `rabbit-retry: settling ${acked.length + failed.length} message(s) of '${host.queue}' at once failed (${reasonOf(batchErr)}); settling them one by one`,
    );
    if (acked.length > 0) {
      try {
        host.inner.settle(acked, []);
      } catch (err) {
        this.refused(fromNativeCall(err));
      }
    }
    for (const f of failed) {
      try {
        host.inner.settle([], [sanitized(f)]);
      } catch {
        try {
          host.inner.settle([], [withId(f.id, UNREADABLE_FAILURE)]);
        } catch (err) {
          this.refused(fromNativeCall(err));
        }
      }
    }
  };

  /** A settle the native side refused: quiet once the consumer is closing or closed (the broker takes the message back). */
  private refused(err: unknown): void {
    if (isClosedError(err)) {
      if (this.host.closing() || this.host.closed() || this.reportedClosed) return;
      this.reportedClosed = true;
    }
    this.host.fail(err);
  }
}
