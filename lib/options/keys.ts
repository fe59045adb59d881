/**
 * The keys of an options object: unknown keys refused with the nearest known
 * one suggested, and another library's options refused all at once, each
 * with why it has no meaning here.
 */
import { InvalidOptionsError, UnsupportedOptionError } from '../errors';

/** The number of single-character edits (insert, delete, substitute) between `a` and `b`, or `max + 1` when it is above `max`. */
function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const d = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(d);
      best = Math.min(best, d);
    }
    if (best > max) return max + 1;
    prev = row;
  }
  return prev[b.length];
}

/**
 * The known key `key` was probably meant to be: the same letters in another
 * case, else the closest key at most 2 edits away (and fewer edits than
 * `key` has characters, so that a short key is not matched to any other).
 */
function nearestKey(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const sameLetters = known.find((k) => k.toLowerCase() === lower);
  if (sameLetters !== undefined) return sameLetters;
  let nearest: string | undefined;
  let nearestDistance = 3;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase(), 2);
    if (d < nearestDistance && d < key.length) {
      nearest = k;
      nearestDistance = d;
    }
  }
  return nearest;
}

/** A key as a message shows it: in backticks, cut when it is long. */
function showKey(key: string): string {
  return `\`${key.length > 64 ? `${key.slice(0, 64)}…` : key}\``;
}

/**
 * Refuses an options object with a key that is not one of `known`, with an
 * {@link InvalidOptionsError} naming the key, `where` it is, and the known
 * key it was probably meant to be (or the known keys when none is close):
 * "`delay` is not an option of onFailure; did you mean `delays`?". Only key
 * names appear in the message, never a value. `hints` gives a key's advice
 * instead of the suggestion.
 * @internal
 */
export function checkKeys(where: string, obj: object, known: Readonly<Record<string, true>>, hints: Readonly<Record<string, string>> = {}): void {
  let keys: string[];
  try {
    keys = Object.keys(obj);
  } catch {
    throw new InvalidOptionsError(`the keys of ${where} could not be read`);
  }
  const unknown = keys.filter((k) => !Object.prototype.hasOwnProperty.call(known, k));
  if (unknown.length === 0) return;
  const [key, ...others] = unknown;
  const names = Object.keys(known);
  const near = nearestKey(key, names);
  const hint = Object.prototype.hasOwnProperty.call(hints, key) ? hints[key] : undefined;
  let message = `${showKey(key)} is not an option of ${where}`;
  if (hint !== undefined) message += `; ${hint}`;
  else if (near !== undefined) message += `; did you mean ${showKey(near)}?`;
  else message += `; its options are ${names.map(showKey).join(', ')}`;
  if (others.length > 0) message += ` (also not an option: ${others.map(showKey).join(', ')})`;
  throw new InvalidOptionsError(message);
}

/**
 * Refuses the options of another library that `obj` still carries (keys of
 * `foreign`), with one {@link UnsupportedOptionError} naming each, `where`, and
 * what to do instead (the key's entry in `foreign`); key names only, never a
 * value. `prefix` goes before each key (`queueOptions.`).
 * @internal
 */
export function refuseForeign(where: string, obj: object, foreign: Readonly<Record<string, string>>, prefix = ''): void {
  refuseAll(where, foreignOptions(where, obj, foreign, prefix));
}

/** The keys of `obj` that `foreign` lists (set to something), each with why it has no meaning. @internal */
export function foreignOptions(where: string, obj: object, foreign: Readonly<Record<string, string>>, prefix = ''): ForeignOption[] {
  let keys: string[];
  try {
    keys = Object.keys(obj);
  } catch {
    throw new InvalidOptionsError(`the keys of ${where} could not be read`);
  }
  return keys
    .filter((key) => Object.prototype.hasOwnProperty.call(foreign, key) && (obj as Record<string, unknown>)[key] !== undefined)
    .map((key) => ({ option: `${prefix}${key}`, why: foreign[key] }));
}

/** An option with no meaning here, and why. @internal */
export type ForeignOption = Readonly<{ option: string; why: string }>;

/** Throws one {@link UnsupportedOptionError} naming every option of `found`, each with why. @internal */
export function refuseAll(where: string, found: readonly ForeignOption[]): void {
  if (found.length === 0) return;
  if (found.length === 1) {
    const { option, why } = found[0];
    throw new UnsupportedOptionError(option, `${showKey(option)} of ${where} has no meaning in rabbit-retry: ${why}`);
  }
  const list = found.map(({ option, why }) => `${showKey(option)}: ${why}`).join('; ');
  throw new UnsupportedOptionError(found.map((f) => f.option).join(', '), `${found.length} options of ${where} have no meaning in rabbit-retry: ${list}`);
}
