/**
 * What makes two parked messages "the same failure": the error's name, its
 * message with the parts that change from message to message (numbers, ids,
 * hex runs, UUIDs, times) replaced, and the first frame of the stack that is
 * the application's own code.
 */
import { createHash } from 'node:crypto';

/** The failure a parked message is grouped by. */
export interface Fingerprint {
  /** A short stable hash of the three parts below: the group's id. */
  key: string;
  /** `retry-error-name` (`Error` when the message has none). */
  errorName: string;
  /** `retry-last-error` with its variable parts replaced by `<n>`, `<id>`, `<hex>`, `<uuid>` and `<time>`. */
  message: string;
  /** The first stack frame of the application's code, without line and column (`rateShipment (src/carrier.ts)`); `''` when there is none. */
  frame: string;
}

/** The longest normalized message kept; a longer one is cut. */
const MAX_MESSAGE = 240;

/** The replacements, applied in this order. */
const VARIABLE_PARTS: readonly [RegExp, string][] = [
  [/\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?/g, '<time>'],
  [/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, '<uuid>'],
  [/\b0x[0-9a-f]+\b/gi, '<hex>'],
  // A run of 8 or more hex digits with letters and decimal digits (an object id, a hash); a run of decimal digits alone is a number, whatever its length.
  [/\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b/gi, '<hex>'],
  // A token mixing letters and digits (`o1`, `ORD-48213`, `E11000`, `user_42`).
  [/\b(?=[\w-]*\d)(?=[\w-]*[a-z])[\w-]+/gi, '<id>'],
  [/\d+(?:[.,]\d+)*/g, '<n>'],
];

/**
 * `text` with its variable parts replaced, its white space collapsed, and cut
 * to 240 characters: `order 48213 has no address` and `order 977 has no
 * address` both become `order <n> has no address`.
 */
export function normalizeMessage(text: string): string {
  let out = text;
  for (const [re, by] of VARIABLE_PARTS) out = out.replace(re, by);
  out = out.replace(/\s+/g, ' ').trim();
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE - 1)}…` : out;
}

/** Whether a frame's location is Node's own, a dependency's, or no file at all. */
function notApplicationCode(location: string): boolean {
  return (
    location.startsWith('node:') ||
    location.startsWith('internal/') ||
    location.includes('/node_modules/') ||
    location.includes('\\node_modules\\') ||
    location === 'native' ||
    location.startsWith('<anonymous>') ||
    location === 'unknown location'
  );
}

/**
 * The first frame of `stack` (V8's format, `    at fn (file:line:col)`)
 * whose file is the application's: not Node's internals, not in
 * `node_modules`. Written as `fn (last/three/segments.ts)`, without line and
 * column, so that the same failure groups together across deploys; `''` when
 * there is no such frame.
 */
export function userFrame(stack: string | undefined): string {
  if (!stack) return '';
  for (const raw of stack.split('\n')) {
    const line = raw.trim();
    if (!line.startsWith('at ')) continue;
    let text = line.slice(3).replace(/^async /, '');
    let fn = '';
    const open = text.lastIndexOf(' (');
    if (text.endsWith(')') && open > 0) {
      // A handler function the consumer calls shows as `Consumer.<name> [as handler]`: it is the application's `<name>`.
      fn = text
        .slice(0, open)
        .replace(/^Consumer\.(\S+) \[as handler\]$/, '$1')
        .replace(/ \[as [^\]]+\]$/, '');
      text = text.slice(open + 2, -1);
    }
    if (notApplicationCode(text)) continue;
    const file = text
      .replace(/^file:\/\//, '')
      .replace(/:\d+(?::\d+)?$/, '')
      .split(/[\\/]/)
      .filter(Boolean)
      .slice(-3)
      .join('/');
    return fn ? `${fn} (${file})` : file;
  }
  return '';
}

/** The fingerprint of a failure from its error's name, message and stack. */
export function fingerprint(error: { errorName?: string; errorMessage?: string; errorStack?: string }): Fingerprint {
  const errorName = error.errorName || 'Error';
  const message = normalizeMessage(error.errorMessage ?? '');
  const frame = userFrame(error.errorStack);
  const key = createHash('sha256').update(`${errorName}\u0000${message}\u0000${frame}`).digest('hex').slice(0, 16);
  return { key, errorName, message, frame };
}
