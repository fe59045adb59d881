/**
 * The handlers a consumer is running: how many, how long the oldest has run,
 * which are stuck (past `stuckAfterMs`), and who waits for none to run.
 */

/** What the stuck check reads of a running handler. */
export interface Tracked {
  /** `performance.now()` when the handler started. */
  readonly startedAt: number;
  readonly messageId?: string;
  readonly attempt: number;
  /** A `stuck` event went out for it. */
  reported: boolean;
}

/** How often to look for stuck handlers: a quarter of the bound, between 25 ms and 5 s (a stuck handler is seen at most that late). */
export function stuckCheckEveryMs(stuckAfterMs: number): number {
  return Math.min(Math.max(Math.floor(stuckAfterMs / 4), 25), 5000);
}

/** Handlers running now, by delivery id, in the order they started. */
export class InFlight<R extends Tracked> {
  private readonly running = new Map<number, R>();
  /** Who waits for no handler to run. */
  private idleWaiters: (() => void)[] = [];

  /** @param stuckAfterMs After this many milliseconds a running handler counts as stuck. */
  constructor(readonly stuckAfterMs: number) {}

  /** Handlers running now. */
  get size(): number {
    return this.running.size;
  }

  /** Delivery `id`'s handler started. */
  add(id: number, r: R): void {
    this.running.set(id, r);
  }

  /** Delivery `id`'s handler is over; when none is left, who waits for that is woken. */
  delete(id: number): void {
    this.running.delete(id);
    if (this.running.size === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Resolves when no handler runs. */
  idle(): Promise<void> {
    if (this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Handlers past the stuck bound now, and the age of the oldest. */
  ages(): { stuck: number; oldestInFlightMs: number } {
    const now = performance.now();
    let stuck = 0;
    let oldest = 0;
    for (const r of this.running.values()) {
      const age = now - r.startedAt;
      if (oldest === 0) oldest = age;
      // They are in the order they started: the first younger than the bound ends the count.
      if (age < this.stuckAfterMs) break;
      stuck++;
    }
    return { stuck, oldestInFlightMs: Math.round(oldest) };
  }

  /** Calls `onStuck` once for each handler that passed the stuck bound since the last check, and marks it reported. */
  checkStuck(onStuck: (r: R, sinceMs: number) => void): void {
    const now = performance.now();
    for (const r of this.running.values()) {
      const age = now - r.startedAt;
      if (age < this.stuckAfterMs) break;
      if (r.reported) continue;
      r.reported = true;
      onStuck(r, Math.round(age));
    }
  }
}
