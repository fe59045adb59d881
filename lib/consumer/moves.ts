/**
 * Where the failed messages went, for a part that must act on it: the
 * microservices transport answers a request's caller only when the request
 * parks. The native verdict decides where a failure goes (`src/retry/verdict.rs`);
 * this only hears its answer, the event of each move, and tells the watcher.
 */
import { reasonOf } from '../support/error-text';
import type { ParkReason } from '../contract';
import type { Log } from '../support/log';
import type { Message } from '../message';
import type { WireEvent } from '../wire';

/** A failed message's park: why, and the error it parked with. */
export interface ParkedMove {
  /** Its `retry-reason`. */
  reason: ParkReason;
  /** The error's message. */
  error: string;
}

/**
 * Hears where a failed message went: `parked` when it was parked (its handler
 * failed, or the verdict refused it before its handler); undefined when it
 * was retried, stored in the retry table, or left to the broker.
 */
export type MoveListener = (msg: Message, parked: ParkedMove | undefined) => void;

/** The failed messages of a consumer whose moves a listener waits on, by delivery id. */
export class MoveWatch {
  readonly #waiting = new Map<number, Message>();

  constructor(
    private readonly listener: MoveListener,
    private readonly log: Log,
    private readonly queue: string,
  ) {}

  /** Delivery `id`, of `msg`, failed or was refused before its handler: its move is told when the native side reports it. */
  failed(id: number, msg: Message): void {
    this.#waiting.set(id, msg);
  }

  /** An event of the native side: the end of a watched failure's move, maybe. */
  heard(e: WireEvent): void {
    switch (e.kind) {
      case 'parked':
      case 'retry':
      case 'stored':
      case 'publish-failed':
      case 'taken-back': {
        const msg = this.#waiting.get(e.id);
        if (msg === undefined) return;
        this.#waiting.delete(e.id);
        try {
          this.listener(msg, e.kind === 'parked' ? { reason: e.reason, error: e.error } : undefined);
        } catch (err) {
          this.log('error', `rabbit-retry: the move listener of the consumer of '${this.queue}' threw: ${reasonOf(err)}`);
        }
        return;
      }
      default:
        return;
    }
  }

  /** The consumer closed: no move is reported after. */
  clear(): void {
    this.#waiting.clear();
  }
}
