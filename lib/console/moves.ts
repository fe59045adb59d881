/**
 * How the console's jobs move parked messages: taken one batch at a time
 * through the parked queue's session, each replayed (or deleted) in turn at
 * the job's rate. Every wait of a job ends as soon as its signal is aborted;
 * from then on it takes no message more from the parked queue, and what it
 * holds goes back to its place when the session closes.
 */
import { native } from '../errors';
import type { NativeParkedSession } from '../native';
import { type Parked, ParkedMessage, pause } from '../parked';
import { tracedPublish } from '../tracing';
import { deliveriesOf, partsOf } from '../wire';

/** Messages taken from the broker in one call, at most. */
const TAKE_AT_ONCE = 100;

/** What a job moves, and how. */
export interface MoveOptions {
  /** `replay`: back to the work queue, `retry-attempt` reset; `purge`: deleted for good. */
  kind: 'replay' | 'purge';
  /** Move at most this many. */
  limit: number;
  /** Look at no more than this many: the parked queue's depth when the job began. */
  depth: number;
  /** At most this many moves a second; null for no bound. */
  ratePerSec: number | null;
  /** Whether the job moves `m`; the others stay parked, in their order. */
  select: (m: ParkedMessage) => boolean;
  /** Once aborted, the job ends: its wait ends at once, and it takes nothing more. */
  signal: AbortSignal;
  /** Called after each message moved, with the counts so far. */
  onMoved: (m: ParkedMessage, moved: number, skipped: number) => void;
}

/** What a job moved, and what it looked at and left parked. */
export interface Moved {
  /** Messages replayed or deleted. */
  moved: number;
  /** Messages looked at and left parked. */
  skipped: number;
}


/**
 * Opens the parked queue's session for `f` and closes it after, as `Parked`'s
 * own methods do: the messages `f` took and did not move go back to their
 * places in the queue.
 */
function withSession(parked: Parked, f: (s: NativeParkedSession) => Promise<void>): Promise<void> {
  // Parked's replay and purge wait between messages without a way to end the
  // wait, and take the rest of the queue once nothing is selected any more:
  // the console drives the session itself so that a stop ends both at once.
  return parked['withSession'](f);
}

/**
 * Moves the parked messages of `parked` that `select` chooses, at most
 * `limit`, looking at no more than `depth`, at no more than `ratePerSec`.
 * Ends as soon as `signal` is aborted: a wait for the next slot ends at
 * once, and no message is taken or moved after it. A replayed message is
 * acked only after its publish was confirmed; when a move fails, that
 * message and the rest stay parked and the error says how far it got.
 */
export async function moveParked(parked: Parked, o: MoveOptions): Promise<Moved> {
  const done: Moved = { moved: 0, skipped: 0 };
  if (o.depth <= 0 || o.limit <= 0 || o.signal.aborted) return done;
  const interval = o.ratePerSec === null ? 0 : 1000 / o.ratePerSec;
  const target = { exchange: '', routingKey: parked.queue };
  await withSession(parked, async (s) => {
    const started = Date.now();
    let looked = 0;
    const more = () => !o.signal.aborted && done.moved < o.limit && looked < o.depth;
    while (more()) {
      const { batch } = await native(() => s.get(Math.min(o.depth - looked, TAKE_AT_ONCE)));
      const held = deliveriesOf(batch);
      if (held.length === 0) return;
      for (const d of held) {
        // What is held and not looked at goes back to its place when the session closes.
        if (!more()) return;
        looked++;
        const message = new ParkedMessage(partsOf(d, batch));
        if (!o.select(message)) {
          done.skipped++;
          continue;
        }
        const wait = started + done.moved * interval - Date.now();
        if (wait > 0 && !(await pause(wait, o.signal))) return;
        if (o.signal.aborted) return;
        try {
          if (o.kind === 'replay') {
            const replayed = { ...target, messageId: message.properties.messageId, bodySize: message.body.length, replayOf: message.headers };
            await tracedPublish(replayed, (trace) => native(() => s.replay(d.i, target.exchange, target.routingKey, trace?.traceparent, trace?.tracestate)));
          } else {
            await native(() => s.discard(d.i));
          }
        } catch (err) {
          const e = err as { message?: unknown } | null;
          if (e && typeof e.message === 'string') {
            e.message = `${o.kind} of '${parked.name}' stopped after ${done.moved} message(s); the rest stay parked: ${e.message}`;
          }
          throw err;
        }
        done.moved++;
        o.onMoved(message, done.moved, done.skipped);
      }
    }
  });
  return done;
}
