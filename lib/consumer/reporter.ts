/**
 * What a consumer tells its listeners: the outcomes the native side reports
 * (a retry, a park, a stored row, a failed republish, a lost or recovered
 * channel), its circuit's changes, stuck handlers and errors. Where nobody
 * listens, a log line stands in for the events an operator must not miss. A
 * listener that throws is logged, and consuming goes on.
 */
import type { ParkReason } from '../contract';
import type { CircuitClosedEvent, CircuitHalfOpenEvent, CircuitOpenEvent } from '../circuit';
import { reasonOf } from '../support/error-text';
import { type RabbitRetryError, fromNative } from '../errors';
import type { Log } from '../support/log';
import type { ConsumerTracing } from '../telemetry/tracing';
import type { WireEvent } from '../wire';
import type { ConsumerEvents, DuplicateEvent, StuckEvent } from './events';
import type { MoveWatch } from './moves';
import type { Tally } from './tally';

/** A change of the consumer's circuit, as its event. */
export type CircuitNotice = ['circuitOpen', CircuitOpenEvent] | ['circuitHalfOpen', CircuitHalfOpenEvent] | ['circuitClosed', CircuitClosedEvent];

/** What the reporter needs of its consumer. */
export interface ReportHost {
  /** The work queue. */
  readonly queue: string;
  readonly log: Log;
  /** Whether the consumer's `event` has a listener. */
  heard(event: keyof ConsumerEvents): boolean;
  /** Emits the consumer's `event`; what a listener throws comes back. */
  emit<E extends keyof ConsumerEvents>(event: E, ...args: ConsumerEvents[E]): void;
  /** The consumer consumes from the node `url` now. */
  movedTo(url: string): void;
  /** Hears where each failed message went, when a part waits on it. */
  moves(): Pick<MoveWatch, 'heard'> | undefined;
}

/** Turns what happened to a consumer into its events, counts and log lines. */
export class Reporter {
  constructor(
    private readonly host: ReportHost,
    private readonly tally: Pick<
      Tally,
      'retried' | 'parked' | 'stored' | 'publishFailed' | 'faultFailed' | 'duplicate' | 'circuitOpened' | 'takenBack' | 'safely'
    >,
    private readonly tracing: Pick<ConsumerTracing, 'settled'>,
  ) {}

  /** Reports an event of the native side; a listener that throws is logged, and consuming goes on. */
  event(e: WireEvent): void {
    try {
      this.report(e);
    } catch (err) {
      this.listenerThrew(e.kind, err);
    }
  }

  /** A handler has run for `event.sinceMs` without settling (`stuckAfterMs` is the bound it passed). */
  stuck(event: StuckEvent, stuckAfterMs: number): void {
    if (this.host.heard('stuck')) {
      this.emitSafely('stuck', () => this.host.emit('stuck', event));
    } else {
      this.host.log(
        'warn',
        `rabbit-retry: the handler of message ${event.messageId ?? '(no id)'} of '${this.host.queue}' has not settled after ${event.sinceMs} ms (stuckAfterMs ${stuckAfterMs})`,
      );
    }
  }

  /** The inbox acked a copy of a message handled already (its handler was not called). */
  duplicate(event: DuplicateEvent): void {
    this.tally.duplicate();
    if (this.host.heard('duplicate')) this.emitSafely('duplicate', () => this.host.emit('duplicate', event));
  }

  /** The consumer's circuit changed. */
  circuit(...[event, e]: CircuitNotice): void {
    if (event === 'circuitOpen') this.tally.circuitOpened(e.dependency);
    if (this.host.heard(event)) {
      // The notice pairs each event with its payload, which the emitter's typing cannot follow.
      this.emitSafely(event, () => (this.host.emit as (ev: string, arg: unknown) => void)(event, e));
      return;
    }
    // Unheard, an open and a close still reach the log; a probe does not.
    const { queue } = this.host;
    if (event === 'circuitOpen') {
      this.host.log(
        'warn',
        `rabbit-retry: the circuit of '${e.dependency}' opened (${e.cause}); the consumer of '${queue}' stops taking messages and probes`,
      );
    } else if (event === 'circuitClosed') {
      this.host.log(
        'warn',
        `rabbit-retry: the circuit of '${e.dependency}' closed (${e.cause}) after ${e.openMs} ms; the consumer of '${queue}' takes messages again`,
      );
    }
  }

  /** Reports an error of the consumer: to its `error` listeners, else to the log. */
  fail(err: unknown): void {
    const error = err instanceof Error ? err : new Error(reasonOf(err));
    if (!this.host.heard('error')) {
      this.host.log('error', `rabbit-retry: consumer of '${this.host.queue}': ${error.message}`);
      return;
    }
    this.emitSafely('error', () => this.host.emit('error', error));
  }

  private report(e: WireEvent): void {
    const { host, tally } = this;
    const { queue } = host;
    tally.safely(() => this.tracing.settled(e));
    host.moves()?.heard(e);
    switch (e.kind) {
      case 'retry': {
        const { delay, target } = e;
        const messageId = e.messageId ?? undefined;
        tally.retried(delay);
        if (host.heard('retry')) host.emit('retry', { queue, target, messageId, attempt: e.attempt, delay, error: e.error });
        return;
      }
      case 'parked': {
        const { reason, target } = e;
        const messageId = e.messageId ?? undefined;
        tally.parked(reason);
        if (host.heard('parked')) host.emit('parked', { queue, target, messageId, reason, attempt: e.attempt, error: e.error });
        if (e.faultError !== null) this.faultFailed(messageId, reason, e.faultError);
        return;
      }
      case 'stored':
        tally.stored();
        host.emit('stored', {
          queue,
          rowId: e.rowId,
          messageId: e.messageId ?? undefined,
          attempt: e.attempt,
          dependency: e.dependency ?? undefined,
          error: e.error,
        });
        return;
      case 'publish-failed': {
        const { target } = e;
        const messageId = e.messageId ?? undefined;
        tally.publishFailed();
        const error = fromNative(new Error(e.error)) as RabbitRetryError;
        if (host.heard('publishFailed')) {
          host.emit('publishFailed', { queue, target, messageId, error });
        } else {
          host.log(
            'warn',
            `rabbit-retry: could not move message ${messageId ?? '(no id)'} of '${queue}' to '${target}'; it stays unacked and the broker will redeliver it: ${error.message}`,
          );
        }
        return;
      }
      case 'disconnected': {
        const error = fromNative(new Error(e.error)) as Error;
        if (host.heard('disconnected')) host.emit('disconnected', { queue, error, url: e.url });
        else host.log('warn', `rabbit-retry: consumer of '${queue}' lost its channel on ${e.url}, recovering: ${error.message}`);
        return;
      }
      case 'tally':
        for (const [delay, n] of Object.entries(e.retried)) tally.retried(delay, n);
        for (const [reason, n] of Object.entries(e.parked)) tally.parked(reason, n);
        return;
      case 'taken-back':
        tally.takenBack(e.acked);
        return;
      case 'recovered':
        host.movedTo(e.url);
        host.emit('recovered', { queue, attempts: e.attempts, afterMs: e.afterMs, url: e.url });
        return;
      default:
        this.fail(fromNative(new Error(e.error)));
    }
  }

  /** The broker refused the fault event of a message that parked for `reason`: an event, or a log line. */
  private faultFailed(messageId: string | undefined, reason: ParkReason, coded: string): void {
    const { host, tally } = this;
    tally.faultFailed();
    const error = fromNative(new Error(coded)) as RabbitRetryError;
    if (host.heard('faultFailed')) {
      this.emitSafely('faultFailed', () => host.emit('faultFailed', { queue: host.queue, messageId, reason, error }));
    } else {
      host.log('warn', `rabbit-retry: the fault event of parked message ${messageId ?? '(no id)'} of '${host.queue}' was refused: ${error.message}`);
    }
  }

  /** Emits `event` with `emit`; a listener that throws is logged. */
  private emitSafely(event: keyof ConsumerEvents, emit: () => void): void {
    try {
      emit();
    } catch (err) {
      this.listenerThrew(event, err);
    }
  }

  private listenerThrew(event: string, err: unknown): void {
    const article = /^[aeiou]/.test(event) ? 'an' : 'a';
    this.host.log('error', `rabbit-retry: ${article} '${event}' listener of the consumer of '${this.host.queue}' threw: ${reasonOf(err)}`);
  }
}
