/**
 * A reading the page's polls share: read again at most once a second, one
 * reading at a time, keeping the last good value when a reading fails.
 */
import { reasonOf } from '../support/error-text';

/** How long depths, table counts and outbox counts are reused, ms. */
export const FRESH_MS = 1000;

/** The last reading of a `T`, and what went wrong with it. */
export class CachedReading<T> {
  private last: { value: T | null; error: string | null; at: number } = { value: null, error: null, at: 0 };
  private ask?: Promise<void>;

  /** The last good value; null before the first. */
  get value(): T | null {
    return this.last.value;
  }

  /** Why the last reading failed; null when it did not. */
  get error(): string | null {
    return this.last.error;
  }

  /** The next {@link refresh} reads anew (an action changed what it reads). */
  invalidate(): void {
    this.last.at = 0;
  }

  /** Calls `read` when the last reading is older than {@link FRESH_MS}; one reading at a time. */
  async refresh(read: () => Promise<T>): Promise<void> {
    if (Date.now() - this.last.at < FRESH_MS) return;
    this.ask ??= (async () => {
      try {
        this.last = { value: await read(), error: null, at: Date.now() };
      } catch (err) {
        this.last = { value: this.last.value, error: reasonOf(err), at: Date.now() };
      }
    })().finally(() => {
      this.ask = undefined;
    });
    await this.ask;
  }
}
