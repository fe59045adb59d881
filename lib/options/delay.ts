/**
 * Delays: the type every delay option takes, the default retry delays, and
 * the broker's own delayed retry (`onFailure.brokerDelay`).
 */

/**
 * A delay: a positive whole number with a unit of `ms`, `s`, `m` or `h`
 * (`'500ms'`, `'5s'`, `'90s'`, `'1m'`, `'2h'`), or a number of milliseconds
 * (`500`, or the string `'500'`). Spellings such as `'5 seconds'`, `'5sec'` or
 * `'5d'` do not compile; what the type cannot tell apart (`'1.5s'`, `'0s'`,
 * `'-5s'`) is refused at run time with an {@link InvalidOptionsError}.
 */
export type Delay = number | `${number}` | `${number}ms` | `${number}s` | `${number}m` | `${number}h`;

/** Default retry delays. */
export const DEFAULT_DELAYS: readonly Delay[] = ['5s', '1m', '10m'];

/** The broker's own delayed retry (see {@link OnFailureOptions.brokerDelay}). */
export interface BrokerDelayOptions {
  /** The delay after the first failure, and the step each later failure adds: `'5s'`, or milliseconds. */
  min: Delay;
  /** The longest delay: `'5m'`, or milliseconds. */
  max: Delay;
  /** Returns to the broker before a retryable failure parks as exhausted; at least 1. */
  attempts: number;
}
