/**
 * What the inbox's database keeps a key as: text, unchanged, within its
 * primary key's index. A key that PostgreSQL would refuse, or that the driver
 * would alter on its way (so that two keys became one), is refused here,
 * before any transaction, and parks its own message at once.
 */
import { InboxRefusedError } from '../errors';

/**
 * The most UTF-8 bytes a key (and `inbox.consumer`) may have. A btree index
 * row of PostgreSQL takes at most 2,704 bytes, and the primary key of
 * `rabbit_retry_inbox` holds the consumer's name beside the key: 1,000 bytes
 * each keeps both, with the row's overhead, well under it, whatever
 * PostgreSQL's compression makes of them.
 */
export const MAX_KEY_BYTES = 1000;

/** What makes `text` unfit to be kept as it is, in words; undefined when nothing does. */
export function unfitText(text: string): string | undefined {
  if (text.includes('\u0000')) return "holds a NUL character (U+0000), which PostgreSQL's text cannot store";
  // Paired surrogates are one code point under the u flag: this finds the lone ones.
  if (/\p{Surrogate}/u.test(text)) {
    return 'holds a lone UTF-16 surrogate, which has no UTF-8 form (the driver would send U+FFFD in its place, and two keys could become one)';
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_KEY_BYTES) return `is ${bytes} bytes long in UTF-8, more than the ${MAX_KEY_BYTES} the inbox takes`;
  return undefined;
}

/** How a key is shown in an error: its start, escaped as JSON (no NUL or lone surrogate reaches a header). */
function shown(key: string): string {
  return key.length > 40 ? `${JSON.stringify(key.slice(0, 40))}…` : JSON.stringify(key);
}

/** An {@link InboxRefusedError} for `key` (the message id, or what `inbox.key` gave) when it cannot be kept as it is. */
export function refusedKey(key: string, consumer: string, from: 'messageId' | 'inbox.key'): InboxRefusedError | undefined {
  const problem = unfitText(key);
  if (problem === undefined) return undefined;
  const what = from === 'messageId' ? 'message id' : 'key (from inbox.key)';
  return new InboxRefusedError(
    `inbox '${consumer}': the message's ${what} ${shown(key)} ${problem}; every attempt would be refused alike, so the message is parked`,
  );
}
