/**
 * What a publish sends: its body as bytes, and its options checked (the
 * header table among them, value by value) and turned into the native
 * layer's message properties, before anything reaches the broker.
 */
import { checkKeys, checkObject, checkString, checkWhole, kindOf } from '../options/check';
import { reasonOf } from '../support/error-text';
import { InvalidOptionsError } from '../errors';
import type { NativeMessageProperties } from '../native';
import type { OptionKeys, PublishOptions } from '../options';

/** The keys of {@link PublishOptions}. */
const PUBLISH_OPTION_KEYS = {
  messageId: true,
  correlationId: true,
  contentType: true,
  contentEncoding: true,
  type: true,
  appId: true,
  priority: true,
  replyTo: true,
  userId: true,
  timestamp: true,
  expiration: true,
  persistent: true,
  headers: true,
} satisfies OptionKeys<PublishOptions>;

/** Advice for publish options that are message properties under another name. */
const PUBLISH_HINTS: Readonly<Record<string, string>> = {
  deliveryMode: 'use `persistent: false` for a transient message (delivery mode 1); messages are persistent by default',
};

/** A body: raw bytes, text, or any value sent as JSON. */
export type Body = Buffer | Uint8Array | string | object | number | boolean | null;

/** `body` as the bytes to send, and the content type its kind implies. @internal */
export function toBuffer(body: Body, opts: PublishOptions): { buf: Buffer; contentType?: string } {
  if (Buffer.isBuffer(body)) return { buf: body };
  if (body instanceof Uint8Array) return { buf: Buffer.from(body.buffer, body.byteOffset, body.byteLength) };
  if (typeof body === 'string') return { buf: Buffer.from(body, 'utf8'), contentType: 'text/plain' };
  let json: string | undefined;
  try {
    json = JSON.stringify(body);
  } catch (err) {
    // A cycle, a BigInt, or a getter or toJSON that throws: the body is refused, with why.
    throw new InvalidOptionsError(`the body cannot be sent as JSON: ${reasonOf(err)}`);
  }
  if (json === undefined) throw new InvalidOptionsError('the body cannot be sent as JSON (undefined, a function or a symbol)');
  return { buf: Buffer.from(json, 'utf8'), contentType: opts.contentType ?? 'application/json' };
}

/** Checks every publish option's type before anything reaches the native layer. @internal */
export function checkPublishOptions(opts: PublishOptions): void {
  checkObject('publish options', opts, 'an object such as { messageId }');
  checkKeys('publish', opts, PUBLISH_OPTION_KEYS, PUBLISH_HINTS);
  for (const key of ['messageId', 'correlationId', 'contentType', 'contentEncoding', 'type', 'appId', 'replyTo', 'userId'] as const) {
    checkString(key, opts[key]);
  }
  checkWhole('priority', opts.priority, 0, 255, 'a whole number from 0 to 255');
  const { timestamp, expiration, persistent, headers } = opts as Record<string, unknown>;
  if (timestamp !== undefined) {
    const valid =
      timestamp instanceof Date ? !Number.isNaN(timestamp.getTime()) : typeof timestamp === 'number' && Number.isFinite(timestamp) && timestamp >= 0;
    if (!valid) throw new InvalidOptionsError(`timestamp must be a valid Date or a number of seconds since the epoch, got ${kindOf(timestamp)}`);
  }
  if (expiration !== undefined && typeof expiration !== 'string') {
    checkWhole('expiration', expiration, 0, Number.MAX_SAFE_INTEGER, 'a number of milliseconds (or a string of one)');
  }
  if (persistent !== undefined && typeof persistent !== 'boolean') {
    throw new InvalidOptionsError(`persistent must be true or false, got ${kindOf(persistent)}`);
  }
  if (headers !== undefined && (headers === null || typeof headers !== 'object' || Array.isArray(headers) || Buffer.isBuffer(headers))) {
    throw new InvalidOptionsError(`headers must be an object of header names to values, got ${kindOf(headers)}`);
  }
  if (headers !== undefined) checkHeaderTable('headers', headers, new Set());
}

/**
 * A header table as AMQP carries it: names of well-formed UTF-16 (a lone surrogate has no
 * UTF-8 form, and would be dropped on the way), values that are strings, finite numbers,
 * booleans, null, arrays or plain objects of such. Anything else (a Date, Map, Set, RegExp,
 * typed array, class instance, function, cycle) would reach the broker changed, so it is
 * refused, naming where it is.
 */
function checkHeaderTable(path: string, table: object, seen: Set<object>): void {
  const proto: unknown = Object.getPrototypeOf(table);
  if (proto !== Object.prototype && proto !== null) {
    throw new InvalidOptionsError(`${path} must be a plain object of header names to values, got ${kindOf(table)}`);
  }
  seen.add(table);
  let names: string[];
  try {
    names = Object.keys(table);
  } catch (err) {
    throw new InvalidOptionsError(`${path} cannot be read: ${reasonOf(err)}`);
  }
  for (const name of names) {
    if (!isWellFormed(name)) throw new InvalidOptionsError(`${path} has a name that is not well-formed UTF-16 (a lone surrogate): it has no UTF-8 form`);
    checkHeaderValue(`${path}[${JSON.stringify(name)}]`, (table as Record<string, unknown>)[name], seen);
  }
  seen.delete(table);
}

/** One header value at `path`, as {@link checkHeaderTable} takes it. */
function checkHeaderValue(path: string, value: unknown, seen: Set<object>): void {
  switch (typeof value) {
    case 'string':
      if (!isWellFormed(value)) throw new InvalidOptionsError(`${path} is not well-formed UTF-16 (a lone surrogate): it has no UTF-8 form`);
      return;
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new InvalidOptionsError(`${path} must be a finite number, got ${kindOf(value)}`);
      return;
    case 'undefined':
      return; // left out, as JSON leaves it out
    case 'object': {
      if (value === null) return;
      if (seen.has(value)) throw new InvalidOptionsError(`${path} refers to itself (a cycle)`);
      if (Array.isArray(value)) {
        seen.add(value);
        value.forEach((v: unknown, i) => checkHeaderValue(`${path}[${i}]`, v, seen));
        seen.delete(value);
        return;
      }
      checkHeaderTable(path, value, seen);
      return;
    }
    default:
      throw new InvalidOptionsError(`${path} must be a string, a number, a boolean, null, an array or a plain object, got ${kindOf(value)}`);
  }
}

/** Whether `s` has no lone surrogate (in a `u` regex, a pair is one code point, not two surrogates). */
function isWellFormed(s: string): boolean {
  return !/\p{Surrogate}/u.test(s);
}

/**
 * The publish options as the native layer's message properties: `contentType`
 * when the options give none, the timestamp in seconds, `persistent` as the
 * delivery mode. @internal
 */
export function toNativeProps(opts: PublishOptions, contentType: string | undefined): NativeMessageProperties {
  const { timestamp, expiration, persistent, headers, ...rest } = opts;
  const props: NativeMessageProperties = { ...rest };
  if (contentType !== undefined && props.contentType === undefined) props.contentType = contentType;
  if (timestamp !== undefined) {
    props.timestamp = timestamp instanceof Date ? Math.floor(timestamp.getTime() / 1000) : timestamp;
  }
  if (expiration !== undefined) props.expiration = String(expiration);
  props.deliveryMode = persistent === false ? 1 : 2;
  if (headers !== undefined) props.headers = headers;
  return props;
}
