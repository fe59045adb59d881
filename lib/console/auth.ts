/**
 * Who the console answers: requests addressed to the loopback or to its
 * `allowedHosts` (by `Host`), acting only for pages of those hosts (by
 * `Origin`), and, for its API, carrying its token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

import { InvalidOptionsError } from '../errors';
import { HttpError } from './http';

/** The header every API request carries the console's token in. */
export const CONSOLE_TOKEN_HEADER = 'x-rabbit-retry-token';

/** The environment variable the console reads its token from when the options give none. */
export const CONSOLE_TOKEN_ENV = 'RABBIT_RETRY_UI_TOKEN';

/** Whether `host`, in lower case, names the loopback. */
function isLoopbackName(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Whether `host` (an address to listen on) is this machine's loopback. */
export function isLoopback(host: string): boolean {
  return isLoopbackName(host.toLowerCase());
}

/**
 * The fewest characters of a token when the console answers beyond the
 * loopback: listening on another address, or mounted with `allowedHosts`
 * beyond the loopback.
 */
export const CONSOLE_MIN_TOKEN_LENGTH = 16;

/** A host the console answers to: its name (lower case; an IPv6 address in brackets), and its port, or any. @internal */
export interface AllowedHost {
  /** `ops.example.com`, `10.0.0.5`, `[fd00::5]`. */
  name: string;
  /** The port; any when left out. */
  port?: string;
}

/** A host as a request names it: its name, and its port (`''` when it names none). */
interface RequestHost {
  name: string;
  port: string;
}

/** The ports a host without one stands for, by scheme. */
const DEFAULT_PORTS = new Set(['80', '443']);

/** `value` (`name`, `name:port`, `[v6]:port`) as its name and port, or undefined when it is not a host. */
function splitHost(value: string): RequestHost | undefined {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?$/.exec(value.toLowerCase());
  if (!m) return undefined;
  if (m[2] === undefined) return { name: m[1], port: '' };
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { name: m[1], port: String(port) } : undefined;
}

/** A host as `allowedHosts` writes it. */
function hostText(h: AllowedHost): string {
  return h.port === undefined ? h.name : `${h.name}:${h.port}`;
}

/**
 * `allowedHosts` read: each a host name, with a port or without (any port);
 * an IPv6 address with or without its brackets. Throws an
 * {@link InvalidOptionsError} naming an entry that is not a host.
 * @internal
 */
export function allowedHostsOf(list: unknown): AllowedHost[] {
  if (list === undefined) return [];
  if (!Array.isArray(list) || list.some((h) => typeof h !== 'string')) {
    throw new InvalidOptionsError('allowedHosts must be an array of host names such as ops.example.com or ops.example.com:8443');
  }
  return (list as string[]).map((entry) => {
    const trimmed = entry.trim();
    // A bare IPv6 address (two colons or more) is written in brackets in a Host header.
    const h = splitHost(/^[0-9a-f:.]+$/i.test(trimmed) && (trimmed.match(/:/g) ?? []).length >= 2 ? `[${trimmed}]` : trimmed);
    if (!h) throw new InvalidOptionsError(`allowedHosts: ${JSON.stringify(entry)} is not a host name such as ops.example.com or ops.example.com:8443`);
    return h.port === '' ? { name: h.name } : { name: h.name, port: h.port };
  });
}

/** Whether a request naming `host` is one the console answers: the loopback's, or one of `allowed`. */
function answers(allowed: readonly AllowedHost[], host: RequestHost): boolean {
  if (isLoopbackName(host.name)) return true;
  return allowed.some((a) => a.name === host.name && (a.port === undefined || a.port === host.port || (host.port === '' && DEFAULT_PORTS.has(a.port))));
}

/** The host of an `Origin` header (`https://ops.example.com`), or undefined when it names none (`null`). */
function originHost(origin: string): RequestHost | undefined {
  try {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
    return { name: url.hostname.toLowerCase(), port: url.port };
  } catch {
    return undefined;
  }
}

/** Methods that change nothing: their `Origin` is not checked. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses a token that cannot protect the console: blank, or beginning or
 * ending with spaces (a header's value is read without them, so no request
 * could carry it); and, when `beyond` says why the console answers beyond
 * the loopback, shorter than {@link CONSOLE_MIN_TOKEN_LENGTH}. `source` names
 * where the token came from. Throws an {@link InvalidOptionsError}; the
 * message never shows the token.
 * @internal
 */
export function checkConsoleToken(token: string | undefined, beyond: string | undefined, source = 'token'): void {
  if (token === undefined) return;
  if (token.trim() === '') throw new InvalidOptionsError(`the console's token (${source}) is blank`);
  if (token.trim() !== token)
    throw new InvalidOptionsError(`the console's token (${source}) begins or ends with spaces: no request header could carry it`);
  if (beyond !== undefined && token.length < CONSOLE_MIN_TOKEN_LENGTH) {
    throw new InvalidOptionsError(
      `${beyond} needs a token of at least ${CONSOLE_MIN_TOKEN_LENGTH} characters; the one given (${source}) has ${token.length}`,
    );
  }
}

/**
 * The console's token: `given`, else `$RABBIT_RETRY_UI_TOKEN`, else none;
 * checked by {@link checkConsoleToken}, at least 16 characters when
 * `allowed` names a host beyond the loopback.
 */
export function consoleToken(given: string | undefined, allowed: readonly AllowedHost[]): string | undefined {
  const token = given ?? (process.env[CONSOLE_TOKEN_ENV] || undefined);
  const beyond = allowed.filter((h) => !isLoopbackName(h.name));
  checkConsoleToken(
    token,
    beyond.length > 0 ? `answering ${beyond.map(hostText).join(', ')} (allowedHosts beyond the loopback)` : undefined,
    given === undefined ? CONSOLE_TOKEN_ENV : 'token',
  );
  return token;
}

/** Whether `given` is `expected`, compared in constant time. */
function sameToken(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * The console's checks of a request: the hosts it answers beside the
 * loopback's, and its token.
 */
export class RequestGate {
  readonly #token: string;

  constructor(
    private readonly allowed: readonly AllowedHost[],
    token: string,
  ) {
    this.#token = token;
  }

  /**
   * Refuses (HTTP 403) a request addressed to a host the console does not
   * answer, and a request that changes anything from a page of another origin.
   */
  checkHost(req: IncomingMessage, method: string): void {
    const host = splitHost(req.headers.host ?? '');
    if (!host || !answers(this.allowed, host)) {
      throw new HttpError(403, 'FORBIDDEN_HOST', 'the console does not answer to this Host: it answers 127.0.0.1, localhost, [::1] and its allowedHosts');
    }
    const origin = req.headers.origin;
    if (!SAFE_METHODS.has(method) && origin !== undefined) {
      const from = originHost(origin);
      if (!from || !answers(this.allowed, from)) {
        throw new HttpError(403, 'FORBIDDEN_ORIGIN', 'the console does not act for a page of this Origin: only for the loopback and its allowedHosts');
      }
    }
  }

  /** Refuses (HTTP 401) an API request without the console's token. */
  authorize(req: IncomingMessage): void {
    const given = req.headers[CONSOLE_TOKEN_HEADER];
    if (typeof given !== 'string' || !sameToken(given, this.#token)) {
      throw new HttpError(401, 'UNAUTHORIZED', `this request needs the console's token in the ${CONSOLE_TOKEN_HEADER} header`);
    }
  }
}
