/**
 * How long a close waits for handlers: the earliest of the bounds its callers
 * gave, after which every wait of the close gives up.
 */
export class CloseBound {
  #at = Infinity;
  #timer?: NodeJS.Timeout;
  #passed?: Promise<void>;
  #pass?: () => void;

  /** Makes the close stop waiting `timeoutMs` from now, unless it stops sooner already. */
  by(timeoutMs: number): void {
    if (!this.#passed) this.#passed = new Promise<void>((resolve) => (this.#pass = resolve));
    // Longer than a timer can wait is for ever.
    const at = timeoutMs > 0x7fffffff ? Infinity : performance.now() + timeoutMs;
    if (at >= this.#at) return;
    this.#at = at;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#pass?.(), Math.max(0, at - performance.now()));
  }

  /** `p`, or nothing once the bound passed (no bound: `p`). */
  async within(p: Promise<unknown>): Promise<void> {
    await (this.#passed ? Promise.race([p, this.#passed]) : p);
  }

  /** Stops the timer: the close is over. */
  clear(): void {
    if (this.#timer) clearTimeout(this.#timer);
  }
}
