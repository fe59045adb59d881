/**
 * What the console's editor starts from: a parked message's body as the
 * text the operator edits (pretty JSON when pretty-printing loses nothing,
 * else the body's own text), and the headers the operator may change; or
 * why the console cannot edit the message.
 */
import { binding } from '../native';
import type { ParkedMessage } from '../parked';

/** A parked message as the editor starts from it. */
export type EditView =
  | {
      /** The console can edit it. */
      editable: true;
      /** Whether the body is JSON: an edited body must then be JSON too. */
      json: boolean;
      /** The text to edit when it is not the body as the page shows it (`body.text`); null when it is. */
      text: string | null;
      /** The headers the operator may change: all but the `retry-*` ones, the broker's dead-letter history, `CC` and `BCC`. */
      headers: Record<string, unknown>;
    }
  | {
      /** The console cannot edit it. */
      editable: false;
      /** Why, in words. */
      why: string;
    };

/** The body as the page shows it: what {@link editViewOf} needs of it. */
interface ShownBody {
  kind: 'json' | 'text' | 'hex' | 'empty';
  text: string;
  truncated: boolean;
}

/**
 * `text` (JSON) without the white space between its tokens: the same
 * value, written the same, each string and number as it was (nothing is
 * parsed and written again).
 */
export function minifyJson(text: string): string {
  return text.replace(/"(?:[^"\\]|\\.)*"|[ \t\n\r]+/g, (m) => (m.startsWith('"') ? m : ''));
}

/** Whether `raw` (JSON) parsed and written again is `raw` but for white space: no number rounded, no escape rewritten. */
export function prettyIsFaithful(raw: string): boolean {
  try {
    return JSON.stringify(JSON.parse(raw)) === minifyJson(raw);
  } catch {
    return false;
  }
}

/** What the editor starts from for `m`, whose body the page shows as `body`. */
export function editViewOf(m: Pick<ParkedMessage, 'properties' | 'headers' | 'body'>, body: ShownBody): EditView {
  if (!m.properties.messageId) return { editable: false, why: 'it has no message id, which an edit names it by' };
  if (body.kind === 'hex') return { editable: false, why: 'its body is binary: edit it with rabbit-retry parked edit --body-file' };
  if (body.truncated) return { editable: false, why: 'its body is longer than the page shows: edit it with rabbit-retry parked edit --body-file' };
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(m.headers)) if (binding.headerNotEditable(name) === null) headers[name] = value;
  if (body.kind !== 'json') return { editable: true, json: false, text: null, headers };
  const raw = m.body.toString('utf8');
  return { editable: true, json: true, text: prettyIsFaithful(raw) ? null : raw, headers };
}
