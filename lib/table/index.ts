import { InvalidOptionsError, native } from '../errors';
import { type MeterProviderLike, meterProviderOr } from '../telemetry/otel';
import type { NativeClient } from '../native';
import { checkKeys, checkObject, checkRate, parseDelay } from '../options/check';
import type { Log } from '../support/log';
import { BOOLEAN, fence, fenceSync } from '../support/fence';
import type { Delay, OptionKeys } from '../options';

/** Which rows {@link RetryTable.pause} and {@link RetryTable.resume} touch; every field given must match. */
export interface RowSelector {
  /** Rows of this dependency. */
  dependency?: string;
  /** Rows of this tenant. */
  tenant?: string;
  /** Rows whose error has this name. */
  errorName?: string;
}

/** The keys of {@link RowSelector}. */
const ROW_SELECTOR_KEYS = { dependency: true, tenant: true, errorName: true } satisfies OptionKeys<RowSelector>;

/** Options of {@link RetryTable.list}. */
export interface ListOptions {
  /** Rows of this dependency. */
  dependency?: string;
  /** Rows of this tenant. */
  tenant?: string;
  /** Only rows due now (not paused, due time passed). */
  due?: boolean;
  /** At most this many, oldest first. @default 100 */
  limit?: number;
}

/** The keys of {@link ListOptions}. */
const LIST_OPTION_KEYS = { dependency: true, tenant: true, due: true, limit: true } satisfies OptionKeys<ListOptions>;

/** A row of the retry table (the body stays in the database). */
export interface RetryRow {
  /** Row id, for {@link RetryTable.retryNow}. */
  id: number;
  /** The work queue it goes back to. */
  queue: string;
  /** The `retry-attempt` it carries when published again. */
  attempt: number;
  /** When it is due; `null` waits for a person. */
  nextAttemptAt: Date | null;
  /** Paused rows are not published. */
  paused: boolean;
  /** What it waits on. */
  dependency: string | null;
  /** Whose it is. */
  tenant: string | null;
  /** The last error message. */
  lastError: string | null;
  /** The last error's name. */
  errorName: string | null;
  /** The message id. */
  messageId: string | null;
  /** The correlation id. */
  correlationId: string | null;
  /** When it failed first. */
  firstFailedAt: Date;
  /** Last change. */
  updatedAt: Date;
}

/** Counts of the retry table. */
export interface RetryTableStats {
  /** Rows in all. */
  rows: number;
  /** Paused rows. */
  paused: number;
  /** Rows waiting for a person (`nextAttemptAt` null). */
  held: number;
  /** Rows due now and not paused. */
  due: number;
  /** Rows by dependency (`null` for rows without one). */
  byDependency: {
    /** The dependency, or `null` for rows without one. */
    dependency: string | null;
    /** Its rows. */
    rows: number;
  }[];
  /**
   * Age in ms of the oldest row whose due time has passed; 0 when none. When
   * it keeps growing, no scheduler is draining the table: alert on it.
   */
  oldestDueAgeMs: number;
  /** Rows this process's scheduler published. */
  schedulerPublished: number;
  /** Publishes of this process's scheduler that failed (those rows wait 30 s and are tried again). */
  schedulerPublishFailed: number;
}

/** Options of {@link RetryTable.pauseWhen}. */
export interface PauseWhenOptions {
  /** How often to run the check; a check that has not answered by the next one counts as failed. @default '10s' */
  every?: Delay;
  /** Failed checks in a row before the dependency is paused. @default 3 */
  failuresBeforePause?: number;
  /** Called when the watch pauses or resumes the dependency; what it throws, or a rejection of a Promise it returns, is logged as a warning. */
  onChange?: (e: { dependency: string; paused: boolean; rows: number }) => void;
}

/** The keys of {@link PauseWhenOptions}. */
const PAUSE_WHEN_OPTION_KEYS = { every: true, failuresBeforePause: true, onChange: true } satisfies OptionKeys<PauseWhenOptions>;

/** A running {@link RetryTable.pauseWhen} watch. */
export interface DependencyWatch {
  /** Whether the watch paused the dependency and has not resumed it yet. */
  readonly paused: boolean;
  /** Stops the watch (it leaves the rows as they are). */
  stop(): void;
}

/** Checks the selector `sel` that `method` was given. */
function selector(method: string, sel: RowSelector): RowSelector {
  if (sel !== null && typeof sel === 'object') checkKeys(method, sel, ROW_SELECTOR_KEYS);
  if (!sel || (sel.dependency === undefined && sel.tenant === undefined && sel.errorName === undefined)) {
    throw new InvalidOptionsError('say which rows: give dependency, tenant or errorName');
  }
  for (const [k, v] of Object.entries(sel)) {
    if (v !== undefined && typeof v !== 'string') throw new InvalidOptionsError(`${k} must be a string`);
  }
  return sel;
}

/**
 * The retry table (`message_retries` in PostgreSQL): failed messages that wait
 * on a person or a condition. Get it as `rr.retryTable` after connecting with
 * `retryTable: { url }`.
 */
export class RetryTable {
  /** @internal */
  constructor(
    private readonly client: NativeClient,
    /** Where the warnings of `pauseWhen` go (the connect options' logger). */
    private readonly log: Log,
  ) {}

  /**
   * Pauses what `sel` selects: its rows now, and rows stored later, until
   * {@link resume} with the same selector. The scheduler skips paused rows.
   * Resolves to how many rows it paused now.
   */
  async pause(sel: RowSelector): Promise<number> {
    return native(() => this.client.tablePause(selector('pause', sel)));
  }

  /**
   * Lifts the pause {@link pause} set with the same selector, and makes the
   * selected rows due now and unpaused (rows held for a person too), unless
   * another pause still covers them; the scheduler drains them at its rate.
   * Resolves to how many rows it resumed.
   */
  async resume(sel: RowSelector): Promise<number> {
    return native(() => this.client.tableResume(selector('resume', sel)));
  }

  /** Whether a pause with exactly this selector is in force. */
  async isPaused(sel: RowSelector): Promise<boolean> {
    return native(() => this.client.tableIsPaused(selector('isPaused', sel)));
  }

  /** Makes row `id` due now (and not paused); false when there is no such row. */
  async retryNow(id: number): Promise<boolean> {
    if (!Number.isInteger(id) || id < 1) throw new InvalidOptionsError(`id must be a row id, got ${String(id)}`);
    return native(() => this.client.tableRetryNow(id));
  }

  /** Rows, oldest first. */
  async list(options: ListOptions = {}): Promise<RetryRow[]> {
    checkObject('list options', options, 'an object such as { dependency, limit }');
    checkKeys('list', options, LIST_OPTION_KEYS);
    if (options.limit !== undefined && (!Number.isInteger(options.limit) || options.limit < 1)) {
      throw new InvalidOptionsError(`limit must be a whole number of at least 1, got ${String(options.limit)}`);
    }
    const rows = await native(() => this.client.tableList(options));
    return rows.map((r) => ({
      id: r.id,
      queue: r.queue,
      attempt: r.attempt,
      nextAttemptAt: r.nextAttemptAtMs == null ? null : new Date(r.nextAttemptAtMs),
      paused: r.paused,
      dependency: r.dependency ?? null,
      tenant: r.tenant ?? null,
      lastError: r.lastError ?? null,
      errorName: r.errorName ?? null,
      messageId: r.messageId ?? null,
      correlationId: r.correlationId ?? null,
      firstFailedAt: new Date(r.firstFailedAtMs),
      updatedAt: new Date(r.updatedAtMs),
    }));
  }

  /**
   * Gives the rows of `dependency` a drain rate of their own, shared by all
   * the schedulers on the database (within `ratePerSec`); `null` removes it.
   */
  async setRate(dependency: string, ratePerSec: number | null): Promise<void> {
    if (typeof dependency !== 'string' || dependency.length === 0) throw new InvalidOptionsError('dependency must be a non-empty string');
    if (ratePerSec !== null) checkRate('ratePerSec', ratePerSec);
    await native(() => this.client.tableSetRate(dependency, ratePerSec));
  }

  /** The shared drain rates: the whole table's (`dependency: null`) and each dependency's own, rows a second. */
  async rates(): Promise<
    {
      /** The dependency, or `null` for the whole table's rate. */
      dependency: string | null;
      /** Rows a second. */
      ratePerSec: number;
    }[]
  > {
    const rates = await native(() => this.client.tableRates());
    return rates.map((r) => ({ dependency: r.dependency === '' ? null : r.dependency, ratePerSec: r.rate }));
  }

  /** Rows by dependency, paused and due counts, and the oldest due row's age. */
  async stats(): Promise<RetryTableStats> {
    const s = await native(() => this.client.tableStats());
    return { ...s, byDependency: s.byDependency.map((d) => ({ dependency: d.dependency ?? null, rows: d.rows })) };
  }

  /**
   * Watches a dependency with `check` (answer `true` when it is healthy):
   * after `failuresBeforePause` failed checks in a row, pauses it; when a
   * check passes while it is paused, resumes it, and the scheduler drains its
   * rows at its rate. A check fails when it answers `false`, throws or
   * rejects (with anything), answers anything but a boolean, or gives no
   * answer within `every`; the next check runs `every` after the one before
   * began, whatever that one did. The pause lives in the database, so
   * watches in several processes agree, and a process that starts after the
   * dependency recovered lifts a pause left by another. The timer does not
   * keep the process alive.
   */
  pauseWhen(dependency: string, check: () => boolean | Promise<boolean>, options: PauseWhenOptions = {}): DependencyWatch {
    if (typeof dependency !== 'string' || dependency.length === 0) throw new InvalidOptionsError('dependency must be a non-empty string');
    if (typeof check !== 'function') throw new InvalidOptionsError('check must be a function () => boolean | Promise<boolean>');
    checkObject('pauseWhen options', options, 'an object such as { every }');
    checkKeys('pauseWhen', options, PAUSE_WHEN_OPTION_KEYS);
    const threshold = options.failuresBeforePause ?? 3;
    if (!Number.isInteger(threshold) || threshold < 1) {
      throw new InvalidOptionsError(`failuresBeforePause must be a whole number of at least 1, got ${String(threshold)}`);
    }
    const everyMs = parseDelay(options.every ?? '10s', 'every').ms;
    const onChange = options.onChange;
    const watch = `retryTable.pauseWhen('${dependency}')`;
    const warn = (line: string) => this.log('warn', `rabbit-retry: ${line}`);
    /** The problems of the failing checks already warned about; forgotten when a check passes. */
    const warned = new Set<string>();
    let failures = 0;
    let paused = false;
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    const changed = (e: { dependency: string; paused: boolean; rows: number }) => {
      if (!onChange) return;
      const r = fenceSync(`the onChange of ${watch}`, () => onChange(e), { onLateRejection: warn });
      if (!r.ok) warn(r.problem);
    };
    const tick = async () => {
      const started = Date.now();
      try {
        const r = await fence(`the check of ${watch}`, () => check(), { expect: BOOLEAN, timeoutMs: everyMs, keepAlive: false });
        const healthy = r.ok && r.value;
        if (healthy) warned.clear();
        else if (!r.ok && !warned.has(r.failure)) {
          warned.add(r.failure);
          warn(`${r.problem}; it counts as a failed check`);
        }
        failures = healthy ? 0 : failures + 1;
        if (stopped) return;
        const isPaused = await this.isPaused({ dependency });
        if (healthy && isPaused) {
          const rows = await this.resume({ dependency });
          paused = false;
          changed({ dependency, paused: false, rows });
        } else if (!healthy && failures >= threshold && !isPaused) {
          const rows = await this.pause({ dependency });
          paused = true;
          changed({ dependency, paused: true, rows });
        }
        paused = healthy ? false : isPaused || failures >= threshold;
      } catch {
        // The database may be down too; the next tick tries again.
      } finally {
        if (!stopped) {
          timer = setTimeout(() => void tick(), Math.max(0, started + everyMs - Date.now()));
          timer.unref();
        }
      }
    };
    void tick();
    return {
      get paused() {
        return paused;
      },
      stop: () => {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  /** Registers the gauge `rabbit_retry.table.oldest_due_age` (ms). @internal */
  observe(provider: MeterProviderLike | undefined): void {
    const p = meterProviderOr(provider);
    if (!p) return;
    const meter = p.getMeter('rabbit-retry') as {
      createObservableGauge(
        name: string,
        o?: { description?: string; unit?: string },
      ): {
        addCallback(cb: (r: { observe(v: number): void }) => Promise<void>): void;
      };
    };
    meter
      .createObservableGauge('rabbit_retry.table.oldest_due_age', {
        description: 'Age of the oldest retry-table row whose due time has passed',
        unit: 'ms',
      })
      .addCallback(async (r) => {
        const s = await this.stats().catch(() => undefined);
        if (s) r.observe(s.oldestDueAgeMs);
      });
  }
}
