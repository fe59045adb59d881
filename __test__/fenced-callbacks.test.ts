/**
 * Every callback a user hands rabbit-retry, fed the same table of bad
 * behaviours (__test__/fixtures/bad-callbacks.ts): throws and rejections of
 * hostile values, answers of the wrong kind, no answer, a late answer. For
 * each, the process stays alive (no unhandled rejection), the callback's
 * defined outcome happens, and a later well-behaved call works. Those that
 * need a broker (or the retry table's PostgreSQL) use the real ones.
 *
 * An unhandled rejection fails the test during which it fires: Jest's runner
 * listens for them on the real process (a listener on the test's `process`,
 * a copy, would hear nothing). The last test runs every callback kind with
 * every row in a child process under Node's defaults, with listeners that
 * end it with exit code 3 on an unhandled rejection and 4 on an uncaught
 * exception.
 */
import 'reflect-metadata';

import path from 'node:path';

import { ConsoleLogger, Logger } from '@nestjs/common';
import type { ConsumerDeserializer, ProducerDeserializer } from '@nestjs/microservices';
import { firstValueFrom, lastValueFrom } from 'rxjs';

import { InvalidOptionsError, Message, NonRetryableError, parkedQueueName, retryQueueName } from '../lib';
import type { CircuitOpenEvent, ParkedAlert, RetryEvent, RetryTableAlert } from '../lib';
import { AlertWatch } from '../lib/consumer/alerts';
import { FailureReporter } from '../lib/consumer/failure';
import { logTo } from '../lib/support/log';
import { BOOLEAN, fence, fenceSync } from '../lib/support/fence';
import { RabbitRetryClient, RabbitRetryServer } from '../lib/microservices';
import { selects } from '../lib/parked';
import { subscribePlan } from '../lib/nestjs/subscribe';
import { BAD_CALLBACKS, type BadCallback, switchable } from './fixtures/bad-callbacks';
import { amqpConnection } from './broker';
import {
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  dropTestDatabase,
  pgUrl,
  queueDepth,
  recordingLogger,
  seedParked,
  sleep,
  startScript,
  testQueue,
  track,
  uniqueName,
  waitFor,
  waitForOne,
} from './helpers';
import { QuietLogger } from './nest-boot';

afterEach(async () => {
  // A late rejection surfaces within a few turns, and fails the test that caused it.
  await sleep(50);
  await cleanup();
});
afterAll(closeAmqp);

/** The table as `it.each` takes it. */
const ROWS: [string, BadCallback][] = BAD_CALLBACKS.map((b) => [b.label, b]);

/** Whether the row ends a synchronous callback with a throw (everything else returns something). */
const throwsNow = (b: BadCallback) => b.kind === 'throws';

/** A message, for the callbacks that take one. */
function message(body = '{"id":1}'): Message {
  const bytes = Buffer.from(body, 'utf8');
  return new Message({
    exchange: '',
    routingKey: 'orders',
    redelivered: false,
    deliveryTag: 1,
    attempt: 0,
    properties: { messageId: 'm-1', headers: {} },
    bytes,
    start: 0,
    end: bytes.length,
  });
}

/** Runs `f`; what it threw, or `'returned'`. */
function outcome(f: () => unknown): { threw: true; error: unknown } | { threw: false; value: unknown } {
  try {
    return { threw: false, value: f() };
  } catch (error) {
    return { threw: true, error };
  }
}

describe('the fence itself', () => {
  it.each(ROWS)('%s: fenceSync and fence end with a defined failure, never a throw or a rejection', async (_label, bad) => {
    const sync = fenceSync('cb', bad.make(100), { expect: BOOLEAN });
    expect(sync.ok).toBe(false);
    if (!sync.ok) {
      expect(sync.failure).toBe(throwsNow(bad) ? 'threw' : 'unexpected');
      expect(typeof sync.problem).toBe('string');
      expect(sync.problem).toMatch(/^cb (threw|returned) /);
    }
    const started = Date.now();
    const async = await fence('cb', bad.make(100), { expect: BOOLEAN, timeoutMs: 100 });
    expect(async.ok).toBe(false);
    if (!async.ok) {
      const expected = { throws: ['threw'], rejects: ['rejected'], hangs: ['timedOut'], late: ['timedOut'], returns: ['unexpected', 'rejected'] }[
        bad.kind
      ];
      expect(expected).toContain(async.failure);
      expect(typeof async.problem).toBe('string');
    }
    // Bounded: a callback that does not answer counts as failed after the bound.
    expect(Date.now() - started).toBeLessThan(1000);
    // A later well-behaved call.
    expect(fenceSync('cb', () => true, { expect: BOOLEAN })).toEqual({ ok: true, value: true });
    expect(await fence('cb', async () => false, { expect: BOOLEAN })).toEqual({ ok: true, value: false });
  });
});

describe('onFailure.retryable', () => {
  it.each(ROWS)('%s: the message parks as non-retryable with a warning, and a later true retries', async (_label, bad) => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const retryable = switchable(bad.make(0) as (err: unknown, msg: Message) => boolean);
    track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'], retryable: retryable.call } }, async (msg) => {
        throw new Error(`carrier down for ${msg.properties.messageId ?? '?'}`);
      }),
    );
    await rr.publish('', queue, { n: 1 }, { messageId: 'bad' });
    const parked = await waitForOne(parkedQueueName(queue));
    expect(parked.properties.messageId).toBe('bad');
    expect(parked.headers['retry-reason']).toBe('non-retryable');
    expect(logger.warnings.join('\n')).toMatch(/onFailure\.retryable (of queue '[^']+' returned|threw)/);

    retryable.set(() => true);
    await rr.publish('', queue, { n: 2 }, { messageId: 'good' });
    const retried = await waitForOne(retryQueueName(queue, '1m'));
    expect(retried.properties.messageId).toBe('good');
    expect(retried.headers['retry-attempt']).toBe(1);
  });
});

describe('onFailure.table callbacks', () => {
  it.each(ROWS)('%s: the row gets the default, with a warning, and later answers are used', (_label, bad) => {
    const logger = recordingLogger();
    const dependency = switchable(bad.make(0) as (err: unknown, msg: Message) => string | undefined);
    const tenant = switchable(bad.make(0) as (msg: Message) => string | undefined);
    const nextAttemptAt = switchable(bad.make(0) as (err: unknown, attempt: number) => Date | null);
    const route = new FailureReporter({
      queue: 'orders',
      retryable: () => true,
      table: { dependency: dependency.call, tenant: tenant.call, nextAttemptAt: nextAttemptAt.call },
      log: logTo(logger),
    });
    const before = Date.now();
    const failure = route.failureOf(new Error('carrier down'), message(), { table: true });
    expect(failure.kind).toBe('retryable');
    // A string is what dependency and tenant should return: that row is the one that is not bad for them.
    const aString = bad.label === 'returns a string';
    expect(failure.table?.dependency).toBe(aString ? 'yes' : undefined);
    expect(failure.table?.tenant).toBe(aString ? 'yes' : undefined);
    expect(failure.table?.nextAttemptAtMs).toBeGreaterThanOrEqual(before + 60_000);
    const warnings = logger.warnings.join('\n');
    expect(warnings).toMatch(/onFailure\.table\.nextAttemptAt (threw|returned)/);
    if (!aString) expect(warnings).toMatch(/onFailure\.table\.dependency (threw|returned)/);
    if (!aString) expect(warnings).toMatch(/onFailure\.table\.tenant (threw|returned)/);

    const due = new Date(Date.now() + 5_000);
    dependency.set(() => 'carrier');
    tenant.set(() => 'acme');
    nextAttemptAt.set(() => due);
    expect(route.failureOf(new Error('carrier down'), message(), { table: true }).table).toEqual({
      dependency: 'carrier',
      tenant: 'acme',
      nextAttemptAtMs: due.getTime(),
    });
  });
});

describe('onFailure.circuit.check', () => {
  const PROBE_MS = 200;

  it.each(ROWS)('%s: counts as failed, the circuit probes again on schedule, and a later check that passes closes it', async (_label, bad) => {
    const queue = testQueue(['10s']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    let down = true;
    const calls: number[] = [];
    const misbehave = bad.make(PROBE_MS);
    const check = switchable<() => unknown>(() => {
      calls.push(Date.now());
      return misbehave();
    });
    const consumer = track(
      await rr.consume(
        {
          queue,
          prefetch: 1,
          onFailure: {
            delays: ['10s'],
            circuit: { openAfter: { failures: 1, within: '10s' }, probeEvery: `${PROBE_MS}ms`, check: check.call as () => boolean },
          },
        },
        async () => {
          if (down) throw new Error('carrier down');
        },
      ),
    );
    const opened: CircuitOpenEvent[] = [];
    let closed = 0;
    consumer.on('circuitOpen', (e) => opened.push(e));
    consumer.on('circuitClosed', () => closed++);
    await rr.publish('', queue, { n: 1 }, { messageId: 'm' });
    await waitFor(() => opened.length >= 1, 10_000, 'the circuit to open');

    await waitFor(() => calls.length >= 3, 10_000, 'three checks');
    // Each failed check opened it again, and the next check came on schedule: a bound and a period at most.
    await waitFor(() => opened.filter((e) => e.cause === 'probe').length >= 2, 5_000, 'two failed checks');
    const gaps = calls.slice(1).map((t, i) => t - calls[i]);
    for (const gap of gaps) expect(gap).toBeLessThan(2 * PROBE_MS + 600);
    expect(closed).toBe(0);
    expect(consumer.health().circuit?.state).not.toBe('closed');
    expect(logger.warnings.join('\n')).toMatch(
      /onFailure\.circuit\.check\) of the circuit of '[^']+' (threw|rejected|returned|did not answer).*; it counts as failed/,
    );

    down = false;
    check.set(() => true);
    await waitFor(() => closed === 1, 10_000, 'a passing check to close the circuit');
    expect(consumer.health().circuit?.state).toBe('closed');
  });
});

describe('retryTable.pauseWhen', () => {
  const EVERY_MS = 200;
  let db = '';
  let url = '';

  beforeAll(() => {
    db = createTestDatabase('fence');
    url = pgUrl(db);
  });
  afterAll(() => {
    if (db) dropTestDatabase(db);
  });

  it.each(ROWS)('%s as the check: counts as a failed check, checks go on on schedule, and a later passing check resumes', async (_label, bad) => {
    const logger = recordingLogger();
    const rr = await connectClient({ logger, retryTable: { url, scheduler: false } });
    const dependency = uniqueName('dep');
    const calls: number[] = [];
    const misbehave = bad.make(EVERY_MS);
    const check = switchable<() => unknown>(() => {
      calls.push(Date.now());
      return misbehave();
    });
    const changes: boolean[] = [];
    const watch = rr.retryTable.pauseWhen(dependency, check.call as () => boolean, {
      every: `${EVERY_MS}ms`,
      failuresBeforePause: 2,
      onChange: (e) => changes.push(e.paused),
    });
    try {
      await waitFor(() => changes.length === 1, 10_000, 'the pause');
      expect(changes).toEqual([true]);
      expect(watch.paused).toBe(true);
      await waitFor(() => calls.length >= 3, 10_000, 'three checks');
      const gaps = calls.slice(1).map((t, i) => t - calls[i]);
      for (const gap of gaps) expect(gap).toBeLessThan(EVERY_MS + 800);
      expect(logger.warnings.join('\n')).toMatch(
        /the check of retryTable\.pauseWhen\('[^']+'\) (threw|rejected|returned|did not answer).*; it counts as a failed check/,
      );

      check.set(() => true);
      await waitFor(() => changes.length === 2, 10_000, 'the resume');
      expect(changes).toEqual([true, false]);
      expect(watch.paused).toBe(false);
      expect(await rr.retryTable.isPaused({ dependency })).toBe(false);
    } finally {
      watch.stop();
    }
  });

  it("under Node's defaults, in a process of its own, no callback kind fed any row ends the process", async () => {
    const script = startScript(path.join(__dirname, 'fixtures', 'fenced-process.ts'), [testQueue(['1m']), testQueue(['1m']), url]);
    const read = new Promise((resolve) => script.child.stdout.once('close', resolve));
    const timer = setTimeout(() => script.child.kill('SIGKILL'), 150_000);
    const { code } = await script.exited;
    await read;
    clearTimeout(timer);
    expect({ code, stderr: script.stderr() }).toEqual({ code: 0, stderr: '' });
    expect(script.stdout()).toMatch(/circuit check\npauseWhen check and onChange\nevent listeners\nok\n$/);
  }, 160_000);

  it.each(ROWS)('%s as onChange: the watch pauses and resumes all the same, and a later onChange is called', async (_label, bad) => {
    const logger = recordingLogger();
    const rr = await connectClient({ logger, retryTable: { url, scheduler: false } });
    const dependency = uniqueName('dep');
    let healthy = false;
    const seen: boolean[] = [];
    const onChange = switchable<(e: { paused: boolean }) => unknown>(bad.make(EVERY_MS));
    const watch = rr.retryTable.pauseWhen(dependency, () => healthy, {
      every: `${EVERY_MS}ms`,
      failuresBeforePause: 1,
      onChange: onChange.call,
    });
    try {
      await waitFor(async () => await rr.retryTable.isPaused({ dependency }), 10_000, 'the pause');
      await waitFor(() => watch.paused, 5_000, 'the watch to say paused');
      if (bad.kind === 'throws' || bad.kind === 'rejects') {
        await waitFor(
          () => /the onChange of retryTable\.pauseWhen\('[^']+'\) (threw|returned a Promise that rejected)/.test(logger.warnings.join('\n')),
          5_000,
          'the warning',
        );
      }
      onChange.set((e) => seen.push(e.paused));
      healthy = true;
      await waitFor(() => seen.length === 1, 10_000, 'the resume');
      expect(seen).toEqual([false]);
      expect(watch.paused).toBe(false);
    } finally {
      watch.stop();
    }
  });
});

describe('alert.onAlert and alert.onTableAlert', () => {
  it.each(ROWS)('%s: the alert is still emitted, the checks go on, and the next crossing reaches a later callback', async (_label, bad) => {
    const logger = recordingLogger();
    let depth = 5;
    let age = 10_000;
    const emitted: string[] = [];
    const onAlert = switchable<(a: ParkedAlert) => unknown>(bad.make(0));
    const onTableAlert = switchable<(a: RetryTableAlert) => unknown>(bad.make(0));
    const watch = new AlertWatch(
      { parkedAbove: 1, oldestDueAboveMs: 1_000, everyMs: 30, onAlert: onAlert.call, onTableAlert: onTableAlert.call },
      { queue: 'orders', parkedDepth: async () => depth, oldestDueAge: async () => age, emit: (event) => emitted.push(event), log: logTo(logger) },
    );
    try {
      await waitFor(() => emitted.includes('alert') && emitted.includes('tableAlert'), 5_000, 'both alerts');
      if (bad.kind === 'throws' || bad.kind === 'rejects') {
        const warned = () => logger.warnings.join('\n');
        await waitFor(() => /alert\.onAlert of queue 'orders' (threw|returned a Promise that rejected)/.test(warned()), 5_000, 'the onAlert warning');
        await waitFor(
          () => /alert\.onTableAlert of queue 'orders' (threw|returned a Promise that rejected)/.test(warned()),
          5_000,
          'the onTableAlert warning',
        );
      }
      const got: string[] = [];
      onAlert.set((a) => got.push(`alert ${a.depth}`));
      onTableAlert.set((a) => got.push(`tableAlert ${a.oldestDueAgeMs}`));
      // Back under the thresholds (re-armed), then over them again.
      depth = 0;
      age = 0;
      await sleep(100);
      depth = 7;
      age = 20_000;
      await waitFor(() => got.length === 2, 5_000, 'the next crossing');
      expect(got.sort()).toEqual(['alert 7', 'tableAlert 20000']);
    } finally {
      watch.stop();
    }
  });
});

describe('the logger', () => {
  it.each(ROWS)('%s as warn and error: logging never throws, and a later logger gets the lines', async (_label, bad) => {
    const lines: string[] = [];
    const warn = switchable<(m: string) => unknown>(bad.make(0));
    const error = switchable<(m: string) => unknown>(bad.make(0));
    const log = logTo({ warn: warn.call, error: error.call });
    expect(() => log('warn', 'first')).not.toThrow();
    expect(() => log('error', 'first')).not.toThrow();
    warn.set((m) => lines.push(`warn ${m}`));
    error.set((m) => lines.push(`error ${m}`));
    log('warn', 'second');
    log('error', 'second');
    expect(lines).toEqual(['warn second', 'error second']);
  });

  it.each(ROWS)('%s through a consumer: its messages are settled all the same', async (_label, bad) => {
    const queue = testQueue([]);
    const misbehave = bad.make(0);
    const rr = await connectClient({ logger: { warn: misbehave, error: misbehave } });
    // `retryable` answering a string makes the consumer warn for each message.
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: [], retryable: () => 'no' as unknown as boolean } }, async () => {
        throw new Error('bad order');
      }),
    );
    await rr.publish('', queue, { n: 1 }, { messageId: 'a' });
    await rr.publish('', queue, { n: 2 }, { messageId: 'b' });
    await waitFor(() => consumer.stats().parked === 2, 10_000, 'both parked');
  });
});

describe("a consumer's event listeners", () => {
  it.each(ROWS)("%s as a 'retry' listener: logged, consuming goes on, and a later listener hears the next", async (_label, bad) => {
    const queue = testQueue(['1m']);
    const logger = recordingLogger();
    const rr = await connectClient({ logger });
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: ['1m'] } }, async () => {
        throw new Error('carrier down');
      }),
    );
    const misbehave = bad.make(0);
    const listener = (e: RetryEvent) => misbehave(e);
    consumer.on('retry', listener);
    await rr.publish('', queue, { n: 1 }, { messageId: 'first' });
    await waitFor(() => consumer.stats().retried === 1, 10_000, 'the first retry');
    if (bad.kind === 'throws' || bad.kind === 'rejects') {
      await waitFor(() => /a 'retry' listener of the consumer of '[^']+' (threw|rejected)/.test(logger.errors.join('\n')), 5_000, 'the listener logged');
    }
    consumer.off('retry', listener);
    const heard: string[] = [];
    consumer.on('retry', (e) => heard.push(e.messageId ?? '?'));
    await rr.publish('', queue, { n: 2 }, { messageId: 'second' });
    await waitFor(() => heard.length === 1, 10_000, 'the second retry heard');
    expect(heard).toEqual(['second']);
    expect(await queueDepth(retryQueueName(queue, '1m'))).toBe(2);
  });
});

describe("@RabbitSubscribe's deserializer", () => {
  it.each(ROWS)('%s: a throw parks the message as non-retryable (or gives the text), anything else goes to the handler', (_label, bad) => {
    const deserializer = switchable<(body: Buffer, msg: Message) => unknown>(bad.make(0));
    const strict = subscribePlan({ queue: 'orders', deserializer: deserializer.call });
    const lenient = subscribePlan({ queue: 'orders', deserializer: deserializer.call, allowNonJsonMessages: true });
    const got = outcome(() => strict.body(message()));
    if (throwsNow(bad)) {
      expect(got.threw).toBe(true);
      if (got.threw) {
        expect(got.error).toBeInstanceOf(NonRetryableError);
        expect((got.error as Error).message).toMatch(/^the deserializer could not read the message: /);
      }
      expect(lenient.body(message())).toBe('{"id":1}');
    } else {
      expect(got.threw).toBe(false);
    }
    deserializer.set((body) => `read ${body.length} bytes`);
    expect(strict.body(message())).toBe('read 8 bytes');
  });
});

describe("a parked filter's where, and onProgress", () => {
  it.each(ROWS)('%s as where: a throw ends the call with it, any other answer with INVALID_OPTIONS; a later where selects', (_label, bad) => {
    const where = switchable<(m: unknown) => unknown>(bad.make(0));
    const filter = { where: where.call as (m: unknown) => boolean };
    const got = outcome(() => selects(filter, {} as never));
    expect(got.threw).toBe(true);
    if (got.threw && !throwsNow(bad)) {
      expect(got.error).toBeInstanceOf(InvalidOptionsError);
      expect((got.error as Error).message).toMatch(/^filter\.where returned .*, not true or false/);
    }
    where.set(() => true);
    expect(selects(filter, {} as never)).toBe(true);
    where.set(() => false);
    expect(selects(filter, {} as never)).toBe(false);
  });

  it.each(ROWS)('%s as onProgress: a throw ends the replay with it, anything else is ignored, and a later replay goes through', async (_label, bad) => {
    const queue = testQueue([]);
    await seedParked(queue, [{ messageId: 'p1' }, { messageId: 'p2' }]);
    const rr = await connectClient();
    const parked = rr.parked(queue);
    const first = await parked.replay({ limit: 1, onProgress: bad.make(0) }).then(
      (r) => ({ replayed: r.replayed }),
      () => 'rejected',
    );
    expect(first).toEqual(throwsNow(bad) ? 'rejected' : { replayed: 1 });
    const later: number[] = [];
    const second = await parked.replay({ onProgress: (p) => later.push(p.replayed) });
    expect(second.replayed).toBe(1);
    expect(later).toEqual([1]);
    expect(await queueDepth(queue)).toBe(2);
  });
});

describe('the serializers and deserializers of rabbit-retry/microservices', () => {
  jest.setTimeout(40_000);
  /** The fence's bound for them: 5 s. */
  const BOUND_MS = 5_000;
  const nest = new QuietLogger();
  const servers: RabbitRetryServer[] = [];
  const clients: RabbitRetryClient[] = [];

  beforeAll(() => Logger.overrideLogger(nest));
  afterAll(() => Logger.overrideLogger(new ConsoleLogger()));
  beforeEach(() => nest.lines.splice(0));
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
    for (const s of servers.splice(0)) await s.close().catch(() => undefined);
  });

  /** A listening server on `queue` with a `sum` request handler and an `order` event handler. */
  async function server(queue: string, options: Partial<ConstructorParameters<typeof RabbitRetryServer>[0]> = {}): Promise<{ events: unknown[] }> {
    const s = new RabbitRetryServer({ queue, onFailure: { delays: ['1m'] }, ...options });
    servers.push(s);
    const events: unknown[] = [];
    s.addHandler('sum', async (data: number[]) => data.reduce((a, b) => a + b, 0), false);
    s.addHandler(
      'order',
      async (data: unknown) => {
        events.push(data);
      },
      true,
    );
    await new Promise<void>((resolve, reject) => void s.listen((err?: unknown) => (err ? reject(err) : resolve())));
    return { events };
  }

  function client(options: ConstructorParameters<typeof RabbitRetryClient>[0]): RabbitRetryClient {
    const c = new RabbitRetryClient(options);
    clients.push(c);
    return c;
  }

  async function publishRaw(queue: string, body: unknown): Promise<void> {
    const ch = await (await amqpConnection()).createConfirmChannel();
    try {
      ch.sendToQueue(queue, Buffer.from(JSON.stringify(body)), { messageId: 'raw' });
      await ch.waitForConfirms();
    } finally {
      await ch.close();
    }
  }

  /** Resolves to the first reply of `send`, or `'no reply'` after `ms`. */
  async function firstReply(c: RabbitRetryClient, pattern: string, data: unknown, ms: number): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('no reply'), ms)));
    try {
      return await Promise.race([
        firstValueFrom(c.send(pattern, data)).then(
          (v: unknown) => ({ reply: v }),
          (e: unknown) => ({ error: e }),
        ),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  it.each(ROWS)("%s as the server's deserializer: the message parks, and a later deserializer's message is handled", async (_label, bad) => {
    const queue = testQueue(['1m']);
    const deserializer = switchable<(value: unknown, options?: Record<string, unknown>) => unknown>(
      bad.make(BOUND_MS, { pattern: 'order', data: 'late' }),
    );
    const { events } = await server(queue, { deserializer: { deserialize: deserializer.call as ConsumerDeserializer['deserialize'] } });
    await publishRaw(queue, { pattern: 'order', data: 'first' });
    const parked = await waitForOne(parkedQueueName(queue), BOUND_MS + 5_000);
    expect(['non-retryable', 'no-handler']).toContain(parked.headers['retry-reason']);
    expect(events).toEqual([]);

    deserializer.set((value) => value);
    await publishRaw(queue, { pattern: 'order', data: 'second' });
    await waitFor(() => events.length === 1, 10_000, 'the second message handled');
    expect(events).toEqual(['second']);
  });

  it.each(ROWS)("%s as the server's serializer: no reply (logged) or what it made, and a later serializer's reply arrives", async (_label, bad) => {
    const queue = testQueue(['1m']);
    const serializer = switchable<(packet: unknown) => unknown>(bad.make(BOUND_MS, { late: true }));
    await server(queue, { serializer: { serialize: serializer.call } });
    const c = client({ queue });
    const fails = bad.kind !== 'returns';
    const first = await firstReply(c, 'sum', [1, 2], fails ? BOUND_MS + 1_500 : 3_000);
    if (fails) {
      expect(first).toBe('no reply');
      expect(nest.lines.join('\n')).toMatch(
        /could not be serialized, so the caller gets none: the serializer of RabbitRetryServer (threw|rejected|did not answer)/,
      );
    }
    serializer.set((packet) => packet);
    expect(await firstReply(c, 'sum', [1, 2, 3], 10_000)).toEqual({ reply: 6 });
  });

  it.each(ROWS)("%s as the client's serializer: the emit fails (or sends what it made), and a later serializer's emit is handled", async (_label, bad) => {
    const queue = testQueue(['1m']);
    const { events } = await server(queue);
    const serializer = switchable<(packet: unknown) => unknown>(bad.make(BOUND_MS));
    const c = client({ queue, serializer: { serialize: serializer.call } });
    const first = await lastValueFrom(c.emit('order', 'first')).then(
      () => 'sent',
      (e: unknown) => ({ error: e }),
    );
    if (bad.kind === 'hangs' || bad.kind === 'late') {
      expect(first).toEqual({ error: expect.objectContaining({ message: `the serializer of RabbitRetryClient did not answer within ${BOUND_MS} ms` }) });
    } else if (bad.kind !== 'returns') {
      expect(first).not.toBe('sent');
    }
    serializer.set((packet) => packet);
    await lastValueFrom(c.emit('order', 'second'));
    await waitFor(() => events.includes('second'), 10_000, 'the second event handled');
  });

  it.each(ROWS)(
    "%s as the client's deserializer: the request ends (with an error, or what it made), and a later deserializer's reply arrives",
    async (_label, bad) => {
      const queue = testQueue(['1m']);
      await server(queue);
      const deserializer = switchable<(value: unknown) => unknown>(bad.make(BOUND_MS, { response: 3, isDisposed: true }));
      const c = client({ queue, deserializer: { deserialize: deserializer.call as ProducerDeserializer['deserialize'] } });
      const first = await firstReply(c, 'sum', [1, 2], BOUND_MS + 3_000);
      expect(first).not.toBe('no reply');
      if (bad.kind === 'hangs' || bad.kind === 'late') {
        expect(first).toEqual({
          error: expect.objectContaining({ message: `the deserializer of RabbitRetryClient did not answer within ${BOUND_MS} ms` }),
        });
      } else if (bad.kind !== 'returns') {
        expect(first).toHaveProperty('error');
      }
      deserializer.set((value) => value);
      expect(await firstReply(c, 'sum', [1, 2, 3], 10_000)).toEqual({ reply: 6 });
    },
  );
});
