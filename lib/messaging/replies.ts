/**
 * Requests that wait for a reply, over RabbitMQ's direct reply-to: one
 * native reply channel, opened on first use (and again after it closed),
 * and the requests waiting for replies, by correlation id.
 * @internal
 */
import { ClosedError, ConnectionError, native } from '../errors';
import type { Message } from '../message';
import type { NativeMessageProperties, NativeReplySession } from '../native';
import type { PublishOptions } from '../options';
import { deliveriesOf, messageOf } from '../wire';

/** A request waiting for its replies. */
export interface ReplyWaiter {
  /** A reply came. */
  reply(msg: Message): void;
  /** The reply channel closed: no reply will come. */
  lost(err: Error): void;
}

/** Replies taken in one native call at most. */
const REPLIES_PER_CALL = 100;

/** The reply channel of one client and the requests waiting on it. */
export class Replies {
  #session?: Promise<NativeReplySession>;
  readonly #waiting = new Map<string, ReplyWaiter>();
  #closed = false;

  constructor(
    private readonly open: () => Promise<NativeReplySession>,
    private readonly properties: (options: PublishOptions) => NativeMessageProperties,
  ) {}

  /**
   * Hands the replies with `correlationId` to `waiter` until the returned
   * function is called.
   */
  wait(correlationId: string, waiter: ReplyWaiter): () => void {
    this.#waiting.set(correlationId, waiter);
    return () => {
      if (this.#waiting.get(correlationId) === waiter) this.#waiting.delete(correlationId);
    };
  }

  /**
   * Publishes a request whose `reply-to` is direct reply-to, mandatory, and
   * waits for the broker's confirm.
   */
  async request(exchange: string, routingKey: string, body: Buffer, options: PublishOptions): Promise<void> {
    const properties = this.properties(options);
    const session = await this.session();
    await native(() => session.request(exchange, routingKey, body, properties));
  }

  /** Closes the reply channel; every request still waiting is told. */
  async close(): Promise<void> {
    this.#closed = true;
    const session = this.#session;
    this.#session = undefined;
    this.lose(new ClosedError('the client closed before the reply came'));
    if (session) await (await session.catch(() => undefined))?.close().catch(() => undefined);
  }

  private session(): Promise<NativeReplySession> {
    if (this.#closed) return Promise.reject(new ClosedError('the client is closed'));
    if (!this.#session) {
      const opening = native(this.open).then((s) => {
        void this.pump(s, opening);
        return s;
      });
      // A channel that could not be opened is tried again on the next request.
      opening.catch(() => {
        if (this.#session === opening) this.#session = undefined;
      });
      this.#session = opening;
    }
    return this.#session;
  }

  /** Hands every reply to its waiter until the channel closes. */
  private async pump(s: NativeReplySession, opened: Promise<NativeReplySession>): Promise<void> {
    for (;;) {
      let batch;
      try {
        batch = await s.next(REPLIES_PER_CALL);
      } catch {
        break;
      }
      for (const d of deliveriesOf(batch)) {
        const { msg } = messageOf(d, batch);
        const id = msg.properties.correlationId;
        if (id === undefined) continue;
        try {
          this.#waiting.get(id)?.reply(msg);
        } catch {
          // A waiter's own failure is its own; the other replies still go out.
        }
      }
      if (batch.closed) break;
    }
    if (this.#session === opened) this.#session = undefined;
    // A channel whose replies stopped is not used again.
    void s.close().catch(() => undefined);
    if (!this.#closed) this.lose(new ConnectionError('the reply channel closed (the connection was lost?) before the reply came'));
  }

  private lose(err: Error): void {
    const waiting = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const w of waiting) {
      try {
        w.lost(err);
      } catch {
        // As above.
      }
    }
  }
}
