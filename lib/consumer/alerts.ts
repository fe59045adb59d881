/**
 * The `alert` option of a consumer: a timer that checks the parked queue's
 * depth and the retry table's oldest due row, and alerts once per crossing
 * of each threshold.
 */
import { parkedQueueName } from '../native';
import type { AlertOptions, ParkedAlert, RetryTableAlert } from '../options';
import { parseDelay } from '../options/check';
import { InvalidOptionsError } from '../errors';
import { fenceSync } from '../support/fence';
import { reasonOf } from '../support/error-text';
import type { Log } from '../support/log';

/**
 * `alert`, checked, with its interval in ms; `withTable` says whether the
 * client has a retry table, which `oldestDueAboveMs` needs.
 */
export function alertSettings(alert: AlertOptions, withTable: boolean): AlertOptions & { everyMs: number } {
  const everyMs = parseDelay(alert.every ?? '1m', 'alert.every').ms;
  if (alert.oldestDueAboveMs !== undefined && !withTable) {
    throw new InvalidOptionsError('alert.oldestDueAboveMs needs a retry table: connect with { retryTable: { url } }');
  }
  return { ...alert, everyMs };
}

/** What the alert checks read and where their alerts go. */
export interface AlertHost {
  /** The work queue. */
  readonly queue: string;
  parkedDepth: () => Promise<number | undefined>;
  oldestDueAge?: () => Promise<number>;
  /** Emits the alert as the consumer's event of that name. */
  emit: (event: 'alert' | 'tableAlert', alert: ParkedAlert | RetryTableAlert) => void;
  readonly log: Log;
}

/** Checks at once, then every `alert.everyMs`, until {@link stop}. */
export class AlertWatch {
  // An ES private field: printing or serialising the consumer never meets a timer's circular internals.
  readonly #timer: NodeJS.Timeout;
  private alerting = false;
  private tableAlerting = false;

  constructor(
    private readonly alert: AlertOptions & { everyMs: number },
    private readonly host: AlertHost,
  ) {
    this.#timer = setInterval(() => void this.check(), alert.everyMs);
    this.#timer.unref();
    void this.check();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  private async check(): Promise<void> {
    const { alert, host } = this;
    const notify = <T extends ParkedAlert | RetryTableAlert>(event: 'alert' | 'tableAlert', a: T, callback?: (a: T) => void) => {
      if (callback) {
        const warn = (problem: string) => host.log('warn', `rabbit-retry: ${problem}`);
        const r = fenceSync(`alert.${event === 'alert' ? 'onAlert' : 'onTableAlert'} of queue '${host.queue}'`, () => callback(a), {
          onLateRejection: warn,
        });
        if (!r.ok) warn(r.problem);
      }
      try {
        host.emit(event, a);
      } catch (err) {
        host.log('error', `rabbit-retry: an '${event}' listener of the consumer of '${host.queue}' threw: ${reasonOf(err)}`);
      }
    };
    if (alert.parkedAbove !== undefined) {
      const depth = await host.parkedDepth().catch(() => undefined);
      if (depth !== undefined) {
        // Once per crossing: re-armed only when the depth falls back to the threshold.
        if (depth > alert.parkedAbove) {
          if (!this.alerting) {
            this.alerting = true;
            notify<ParkedAlert>(
              'alert',
              { queue: host.queue, parkedQueue: parkedQueueName(host.queue), depth, threshold: alert.parkedAbove },
              alert.onAlert,
            );
          }
        } else {
          this.alerting = false;
        }
      }
    }
    if (alert.oldestDueAboveMs !== undefined && host.oldestDueAge) {
      const age = await host.oldestDueAge().catch(() => undefined);
      if (age !== undefined) {
        if (age > alert.oldestDueAboveMs) {
          if (!this.tableAlerting) {
            this.tableAlerting = true;
            notify<RetryTableAlert>('tableAlert', { queue: host.queue, oldestDueAgeMs: age, threshold: alert.oldestDueAboveMs }, alert.onTableAlert);
          }
        } else {
          this.tableAlerting = false;
        }
      }
    }
  }
}
