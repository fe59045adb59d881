/**
 * How an option is declared: its TypeScript type, its doc, its default, its
 * rule, and the native layer's field it crosses as. `scripts/options.ts`
 * writes from a declaration the option types and the tables of their keys,
 * their checks and their native form, the native layer's struct and
 * defaults, and the docs' table; `npm test` fails when a written copy differs.
 */

/** What a value must be, as the TypeScript check holds it before it crosses. */
export type Rule =
  /** A string; `nonEmpty` refuses `''`; `what` names it in the error. */
  | { kind: 'string'; nonEmpty?: boolean; what?: string }
  | { kind: 'boolean' }
  /** One of `values`. */
  | { kind: 'oneOf'; values: readonly string[] }
  /** A whole number from `min` to `max`; `what` names it in the error. */
  | { kind: 'whole'; min: number; max: number; what: string }
  /** A whole number the native layer takes (0 to 4294967295); the native layer holds its rule and names it `what` too. */
  | { kind: 'native-whole'; what: string }
  /** A function; `what` names its shape in the error. */
  | { kind: 'function'; what?: string }
  /** Checked by hand, in lib/options/check.ts: its shape is more than one rule says. */
  | { kind: 'by-hand' };

/** How a value crosses to the native layer's field. */
export type Crossing =
  /** As it is. */
  | 'same'
  /** As a JSON text. */
  | 'json'
  /** A delay, as its text. */
  | 'delay'
  /** Whether it is `'full'`. */
  | 'full'
  /** Whether it was given. */
  | 'given'
  /** By hand, in lib/options/native.ts. */
  | 'by-hand';

/** A default of the native layer: the Rust constant that holds it. */
export interface NativeDefault {
  /** The constant's name (`DEFAULT_PREFETCH`). */
  name: string;
  /** Its Rust type. */
  rust: string;
  /** Its value, as Rust writes it. */
  value: string;
}

/** One option. */
export interface Field {
  /** Its TypeScript type, as the option type writes it. */
  type: string;
  /** Its doc comment, in sentences; the first one is its line in the docs' table. */
  doc: string;
  /** What it is when left out, in words (`@default`); absent: nothing. */
  default?: string;
  /** Whether it must be given. */
  required?: true;
  /** Its rule. */
  rule: Rule;
  /** The native layer's field it crosses as, its Rust type, how it crosses, and the native default. */
  native?: { field: string; rust: string; as: Crossing; default?: NativeDefault };
  /** Its line in the docs' table, when not the doc's first sentence. */
  row?: string;
}

/** An options object: its interface's name and doc, and its options (an option that is itself an object is a {@link Shape}). */
export interface Shape {
  /** The interface's name. */
  name: string;
  /** Its doc comment. */
  doc: string;
  /** Whether it must be given (as a nested option). */
  required?: true;
  /** Its doc as a nested option of its parent, and its line in the docs' table. */
  asOption?: { doc: string; default?: string; row?: string };
  /** The options, in the order the docs list them. */
  fields: Readonly<Record<string, Field | Shape>>;
}

/** Whether `f` is a nested options object. */
export function isShape(f: Field | Shape): f is Shape {
  return 'fields' in f;
}
