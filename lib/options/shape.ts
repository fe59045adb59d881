/** What every options object's table of keys shares. */

/**
 * Every key of `T` mapped to `true`: the type of a table of an options
 * object's keys, written with `satisfies` so that a field added to the
 * interface without an entry in its table, or an entry that is not a field,
 * fails to compile.
 * @internal
 */
export type OptionKeys<T> = Record<keyof T, true>;
