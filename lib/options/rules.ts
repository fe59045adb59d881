/**
 * The rules an option's value is checked against before it reaches the
 * native layer, each refusing with an {@link InvalidOptionsError} that names
 * the option and what it must be, and never shows a value that could hold a
 * secret.
 */
import { InvalidOptionsError } from '../errors';

/**
 * A value as an error message may show it: numbers and booleans as they are,
 * anything else by its kind only, since a string, an array or an object can
 * hold a secret (a URL with its password, a key).
 * @internal
 */
export function kindOf(v: unknown): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'undefined':
      return 'undefined';
    case 'number':
      return String(v);
    case 'boolean':
      return String(v);
    case 'string':
      return 'a string';
    case 'bigint':
      return 'a bigint';
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    default:
      try {
        if (Array.isArray(v)) return 'an array';
        if (Buffer.isBuffer(v)) return 'a Buffer';
        if (v instanceof Date) return 'a Date';
      } catch {
        // A proxy that refuses to be inspected is still an object.
      }
      return 'an object';
  }
}

/** Whether `v` is an object other than an array. @internal */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** @internal */
export function checkObject(name: string, v: unknown, what = 'an object'): void {
  if (!isRecord(v)) throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
}

/** @internal */
export function checkString(name: string, v: unknown, opts: { optional?: boolean; nonEmpty?: boolean; what?: string } = {}): void {
  if (v === undefined && opts.optional !== false) return;
  const what = opts.what ?? (opts.nonEmpty ? 'a non-empty string' : 'a string');
  if (typeof v !== 'string') throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
  if (opts.nonEmpty && v.length === 0) throw new InvalidOptionsError(`${name} must be ${what}, got an empty string`);
}

/** @internal */
export function checkFunction(name: string, v: unknown, what = 'a function'): void {
  if (v !== undefined && typeof v !== 'function') throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
}

/** @internal */
export function checkBoolean(name: string, v: unknown): void {
  if (v !== undefined && typeof v !== 'boolean') throw new InvalidOptionsError(`${name} must be true or false, got ${kindOf(v)}`);
}

/** A whole number from `min` to `max` (optional). @internal */
export function checkWhole(name: string, v: unknown, min: number, max: number, what: string): void {
  if (v === undefined) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
  }
}

/** One of `values` (optional). @internal */
export function checkOneOf(name: string, v: unknown, values: readonly string[]): void {
  if (v === undefined || (typeof v === 'string' && values.includes(v))) return;
  const words = values.map((x) => `'${x}'`);
  const what = words.length === 1 ? words[0] : `${words.slice(0, -1).join(', ')} or ${words.at(-1)}`;
  throw new InvalidOptionsError(`${name} must be ${what}, got ${kindOf(v)}`);
}
