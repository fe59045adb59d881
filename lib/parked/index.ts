/**
 * The operators' calls on a work queue's parked queue: count, look, replay at
 * a safe rate, edit one message and send it back, purge.
 */
import { InvalidOptionsError, NotParkedError, native } from '../errors';
import { type NativeClient, type NativeParkedSession, parkedQueueName } from '../native';
import { tracedPublish } from '../telemetry/tracing';
import { checkKeys, checkObject } from '../options/check';
import type { OptionKeys } from '../options';
import { fenceSync } from '../support/fence';
import { type ParkedFilter, type ParkedMessage, checkFilter, selects, taken } from './message';

import { type EditOptions, type EditResult, type ParkedEdit, checkEdit, editParked } from './edit';

export { type ParkedFilter, ParkedMessage, selects } from './message';
export type { EditOptions, EditResult, ParkedEdit } from './edit';

/** Options of {@link Parked.peek}. */
export interface PeekOptions {
  /** Return at most this many messages. @default 20 */
  limit?: number;
  /** Return only the messages it selects. */
  filter?: ParkedFilter;
  /** Look at no more than this many messages to find `limit` matches. @default 10000 */
  scanLimit?: number;
}

/** The keys of {@link PeekOptions}. */
const PEEK_OPTION_KEYS = { limit: true, filter: true, scanLimit: true } satisfies OptionKeys<PeekOptions>;

/** Where {@link Parked.replay} sends messages. */
export interface ReplayTarget {
  /** The exchange (`''` for the default exchange). */
  exchange: string;
  /** The routing key. */
  routingKey: string;
}

/** The keys of {@link ReplayTarget}. */
const REPLAY_TARGET_KEYS = { exchange: true, routingKey: true } satisfies OptionKeys<ReplayTarget>;

/** Progress of a replay, reported after each message. */
export interface ReplayProgress {
  /** Replayed so far. */
  replayed: number;
  /** Looked at and left parked so far (not selected by the filter). */
  skipped: number;
  /** The most that will be replayed (`limit`, or the queue's depth at the start). */
  total: number;
}

/** Options of {@link Parked.replay}. */
export interface ReplayOptions {
  /** Replay at most this many. @default all that the filter selects */
  limit?: number;
  /** At most this many publishes a second. @default 50 */
  ratePerSec?: number;
  /** Replay only the messages it selects. */
  filter?: ParkedFilter;
  /** Where to send them. @default the work queue, through the default exchange */
  to?: ReplayTarget;
  /** Called after each replayed message. */
  onProgress?: (p: ReplayProgress) => void;
  /**
   * Ends the replay as soon as it is aborted: the wait for the next slot ends
   * at once, and no message is taken or replayed after it. What was not
   * replayed stays parked, in its order; the result says `stopped: true`.
   */
  signal?: AbortSignal;
}

/** The keys of {@link ReplayOptions}. */
const REPLAY_OPTION_KEYS = {
  limit: true,
  ratePerSec: true,
  filter: true,
  to: true,
  onProgress: true,
  signal: true,
} satisfies OptionKeys<ReplayOptions>;

/** What a replay did. */
export interface ReplayResult {
  /** Messages moved out of the parked queue. */
  replayed: number;
  /** Messages looked at and left parked. */
  skipped: number;
  /** Milliseconds the replay took. */
  durationMs: number;
  /** Whether `signal` ended it before it was done. */
  stopped: boolean;
}

/** Progress of a {@link Parked.purge} that selects messages, reported after each deleted one. */
export interface PurgeProgress {
  /** Deleted so far. */
  purged: number;
  /** Looked at and left parked so far (not selected by the filter). */
  skipped: number;
}

/** Options of {@link Parked.purge}: which messages to delete. */
export interface PurgeOptions {
  /** Delete at most this many. @default all that the filter selects */
  limit?: number;
  /** Delete only the messages it selects. */
  filter?: ParkedFilter;
  /** Called after each deleted message. */
  onProgress?: (p: PurgeProgress) => void;
}

/** The keys of {@link PurgeOptions}. */
const PURGE_OPTION_KEYS = { limit: true, filter: true, onProgress: true } satisfies OptionKeys<PurgeOptions>;

/** What {@link Parked.move} moves, and how. @internal */
export interface MoveOptions {
  /** `replay`: back to `to`, `retry-attempt` reset; `purge`: deleted for good. */
  kind: 'replay' | 'purge';
  /** Where a replay sends them. @default the work queue, through the default exchange */
  to?: ReplayTarget;
  /** Move at most this many. */
  limit: number;
  /** Look at no more than this many: the parked queue's depth at the start. */
  depth: number;
  /** At most this many moves a second; null for no bound. */
  ratePerSec: number | null;
  /** Whether `m` moves; the others stay parked, in their order. */
  select: (m: ParkedMessage) => boolean;
  /** Once aborted, the move ends: its wait ends at once, and it takes nothing more. */
  signal?: AbortSignal;
  /** Called after each message moved, with the counts so far. */
  onMoved?: (m: ParkedMessage, moved: number, skipped: number) => void;
}

/** What {@link Parked.move} moved, and what it looked at and left parked. @internal */
export interface Moved {
  /** Messages replayed or deleted. */
  moved: number;
  /** Messages looked at and left parked. */
  skipped: number;
}

/** Calls an `onProgress` callback, fenced: a throw ends the call that asked (as it was thrown); a Promise it returns is not awaited, its rejection caught. */
function progress<P>(onProgress: ((p: P) => void) | undefined, p: P): void {
  if (!onProgress) return;
  const r = fenceSync('onProgress', () => onProgress(p));
  if (!r.ok) throw r.error;
}

function positiveInt(name: string, v: number | undefined): void {
  if (v !== undefined && (!Number.isInteger(v) || v < 1)) {
    throw new InvalidOptionsError(`${name} must be a whole number of at least 1, got ${String(v)}`);
  }
}

/**
 * Resolves after `ms`, to true; at once, to false, when `signal` is (or
 * becomes) aborted first. Without a signal it only waits.
 */
function pause(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve(false);
      return;
    }
    const end = (waited: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', aborted);
      resolve(waited);
    };
    const aborted = () => end(false);
    const timer = setTimeout(() => end(true), ms);
    signal?.addEventListener('abort', aborted, { once: true });
  });
}

/**
 * The parked queue of one work queue (`<queue>.parked`): count, look, replay
 * at a safe rate, purge. Get one with {@link RabbitRetry.parked}.
 *
 * Looking uses `basic.get` without an ack and gives every message back when
 * done: RabbitMQ puts them back in their place, and marks them `redelivered`.
 */
export class Parked {
  /** The parked queue's name. */
  readonly name: string;

  /** @internal */
  constructor(
    private readonly client: NativeClient,
    /** The work queue the parked messages belong to. */
    readonly queue: string,
  ) {
    this.name = parkedQueueName(queue);
  }

  /** Messages in the parked queue (0 when it does not exist). */
  async count(): Promise<number> {
    const info = await native(() => this.client.queueInfo(this.name));
    return info?.messages ?? 0;
  }

  /**
   * Up to `limit` parked messages that `filter` selects, with body, properties
   * and headers. Every message stays parked.
   */
  async peek(options: PeekOptions = {}): Promise<ParkedMessage[]> {
    checkObject('peek options', options, 'an object such as { limit }');
    checkKeys('peek', options, PEEK_OPTION_KEYS);
    checkFilter('peek', options.filter);
    const limit = options.limit ?? 20;
    const scanLimit = options.scanLimit ?? 10_000;
    positiveInt('limit', limit);
    positiveInt('scanLimit', scanLimit);
    const out: ParkedMessage[] = [];
    await this.withSession(async (s) => {
      let scanned = 0;
      for await (const { message } of taken(s, () => (out.length < limit ? scanLimit - scanned : 0))) {
        scanned++;
        if (selects(options.filter, message)) out.push(message);
      }
    });
    return out;
  }

  /**
   * Moves parked messages back to the work queue (or `to`), with
   * `retry-attempt` reset to 0 and a `retry-replayed-at` header, message and
   * correlation ids kept, at no more than `ratePerSec`. Each message is acked
   * from the parked queue only after its publish was confirmed; when a publish
   * fails the replay stops, that message and the rest stay parked, and the
   * error says how far it got.
   */
  async replay(options: ReplayOptions = {}): Promise<ReplayResult> {
    checkObject('replay options', options, 'an object such as { ratePerSec }');
    checkKeys('replay', options, REPLAY_OPTION_KEYS);
    checkFilter('replay', options.filter);
    if (options.to !== undefined) {
      checkObject('replay to', options.to, 'an object such as { exchange, routingKey }');
      checkKeys('replay to', options.to, REPLAY_TARGET_KEYS);
    }
    const rate = options.ratePerSec ?? 50;
    if (typeof rate !== 'number' || !(rate > 0) || !Number.isFinite(rate)) {
      throw new InvalidOptionsError(`ratePerSec must be a positive number, got ${String(rate)}`);
    }
    positiveInt('limit', options.limit);
    const { signal } = options;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidOptionsError('signal must be an AbortSignal (from an AbortController)');
    }
    const started = Date.now();
    const depth = await this.count();
    const total = Math.min(options.limit ?? depth, depth);
    const { moved: replayed, skipped } = await this.move({
      kind: 'replay',
      to: options.to,
      limit: options.limit ?? Infinity,
      depth,
      ratePerSec: rate,
      select: (m) => selects(options.filter, m),
      signal,
      onMoved: (_m, replayed, skipped) => progress(options.onProgress, { replayed, skipped, total }),
    });
    return { replayed, skipped, durationMs: Date.now() - started, stopped: signal?.aborted === true };
  }

  /**
   * Sends the one parked message whose id is `messageId` back to the work
   * queue, edited: `edit.body` for its body, `edit.headers` added, replaced
   * or (given as `undefined`) left out. The copy keeps the original's message
   * id and other properties, its attempt count starts again, and it carries
   * the audit trail: `retry-edited-by` (`options.by`), `retry-edited-at`, and
   * `retry-edits`, every edit of the message with who, when and what changed.
   * The original leaves the parked queue only after the broker confirmed the
   * copy; every other parked message stays, in its place.
   *
   * Rejects, with nothing moved, with a `NotParkedError` (`NOT_PARKED`) when
   * no parked message has that id, an `AmbiguousMessageIdError`
   * (`AMBIGUOUS_MESSAGE_ID`) when several have it, an `InvalidOptionsError`
   * for an edit it cannot make, and as `rr.publish` does when the broker
   * refuses the copy (a body over its limits, a work queue that refuses it).
   */
  async edit(messageId: string, edit: ParkedEdit, options: EditOptions): Promise<EditResult> {
    const checked = checkEdit(messageId, edit, options);
    const depth = await this.count();
    const none = () => new NotParkedError(`no message of '${this.name}' has the id '${messageId}' (it holds none): nothing was edited`);
    if (depth === 0) throw none();
    let result: EditResult | undefined;
    await this.withSession(async (s) => {
      result = await editParked(s, { queue: this.queue, parked: this.name, depth }, checked);
    });
    if (!result) throw none();
    return result;
  }

  /**
   * Deletes parked messages for good; resolves to how many. Without options
   * it deletes every one. With a `filter` or a `limit` it looks at the
   * messages in order (no more than the queue's depth at the start) and
   * deletes the ones selected, up to `limit`, each acked alone: the others
   * stay parked, in their order. When a deletion fails it stops, and that
   * message and the rest stay parked.
   */
  async purge(options?: PurgeOptions): Promise<number> {
    if (options !== undefined) {
      checkObject('purge options', options, 'an object such as { filter, limit }');
      checkKeys('purge', options, PURGE_OPTION_KEYS);
      checkFilter('purge', options.filter);
      positiveInt('limit', options.limit);
    }
    if (options?.filter !== undefined || options?.limit !== undefined) return this.purgeSelected(options);
    const info = await native(() => this.client.queueInfo(this.name));
    if (!info) return 0;
    return native(() => this.client.purge(this.name));
  }

  private async purgeSelected(options: PurgeOptions): Promise<number> {
    const { moved } = await this.move({
      kind: 'purge',
      limit: options.limit ?? Infinity,
      depth: await this.count(),
      ratePerSec: null,
      select: (m) => selects(options.filter, m),
      onMoved: (_m, purged, skipped) => progress(options.onProgress, { purged, skipped }),
    });
    return moved;
  }

  /**
   * Moves the parked messages that `select` chooses, at most `limit`, looking
   * at no more than `depth`, at no more than `ratePerSec`: what replay, a
   * selecting purge and the console's jobs share. Ends as soon as `signal` is
   * aborted: a wait for the next slot ends at once, and no message is taken or
   * moved after it. A replayed message is acked only after its publish was
   * confirmed; when a move fails, that message and the rest stay parked and
   * the error says how far it got. What the session took and did not move
   * goes back to its place when it closes.
   * @internal
   */
  async move(o: MoveOptions): Promise<Moved> {
    const done: Moved = { moved: 0, skipped: 0 };
    if (o.depth <= 0 || o.limit <= 0 || o.signal?.aborted) return done;
    const interval = o.ratePerSec === null ? 0 : 1000 / o.ratePerSec;
    const { exchange, routingKey } = o.to ?? { exchange: '', routingKey: this.queue };
    await this.withSession(async (s) => {
      const started = Date.now();
      // Look at no more than the depth at the start: a replayed message that
      // fails and parks again lands behind them and waits for the next replay.
      let looked = 0;
      const room = () => (!o.signal?.aborted && done.moved < o.limit ? o.depth - looked : 0);
      for await (const { id, message } of taken(s, room)) {
        looked++;
        if (!o.select(message)) {
          done.skipped++;
          continue;
        }
        // A stop during the wait leaves this message, and the rest, parked in their order.
        const wait = started + done.moved * interval - Date.now();
        if (wait > 0 && !(await pause(wait, o.signal))) break;
        if (o.signal?.aborted) break;
        try {
          if (o.kind === 'replay') {
            const replayed = { exchange, routingKey, messageId: message.properties.messageId, bodySize: message.body.length, replayOf: message.headers };
            await tracedPublish(replayed, (trace) => native(() => s.replay(id, exchange, routingKey, trace?.traceparent, trace?.tracestate)));
          } else {
            await native(() => s.discard(id));
          }
        } catch (err) {
          const e = err as { message?: unknown } | null;
          if (e && typeof e.message === 'string') {
            e.message = `${o.kind} of '${this.name}' stopped after ${done.moved} message(s); the rest stay parked: ${e.message}`;
          }
          throw err;
        }
        done.moved++;
        o.onMoved?.(message, done.moved, done.skipped);
      }
    });
    return done;
  }

  /**
   * Calls `visit` with each of the first `scanLimit` parked messages, in
   * order, until it returns `false`, and leaves every one parked (as
   * {@link peek} does); resolves to how many it looked at.
   * @internal
   */
  // eslint-disable-next-line @typescript-eslint/no-invalid-void-type -- a visitor that returns nothing goes on
  async scan(scanLimit: number, visit: (m: ParkedMessage, position: number) => boolean | void): Promise<number> {
    positiveInt('scanLimit', scanLimit);
    if ((await this.count()) === 0) return 0;
    let scanned = 0;
    let stop = false;
    await this.withSession(async (s) => {
      for await (const { message } of taken(s, () => (stop ? 0 : scanLimit - scanned))) {
        if (visit(message, scanned) === false) stop = true;
        scanned++;
      }
    });
    return scanned;
  }

  private async withSession(f: (s: NativeParkedSession) => Promise<void>): Promise<void> {
    const s = await native(() => this.client.openParked(this.name, this.queue));
    try {
      await f(s);
    } finally {
      await native(() => s.close());
    }
  }
}
