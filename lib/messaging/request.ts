/**
 * A request that waits for one reply, over direct reply-to (`amq.rabbitmq.reply-to`):
 * published with a correlation id, answered by the first reply that carries it, or
 * failed with a {@link RequestTimeoutError} when none comes within the timeout. An
 * answer that says the handler failed (the {@link REPLY_ERROR_HEADER} header) is
 * told apart from a result.
 */
import { randomUUID } from 'node:crypto';

import { checkKeys, checkObject } from '../options/check';
import { InvalidOptionsError, RemoteError, RequestTimeoutError } from '../errors';
import type { Message } from '../message';
import type { OptionKeys, PublishOptions } from '../options';
import { type Body, checkPublishOptions, toBuffer } from './publish';
import type { Replies } from './replies';

/** What `rr.request` takes (golevelup's `RequestOptions`). */
export interface RequestOptions {
  /** The exchange to publish the request to. @default '' (the default exchange) */
  exchange?: string;
  /** Its routing key. */
  routingKey: string;
  /** The request's body, encoded as `publish` encodes one. @default {} */
  payload?: Body;
  /** ms to wait for the reply. @default 10000 */
  timeout?: number;
  /** Headers of the request. */
  headers?: Record<string, unknown>;
  /** The correlation id the reply must carry. @default a new UUID */
  correlationId?: string;
  /** Other publish options of the request (`replyTo` is direct reply-to, and cannot be given). */
  publishOptions?: PublishOptions;
}

/** The keys of {@link RequestOptions}. */
export const REQUEST_OPTION_KEYS = {
  exchange: true,
  routingKey: true,
  payload: true,
  timeout: true,
  headers: true,
  correlationId: true,
  publishOptions: true,
} satisfies OptionKeys<RequestOptions>;

/**
 * The header of a reply that answers with the handler's error instead of a result:
 * its value is the error's class name, the body `{ status: 'error', message }`, with
 * `code` when the error has a string one.
 */
export const REPLY_ERROR_HEADER = 'rabbit-retry-error';

/** The default timeout of a request, in ms (golevelup's `defaultRpcTimeout`). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** One request, as {@link sendRequest} publishes it. */
export interface OutgoingRequest {
  exchange: string;
  routingKey: string;
  body: Buffer;
  /** Publish options; `replyTo` is direct reply-to, `correlationId` a new UUID unless given. */
  options: PublishOptions;
  /** ms to wait for the reply. */
  timeoutMs: number;
}

/** Checks a request timeout: a whole number of ms, at least 1. */
export function checkTimeout(timeout: unknown): number {
  if (timeout === undefined) return DEFAULT_REQUEST_TIMEOUT_MS;
  if (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < 1 || timeout > 2 ** 31 - 1) {
    throw new InvalidOptionsError(`timeout must be a whole number of milliseconds from 1 to ${2 ** 31 - 1}`);
  }
  return timeout;
}

/**
 * Publishes `request` with a reply-to of direct reply-to and resolves with the
 * first reply that carries its correlation id (and, when the request has an
 * `X-Request-ID` header, the same header: golevelup's callers may reuse a
 * correlation id across requests).
 */
export async function sendRequest(replies: Replies, request: OutgoingRequest): Promise<Message> {
  const correlationId = request.options.correlationId ?? randomUUID();
  const requestId = request.options.headers?.['X-Request-ID'];
  let stop: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<Message>((resolve, reject) => {
      stop = replies.wait(correlationId, {
        reply: (msg) => {
          if (requestId !== undefined && msg.headers['X-Request-ID'] !== requestId) return;
          resolve(msg);
        },
        lost: reject,
      });
      timer = setTimeout(() => {
        reject(new RequestTimeoutError(request.timeoutMs, request.exchange, request.routingKey));
      }, request.timeoutMs);
      replies.request(request.exchange, request.routingKey, request.body, { ...request.options, correlationId }).catch(reject);
    });
  } finally {
    clearTimeout(timer);
    stop?.();
  }
}

/**
 * A reply as `rr.request` returns it: nothing for an empty body, the text of a
 * `text/plain` one, else its JSON (or its text when it is not JSON). An error
 * reply rejects with a {@link RemoteError}.
 */
export function replyValue(msg: Message): unknown {
  const failed = msg.headers[REPLY_ERROR_HEADER];
  if (failed !== undefined) {
    const body = parsed(msg);
    const { message, code } =
      body !== null && typeof body === 'object' ? (body as { message?: unknown; code?: unknown }) : { message: body, code: undefined };
    throw new RemoteError(
      typeof failed === 'string' ? failed : JSON.stringify(failed),
      typeof message === 'string' ? message : JSON.stringify(message),
      typeof code === 'string' ? code : undefined,
    );
  }
  return parsed(msg);
}

function parsed(msg: Message): unknown {
  if (msg.body.length === 0) return undefined;
  if (msg.properties.contentType === 'text/plain') return msg.text();
  try {
    return JSON.parse(msg.text()) as unknown;
  } catch {
    return msg.text();
  }
}

/** `rr.request`'s options, checked, as the request to publish. */
export function outgoingRequest(options: RequestOptions): OutgoingRequest {
  checkObject('request options', options, 'an object such as { exchange, routingKey, payload }');
  checkKeys('request', options, REQUEST_OPTION_KEYS);
  const { exchange = '', routingKey, payload = {}, timeout, headers, correlationId, publishOptions = {} } = options;
  if (typeof exchange !== 'string') throw new InvalidOptionsError("exchange must be a string ('' is the default exchange)");
  if (typeof routingKey !== 'string') throw new InvalidOptionsError('routingKey must be a string');
  const timeoutMs = checkTimeout(timeout);
  const publish: PublishOptions = { ...publishOptions };
  if (headers !== undefined) publish.headers = { ...publishOptions.headers, ...headers };
  if (correlationId !== undefined) publish.correlationId = correlationId;
  checkPublishOptions(publish);
  const { buf, contentType } = toBuffer(payload, publish);
  if (contentType !== undefined) publish.contentType ??= contentType;
  return { exchange, routingKey, body: buf, options: publish, timeoutMs };
}
