/**
 * The options of the retry table: the client's (`ConnectOptions.retryTable`),
 * and a consumer's route into it (`onFailure.table`, declared with the other
 * consume options in lib/options/consume.ts), and the tables of their keys;
 * lib/options/check.ts checks them.
 */
import type { OptionKeys } from '../options/shape';

export { type TableRouteOptions, TABLE_ROUTE_OPTION_KEYS } from '../options/consume.generated';

/** The retry table: where failures that wait on a person or a condition are kept. */
export interface RetryTableOptions {
  /** `postgres://user:password@host:5432/database`; the table `message_retries` is created there. */
  url: string;
  /**
   * Due rows published a second, by all the schedulers on this database
   * together: the rate is kept in the database (`rabbit_retry_rates`), so six
   * replicas at 50 publish 50 a second, not 300. A process that gives it sets
   * it for all; one that leaves it out keeps the rate set, or 50 when none is.
   * @default 50
   */
  ratePerSec?: number;
  /** This process's scheduler publishes at most this many due rows a second, within the shared `ratePerSec`. */
  ratePerSecPerProcess?: number;
  /**
   * Rates of their own for the rows of some dependencies, rows a second,
   * shared by all the schedulers as `ratePerSec` is (and within it):
   * `{ carrier: 20 }`. Also set at run time with `retryTable.setRate`.
   */
  dependencyRates?: Readonly<Record<string, number>>;
  /** Whether this process runs a scheduler. Run it in every consumer process, or in one process of its own. @default true */
  scheduler?: boolean;
}

/** The keys of {@link RetryTableOptions}. @internal */
export const RETRY_TABLE_OPTION_KEYS = {
  url: true,
  ratePerSec: true,
  ratePerSecPerProcess: true,
  dependencyRates: true,
  scheduler: true,
} satisfies OptionKeys<RetryTableOptions>;
