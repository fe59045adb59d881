/**
 * onFailure.brokerDelay where operators and dashboards look: `status` and the
 * console count the messages the broker holds delayed (through the
 * management API, the only place that counts them), and a brokerDelay
 * consumer's stats(), health(), metrics, traces and NestJS decorators. Runs
 * on RabbitMQ 4.3 or later; on older brokers each test says why it did
 * nothing, but for `status` without a management API, which runs everywhere.
 */
import 'reflect-metadata';

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import { context, propagation, trace, SpanKind } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { DataPointType, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { Injectable, type Type } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';

import { type Message, NonRetryableError, type OnFailureOptions, type RabbitRetry, parkedQueueName } from '../lib';
import { runCli } from './cli-run';
import { type ConsoleServer, type ConsoleState, startConsole } from '../lib/console';
import { Consume, OnFailure, RABBIT_RETRY, RabbitRetryConsumers, RabbitRetryModule, RabbitSubscribe } from '../lib/nestjs';
import { ConsoleApi } from './console-fixture';
import { AMQP_URL, BROKER, cleanup, closeAmqp, connectClient, it43, queueDepth, testQueue, track, waitFor, waitForOne } from './helpers';

/** The management API of the broker under test: RABBITMQ_MANAGEMENT_URL (scripts/broker-root.sh env), else port 15672 of its host. */
const MANAGEMENT_URL =
  process.env.RABBITMQ_MANAGEMENT_URL ?? `http://${encodeURIComponent(BROKER.user)}:${encodeURIComponent(BROKER.password)}@${BROKER.host}:15672`;
const managementShown = MANAGEMENT_URL.replace(/\/\/[^@]*@/, '//');

/** Why the management API cannot be used, or null when it answers. */
async function managementMissing(): Promise<string | null> {
  const u = new URL(MANAGEMENT_URL);
  try {
    const res = await fetch(`${u.protocol}//${u.host}/api/overview`, {
      headers: { authorization: `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}` },
      signal: AbortSignal.timeout(3000),
    });
    await res.body?.cancel();
    return res.ok ? null : `HTTP ${res.status}`;
  } catch (err) {
    const e = err as { cause?: { code?: string }; message?: string };
    return e.cause?.code ?? e.message ?? 'no answer';
  }
}

/** `it` on 4.3 with a management API; otherwise it passes at once, having said why it did nothing. */
function itManaged(name: string, fn: () => Promise<void>, timeout?: number): void {
  it43(
    name,
    async () => {
      const missing = await managementMissing();
      if (missing) {
        console.warn(`skipped without the management API at ${managementShown} (${missing}; set RABBITMQ_MANAGEMENT_URL): ${name}`);
        return;
      }
      await fn();
    },
    timeout,
  );
}

const exporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const servers: ConsoleServer[] = [];
const apps: TestingModule[] = [];

beforeAll(() => {
  trace.setGlobalTracerProvider(tracerProvider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close().catch(() => undefined);
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});
afterAll(async () => {
  trace.disable();
  context.disable();
  propagation.disable();
  await closeAmqp();
});

/** Long enough that a failed message is still delayed when the test looks. */
const LONG = { min: '60s', max: '60s', attempts: 3 } as const;
/** Short, for the tests that follow messages to their end. */
const SHORT = { min: '100ms', max: '200ms', attempts: 2 } as const;

/** A consumer of `queue` whose handler always fails, and `n` messages it failed once each: they wait delayed for a minute. */
async function delayedMessages(rr: RabbitRetry, queue: string, n: number): Promise<void> {
  const consumer = track(
    await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay: LONG } }, async () => {
      throw new Error('carrier down');
    }),
  );
  for (let i = 0; i < n; i++) await rr.publish('', queue, { i }, { messageId: `d-${i}` });
  await waitFor(() => consumer.stats().retried === n, 10_000, `${n} returned to the broker`);
}

const cli = runCli;

interface StatusJson {
  queues: { queue: string; role: string; exists: boolean; messages: number }[];
  brokerDelay: boolean | null;
  delayed: number | null;
  management: { state: string; detail: string };
}

describe('status <queue>', () => {
  itManaged(
    'counts the delayed messages through the management API, and lists no retry queue',
    async () => {
      const queue = testQueue();
      const rr = await connectClient();
      await delayedMessages(rr, queue, 3);
      // The broker refreshes the management API's counts every few seconds.
      let s: StatusJson | undefined;
      await waitFor(
        async () => {
          const r = await cli(['status', queue, '--json', '--management', MANAGEMENT_URL]);
          expect(r.code).toBe(0);
          s = JSON.parse(r.out) as StatusJson;
          return s.delayed === 3;
        },
        30_000,
        '3 delayed in status',
        500,
      );
      expect(s).toMatchObject({ brokerDelay: true, delayed: 3, management: { state: 'ok' } });
      // Ready and parked: none; the 3 are neither (a passive declare counts 0 for them).
      expect(s?.queues).toEqual([
        { queue, role: 'work', exists: true, messages: 0, consumers: 1 },
        { queue: parkedQueueName(queue), role: 'parked', exists: true, messages: 0, consumers: 0 },
      ]);

      const text = await cli(['status', queue, '--management', MANAGEMENT_URL]);
      const lines = text.out.split('\n');
      expect(lines.find((l) => l.startsWith(`${queue} `) && l.includes('delayed'))).toMatch(/delayed\s+3\s+-$/);
      expect(text.out).not.toContain('.retry.');
      expect(text.out).not.toContain('unavailable');
    },
    60_000,
  );

  it('without a management API says in one line that the delayed count is unavailable and why, and prints the rest', async () => {
    const queue = testQueue(['5s']);
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const mgmt = `http://ops:pw-not-shown@127.0.0.1:${port}`;

    const text = await cli(['status', queue, '--delays', '5s', '--management', mgmt]);
    expect(text.code).toBe(0);
    const notes = text.out.split('\n').filter((l) => l.includes('unavailable'));
    expect(notes).toEqual([
      `delayed messages: unavailable, the management API did not answer (http://127.0.0.1:${port}: ECONNREFUSED); only it counts the broker's delayed retry`,
    ]);
    expect(text.out).toMatch(/QUEUE\s+ROLE\s+MESSAGES\s+CONSUMERS/);
    expect(text.out).toContain(`${queue}.retry.5s`);
    expect(text.out + text.err).not.toContain('pw-not-shown');

    const json = JSON.parse((await cli(['status', queue, '--delays', '5s', '--json', '--management', mgmt])).out) as StatusJson;
    expect(json).toMatchObject({
      brokerDelay: null,
      delayed: null,
      management: { state: 'unavailable', detail: `http://127.0.0.1:${port}: ECONNREFUSED` },
    });
    expect(json.queues.map((q) => q.role)).toEqual(['work', 'retry', 'parked']);

    const off = await cli(['status', queue, '--delays', '5s', '--no-management', '--json']);
    expect(JSON.parse(off.out)).toMatchObject({ brokerDelay: null, delayed: null, management: { state: 'off' } });
  });
});

describe('the console', () => {
  itManaged(
    "shows a brokerDelay queue's delayed messages from the management API, instead of retry queues",
    async () => {
      const queue = testQueue();
      const rr = await connectClient();
      await delayedMessages(rr, queue, 2);
      const server = await startConsole({ client: rr, port: 0, management: MANAGEMENT_URL });
      servers.push(server);
      const api = await ConsoleApi.of(server.url);
      let view: ConsoleState['queues'][number] | undefined;
      await waitFor(
        async () => {
          // Under load a read of the management API can fail once; the page reads the state again, and so does this.
          const { status, body } = await api.get<ConsoleState>('api/state');
          if (status !== 200) {
            console.warn(`api/state answered ${status}: ${JSON.stringify(body)}`);
            return false;
          }
          view = body.queues.find((q) => q.queue === queue);
          return view?.delayed === 2;
        },
        30_000,
        '2 delayed on the console',
        500,
      );
      expect(view).toMatchObject({ brokerDelay: true, delayed: 2, retry: [], work: { messages: 0, consumers: 1 }, parked: 0 });
    },
    60_000,
  );

  it43('without the management API it knows the mode from its consumer, and says the count is unavailable', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await delayedMessages(rr, queue, 1);
    const server = await startConsole({ client: rr, port: 0, management: false });
    servers.push(server);
    const st = (await (await ConsoleApi.of(server.url)).get<ConsoleState>('api/state')).body;
    expect(st.queues.find((q) => q.queue === queue)).toMatchObject({ brokerDelay: true, delayed: null, retry: [] });
  });
});

/** ok succeeds; flaky fails once; stubborn always fails (parks after the attempts); bad is not retryable. */
async function plan(msg: Message): Promise<void> {
  const kind = msg.properties.messageId ?? '';
  if (kind === 'bad') throw new NonRetryableError('no address');
  if (kind === 'stubborn') throw new Error('carrier down');
  if (kind === 'flaky' && msg.attempt === 0) throw new Error('carrier blip');
}
const KINDS = ['ok', 'flaky', 'stubborn', 'bad'];

class Reader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

describe('a brokerDelay consumer', () => {
  it43('counts its returns and parks in stats(), is healthy, and records them in its metrics', async () => {
    const reader = new Reader();
    const provider = new MeterProvider({ readers: [reader] });
    try {
      const queue = testQueue();
      const rr = await connectClient({ meterProvider: provider });
      const consumer = track(await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay: SHORT } }, plan));
      for (const id of KINDS) await rr.publish('', queue, { id }, { messageId: id });
      await waitFor(() => consumer.stats().acked === 2 && consumer.stats().parked === 2, 15_000, 'two acked and two parked');

      expect(consumer.stats()).toMatchObject({
        acked: 2,
        // flaky once, stubborn three times, bad once.
        failed: 5,
        // flaky's and stubborn's first return wait 100ms, stubborn's second 200ms.
        retried: 3,
        retriedByDelay: { '100ms': 2, '200ms': 1 },
        parked: 2,
        parkedByReason: { exhausted: 1, 'non-retryable': 1 },
        publishFailed: 0,
      });
      expect(consumer.health()).toMatchObject({ queue, state: 'connected', healthy: true, inFlight: 0, stuck: 0 });
      expect(await queueDepth(parkedQueueName(queue))).toBe(2);

      const { resourceMetrics, errors } = await reader.collect();
      expect(errors).toEqual([]);
      const all = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
      const sum = (name: string, key: string) => {
        const m = all.find((x) => x.descriptor.name === name);
        expect(m?.dataPointType).toBe(DataPointType.SUM);
        const out: Record<string, number> = {};
        for (const p of (m?.dataPoints ?? []) as { attributes: Record<string, unknown>; value: number }[]) {
          expect(p.attributes.queue).toBe(queue);
          out[String(p.attributes[key])] = (out[String(p.attributes[key])] ?? 0) + p.value;
        }
        return out;
      };
      expect(sum('rabbit_retry.messages.retried', 'delay')).toEqual({ '100ms': 2, '200ms': 1 });
      expect(sum('rabbit_retry.messages.parked', 'reason')).toEqual({ exhausted: 1, 'non-retryable': 1 });
      expect(sum('rabbit_retry.messages.acked', 'queue')).toEqual({ [queue]: 2 });
    } finally {
      await provider.shutdown().catch(() => undefined);
    }
  });

  it43('continues the trace: the same traceparent reaches every attempt, whose spans say the attempt and the return', async () => {
    exporter.reset();
    const queue = testQueue();
    const rr = await connectClient();
    const seen: { traceparent: unknown; attempt: number }[] = [];
    track(
      await rr.consume({ queue, queueType: 'quorum', onFailure: { brokerDelay: SHORT } }, async (msg) => {
        seen.push({ traceparent: msg.headers.traceparent, attempt: msg.attempt });
        if (seen.length < 3) throw new Error(`carrier 503 (call ${seen.length})`);
      }),
    );
    await rr.publish('', queue, { orderId: 7 }, { messageId: 'o-7' });
    const spans = () => exporter.getFinishedSpans().filter((s) => s.name.endsWith(queue));
    await waitFor(() => spans().filter((s) => s.name === `process ${queue}`).length === 3, 10_000, 'three process spans');
    await waitFor(() => spans().filter((s) => s.kind === SpanKind.PRODUCER).length === 3, 10_000, 'the publish and two returns');

    const send = spans().find((s) => s.kind === SpanKind.PRODUCER && s.parentSpanContext === undefined);
    expect(send).toBeDefined();
    const traceId = send?.spanContext().traceId;
    expect(seen.map((s) => s.attempt)).toEqual([0, 1, 2]);
    expect(new Set(seen.map((s) => s.traceparent)).size).toBe(1);
    expect(String(seen[0].traceparent)).toContain(traceId);

    const processes = spans()
      .filter((s) => s.name === `process ${queue}`)
      .sort((a, b) => Number(a.attributes['rabbit_retry.attempt']) - Number(b.attributes['rabbit_retry.attempt']));
    expect(processes.map((s) => s.attributes['rabbit_retry.attempt'])).toEqual([0, 1, 2]);
    // The returned message is the one published, untouched: each attempt is a child of its publish.
    for (const p of processes) {
      expect(p.spanContext().traceId).toBe(traceId);
      expect(p.parentSpanContext?.spanId).toBe(send?.spanContext().spanId);
    }
    const returns = spans()
      .filter((s) => s.kind === SpanKind.PRODUCER && s !== send)
      .sort((a, b) => Number(a.attributes['rabbit_retry.attempt']) - Number(b.attributes['rabbit_retry.attempt']));
    expect(returns.map((s) => [s.attributes['rabbit_retry.outcome'], s.attributes['rabbit_retry.attempt'], s.attributes['rabbit_retry.delay']])).toEqual([
      ['retry', 1, '100ms'],
      ['retry', 2, '200ms'],
    ]);
    expect(returns.map((s) => s.parentSpanContext?.spanId)).toEqual([processes[0].spanContext().spanId, processes[1].spanContext().spanId]);
    expect(returns[0].attributes).toMatchObject({ 'messaging.destination.name': queue, 'rabbit_retry.error': 'carrier 503 (call 1)' });
  });
});

/**
 * Boots a NestJS app with `defaultOnFailure` and the `handlers` provider,
 * publishes `{ id: 'a' }` to `qa` and `{ id: 'b' }` to `qb`, and waits until
 * each is parked.
 */
async function parkOneEach(defaultOnFailure: OnFailureOptions, handlers: Type, qa: string, qb: string) {
  const app = await Test.createTestingModule({
    imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, defaultOnFailure })],
    providers: [handlers],
  }).compile();
  apps.push(app);
  await app.init();
  const rr = app.get<RabbitRetry>(RABBIT_RETRY);
  await rr.publish('', qa, { id: 'a' });
  await rr.publish('', qb, { id: 'b' });
  return { app, a: await waitForOne(parkedQueueName(qa), 15_000), b: await waitForOne(parkedQueueName(qb), 15_000) };
}

describe('NestJS', () => {
  it43('@OnFailure({ brokerDelay }) with @Consume({ queueType: quorum }), over a module default of delays, and @RabbitSubscribe with it', async () => {
    const viaOnFailure = testQueue();
    const viaSubscribe = testQueue();
    const calls: Record<string, number> = {};

    @Injectable()
    class Handlers {
      @OnFailure({ brokerDelay: SHORT })
      @Consume({ queue: viaOnFailure, queueType: 'quorum' })
      async first(body: { id: string }): Promise<void> {
        calls[body.id] = (calls[body.id] ?? 0) + 1;
        throw new Error(`first failed ${body.id}`);
      }

      @RabbitSubscribe({ queue: viaSubscribe, queueType: 'quorum', onFailure: { brokerDelay: SHORT } })
      async second(body: { id: string }): Promise<void> {
        calls[body.id] = (calls[body.id] ?? 0) + 1;
        throw new Error(`second failed ${body.id}`);
      }
    }

    // The module's default delays are the other way to retry: the method's brokerDelay replaces them.
    const { app, a, b } = await parkOneEach({ delays: ['5s'], stackOnRetry: true }, Handlers, viaOnFailure, viaSubscribe);
    // Once, then once after each of the 2 returns.
    expect(calls).toEqual({ a: 3, b: 3 });
    expect(a.headers).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 2, 'retry-last-error': 'first failed a' });
    expect(b.headers).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 2, 'retry-last-error': 'second failed b' });
    const consumers = app.get(RabbitRetryConsumers);
    expect(consumers.get(viaOnFailure)?.stats()).toMatchObject({ retried: 2, parked: 1 });
    expect(consumers.health().healthy).toBe(true);
  });

  it43('a module default of brokerDelay applies to a quorum @Consume; a method with its own delays drops it', async () => {
    const byDefault = testQueue();
    const ownDelays = testQueue(['100ms']);

    @Injectable()
    class Handlers {
      @Consume({ queue: byDefault, queueType: 'quorum' })
      async first(): Promise<void> {
        throw new Error('first failed');
      }

      @OnFailure({ delays: ['100ms'] })
      @Consume({ queue: ownDelays })
      async second(): Promise<void> {
        throw new Error('second failed');
      }
    }

    const { a, b } = await parkOneEach({ brokerDelay: SHORT }, Handlers, byDefault, ownDelays);
    expect(a.headers).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 2, 'retry-queue': byDefault });
    expect(b.headers).toMatchObject({ 'retry-reason': 'exhausted', 'retry-attempt': 1 });
  });
});
