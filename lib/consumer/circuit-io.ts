/**
 * What a consumer's circuit does on the broker: the state queue
 * `<queue>.circuit`, and sending the messages of the retry queues back to the
 * work queue when the circuit closes.
 */
import type { CircuitRecord } from '../circuit';
import { native } from '../errors';
import type { NativeClient } from '../native';
import { deliveriesOf, messageOf } from '../wire';

/** The state queue of `queue`'s circuit: `<queue>.circuit`. */
export function circuitQueueName(queue: string): string {
  return `${queue}.circuit`;
}

/** The circuit operations of the consumer of one work queue. @internal */
export class CircuitIo {
  readonly stateQueue: string;

  constructor(
    private readonly client: NativeClient,
    private readonly queue: string,
    /** The consumer's retry queues, shortest delay first. */
    private readonly retryQueues: readonly string[],
  ) {
    this.stateQueue = circuitQueueName(queue);
  }

  /** Declares the state queue and reads what it holds (left where it is). */
  async restore(): Promise<CircuitRecord | undefined> {
    await native(() => this.client.declareStateQueue(this.stateQueue));
    return readCircuitState(this.client, this.stateQueue, this.queue);
  }

  /** Writes `r` to the state queue (it keeps only the newest). */
  async record(r: CircuitRecord): Promise<void> {
    const body = Buffer.from(JSON.stringify(r));
    await native(() => this.client.publish('', this.stateQueue, body, { contentType: 'application/json', deliveryMode: 2 }));
  }

  /**
   * Sends the messages of the retry queues back to the work queue, at most
   * `rate` a second, while `go()` holds: each copy keeps its headers (its
   * attempt count among them), and the original is acked only after the
   * broker confirmed the copy. Resolves to how many went back.
   */
  async returnEarly(rate: number, go: () => boolean): Promise<number> {
    const gapMs = 1000 / rate;
    let sent = 0;
    let next = performance.now();
    for (const q of this.retryQueues) {
      if (!go()) break;
      const s = await native(() => this.client.openParked(q, this.queue)).catch(() => undefined);
      if (!s) continue;
      try {
        for (;;) {
          const held = await native(() => s.get(Math.max(1, Math.min(100, Math.ceil(rate)))));
          const ids = deliveriesOf(held.batch).map((d) => d.id);
          if (ids.length === 0) break;
          for (const id of ids) {
            if (!go()) return sent;
            const wait = next - performance.now();
            if (wait > 0) await new Promise((r) => setTimeout(r, wait));
            next = Math.max(next, performance.now() - gapMs) + gapMs;
            await native(() => s.replay(id, '', this.queue, undefined, undefined, true));
            sent++;
          }
          if (held.remaining === 0) break;
        }
      } finally {
        // Whatever is still held goes back to its retry queue.
        await native(() => s.close()).catch(() => undefined);
      }
    }
    return sent;
  }
}

/** A stored field as text: empty when missing or null, else as `String` writes it. */
function fieldText(v: unknown): string {
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a field of any JSON type reads as its text
  return v === undefined || v === null ? '' : String(v);
}

/**
 * What the state queue `stateQueue` holds, read without taking it away;
 * undefined when it is empty, missing or unreadable. @internal
 */
export async function readCircuitState(client: NativeClient, stateQueue: string, workQueue: string): Promise<CircuitRecord | undefined> {
  const s = await native(() => client.openParked(stateQueue, workQueue)).catch(() => undefined);
  if (!s) return undefined;
  try {
    const held = await native(() => s.get(1));
    const [d] = deliveriesOf(held.batch);
    if (!d) return undefined;
    // The queue holds whatever was published to it: a field may be missing or of any JSON type.
    const r = JSON.parse(messageOf(d, held.batch).msg.body.toString('utf8')) as { [K in keyof CircuitRecord]?: unknown };
    if (r.state !== 'closed' && r.state !== 'open' && r.state !== 'halfOpen') return undefined;
    return { dependency: fieldText(r.dependency), state: r.state, since: fieldText(r.since), probing: r.probing === true };
  } catch {
    return undefined;
  } finally {
    await native(() => s.close()).catch(() => undefined);
  }
}
