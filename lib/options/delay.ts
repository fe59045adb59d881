/**
 * Delays: the type every delay option takes, and the default retry delays.
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
