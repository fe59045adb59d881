/**
 * The console's JSON API: which request reads or does what, by method and
 * path (`state`, `queues/<queue>/groups[/<key>/messages]`,
 * `queues/<queue>/replay|purge|edit`, `jobs/<id>/stop`, `table/pause|resume|retry-now`,
 * `outbox/retry|delete`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

import type { Actions } from './actions';
import type { Editor } from './edit';
import type { Groupings } from './groups';
import { HttpError, readJson, sendJson } from './http';
import type { Jobs } from './jobs';
import type { KnownQueues } from './known-queues';
import type { ConsoleStateCache } from './state';

/** What the API needs of its console. */
export interface ApiHost {
  readonly state: Pick<ConsoleStateCache, 'state'>;
  readonly queues: Pick<KnownQueues, 'known'>;
  readonly groupings: Pick<Groupings, 'read' | 'messages'>;
  readonly actions: Pick<Actions, 'replay' | 'purge' | 'table' | 'outbox'>;
  readonly editor: Pick<Editor, 'edit'>;
  readonly jobs: Pick<Jobs, 'stop'>;
}

/** The most messages of a group one request reads. */
const MAX_MESSAGES = 100;

/** The most an edit request may hold, in bytes: the page edits bodies of up to 64 KiB of text. */
const MAX_EDIT_REQUEST = 512 * 1024;

/**
 * Answers the API request `parts` (the path under `api/`, decoded), or
 * throws the {@link HttpError} to answer.
 */
export async function serveApi(
  host: ApiHost,
  req: IncomingMessage,
  res: ServerResponse,
  method: string,
  parts: string[],
  query: URLSearchParams,
): Promise<void> {
  const [first, second, third, fourth, fifth] = parts;
  const get = method === 'GET';
  const post = method === 'POST';
  if (parts.length === 1 && first === 'state') {
    if (!get) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'read the state with GET');
    sendJson(res, 200, await host.state.state());
    return;
  }
  if (first === 'queues' && second !== undefined) {
    const queue = await host.queues.known(second);
    if (parts.length === 3 && third === 'groups') {
      if (!get) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'read the groups with GET');
      sendJson(res, 200, await host.groupings.read(queue, query.get('refresh') === '1'));
      return;
    }
    if (parts.length === 5 && third === 'groups' && fifth === 'messages') {
      if (!get) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'read the messages with GET');
      const limit = Math.min(MAX_MESSAGES, Math.max(1, Number(query.get('limit') ?? 20) || 20));
      sendJson(res, 200, await host.groupings.messages(queue, fourth, limit));
      return;
    }
    if (parts.length === 3 && (third === 'replay' || third === 'purge')) {
      if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${third} with POST`);
      const body = await readJson(req);
      const job = third === 'replay' ? host.actions.replay(queue, body) : host.actions.purge(queue, body);
      sendJson(res, 202, { job });
      return;
    }
    if (parts.length === 3 && third === 'edit') {
      if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'edit with POST');
      const body = await readJson(req, MAX_EDIT_REQUEST);
      sendJson(res, 200, await host.editor.edit(queue, body));
      return;
    }
  }
  if (first === 'jobs' && parts.length === 3 && third === 'stop') {
    if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'stop a job with POST');
    await readJson(req);
    sendJson(res, 200, { stopped: host.jobs.stop(Number(second)) });
    return;
  }
  if (first === 'table' && parts.length === 2 && (second === 'pause' || second === 'resume' || second === 'retry-now')) {
    if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${second} with POST`);
    const body = await readJson(req);
    sendJson(res, 200, { rows: await host.actions.table(second, body) });
    return;
  }
  if (first === 'outbox' && parts.length === 2 && (second === 'retry' || second === 'delete')) {
    if (!post) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${second} parked outbox rows with POST`);
    const body = await readJson(req);
    sendJson(res, 200, { rows: await host.actions.outbox(second, body) });
    return;
  }
  throw new HttpError(404, 'NOT_FOUND', `no API at ${parts.join('/')}`);
}
