/**
 * The console's Edit: one parked message, its body or headers changed by
 * the operator, sent back to its work queue through `Parked.edit`, in the
 * queue's turn (never beside a replay, purge or reading of it), and only
 * when the message is still the one the operator opened.
 */
import type { RabbitRetry } from '../client';
import { NotParkedError } from '../errors';
import type { EditResult, ParkedEdit, ParkedMessage } from '../parked';
import { minifyJson } from './edit-view';
import { checkKey, type Groupings } from './groups';
import { HttpError, checkOpen } from './http';
import type { Jobs, KeyedQueue } from './jobs';
import type { ConsoleStateCache } from './state';
import { bodyView, messageKey } from './views';

/** The longest `by` the console takes, in characters. */
const MAX_BY = 200;

/** What `POST api/queues/<queue>/edit` answers: what the edit did, and who the audit trail names. */
export interface EditAnswer extends EditResult {
  /** Who the copy's audit trail names (`retry-edited-by`). */
  by: string;
}

/** An edit request, checked. */
interface EditRequest {
  messageId: string;
  key: string;
  by: string;
  body: string | undefined;
  asText: boolean;
  headers: Record<string, unknown>;
  removeHeaders: string[];
}

/** Checks the body of an edit request; throws a 400 naming what is wrong. */
function requestOf(body: Record<string, unknown>): EditRequest {
  const bad = (message: string) => new HttpError(400, 'BAD_REQUEST', message);
  const { messageId, key, by, asText } = body;
  if (typeof messageId !== 'string' || messageId === '') throw bad("messageId must be the parked message's id");
  checkKey(key);
  if (typeof by !== 'string' || by.trim() === '' || by.length > MAX_BY) throw bad(`by must name who edits (1 to ${MAX_BY} characters)`);
  if (body.body !== undefined && typeof body.body !== 'string') throw bad('body must be the edited body, as text');
  if (asText !== undefined && typeof asText !== 'boolean') throw bad('asText must be true or false');
  const headers = body.headers ?? {};
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) throw bad('headers must be an object of header names to values');
  const removeHeaders = body.removeHeaders ?? [];
  if (!Array.isArray(removeHeaders) || removeHeaders.some((h) => typeof h !== 'string' || h === '')) throw bad('removeHeaders must be header names');
  const known = new Set(['messageId', 'key', 'by', 'body', 'asText', 'headers', 'removeHeaders']);
  const unknown = Object.keys(body).filter((k) => !known.has(k));
  if (unknown.length > 0) throw bad(`an edit request has no ${unknown.join(', ')}`);
  const set = headers as Record<string, unknown>;
  const removed = removeHeaders as string[];
  if (body.body === undefined && Object.keys(set).length === 0 && removed.length === 0)
    throw bad('the edit changes nothing: give body, headers or removeHeaders');
  const both = removed.filter((h) => Object.hasOwn(set, h));
  if (both.length > 0) throw bad(`header ${both[0]} is both set and removed`);
  return { messageId, key, by: by.trim(), body: body.body, asText: asText === true, headers: set, removeHeaders: removed };
}

/**
 * The edited body as bytes: when `original` is JSON, the edit must be JSON
 * too, and is sent without the white space between its tokens; otherwise a
 * body that is not JSON is sent as text only when the request says so
 * (`asText`).
 */
function bodyOf(original: ParkedMessage, text: string, asText: boolean): Buffer {
  let json = true;
  try {
    JSON.parse(text);
  } catch {
    json = false;
  }
  const wasJson = bodyView(original.body, original.properties.contentType).kind === 'json';
  if (wasJson && !json) throw new HttpError(400, 'BODY_NOT_JSON', 'the body was JSON and the edited one is not: fix it, nothing was edited');
  if (!json && !asText)
    throw new HttpError(400, 'BODY_NOT_JSON', 'the edited body is not JSON: send it with asText to send it as text; nothing was edited');
  return Buffer.from(wasJson ? minifyJson(text) : text, 'utf8');
}

/** What the editor needs of its console. */
export interface EditorHost {
  readonly client: Pick<RabbitRetry, 'parked'>;
  /** The queues' jobs: no edit while one acts on the queue. */
  readonly jobs: Pick<Jobs, 'active'>;
  /** The queues' turns, which an edit takes as jobs and readings do. */
  readonly order: Pick<KeyedQueue, 'run'>;
  /** The groupings: an edit makes its queue's stale. */
  readonly groupings: Pick<Groupings, 'invalidate'>;
  /** The depths, read anew after an edit. */
  readonly state: Pick<ConsoleStateCache, 'invalidate'>;
  /** Aborted when the console closes: it edits nothing more. */
  readonly closing: AbortSignal;
}

/** The console's edits of parked messages. */
export class Editor {
  constructor(
    private readonly host: EditorHost,
    /** The most parked messages looked at to find the one opened. */
    private readonly scanLimit: number,
  ) {}

  /**
   * Sends the parked message of `queue` that `body` names (`messageId`, and
   * `key`, the console's id of the message the operator opened) back to the
   * work queue, edited (`body`, `headers`, `removeHeaders`), with `by` in its
   * audit trail. Refuses, with nothing moved: a message changed since it was
   * opened (409 `MESSAGE_CHANGED`), an edited body that is not JSON
   * (400 `BODY_NOT_JSON`), and what `Parked.edit` refuses (`NOT_PARKED`,
   * `AMBIGUOUS_MESSAGE_ID`, `INVALID_OPTIONS`, a copy the broker refuses).
   */
  async edit(queue: string, body: Record<string, unknown>): Promise<EditAnswer> {
    const { client, jobs, order, closing } = this.host;
    checkOpen(closing);
    const r = requestOf(body);
    if (jobs.active(queue)) throw new HttpError(409, 'BUSY', `a replay or purge of '${queue}' is running; edit when it ends`);
    try {
      return await order.run(queue, async () => {
        checkOpen(closing);
        const parked = client.parked(queue);
        const found: ParkedMessage[] = [];
        await parked.scan(this.scanLimit, (m) => {
          if (m.properties.messageId === r.messageId) found.push(m);
          return !closing.aborted;
        });
        checkOpen(closing);
        if (found.length === 0) {
          throw new NotParkedError(
            `no message of '${parked.name}' has the id '${r.messageId}' (looked at the first ${this.scanLimit}): nothing was edited`,
          );
        }
        // Several with the id: Parked.edit refuses, naming where they are.
        if (found.length === 1 && messageKey(found[0]) !== r.key) {
          throw new HttpError(409, 'MESSAGE_CHANGED', `message ${r.messageId} changed since it was opened: nothing was edited; open it again`);
        }
        const edit: ParkedEdit = {};
        if (r.body !== undefined) edit.body = bodyOf(found[0], r.body, r.asText);
        if (Object.keys(r.headers).length > 0 || r.removeHeaders.length > 0) {
          edit.headers = { ...r.headers };
          for (const h of r.removeHeaders) edit.headers[h] = undefined;
        }
        const result = await parked.edit(r.messageId, edit, { by: r.by });
        return { ...result, by: r.by };
      });
    } finally {
      this.host.groupings.invalidate(queue);
      this.host.state.invalidate();
    }
  }
}
