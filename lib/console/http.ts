/**
 * The console's HTTP plumbing: its errors and their status, JSON answers,
 * request bodies, and the path of a request under the console's mount.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

import { RabbitRetryError } from '../errors';

/**
 * A request handler: node's request and response, and for frameworks that
 * pass one, `next` (never called: every path under the console is its own).
 */
export type ConsoleHandler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void;

/**
 * The codes of the console's HTTP errors (the JSON body is
 * `{ error: { code, message } }`): those of the library's errors
 * (`INVALID_OPTIONS`, `CONNECTION`, `RETRY_TABLE`, ...), and the console's own.
 */
export type ConsoleErrorCode =
  | RabbitRetryError['code']
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN_HOST'
  | 'FORBIDDEN_ORIGIN'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'BUSY'
  | 'NO_RETRY_TABLE'
  | 'NO_OUTBOX'
  | 'MESSAGE_CHANGED'
  | 'BODY_NOT_JSON'
  | 'INTERNAL';

/** An error the console answers with its HTTP status. */
export class HttpError extends Error {
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The code in the answer's body. */
    readonly code: ConsoleErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** The HTTP status of a library error. */
function statusOf(code: RabbitRetryError['code']): number {
  switch (code) {
    case 'INVALID_OPTIONS':
      return 400;
    case 'CLOSED':
      return 503;
    case 'NOT_PARKED':
      return 404;
    case 'AMBIGUOUS_MESSAGE_ID':
      return 409;
    default:
      return 502;
  }
}

/** Refuses (HTTP 503) what the console is asked once it is closing (`closing` aborted). */
export function checkOpen(closing: AbortSignal): void {
  if (closing.aborted) throw new HttpError(503, 'CLOSED', 'the console is closing');
}

/** Answers `body` as JSON with `status`. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body), 'utf8');
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': data.length,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.end(data);
}

/** Answers `err` as `{ error: { code, message } }` with its status; cuts the connection when the answer has begun. */
export function sendError(res: ServerResponse, err: unknown): void {
  let status = 500;
  let code: ConsoleErrorCode = 'INTERNAL';
  let message = 'the console failed';
  if (err instanceof HttpError) {
    status = err.status;
    code = err.code;
    message = err.message;
  } else if (err instanceof RabbitRetryError) {
    status = statusOf(err.code);
    code = err.code;
    message = err.message;
  } else if (err instanceof Error) {
    message = err.message;
  }
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, { error: { code, message } });
}

/** Where a request is: its path under the console, the full path it came as, and its query. */
export interface RequestPath {
  /** The path under the console's mount (`/api/state`). */
  sub: string;
  /** The full path, mount included. */
  full: string;
  /** The query. */
  query: URLSearchParams;
}

/** The path under the console (mounted at `basePath`, or at the root of `req.url`) of `req`. */
export function requestPath(req: IncomingMessage, basePath: string): RequestPath {
  const original = (req as IncomingMessage & { originalUrl?: unknown }).originalUrl;
  const urls = [typeof original === 'string' ? original : undefined, req.url].filter((u): u is string => typeof u === 'string');
  const parse = (u: string) => new URL(u, 'http://console.invalid');
  const full = parse(urls[0] ?? '/');
  if (basePath !== '') {
    for (const u of urls) {
      const p = parse(u);
      if (p.pathname === basePath || p.pathname.startsWith(`${basePath}/`)) {
        return { sub: p.pathname.slice(basePath.length), full: p.pathname, query: p.searchParams };
      }
    }
  }
  const own = parse(req.url ?? '/');
  return { sub: own.pathname, full: full.pathname, query: own.searchParams };
}

/** The most a request body may hold, in bytes, unless its route says otherwise. */
const MAX_BODY = 16 * 1024;

/** The request's JSON object body (already parsed by a framework, or read here), of at most `maxBytes`. */
export async function readJson(req: IncomingMessage, maxBytes = MAX_BODY): Promise<Record<string, unknown>> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) throw new HttpError(400, 'BAD_REQUEST', 'send the body as application/json');
  const parsed = (req as IncomingMessage & { body?: unknown }).body;
  let value: unknown = parsed;
  if (parsed === undefined || Buffer.isBuffer(parsed) || typeof parsed === 'string') {
    let text: string;
    if (parsed !== undefined) text = String(parsed);
    else {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of req) {
        size += (chunk as Buffer).length;
        if (size > maxBytes) throw new HttpError(400, 'BAD_REQUEST', `the body is too large (over ${Math.round(maxBytes / 1024)} KiB)`);
        chunks.push(chunk as Buffer);
      }
      text = Buffer.concat(chunks).toString('utf8');
    }
    try {
      value = text.trim() === '' ? {} : JSON.parse(text);
    } catch {
      throw new HttpError(400, 'BAD_REQUEST', 'the body is not valid JSON');
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new HttpError(400, 'BAD_REQUEST', 'the body must be a JSON object');
  return value as Record<string, unknown>;
}
