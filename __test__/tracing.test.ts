/**
 * Traces with OpenTelemetry's SDK and its in-memory exporter: a message's
 * attempts read as one trace, from a producer on amqplib (with its
 * instrumentation, in a process of its own) or on rr.publish, through the
 * retry queues to its success or to the parked queue.
 */
import 'reflect-metadata';

import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import { context, propagation, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { NonRetryableError, type Message, type RabbitRetry } from '../lib';
import { Consume, RABBIT_RETRY, RabbitRetryModule } from '../lib/nestjs';
import { consumerTracing, tracedPublish } from '../lib/telemetry/tracing';
import type * as Tracing from '../lib/telemetry/tracing';
import { AMQP_URL, closeAmqp } from './broker';
import { cleanup, connectClient, createTestDatabase, dropTestDatabase, pgUrl, psqlRows, testQueue, track, waitFor } from './helpers';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(() => {
  trace.disable();
  context.disable();
  propagation.disable();
});
beforeEach(() => exporter.reset());
afterEach(cleanup);
afterAll(closeAmqp);

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const idOf = (s: ReadableSpan) => s.spanContext().spanId;
const ofQueue = (queue: string) => exporter.getFinishedSpans().filter((s) => JSON.stringify(s.attributes).includes(queue) || s.name.includes(queue));

describe('a message that fails twice and then succeeds', () => {
  it('reads as one trace from an amqplib producer with its instrumentation: producer, three attempts, two moves', async () => {
    const queue = testQueue(['50ms', '100ms']);
    const rr = await connectClient();
    let calls = 0;
    track(
      await rr.consume({ queue, onFailure: { delays: ['50ms', '100ms'] } }, async () => {
        calls++;
        if (calls < 3) throw new Error(`carrier 503 (call ${calls})`);
      }),
    );
    const out = execFileSync(process.execPath, [join(__dirname, 'fixtures', 'otel-amqplib-producer.js'), AMQP_URL, queue, 'order-48213'], {
      encoding: 'utf8',
    });
    const [producer] = JSON.parse(out) as { name: string; kind: number; traceId: string; spanId: string }[];
    expect(producer.kind).toBe(SpanKind.PRODUCER);

    await waitFor(() => ofQueue(queue).filter((s) => s.name === `process ${queue}`).length === 3, 10_000, 'three process spans');
    await waitFor(() => ofQueue(queue).filter((s) => s.kind === SpanKind.PRODUCER).length === 2, 10_000, 'two move spans');
    const spans = ofQueue(queue);
    const processes = spans
      .filter((s) => s.name === `process ${queue}`)
      .sort((a, b) => Number(a.attributes['rabbit_retry.attempt']) - Number(b.attributes['rabbit_retry.attempt']));
    const moves = spans
      .filter((s) => s.kind === SpanKind.PRODUCER)
      .sort((a, b) => Number(a.attributes['rabbit_retry.attempt']) - Number(b.attributes['rabbit_retry.attempt']));

    // One trace, a chain: producer -> attempt 0 -> move -> attempt 1 -> move -> attempt 2.
    for (const s of spans) expect(s.spanContext().traceId).toBe(producer.traceId);
    expect(parentOf(processes[0])).toBe(producer.spanId);
    expect(parentOf(moves[0])).toBe(idOf(processes[0]));
    expect(parentOf(processes[1])).toBe(idOf(moves[0]));
    expect(parentOf(moves[1])).toBe(idOf(processes[1]));
    expect(parentOf(processes[2])).toBe(idOf(moves[1]));

    expect(processes.map((s) => s.kind)).toEqual([SpanKind.CONSUMER, SpanKind.CONSUMER, SpanKind.CONSUMER]);
    expect(processes.map((s) => s.attributes['rabbit_retry.attempt'])).toEqual([0, 1, 2]);
    expect(processes[0].attributes).toMatchObject({
      'messaging.system': 'rabbitmq',
      'messaging.operation.type': 'process',
      'messaging.consumer.group.name': queue,
      'messaging.rabbitmq.destination.routing_key': queue,
      'messaging.message.id': 'order-48213',
      'messaging.message.body.size': 17,
    });
    expect(processes.map((s) => s.status.code)).toEqual([SpanStatusCode.ERROR, SpanStatusCode.ERROR, SpanStatusCode.UNSET]);
    expect(processes[0].events.map((e) => [e.name, e.attributes?.['exception.message']])).toEqual([['exception', 'carrier 503 (call 1)']]);

    expect(moves.map((s) => s.name)).toEqual([`send ${queue}.retry.50ms`, `send ${queue}.retry.100ms`]);
    // The reason each copy carries in its retry-reason header, as a park's span has its own.
    expect(moves.map((s) => s.attributes['rabbit_retry.reason'])).toEqual(['retry', 'retry']);
    expect(moves[1].attributes).toMatchObject({
      'messaging.system': 'rabbitmq',
      'messaging.operation.type': 'send',
      'messaging.destination.name': `${queue}.retry.100ms`,
      'rabbit_retry.outcome': 'retry',
      'rabbit_retry.reason': 'retry',
      'rabbit_retry.attempt': 2,
      'rabbit_retry.delay': '100ms',
      'rabbit_retry.error': 'carrier 503 (call 2)',
    });
  });
});

describe('rr.publish and the handler', () => {
  it('continues the caller’s trace, and the handler’s own spans are children of its process span', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    const tracer = trace.getTracer('test');
    let inner: string | undefined;
    track(
      await rr.consume({ queue }, async () => {
        const span = tracer.startSpan('carrier.rate');
        inner = span.spanContext().spanId;
        span.end();
      }),
    );
    const root = tracer.startSpan('checkout');
    await context.with(trace.setSpan(context.active(), root), () => rr.publish('', queue, { orderId: 1 }, { messageId: 'o-1' }));
    root.end();
    await waitFor(() => exporter.getFinishedSpans().some((s) => s.name === 'carrier.rate'), 10_000, 'the handler span');
    const spans = exporter.getFinishedSpans();
    const send = spans.find((s) => s.name === `send ${queue}`);
    const processed = spans.find((s) => s.name === `process ${queue}`);
    const handlerSpan = spans.find((s) => s.name === 'carrier.rate');
    expect(send?.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(send as ReadableSpan)).toBe(root.spanContext().spanId);
    expect(send?.attributes).toMatchObject({ 'messaging.destination.name': queue, 'messaging.message.id': 'o-1' });
    expect(parentOf(processed as ReadableSpan)).toBe(idOf(send as ReadableSpan));
    expect(parentOf(handlerSpan as ReadableSpan)).toBe(idOf(processed as ReadableSpan));
    expect(handlerSpan?.spanContext().spanId).toBe(inner);
    expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([root.spanContext().traceId]));
  });

  it('keeps the trace headers a caller writes itself', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    const own = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const seen: Message[] = [];
    track(await rr.consume({ queue }, async (msg) => void seen.push(msg)));
    await rr.publish('', queue, 'x', { headers: { traceparent: own } });
    await waitFor(() => seen.length === 1, 10_000, 'the message');
    expect(seen[0].headers.traceparent).toBe(own);
    const processed = exporter.getFinishedSpans().find((s) => s.name === `process ${queue}`);
    expect(processed?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
  });
});

describe('NestJS', () => {
  it('runs a @Consume method inside the process span, with no setup beyond the SDK', async () => {
    const queue = testQueue();
    const tracer = trace.getTracer('test');
    let handled = false;

    @Injectable()
    class Orders {
      @Consume({ queue })
      async handle(): Promise<void> {
        tracer.startSpan('inventory.reserve').end();
        handled = true;
      }
    }

    const app = await Test.createTestingModule({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })], providers: [Orders] }).compile();
    await app.init();
    try {
      await app.get<RabbitRetry>(RABBIT_RETRY).publish('', queue, { orderId: 4 });
      await waitFor(() => handled, 10_000, 'the handler');
      await waitFor(() => exporter.getFinishedSpans().some((s) => s.name === `process ${queue}`), 10_000, 'the process span');
      const spans = exporter.getFinishedSpans();
      const processed = spans.find((s) => s.name === `process ${queue}`) as ReadableSpan;
      const own = spans.find((s) => s.name === 'inventory.reserve') as ReadableSpan;
      expect(parentOf(own)).toBe(idOf(processed));
    } finally {
      await app.close();
    }
  });
});

describe('a parked message and its replay', () => {
  it('the move to the parked queue is a span with the reason; the replay is a span linked to it, and the replayed attempt its child', async () => {
    const queue = testQueue(['50ms']);
    const rr = await connectClient();
    let calls = 0;
    track(
      await rr.consume({ queue, onFailure: { delays: ['50ms'] } }, async () => {
        calls++;
        if (calls === 1) throw new NonRetryableError('no address');
      }),
    );
    await rr.publish('', queue, { orderId: 2 }, { messageId: 'o-2' });
    await waitFor(() => exporter.getFinishedSpans().some((s) => s.name === `send ${queue}.parked`), 10_000, 'the park span');
    const park = exporter.getFinishedSpans().find((s) => s.name === `send ${queue}.parked`) as ReadableSpan;
    expect(park.attributes).toMatchObject({
      'rabbit_retry.outcome': 'parked',
      'rabbit_retry.reason': 'non-retryable',
      'rabbit_retry.error': 'no address',
    });

    const replayed = await rr.parked(queue).replay({ ratePerSec: 100 });
    expect(replayed).toMatchObject({ replayed: 1 });
    await waitFor(() => calls === 2, 10_000, 'the replayed message');
    await waitFor(() => exporter.getFinishedSpans().filter((s) => s.name === `process ${queue}`).length === 2, 10_000, 'its span');
    const second = exporter
      .getFinishedSpans()
      .filter((s) => s.name === `process ${queue}`)
      .find((s) => s.status.code !== SpanStatusCode.ERROR) as ReadableSpan;
    // The operator's replay is a span of its own that links to the parked message's trace,
    // and the replayed attempt is its child.
    const replay = exporter.getFinishedSpans().find((s) => s.attributes['rabbit_retry.outcome'] === 'replay') as ReadableSpan;
    expect(replay.kind).toBe(SpanKind.PRODUCER);
    expect(replay.name).toBe(`send ${queue}`);
    expect(replay.links.map((l) => l.context.spanId)).toEqual([idOf(park)]);
    expect(parentOf(second)).toBe(idOf(replay));
  });
});

describe('through the retry table', () => {
  let db: string | undefined;
  afterAll(() => {
    if (db) dropTestDatabase(db);
  });

  it('the row keeps the trace of its move; the scheduler drains it in a span of its own, whose child is the next attempt', async () => {
    db = createTestDatabase('trace');
    const queue = testQueue([]);
    const rr = await connectClient({ retryTable: { url: pgUrl(db) } });
    let calls = 0;
    track(
      await rr.consume(
        { queue, onFailure: { delays: [], table: { dependency: () => 'carrier', nextAttemptAt: () => new Date(Date.now() + 300) } } },
        async () => {
          calls++;
          if (calls === 1) throw new Error('carrier down');
        },
      ),
    );
    await rr.publish('', queue, { orderId: 3 }, { messageId: 'o-3' });
    await waitFor(() => calls === 2, 20_000, 'the attempt from the table');
    await waitFor(() => exporter.getFinishedSpans().filter((s) => s.name === `process ${queue}`).length === 2, 10_000, 'its span');
    // The drain's span ends when the broker's confirm reaches the scheduler, which can be after the next attempt ran.
    const isDrain = (s: ReadableSpan) => s.name === `send ${queue}` && s.attributes['rabbit_retry.outcome'] === 'drain';
    await waitFor(() => exporter.getFinishedSpans().some(isDrain), 10_000, 'the drain span');
    const spans = exporter.getFinishedSpans();
    const stored = spans.find((s) => s.name === 'send retry-table') as ReadableSpan;
    expect(stored.attributes).toMatchObject({
      'rabbit_retry.outcome': 'stored',
      'rabbit_retry.reason': 'retry-table',
      'rabbit_retry.dependency': 'carrier',
      'rabbit_retry.error': 'carrier down',
    });
    const drained = spans.filter(isDrain);
    expect(drained).toHaveLength(1);
    const [drain] = drained;
    expect(drain.kind).toBe(SpanKind.PRODUCER);
    expect(drain.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(drain.attributes).toMatchObject({
      'messaging.system': 'rabbitmq',
      'messaging.operation.type': 'send',
      'messaging.destination.name': queue,
      'messaging.message.id': 'o-3',
      'rabbit_retry.attempt': 1,
      'rabbit_retry.dependency': 'carrier',
      'rabbit_retry.error': 'carrier down',
      'rabbit_retry.row_id': stored.attributes['rabbit_retry.row_id'],
    });
    // It waited in the table for about the 300 ms the handler asked for.
    expect(drain.attributes['rabbit_retry.delay']).toBeGreaterThanOrEqual(200);
    const [first, second] = spans
      .filter((s) => s.name === `process ${queue}`)
      .sort((a, b) => Number(a.attributes['rabbit_retry.attempt']) - Number(b.attributes['rabbit_retry.attempt']));
    // One chain: attempt 0 -> send retry-table -> drain -> attempt 1.
    expect(parentOf(stored)).toBe(idOf(first));
    expect(parentOf(drain)).toBe(idOf(stored));
    expect(parentOf(second)).toBe(idOf(drain));
    for (const s of [stored, drain, second]) expect(s.spanContext().traceId).toBe(first.spanContext().traceId);
  });

  it('a drain the broker refuses is a span with an error status, and the row stays for a later try', async () => {
    db ??= createTestDatabase('trace');
    const queue = testQueue([]);
    const rr = await connectClient({ retryTable: { url: pgUrl(db) } });
    let stored = 0;
    const consumer = await rr.consume({ queue, onFailure: { delays: [], table: { nextAttemptAt: () => new Date(Date.now() + 1500) } } }, async () => {
      throw new Error('carrier down');
    });
    consumer.on('stored', () => stored++);
    await rr.publish('', queue, { orderId: 5 }, { messageId: 'o-5' });
    await waitFor(() => stored === 1, 10_000, 'the row');
    await consumer.close();
    // The work queue is gone when the row comes due: the publish is unroutable.
    await rr.deleteQueue(queue);
    await waitFor(
      () => exporter.getFinishedSpans().some((s) => s.name === `send ${queue}` && s.attributes['rabbit_retry.outcome'] === 'drain'),
      10_000,
      'the drain span',
    );
    const drain = exporter.getFinishedSpans().find((s) => s.name === `send ${queue}` && s.attributes['rabbit_retry.outcome'] === 'drain') as ReadableSpan;
    expect(drain.status.code).toBe(SpanStatusCode.ERROR);
    expect(drain.status.message).toMatch(/unroutable|no route|NO_ROUTE/i);
    const rows = psqlRows<{ n: string }>(`SELECT count(*) AS n FROM message_retries WHERE queue = '${queue}'`, db);
    expect(Number(rows[0].n)).toBe(1);
  });

  it('a scheduler drains untraced rows unchanged when no provider is registered', async () => {
    db ??= createTestDatabase('trace');
    trace.disable();
    try {
      const queue = testQueue([]);
      const rr = await connectClient({ retryTable: { url: pgUrl(db) } });
      const seen: Message[] = [];
      track(
        await rr.consume({ queue, onFailure: { delays: [], table: { nextAttemptAt: () => new Date() } } }, async (m) => {
          seen.push(m);
          if (seen.length === 1) throw new Error('later');
        }),
      );
      await rr.publish('', queue, { orderId: 4 });
      await waitFor(() => seen.length === 2, 20_000, 'the attempt from the table');
      expect(seen[1].headers.traceparent).toBeUndefined();
      expect(exporter.getFinishedSpans().filter((s) => JSON.stringify(s.attributes).includes(queue) || s.name.includes(queue))).toHaveLength(0);
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
  });
});

describe('without a tracer provider or without @opentelemetry/api', () => {
  it('makes no span and hands the publish no headers when no provider is registered', async () => {
    trace.disable();
    try {
      const got = await tracedPublish({ exchange: '', routingKey: 'q', bodySize: 1 }, async (headers) => headers);
      expect(got).toBeUndefined();
      const t = consumerTracing('q');
      expect(t.process({}, () => ({ exchange: '', routingKey: 'q', bodySize: 1, attempt: 0 }))).toBeUndefined();
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
  });

  it('traces the next message once a provider is registered, and stops once it is gone', () => {
    const message = () => ({ exchange: '', routingKey: 'q.late', bodySize: 1, attempt: 0 });
    const t = consumerTracing('q.late');
    trace.disable();
    try {
      expect(t.process({}, message)).toBeUndefined();
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
    const span = t.process({}, message);
    expect(span).toBeDefined();
    span?.end(undefined, false);
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['process q.late']);
    trace.disable();
    try {
      expect(t.process({}, message)).toBeUndefined();
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
  });

  it('traces nothing and fails nothing when @opentelemetry/api cannot be loaded', async () => {
    let isolated: typeof Tracing | undefined;
    jest.isolateModules(() => {
      jest.doMock('@opentelemetry/api', () => {
        throw new Error("Cannot find module '@opentelemetry/api'");
      });
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      isolated = require('../lib/telemetry/tracing') as typeof Tracing;
    });
    if (!isolated) throw new Error('lib/telemetry/tracing did not load');
    const got = await isolated.tracedPublish({ exchange: '', routingKey: 'q', bodySize: 1 }, async (headers) => headers ?? 'none');
    expect(got).toBe('none');
    const t = isolated.consumerTracing('q');
    expect(t.process({ traceparent: 'x' }, () => ({ exchange: '', routingKey: 'q', bodySize: 1, attempt: 0 }))).toBeUndefined();
    t.settled({ kind: 'retry', id: 1, messageId: null, target: 'q.retry.5s', reason: 'retry', attempt: 1, delay: '5s', error: 'e' });
    t.close();
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});
