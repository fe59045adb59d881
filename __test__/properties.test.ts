/**
 * Property tests of the failure path, against the real broker. fast-check
 * generates what producers send (basic properties, header tables of every
 * AMQP type, bodies of any bytes), what handlers do with it (succeed, throw
 * anything, reject after an await, take a while), what the `retryable`
 * predicate answers, and what `rr.publish` is given. Each run checks the
 * ledger: every message published is acked after a success or parked exactly
 * once, with the reason and attempt the rules of "What happens to a failed
 * message" give, and as it came; nothing is left in the work queue, its retry
 * queue or unacked; the consumer stays connected; a publish is sent as given
 * or refused with a stable code and not sent; and the process sees no
 * unhandled rejection and no uncaught exception.
 *
 * `FC_SEED` (and `FC_PATH`, both printed by a failure) replays a run;
 * `FC_RUNS` sets the number of runs of each property.
 */
import path from 'node:path';
import vm from 'node:vm';

import amqp, { type Options } from 'amqplib';
import fc from 'fast-check';

import { type Consumer, type Delay, type Message, NonRetryableError, type RabbitRetry, parkedQueueName, retryQueueName } from '../lib';
import { everyTrapThrows, getterHostileError, nullPrototype } from './fixtures/bad-callbacks';
import {
  AMQP_URL,
  BROKER,
  type GotMessage,
  cleanup,
  closeAmqp,
  connectClient,
  deleteQueues,
  drain,
  queueDepth,
  recordingLogger,
  sleep,
  testQueue,
  track,
  uniqueName,
  waitFor,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

// ---------------------------------------------------------------------------
// Running the properties.

const SEED = process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined;
const REPLAY_PATH = process.env.FC_PATH || undefined;
const RUNS = process.env.FC_RUNS ? Number(process.env.FC_RUNS) : undefined;

/** How long one property may run, its shrinking included, before it stops (and fails). */
const PROPERTY_BUDGET_MS = 150_000;

/** fast-check's parameters: `numRuns` runs, or what FC_SEED, FC_PATH and FC_RUNS say. */
function params<T>(numRuns: number): fc.Parameters<T> {
  return {
    numRuns: RUNS ?? numRuns,
    ...(SEED === undefined ? {} : { seed: SEED }),
    ...(REPLAY_PATH === undefined ? {} : { path: REPLAY_PATH }),
    plugins: [fc.interruptAfterTimeLimit(PROPERTY_BUDGET_MS, { failOnInterrupt: true })],
  };
}

/**
 * The process's own `process`. Jest gives each test file a copy of it, on
 * which a listener never hears an unhandled rejection or an uncaught exception.
 */
const realProcess = vm.runInThisContext('process') as NodeJS.Process;

/** What would end the process under Node's defaults, as it happens. */
const hazards: string[] = [];
const onUnhandled = (reason: unknown): void => void hazards.push(`unhandledRejection: ${inWords(reason)}`);
const onUncaught = (err: unknown): void => void hazards.push(`uncaughtException: ${inWords(err)}`);
beforeAll(() => {
  realProcess.on('unhandledRejection', onUnhandled);
  realProcess.on('uncaughtException', onUncaught);
});
afterAll(() => {
  realProcess.off('unhandledRejection', onUnhandled);
  realProcess.off('uncaughtException', onUncaught);
});

/** A value in words, whatever it is (a Proxy whose traps throw included). */
function inWords(v: unknown): string {
  try {
    if (v instanceof Error) return `${v.name}: ${v.message}`;
    return typeof v === 'symbol' ? v.toString() : String(v);
  } catch {
    return `(a ${typeof v} that cannot be read)`;
  }
}

// amqplib's field-table codec: what a header table reads as after a trip through the broker.
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a file of amqplib's that its exports map does not name
const codec = require(path.join(path.dirname(require.resolve('amqplib')), 'lib', 'codec.js')) as {
  encodeTable: (buffer: Buffer, value: unknown, offset: number) => number;
  decodeFields: (slice: Buffer) => Record<string, unknown>;
};

/** `headers` as amqplib encodes them and reads them back. */
function amqpRoundTrip(headers: Record<string, unknown>): Record<string, unknown> {
  const buffer = Buffer.alloc(1 << 20);
  const size = codec.encodeTable(buffer, headers, 0);
  return codec.decodeFields(buffer.subarray(4, size));
}

/** The first `max` bytes' worth of whole code points of `s`, in UTF-8. */
function fitBytes(s: string, max: number): string {
  let out = '';
  let bytes = 0;
  for (const ch of s) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > max) break;
    out += ch;
    bytes += n;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Arbitraries.

/** Text for an AMQP short string (at most 255 bytes in UTF-8): ASCII, any code point, graphemes, or long. */
const shortText: fc.Arbitrary<string> = fc
  .oneof(
    { arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 30 }), weight: 3 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 20 }), weight: 2 },
    { arbitrary: fc.string({ unit: 'grapheme', maxLength: 10 }), weight: 2 },
    { arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 30 }), weight: 1 },
    { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 200, maxLength: 255 }), weight: 1 },
  )
  .map((s) => fitBytes(s, 255));

/** A content type or encoding: a real one, or junk. */
const mimeish = fc.oneof(fc.constantFrom('application/json', 'text/plain; charset=utf-8', 'gzip', 'application/x-ndjson'), shortText);

/** The headers the library writes or drops itself: their values on a republished copy are its own. */
const LIBRARY_HEADERS = new Set([
  'retry-attempt',
  'retry-reason',
  'retry-last-error',
  'retry-error-name',
  'retry-error-stack',
  'retry-failed-at',
  'retry-first-failed-at',
  'retry-original-exchange',
  'retry-original-routing-key',
  'retry-queue',
  'retry-original-user-id',
  'retry-dropped-headers',
  'x-death',
  'x-delivery-count',
  'x-acquired-count',
]);
const isLibraryHeader = (name: string): boolean => LIBRARY_HEADERS.has(name) || name.startsWith('x-first-death-') || name.startsWith('x-last-death-');

/** The header this file adds to every message to count it by. */
const LEDGER = 'x-ledger-id';

/**
 * A header name: ASCII, any Unicode, `x-` and `retry-` prefixed (the
 * library's own names among them), and long ones up to the 255 bytes AMQP
 * allows. `__proto__` is left out (amqplib's decoder would set a prototype),
 * and `!` too (amqplib reads a table with that key as a typed value).
 */
const headerName: fc.Arbitrary<string> = fc
  .oneof(
    { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 16 }), weight: 4 },
    { arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }), weight: 2 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 8 }), weight: 1 },
    { arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 12 }).map((s) => `x-${s}`), weight: 2 },
    { arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 12 }).map((s) => `retry-${s}`), weight: 2 },
    { arbitrary: fc.constantFrom(...LIBRARY_HEADERS, 'x-first-death-queue', 'x-last-death-reason', 'retry-after', 'retry-policy'), weight: 2 },
    { arbitrary: fc.string({ unit: 'binary', minLength: 64, maxLength: 255 }), weight: 1 },
  )
  .map((s) => fitBytes(s, 255))
  .filter((s) => s !== '__proto__' && s !== '!' && s !== LEDGER);

/** Values amqplib writes with a type of their own (`{ '!': type, value }`): every other AMQP field type. */
const typedValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.nat({ max: 2 ** 40 }).map((value) => ({ '!': 'timestamp', value })),
  fc.float({ noNaN: true, noDefaultInfinity: true }).map((value) => ({ '!': 'float', value })),
  fc.record({ places: fc.nat(255), digits: fc.nat({ max: 2 ** 32 - 1 }) }).map((value) => ({ '!': 'decimal', value })),
  fc.nat(255).map((value) => ({ '!': 'uint8', value })),
  fc.nat(65_535).map((value) => ({ '!': 'uint16', value })),
  fc.nat({ max: 2 ** 32 - 1 }).map((value) => ({ '!': 'uint32', value })),
  fc.integer({ min: -128, max: 127 }).map((value) => ({ '!': 'int64', value })),
);

/** A header value: strings, numbers (negative, float, huge; no NaN), booleans, null, byte arrays, typed values, nested arrays and tables. */
const headerValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 2 },
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.string({ unit: 'binary', maxLength: 20 }),
    fc.integer(),
    fc.maxSafeInteger(),
    // amqplib writes a number as a double only below 2^50 in magnitude (or from 2^63), else as a
    // 64-bit integer; RabbitMQ closes the connection over an infinite double.
    fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e12, max: 1e12 }),
    fc.constantFrom(-0, Number.EPSILON, 1e300),
    fc.boolean(),
    fc.constant(null),
    fc.uint8Array({ maxLength: 16 }).map((a) => Buffer.from(a)),
    typedValue,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(headerName, tie('value'), { maxKeys: 3, noNullPrototype: true }),
  ),
})).value;

/** What a producer may write in `retry-attempt`: counts the consumer reads, and values it must not read as one. */
const producerAttempt: fc.Arbitrary<unknown> = fc.oneof(
  fc.nat(3),
  fc.integer({ min: -5, max: -1 }),
  fc.constant(2 ** 40),
  fc.constantFrom('1', 'two', 1.5, true, null, [1], { n: 1 }),
);

/** The attempt the consumer reads from a producer's `retry-attempt` value (a whole number from 0, at most u32). */
function attemptFrom(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? Math.min(v, 2 ** 32 - 1) : 0;
}

/** A producer's header table. */
const producerHeaders: fc.Arbitrary<Record<string, unknown>> = fc
  .tuple(
    fc.dictionary(headerName, headerValue, { maxKeys: 6, noNullPrototype: true }),
    fc.oneof({ arbitrary: fc.constant(null), weight: 3 }, { arbitrary: producerAttempt, weight: 1 }),
  )
  .map(([headers, attempt]) => {
    const out: Record<string, unknown> = { ...headers };
    // Counted only when it is set here, so that the model knows it.
    delete out['retry-attempt'];
    if (attempt !== null) out['retry-attempt'] = attempt;
    return out;
  });

/** AMQP basic properties as another client may send them. */
const producerProperties = fc.record(
  {
    messageId: shortText,
    correlationId: shortText,
    type: shortText,
    appId: shortText,
    replyTo: shortText,
    contentType: mimeish,
    contentEncoding: mimeish,
    // The broker refuses a user-id other than the connection's user.
    userId: fc.constant(BROKER.user),
    priority: fc.nat(255),
    timestamp: fc.oneof(fc.constant(0), fc.nat({ max: 2 ** 32 }), fc.constant(Number.MAX_SAFE_INTEGER)),
    expiration: fc.integer({ min: 3_600_000, max: 2 ** 31 - 1 }).map(String),
    deliveryMode: fc.constantFrom(1, 2),
  },
  { requiredKeys: [] },
);

/** A body: any bytes, empty, not UTF-8, or JSON. */
const body: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
  fc.constant(Buffer.alloc(0)),
  fc.constantFrom(Buffer.from([0xc3, 0x28]), Buffer.from([0xff, 0xfe, 0xfd]), Buffer.from('caf\xe9', 'latin1')),
  fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
);

/** What a handler throws or rejects with, by name (made when it is thrown). */
const THROWN = [
  'an Error',
  'a TypeError',
  'a string',
  'an empty string',
  'undefined',
  'null',
  'a number',
  'a BigInt',
  'a Symbol',
  'a plain object',
  'an object with a null prototype',
  'a Proxy whose every trap throws',
  'an Error whose getters throw',
] as const;
type Thrown = (typeof THROWN)[number];

function make(thrown: Thrown, text: string): unknown {
  switch (thrown) {
    case 'an Error':
      return new Error(text);
    case 'a TypeError':
      return new TypeError(text);
    case 'a string':
      return text;
    case 'an empty string':
      return '';
    case 'undefined':
      return undefined;
    case 'null':
      return null;
    case 'a number':
      return 503;
    case 'a BigInt':
      return 10n;
    case 'a Symbol':
      return Symbol(text);
    case 'a plain object':
      return { code: 'E_CARRIER', text };
    case 'an object with a null prototype':
      return nullPrototype();
    case 'a Proxy whose every trap throws':
      return everyTrapThrows();
    case 'an Error whose getters throw':
      return getterHostileError();
  }
}

/** Error text: short and of any script, or longer than the 8 KiB `retry-last-error` keeps. */
const errorText = fc.oneof(
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }), weight: 5 },
  { arbitrary: fc.integer({ min: 8_000, max: 12_000 }).map((n) => 'é'.repeat(n)), weight: 1 },
);

/** What one call of the handler does, and when. */
type Outcome =
  | { settle: 'succeed'; timing: Timing; returns: unknown }
  | { settle: 'throw'; timing: Timing; thrown: Thrown; text: string }
  | { settle: 'nonRetryable'; timing: Timing; text: string };
/** `sync`: at once; `await`: after an await (a rejection); `delay`: after `ms` milliseconds. */
type Timing = { at: 'sync' } | { at: 'await' } | { at: 'delay'; ms: number };

const timing: fc.Arbitrary<Timing> = fc.oneof(
  fc.constant<Timing>({ at: 'sync' }),
  fc.constant<Timing>({ at: 'await' }),
  fc.integer({ min: 1, max: 150 }).map((ms): Timing => ({ at: 'delay', ms })),
);

const outcome: fc.Arbitrary<Outcome> = fc.oneof(
  { arbitrary: fc.record({ settle: fc.constant('succeed' as const), timing, returns: fc.constantFrom(undefined, 42, 'ok', null, {}) }), weight: 3 },
  { arbitrary: fc.record({ settle: fc.constant('throw' as const), timing, thrown: fc.constantFrom(...THROWN), text: errorText }), weight: 4 },
  { arbitrary: fc.record({ settle: fc.constant('nonRetryable' as const), timing, text: errorText }), weight: 1 },
);

/** Does what `o` says: returns, or throws (synchronously or as a rejection). */
function perform(o: Outcome): unknown {
  const settle = (): unknown => {
    if (o.settle === 'succeed') return o.returns;
    if (o.settle === 'nonRetryable') throw new NonRetryableError(o.text);
    throw make(o.thrown, o.text);
  };
  if (o.timing.at === 'sync') return settle();
  if (o.timing.at === 'await') return Promise.resolve().then(settle);
  return sleep(o.timing.ms).then(settle);
}

// ---------------------------------------------------------------------------
// The ledger of one run.

/** The one delay of every run: a message has two attempts, the second 100 ms after the first. */
const DELAYS: Delay[] = ['100ms'];

/** Where a message ends, and its handler calls, as the rules of the failure path give them. */
interface Expected {
  /** The `msg.attempt` of each handler call. */
  attempts: number[];
  end: { acked: true } | { acked: false; reason: 'non-retryable' | 'exhausted'; attempt: number };
  /** The error the message was parked with. */
  lastError?: { text: string } | { readable: true };
}

/**
 * Follows the rules of "What happens to a failed message": from attempt
 * `first`, call `k` does what `decide(k, attempt)` says; a retryable failure
 * at attempt `n < delays.length` retries with attempt `n + 1`, at
 * `n >= delays.length` parks as `exhausted`.
 */
function follow(first: number, decide: (call: number, attempt: number) => 'ack' | 'retryable' | 'non-retryable'): Expected {
  const attempts: number[] = [];
  let n = first;
  for (let call = 0; ; call++) {
    attempts.push(n);
    const d = decide(call, n);
    if (d === 'ack') return { attempts, end: { acked: true } };
    if (d === 'non-retryable') return { attempts, end: { acked: false, reason: 'non-retryable', attempt: n } };
    if (n >= DELAYS.length) return { attempts, end: { acked: false, reason: 'exhausted', attempt: n } };
    n++;
  }
}

/** What the consumer reported that a user would alert on. */
interface Alarms {
  disconnected: string[];
  errors: string[];
  publishFailed: string[];
}

function alarmsOf(c: Consumer): Alarms {
  const a: Alarms = { disconnected: [], errors: [], publishFailed: [] };
  c.on('disconnected', (e) => a.disconnected.push(inWords(e.error)));
  c.on('error', (e) => a.errors.push(inWords(e)));
  c.on('publishFailed', (e) => a.publishFailed.push(inWords(e.error)));
  return a;
}

/** A consumer of a new work queue, the attempts its handler saw per ledger id, and what it reported. */
interface Run {
  queue: string;
  consumer: Consumer;
  seen: Map<string, number[]>;
  alarms: Alarms;
}

/**
 * Consumes a new work queue (delays {@link DELAYS}) with `handle` as the
 * handler, recording each call's attempt by ledger id; runs `body`, then
 * closes the consumer and deletes the queues, whatever happened.
 */
async function withRun<T>(
  rr: RabbitRetry,
  options: { prefetch: number; retryable?: (err: unknown, msg: Message) => boolean },
  handle: (id: string, msg: Message) => unknown,
  body: (run: Run) => Promise<T>,
): Promise<T> {
  const queue = uniqueName('rr-test-prop');
  const seen = new Map<string, number[]>();
  let consumer: Consumer | undefined;
  try {
    consumer = await rr.consume(
      { queue, prefetch: options.prefetch, onFailure: { delays: DELAYS, ...(options.retryable ? { retryable: options.retryable } : {}) } },
      (msg: Message) => {
        const id = String(msg.headers[LEDGER]);
        seen.set(id, [...(seen.get(id) ?? []), msg.attempt]);
        return handle(id, msg);
      },
    );
    return await body({ queue, consumer, seen, alarms: alarmsOf(consumer) });
  } finally {
    await consumer?.close().catch(() => undefined);
    await deleteQueues(queue, DELAYS);
  }
}

/**
 * Waits until every one of `n` messages was acked or parked, nothing is in
 * flight and the work and retry queues are empty; then closes the consumer
 * (so that a delivery still unacked would go back to the work queue) and
 * takes every message off the parked queue.
 */
async function settle(run: Run, n: number): Promise<{ parked: GotMessage[]; stats: ReturnType<Consumer['stats']> }> {
  const { queue, consumer } = run;
  const retry = retryQueueName(queue, DELAYS[0]);
  try {
    await waitFor(
      async () => {
        const s = consumer.stats();
        return s.inFlight === 0 && s.acked + s.parked >= n && (await queueDepth(queue)) === 0 && (await queueDepth(retry)) === 0;
      },
      20_000,
      `all ${n} messages acked or parked`,
    );
  } catch (err) {
    const s = consumer.stats();
    throw new Error(
      `${(err as Error).message}: stats ${JSON.stringify({ acked: s.acked, parked: s.parked, retried: s.retried, failed: s.failed, inFlight: s.inFlight, publishFailed: s.publishFailed })}, ` +
        `calls ${JSON.stringify(Object.fromEntries(run.seen))}, alarms ${JSON.stringify(run.alarms)}, depths Q=${await queueDepth(queue)} ` +
        `retry=${await queueDepth(retry)} parked=${await queueDepth(parkedQueueName(queue))}`,
      { cause: err },
    );
  }
  const stats = consumer.stats();
  expect(consumer.state).toBe('connected');
  const closed = await consumer.close();
  expect(closed).toMatchObject({ unfinished: 0 });
  // Nothing went back to the work queue when the channel closed: nothing was left unacked.
  expect(await queueDepth(queue)).toBe(0);
  expect(await queueDepth(retry)).toBe(0);
  return { parked: await drain(parkedQueueName(queue)), stats };
}

/** Counts of each value. */
function tally(xs: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}

/**
 * Checks the ledger: each message's handler calls, and that it was acked
 * (and not parked) or parked exactly once with the expected reason,
 * attempt and error; nothing parked that was not published.
 */
function checkLedger(queue: string, expected: Map<string, Expected>, seen: Map<string, number[]>, parked: GotMessage[]): Map<string, GotMessage> {
  const ids = parked.map((m) => String(m.headers[LEDGER]));
  const mustPark = [...expected].filter(([, e]) => !e.end.acked).map(([id]) => id);
  expect(tally(ids)).toEqual(tally(mustPark));
  for (const [id, e] of expected) expect({ id, attempts: seen.get(id) ?? [] }).toEqual({ id, attempts: e.attempts });
  expect([...seen.keys()].filter((id) => !expected.has(id))).toEqual([]);

  const byId = new Map(parked.map((m) => [String(m.headers[LEDGER]), m]));
  for (const [id, e] of expected) {
    if (e.end.acked) continue;
    const h = byId.get(id)?.headers ?? {};
    expect({ id, reason: h['retry-reason'], attempt: h['retry-attempt'], queue: h['retry-queue'] }).toEqual({
      id,
      reason: e.end.reason,
      attempt: e.end.attempt,
      queue,
    });
    const lastError = h['retry-last-error'];
    expect(typeof lastError).toBe('string');
    const last = lastError as string;
    expect(Buffer.byteLength(last)).toBeLessThanOrEqual(8 * 1024 + 64);
    if (e.lastError && 'text' in e.lastError) {
      if (Buffer.byteLength(e.lastError.text) <= 8 * 1024) expect({ id, last }).toEqual({ id, last: e.lastError.text });
      else expect(e.lastError.text.startsWith(last.slice(0, 1024))).toBe(true);
    } else if (e.lastError) {
      expect(last.length).toBeGreaterThan(0);
    }
  }
  return byId;
}

/**
 * The `retry-last-error` of a failure: an Error's message, a thrown string
 * itself, and for any other value a text that is not empty.
 */
function lastErrorOf(o: Outcome): Expected['lastError'] {
  if (o.settle === 'succeed') return undefined;
  if (o.settle === 'nonRetryable') return { text: o.text };
  switch (o.thrown) {
    case 'an Error':
    case 'a TypeError':
    case 'a string':
      return { text: o.text };
    case 'an empty string':
      return { text: '' };
    default:
      return { readable: true };
  }
}

// ---------------------------------------------------------------------------
// What a `retryable` predicate answers.

/** A predicate's behaviour, by name: what it returns, or throws. */
const VERDICTS = [
  'true',
  'false',
  'a string',
  'an empty string',
  'a number',
  'zero',
  'NaN',
  'an object',
  'an array',
  'null',
  'undefined',
  'a BigInt',
  'a Symbol',
  'a function',
  'a Boolean object',
  'a Promise of true',
  'a Promise of false',
  'a rejected Promise',
  'a Promise that never settles',
  'a thenable that rejects',
  'a thenable whose then throws',
  'a Proxy whose every trap throws',
  'an Error whose getters throw',
  'an object with a null prototype',
  'throws an Error',
  'throws a string',
  'throws undefined',
  'throws a Proxy whose every trap throws',
  'throws an Error whose getters throw',
] as const;
type Verdict = (typeof VERDICTS)[number];

/** Answers as `v` says (or throws). */
function answer(v: Verdict): unknown {
  switch (v) {
    case 'true':
      return true;
    case 'false':
      return false;
    case 'a string':
      return 'yes';
    case 'an empty string':
      return '';
    case 'a number':
      return 1;
    case 'zero':
      return 0;
    case 'NaN':
      return NaN;
    case 'an object':
      return { retry: true };
    case 'an array':
      return [true];
    case 'null':
      return null;
    case 'undefined':
      return undefined;
    case 'a BigInt':
      return 1n;
    case 'a Symbol':
      return Symbol('true');
    case 'a function':
      return () => true;
    case 'a Boolean object':
      return new Boolean(true);
    case 'a Promise of true':
      return Promise.resolve(true);
    case 'a Promise of false':
      return Promise.resolve(false);
    case 'a rejected Promise':
      return Promise.reject(new Error('the lookup failed'));
    case 'a Promise that never settles':
      return new Promise<never>(() => undefined);
    case 'a thenable that rejects':
      return { then: (_resolve: unknown, reject: (e: unknown) => void) => reject(new Error('the thenable refuses')) };
    case 'a thenable whose then throws':
      return {
        then: () => {
          throw new Error('then throws');
        },
      };
    case 'a Proxy whose every trap throws':
      return everyTrapThrows();
    case 'an Error whose getters throw':
      return getterHostileError();
    case 'an object with a null prototype':
      return nullPrototype();
    case 'throws an Error':
      throw new Error('the predicate failed');
    case 'throws a string':
      throw 'the predicate failed';
    case 'throws undefined':
      throw undefined;
    case 'throws a Proxy whose every trap throws':
      throw everyTrapThrows();
    case 'throws an Error whose getters throw':
      throw getterHostileError();
  }
}

const verdict: fc.Arbitrary<Verdict> = fc.oneof(
  { arbitrary: fc.constantFrom<Verdict>('true', 'false'), weight: 3 },
  { arbitrary: fc.constantFrom(...VERDICTS), weight: 2 },
);

/** A first call that fails: throws (anything) or throws a NonRetryableError. */
const failure: fc.Arbitrary<Outcome> = fc.oneof(
  { arbitrary: fc.record({ settle: fc.constant('throw' as const), timing, thrown: fc.constantFrom(...THROWN), text: errorText }), weight: 5 },
  { arbitrary: fc.record({ settle: fc.constant('nonRetryable' as const), timing, text: errorText }), weight: 1 },
);

// ---------------------------------------------------------------------------
// What `rr.publish` is given.

/** How a publish must end: sent, refused by the client (`INVALID_OPTIONS`), or refused by the broker. */
type Ending = 'sent' | 'client' | 'broker';

/** A JSON value whose strings are any code points (no lone surrogate halves). */
const plainJson = (maxDepth: number) => fc.jsonValue({ maxDepth, stringUnit: 'binary' });

/** Publish options that are all valid. */
const validOptions: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    messageId: shortText,
    correlationId: shortText,
    contentType: mimeish,
    contentEncoding: mimeish,
    type: shortText,
    appId: shortText,
    replyTo: shortText,
    userId: fc.constant(BROKER.user),
    priority: fc.nat(255),
    timestamp: fc.oneof(fc.nat({ max: 2 ** 32 }), fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true })),
    expiration: fc.integer({ min: 3_600_000, max: 2 ** 31 - 1 }).chain((n) => fc.constantFrom<number | string>(n, String(n))),
    persistent: fc.boolean(),
    // JSON values under names of at most 255 bytes; a name whose value is undefined is left out.
    headers: fc
      .dictionary(headerName, fc.oneof({ arbitrary: plainJson(2), weight: 5 }, { arbitrary: fc.constant(undefined), weight: 1 }), {
        maxKeys: 5,
        noNullPrototype: true,
      })
      .filter((h) => !JSON.stringify(h).includes('"__proto__"')),
  },
  { requiredKeys: [] },
);

/** One option that spoils a publish: its name, its value, and who refuses it. */
const fault: fc.Arbitrary<{ key: string; value: unknown; ends: Ending }> = fc.oneof(
  fc.record({
    key: fc.constantFrom('messageId', 'correlationId', 'contentType', 'contentEncoding', 'type', 'appId', 'replyTo', 'userId'),
    value: fc.oneof(fc.string({ unit: 'grapheme-ascii', minLength: 256, maxLength: 300 }), fc.constantFrom<unknown>(null, 5, true, ['id'], { id: 1 })),
    ends: fc.constant<Ending>('client'),
  }),
  fc.record({ key: fc.constant('userId'), value: fc.constant('rr-somebody-else'), ends: fc.constant<Ending>('broker') }),
  fc.record({ key: fc.constant('priority'), value: fc.constantFrom<unknown>(-1, 256, 1.5, '5', NaN), ends: fc.constant<Ending>('client') }),
  fc.record({
    key: fc.constant('timestamp'),
    value: fc
      .constantFrom<() => unknown>(
        () => -1,
        () => NaN,
        () => Infinity,
        () => 'now',
        () => new Date(NaN),
        () => new Date(-5000),
      )
      .map((f) => f()),
    ends: fc.constant<Ending>('client'),
  }),
  fc.record({ key: fc.constant('expiration'), value: fc.constantFrom<unknown>(-1, 1.5, true), ends: fc.constant<Ending>('client') }),
  fc.record({ key: fc.constant('expiration'), value: fc.constantFrom<unknown>('abc', '-5', 2 ** 40), ends: fc.constant<Ending>('broker') }),
  // The headers the broker routes by must be arrays.
  fc.record({ key: fc.constant('headers'), value: fc.constantFrom<unknown>({ CC: 5 }, { BCC: 'q' }), ends: fc.constant<Ending>('broker') }),
  fc.record({ key: fc.constant('persistent'), value: fc.constantFrom<unknown>('yes', 1, null), ends: fc.constant<Ending>('client') }),
  fc.record({
    key: fc.constant('headers'),
    value: fc
      .constantFrom<() => unknown>(
        () => null,
        () => [],
        () => 'tenant=acme',
        () => Buffer.from('h'),
        () => ({ ratio: NaN }),
        () => ({ ratio: Infinity }),
        () => ({ list: [undefined] }),
        () => ({ call: () => 1 }),
        () => ({ bytes: Buffer.from([1]) }),
        () => ({ ['k'.repeat(256)]: 1 }),
        () => ({ nested: { ['é'.repeat(128)]: 1 } }),
      )
      .map((f) => f()),
    ends: fc.constant<Ending>('client'),
  }),
  // Not options of publish.
  fc.record({
    key: fc.constantFrom('deliveryMode', 'messageID', 'mandatory', 'persistant'),
    value: fc.constantFrom<unknown>(2, 'x', true),
    ends: fc.constant<Ending>('client'),
  }),
);

/** Publish options, valid or with one option that spoils them, and how the publish must end. */
const publishOptions: fc.Arbitrary<{ options: Record<string, unknown>; ends: Ending }> = fc
  .tuple(validOptions, fc.oneof({ arbitrary: fc.constant(null), weight: 3 }, { arbitrary: fault, weight: 2 }))
  .map(([options, f]) => (f === null ? { options, ends: 'sent' } : { options: { ...options, [f.key]: f.value }, ends: f.ends }));

/** A body, and how it must arrive. */
interface BodyCase {
  body: unknown;
  /** Its bytes on the wire; `undefined` when the client must refuse it. */
  bytes?: Buffer;
  /** The content type the client sets when the options give none. */
  contentType?: string;
}

const bodyCase: fc.Arbitrary<BodyCase> = fc.oneof(
  // A string is sent as text, any other value as JSON.
  {
    arbitrary: plainJson(3).map((v): BodyCase =>
      typeof v === 'string'
        ? { body: v, bytes: Buffer.from(v, 'utf8'), contentType: 'text/plain' }
        : { body: v, bytes: Buffer.from(JSON.stringify(v), 'utf8'), contentType: 'application/json' },
    ),
    weight: 3,
  },
  {
    arbitrary: fc
      .string({ unit: 'grapheme', maxLength: 40 })
      .map((v): BodyCase => ({ body: v, bytes: Buffer.from(v, 'utf8'), contentType: 'text/plain' })),
    weight: 2,
  },
  { arbitrary: fc.uint8Array({ maxLength: 64 }).map((a): BodyCase => ({ body: Buffer.from(a), bytes: Buffer.from(a) })), weight: 2 },
  { arbitrary: fc.uint8Array({ maxLength: 64 }).map((a): BodyCase => ({ body: a, bytes: Buffer.from(a) })), weight: 1 },
  // Not a body: refused.
  { arbitrary: fc.constantFrom<BodyCase>({ body: undefined }, { body: Symbol('body') }, { body: () => 1 }), weight: 1 },
);

/** The codes an error of the library can have (lib/errors.ts). */
const ERROR_CODES = [
  'NON_RETRYABLE',
  'NO_HANDLER',
  'UNSUPPORTED_OPTION',
  'TOPOLOGY_MISMATCH',
  'UNROUTABLE',
  'PUBLISH_NACKED',
  'PUBLISH_FAILED',
  'CONNECTION',
  'INVALID_OPTIONS',
  'CLOSED',
  'RETRY_TABLE',
  'REPLY_REFUSED',
  'ACCESS_REFUSED',
  'NOT_FOUND',
  'PRECONDITION_FAILED',
];

// ---------------------------------------------------------------------------

describe('properties of the failure path', () => {
  beforeEach(() => void hazards.splice(0));

  it('hostile producers and handlers: every message is acked after a success or parked once, as it came', async () => {
    const logger = recordingLogger();
    const rr = await connectClient({ logger });

    const message = fc.record({
      properties: producerProperties,
      headers: producerHeaders,
      body,
      // What the first and the second call do.
      outcomes: fc.tuple(outcome, outcome),
    });

    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 5 }), fc.integer({ min: 1, max: 4 }), async (messages, prefetch) => {
        hazards.splice(0);
        logger.errors.splice(0);
        const byId = new Map(messages.map((m, i) => [`m${i}`, m]));
        const expected = new Map<string, Expected>();
        for (const [id, m] of byId) {
          const e = follow(attemptFrom(m.headers['retry-attempt']), (call) => {
            const o = m.outcomes[Math.min(call, 1)];
            return o.settle === 'succeed' ? 'ack' : o.settle === 'nonRetryable' ? 'non-retryable' : 'retryable';
          });
          const last = e.end.acked ? undefined : lastErrorOf(m.outcomes[Math.min(e.attempts.length - 1, 1)]);
          expected.set(id, { ...e, lastError: last });
        }

        await withRun(
          rr,
          { prefetch },
          (id, msg) => {
            const m = byId.get(id);
            if (!m) throw new Error(`a message that was not published: ${id}`);
            const calls = (msg.attempt - attemptFrom(m.headers['retry-attempt'])) | 0;
            return perform(m.outcomes[Math.min(Math.max(calls, 0), 1)]);
          },
          async (run) => {
            // Published by another client, on a connection of its own, with publisher confirms and mandatory set.
            const returned: string[] = [];
            const conn = await amqp.connect(AMQP_URL);
            try {
              const ch = await conn.createConfirmChannel();
              ch.on('return', (r: { properties: { headers?: Record<string, unknown> } }) => returned.push(String(r.properties.headers?.[LEDGER])));
              for (const [id, m] of byId) {
                const options: Options.Publish = { ...m.properties, mandatory: true, headers: { ...m.headers, [LEDGER]: id } };
                ch.publish('', run.queue, m.body, options);
              }
              await ch.waitForConfirms();
            } finally {
              await conn.close().catch(() => undefined);
            }
            expect(returned).toEqual([]);

            const { parked, stats } = await settle(run, byId.size);
            const moved = checkLedger(run.queue, expected, run.seen, parked);

            // The counts agree with the ledger.
            const ends = [...expected.values()];
            expect({ acked: stats.acked, parked: stats.parked, retried: stats.retried, publishFailed: stats.publishFailed }).toEqual({
              acked: ends.filter((e) => e.end.acked).length,
              parked: ends.filter((e) => !e.end.acked).length,
              retried: ends.reduce((n, e) => n + e.attempts.length - 1, 0),
              publishFailed: 0,
            });

            // A parked copy is the message as it came: its body, its properties (but expiration) and its headers (but the library's own).
            for (const [id, copy] of moved) {
              const m = byId.get(id);
              if (!m) continue;
              expect({ id, body: copy.content.toString('hex') }).toEqual({ id, body: m.body.toString('hex') });
              const { expiration: _dropped, ...kept } = m.properties;
              const props: Record<string, unknown> = {};
              for (const key of Object.keys(kept)) props[key] = (copy.properties as unknown as Record<string, unknown>)[key];
              expect({ id, properties: props }).toEqual({ id, properties: kept });
              expect(copy.properties.expiration).toBeUndefined();
              const sent = amqpRoundTrip(m.headers);
              const userHeaders = (h: Record<string, unknown>) =>
                Object.fromEntries(Object.entries(h).filter(([k]) => !isLibraryHeader(k) && k !== LEDGER));
              expect({ id, headers: userHeaders(copy.headers) }).toEqual({ id, headers: userHeaders(sent) });
            }

            expect(run.alarms).toEqual({ disconnected: [], errors: [], publishFailed: [] });
            expect(logger.errors).toEqual([]);
            expect(hazards).toEqual([]);
          },
        );
      }),
      params(30),
    );
  }, 200_000);

  it('whatever retryable answers: true retries, anything else parks as non-retryable (with a warning unless false), once', async () => {
    const logger = recordingLogger();
    const rr = await connectClient({ logger });

    const message = fc.record({
      // What the first call throws, and what the second does.
      outcomes: fc.tuple(failure, outcome),
      // What the predicate answers at attempt 0 and at attempt 1.
      verdicts: fc.tuple(verdict, verdict),
    });

    await fc.assert(
      fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 4 }), fc.integer({ min: 1, max: 4 }), async (messages, prefetch) => {
        hazards.splice(0);
        logger.errors.splice(0);
        logger.warnings.splice(0);
        const byId = new Map(messages.map((m, i) => [`m${i}`, m]));
        const expected = new Map<string, Expected>();
        /** Predicate calls per message, as the rules give them: one for each failure that is not a NonRetryableError. */
        const expectedAsks = new Map<string, number>();
        let anyNonBoolean = false;
        for (const [id, m] of byId) {
          let asks = 0;
          const e = follow(0, (call) => {
            const o = m.outcomes[Math.min(call, 1)];
            if (o.settle === 'succeed') return 'ack';
            if (o.settle === 'nonRetryable') return 'non-retryable';
            asks++;
            const v = m.verdicts[Math.min(call, 1)];
            if (v !== 'true' && v !== 'false') anyNonBoolean = true;
            return v === 'true' ? 'retryable' : 'non-retryable';
          });
          expectedAsks.set(id, asks);
          const last = e.end.acked ? undefined : lastErrorOf(m.outcomes[Math.min(e.attempts.length - 1, 1)]);
          expected.set(id, { ...e, lastError: last });
        }

        const asked = new Map<string, number>();
        const retryable = (_err: unknown, msg: Message): boolean => {
          const id = String(msg.headers[LEDGER]);
          asked.set(id, (asked.get(id) ?? 0) + 1);
          const m = byId.get(id);
          if (!m) return true;
          return answer(m.verdicts[Math.min(msg.attempt, 1)]) as boolean;
        };

        await withRun(
          rr,
          { prefetch, retryable },
          (id, msg) => {
            const m = byId.get(id);
            if (!m) throw new Error(`a message that was not published: ${id}`);
            return perform(m.outcomes[Math.min(msg.attempt, 1)]);
          },
          async (run) => {
            for (const id of byId.keys()) await rr.publish('', run.queue, { id }, { messageId: id, headers: { [LEDGER]: id } });
            const { parked, stats } = await settle(run, byId.size);
            checkLedger(run.queue, expected, run.seen, parked);
            expect(Object.fromEntries(asked)).toEqual(Object.fromEntries([...expectedAsks].filter(([, n]) => n > 0)));

            const ends = [...expected.values()];
            expect({ acked: stats.acked, parked: stats.parked, retried: stats.retried, publishFailed: stats.publishFailed }).toEqual({
              acked: ends.filter((e) => e.end.acked).length,
              parked: ends.filter((e) => !e.end.acked).length,
              retried: ends.reduce((n, e) => n + e.attempts.length - 1, 0),
              publishFailed: 0,
            });

            // A non-boolean answer, or a throw, is named in a warning; true and false are not.
            const warned = logger.warnings.filter((w) => w.includes('onFailure.retryable'));
            if (anyNonBoolean) expect(warned.length).toBeGreaterThan(0);
            else expect(warned).toEqual([]);

            expect(run.alarms).toEqual({ disconnected: [], errors: [], publishFailed: [] });
            expect(logger.errors).toEqual([]);
            // A rejected Promise the predicate returned surfaces within a turn or two.
            await sleep(20);
            expect(hazards).toEqual([]);
          },
        );
      }),
      params(30),
    );
  }, 200_000);

  it('rr.publish: a message sent arrives as it was given; one refused has a stable code and is not sent', async () => {
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const queue = testQueue(['1m']);
    const got: Message[] = [];
    const consumer = track(await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, (msg: Message) => void got.push(msg)));
    const alarms = alarmsOf(consumer);
    let round = 0;

    await fc.assert(
      fc.asyncProperty(bodyCase, publishOptions, async (b, { options, ends }) => {
        hazards.splice(0);
        round++;
        const expected: Ending = b.bytes === undefined || ends === 'client' ? 'client' : ends;

        const before = got.length;
        let result: { sent: true } | { sent: false; error: unknown };
        try {
          await rr.publish('', queue, b.body as Parameters<RabbitRetry['publish']>[2], options);
          result = { sent: true };
        } catch (error) {
          result = { sent: false, error };
        }
        // Everything published before it is in the queue ahead of it: what arrives before it is what this round sent.
        const sentinel = `sentinel-${round}`;
        await rr.publish('', queue, 'sentinel', { messageId: sentinel });
        await waitFor(() => got.slice(before).some((m) => m.properties.messageId === sentinel), 10_000, `the sentinel of round ${round}`);
        const arrived = got.slice(
          before,
          got.findIndex((m, i) => i >= before && m.properties.messageId === sentinel),
        );

        if (expected !== 'sent') {
          expect(result.sent).toBe(false);
          const code = result.sent ? undefined : (result.error as { code?: unknown } | undefined)?.code;
          expect(ERROR_CODES).toContain(code);
          if (expected === 'client') expect(code).toBe('INVALID_OPTIONS');
          // What the broker refuses by closing the channel is refused before it is sent, with its reason.
          else expect(code).toBe('PRECONDITION_FAILED');
          expect(arrived.length).toBe(0);
        } else {
          if (!result.sent) throw new Error(`refused: ${inWords(result.error)}`);
          expect(arrived.length).toBe(1);
          const m = arrived[0];
          expect(m.body.toString('hex')).toBe(b.bytes?.toString('hex'));
          const p = m.properties;
          for (const key of ['messageId', 'correlationId', 'contentEncoding', 'type', 'appId', 'replyTo', 'userId', 'priority'] as const) {
            expect({ key, value: p[key] }).toEqual({ key, value: options[key] });
          }
          expect(p.contentType).toBe(options.contentType ?? b.contentType);
          const ts = options.timestamp;
          expect(p.timestamp).toBe(ts instanceof Date ? Math.floor(ts.getTime() / 1000) : ts);
          expect(p.expiration).toBe(options.expiration === undefined ? undefined : String(options.expiration as number | string));
          expect(p.deliveryMode).toBe(options.persistent === false ? 1 : 2);
          const headers = options.headers === undefined ? {} : (JSON.parse(JSON.stringify(options.headers)) as Record<string, unknown>);
          expect(m.headers).toEqual(headers);
        }
        expect(alarms).toEqual({ disconnected: [], errors: [], publishFailed: [] });
        expect(consumer.state).toBe('connected');
        expect(hazards).toEqual([]);
      }),
      params(50),
    );
    expect(await queueDepth(queue)).toBe(0);
  }, 200_000);
});
