/**
 * Editing one parked message and sending it back: the operator's fix of a
 * wrong body or header, with an audit trail in the copy's headers.
 */
import { AmbiguousMessageIdError, InvalidOptionsError, NotParkedError, native } from '../errors';
import { type NativeParkedSession, binding } from '../native';
import { type Body, checkPublishOptions, toBuffer } from '../messaging/publish';
import { checkKeys, checkObject, kindOf } from '../options/check';
import type { OptionKeys } from '../options';
import { tracedPublish } from '../telemetry/tracing';
import { type ParkedMessage, taken } from './message';

/** What {@link Parked.edit} changes in the copy it sends back; what it leaves out stays the original's. */
export interface ParkedEdit {
  /**
   * The copy's body instead of the original's: bytes, text, or any other
   * value sent as JSON, as `rr.publish` sends them. The copy keeps the
   * original's properties, its content type included.
   */
  body?: Body;
  /**
   * Headers the copy carries with these values, added or replaced; a header
   * given as `undefined` is left out of the copy. The `retry-*` headers, the
   * broker's dead-letter history (`x-death`, ...) and `CC`/`BCC` are not
   * editable.
   */
  headers?: Record<string, unknown>;
}

/** The keys of {@link ParkedEdit}. */
const PARKED_EDIT_KEYS = { body: true, headers: true } satisfies OptionKeys<ParkedEdit>;

/** Who edits: the audit trail's author. */
export interface EditOptions {
  /** Who made the edit (a name, an e-mail address): the copy's `retry-edited-by`, and its entry of `retry-edits`. */
  by: string;
}

/** The keys of {@link EditOptions}. */
const EDIT_OPTION_KEYS = { by: true } satisfies OptionKeys<EditOptions>;

/** What {@link Parked.edit} did. */
export interface EditResult {
  /** The message's id, the copy's as the original's. */
  messageId: string;
  /** What the edit changed, as the audit trail says it: `body`, `header <name>`; empty when the copy is the original's. */
  changed: string[];
  /** The work queue the copy went to. */
  queue: string;
}

/** An edit's arguments, checked: the body as bytes, the headers to set and to leave out. @internal */
export interface CheckedEdit {
  messageId: string;
  by: string;
  body: Buffer | undefined;
  set: Record<string, unknown> | undefined;
  remove: string[];
}

/** Checks an edit's arguments before any message is touched. @internal */
export function checkEdit(messageId: unknown, edit: unknown, options: unknown): CheckedEdit {
  if (typeof messageId !== 'string' || messageId.length === 0) {
    throw new InvalidOptionsError(`messageId must be the parked message's id (a non-empty string), got ${kindOf(messageId)}`);
  }
  checkObject('edit', edit, 'an object such as { body } or { headers }');
  checkKeys('edit', edit as object, PARKED_EDIT_KEYS);
  checkObject('edit options', options, "an object such as { by: 'ana@example.com' }");
  checkKeys('edit options', options as object, EDIT_OPTION_KEYS);
  const { by } = options as { by?: unknown };
  if (typeof by !== 'string' || by.trim().length === 0) {
    throw new InvalidOptionsError(`edit options.by must name who edits (a non-empty string), got ${kindOf(by)}`);
  }
  const { body, headers } = edit as ParkedEdit;
  if (body === undefined && headers === undefined) throw new InvalidOptionsError('an edit changes the body, the headers or both: give body or headers');
  let set: Record<string, unknown> | undefined;
  const remove: string[] = [];
  if (headers !== undefined) {
    checkObject('edit headers', headers, 'an object of header names to values');
    set = {};
    for (const [name, value] of Object.entries(headers)) {
      const why = binding.headerNotEditable(name);
      if (why !== null) throw new InvalidOptionsError(`header '${name}' cannot be edited: ${why}`);
      if (value === undefined) remove.push(name);
      else set[name] = value;
    }
    checkPublishOptions({ headers: set });
  }
  return { messageId, by, body: body === undefined ? undefined : toBuffer(body, {}).buf, set, remove };
}

/**
 * Finds the one parked message of `messageId` in session `s` (looking at no
 * more than `depth`), and sends its edited copy to `queue`. Refuses, with
 * nothing moved, when no message or several carry that id. The messages
 * taken and not edited go back to their places when the session closes.
 * @internal
 */
export async function editParked(s: NativeParkedSession, at: { queue: string; parked: string; depth: number }, checked: CheckedEdit): Promise<EditResult> {
  const id = checked.messageId;
  let found: { id: number; message: ParkedMessage; position: number } | undefined;
  let looked = 0;
  for await (const held of taken(s, () => at.depth - looked)) {
    looked++;
    if (held.message.properties.messageId !== id) continue;
    if (found) {
      throw new AmbiguousMessageIdError(
        `messages ${found.position} and ${looked} of '${at.parked}' both have the id '${id}': nothing was edited; replay or purge them with a filter instead`,
      );
    }
    found = { id: held.id, message: held.message, position: looked };
  }
  if (!found) throw new NotParkedError(`no message of '${at.parked}' has the id '${id}' (looked at ${looked}): nothing was edited`);
  const { body, set, remove, by } = checked;
  const target = found;
  const published = {
    exchange: '',
    routingKey: at.queue,
    messageId: id,
    bodySize: body?.length ?? target.message.body.length,
    replayOf: target.message.headers,
  };
  const changed = await tracedPublish(published, (trace) =>
    native(() => s.edit(target.id, '', at.queue, by, body, set, remove, trace?.traceparent, trace?.tracestate)),
  );
  return { messageId: id, changed, queue: at.queue };
}
