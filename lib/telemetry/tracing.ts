/**
 * OpenTelemetry traces through `@opentelemetry/api`, an optional peer
 * dependency: when it is not installed, or no tracer provider is registered,
 * nothing is traced and nothing costs more than a check per message.
 *
 * Spans follow OpenTelemetry's semantic conventions for messaging (v1.28):
 * a PRODUCER span `send <destination>` for each `rr.publish`, whose context
 * goes into the message as `traceparent` (and `tracestate`); a CONSUMER span
 * `process <queue>` for each handler call, a child of the context the
 * delivery carries (whoever published it); and a PRODUCER span `send
 * <target>` for each move of a failed message to a retry queue, the parked
 * queue or the retry table, a child of the attempt's `process` span, whose
 * context goes into the moved copy: the next attempt, however much later, is
 * its child, so a message's attempts read as one trace. The retry table's
 * scheduler brings a stored row back in a PRODUCER span `send <queue>`, a
 * child of the context the row kept, whose context the published copy
 * carries in its place.
 */
import type { Context, Span, SpanOptions, Tracer } from '@opentelemetry/api';

import { errorInfo } from '../support/error-text';
import { type OtelApi, otelApi } from './otel-api';
import type { WireEvent } from '../wire';

/** The API once loaded (null: not installed): a span per message should not look it up each time. */
let api: OtelApi | null | undefined;

function loadApi(): OtelApi | null {
  if (api === undefined) api = otelApi() ?? null;
  return api;
}

/** A carrier getter for AMQP headers: values may be strings or Buffers. */
const headerGetter = {
  keys: (carrier: Record<string, unknown>) => Object.keys(carrier),
  get: (carrier: Record<string, unknown>, key: string) => {
    const v = carrier[key];
    if (typeof v === 'string') return v;
    if (Buffer.isBuffer(v)) return v.toString('utf8');
    return undefined;
  },
};

/** The trace headers a moved copy of a failed message carries. @internal */
export interface TraceHeaders {
  traceparent?: string;
  tracestate?: string;
}

/** What a span describes of a message. @internal */
export interface TracedMessage {
  exchange: string;
  routingKey: string;
  messageId?: string;
  headers: Record<string, unknown>;
  bodySize: number;
  attempt: number;
}

/** One handler call's span: the handler runs inside it. @internal */
export interface ProcessSpan {
  /** Runs `fn` with the span as the active one. */
  run<T>(fn: () => T): T;
  /** Ends the span: with an error status and an exception event when the handler threw. */
  end(error?: unknown, threw?: boolean): void;
  /** Starts the span of the failed message's move; returns the headers its copy carries. */
  moving(id: number): TraceHeaders;
}

/** The spans of one consumer. @internal */
export interface ConsumerTracing {
  /**
   * The span of a handler call for the delivery with `headers`, or undefined
   * when nothing traces; `describe` is called only for a span that records.
   */
  process(headers: Record<string, unknown>, describe: () => Omit<TracedMessage, 'headers'>): ProcessSpan | undefined;
  /** Ends the move span of the delivery an event settled. */
  settled(e: WireEvent): void;
  /** Ends the move spans whose outcome never came (the consumer closed). */
  close(): void;
}

let tracer: { provider: unknown; tracer: Tracer } | undefined;

/** The API's no-op provider, the delegate of a proxy provider while none is registered. */
let noopProvider: unknown;

/**
 * Whether a tracer provider may record: false only while the API's global
 * provider is its proxy with no provider behind it. Every span is then a
 * no-op, and the parent context extracted for one would be thrown away.
 */
function mayRecord(a: OtelApi): boolean {
  const ProxyProvider = a.ProxyTracerProvider;
  const provider = a.trace.getTracerProvider();
  if (typeof ProxyProvider !== 'function' || !(provider instanceof ProxyProvider)) return true;
  noopProvider ??= new ProxyProvider().getDelegate();
  return provider.getDelegate() !== noopProvider;
}

/**
 * The library's tracer, made once per global provider (the API's proxy
 * tracer follows a provider registered later): one per message would cost
 * an allocation each.
 */
function tracerOf(a: OtelApi): Tracer {
  const provider = a.trace.getTracerProvider();
  if (tracer?.provider !== provider) tracer = { provider, tracer: provider.getTracer('rabbit-retry') };
  return tracer.tracer;
}

const BASE = { 'messaging.system': 'rabbitmq' } as const;
const SEND = { ...BASE, 'messaging.operation.type': 'send', 'messaging.operation.name': 'send' } as const;

/** The trace headers that carry `span`'s context, as the global propagator writes them. */
function injected(a: OtelApi, ctx: Context, span: Span): TraceHeaders {
  const carrier: Record<string, unknown> = {};
  a.propagation.inject(a.trace.setSpan(ctx, span), carrier);
  const out: TraceHeaders = {};
  if (typeof carrier.traceparent === 'string') out.traceparent = carrier.traceparent;
  if (typeof carrier.tracestate === 'string') out.tracestate = carrier.tracestate;
  return out;
}

/** What a span of a publish describes. @internal */
export type PublishedMessage = Omit<TracedMessage, 'attempt' | 'headers'> & {
  /** A replay: the headers of the parked message, whose trace the span links to. */
  replayOf?: Record<string, unknown>;
};

/**
 * Runs `send` inside a PRODUCER span for a publish of `m`, giving it the
 * headers that carry the span's context (none when nothing traces). @internal
 */
export async function tracedPublish<T>(m: PublishedMessage, send: (trace: TraceHeaders | undefined) => Promise<T>): Promise<T> {
  const a = loadApi();
  if (!a || !mayRecord(a)) return send(undefined);
  const destination = m.exchange || m.routingKey;
  const parked = m.replayOf ? a.trace.getSpan(a.propagation.extract(a.ROOT_CONTEXT, m.replayOf, headerGetter))?.spanContext() : undefined;
  const options: SpanOptions = {
    kind: a.SpanKind.PRODUCER,
    links: parked ? [{ context: parked, attributes: { 'rabbit_retry.link': 'parked' } }] : [],
  };
  const span = tracerOf(a).startSpan(`send ${destination}`, options);
  // Without a provider the span is a no-op: nothing more to do, nothing to end.
  if (!span.isRecording()) return send(undefined);
  span.setAttributes({
    ...SEND,
    'messaging.destination.name': destination,
    'messaging.rabbitmq.destination.routing_key': m.routingKey,
    'messaging.message.body.size': m.bodySize,
    ...(m.messageId ? { 'messaging.message.id': m.messageId } : {}),
    ...(m.replayOf ? { 'rabbit_retry.outcome': 'replay' } : {}),
  });
  try {
    return await send(injected(a, a.context.active(), span));
  } catch (err) {
    failed(a, span, err);
    throw err;
  } finally {
    span.end();
  }
}

function failed(a: OtelApi, span: Span, err: unknown): void {
  const info = errorInfo(err);
  span.recordException({ name: info.name, message: info.message, stack: info.stack });
  span.setStatus({ code: a.SpanStatusCode.ERROR, message: info.message });
}

/** The spans of the consumer of `queue`. @internal */
export function consumerTracing(queue: string): ConsumerTracing {
  const moves = new Map<number, Span>();
  return {
    process(headers, describe) {
      const a = loadApi();
      if (!a || !mayRecord(a)) return undefined;
      const parent = a.propagation.extract(a.ROOT_CONTEXT, headers, headerGetter);
      const span = tracerOf(a).startSpan(`process ${queue}`, { kind: a.SpanKind.CONSUMER }, parent);
      // Without a provider the span is a no-op: nothing more to do, nothing to end.
      if (!span.isRecording()) return undefined;
      const msg = describe();
      span.setAttributes({
        ...BASE,
        'messaging.operation.type': 'process',
        'messaging.operation.name': 'process',
        'messaging.destination.name': msg.exchange || queue,
        'messaging.rabbitmq.destination.routing_key': msg.routingKey,
        'messaging.consumer.group.name': queue,
        'messaging.message.body.size': msg.bodySize,
        'rabbit_retry.attempt': msg.attempt,
        ...(msg.messageId ? { 'messaging.message.id': msg.messageId } : {}),
      });
      const ctx = a.trace.setSpan(parent, span);
      return {
        run: (fn) => a.context.with(ctx, fn),
        end(error, threw) {
          if (threw) failed(a, span, error);
          span.end();
        },
        moving(id) {
          const move = tracerOf(a).startSpan(`send ${queue}`, { kind: a.SpanKind.PRODUCER, attributes: SEND }, ctx);
          moves.set(id, move);
          return injected(a, ctx, move);
        },
      };
    },
    settled(e) {
      if (e.kind !== 'retry' && e.kind !== 'parked' && e.kind !== 'stored' && e.kind !== 'publish-failed') return;
      // A move span exists only once the API loaded.
      const a = loadApi();
      const span = moves.get(e.id);
      if (!a || !span) return;
      moves.delete(e.id);
      // Where the copy went: its queue, or the retry table.
      const target = e.kind === 'stored' ? 'retry-table' : e.target;
      span.updateName(`send ${target}`);
      span.setAttributes({ 'messaging.destination.name': target, 'rabbit_retry.outcome': e.kind });
      switch (e.kind) {
        case 'retry':
          span.setAttributes({
            'rabbit_retry.attempt': e.attempt,
            'rabbit_retry.reason': e.reason,
            'rabbit_retry.delay': e.delay,
            'rabbit_retry.error': e.error,
          });
          break;
        case 'parked':
          span.setAttributes({ 'rabbit_retry.attempt': e.attempt, 'rabbit_retry.reason': e.reason, 'rabbit_retry.error': e.error });
          break;
        case 'stored':
          span.setAttributes({
            'rabbit_retry.attempt': e.attempt,
            'rabbit_retry.reason': e.reason,
            'rabbit_retry.row_id': e.rowId,
            'rabbit_retry.error': e.error,
            ...(e.dependency ? { 'rabbit_retry.dependency': e.dependency } : {}),
          });
          break;
        case 'publish-failed':
          span.setStatus({ code: a.SpanStatusCode.ERROR, message: e.error });
          break;
      }
      span.end();
    },
    close() {
      for (const span of moves.values()) span.end();
      moves.clear();
    },
  };
}

/** A row the retry table's scheduler is about to publish, as the native side describes it. @internal */
export interface DrainedRow {
  rowId: number;
  queue: string;
  attempt: number;
  dependency?: string | null;
  messageId?: string | null;
  bodySize: number;
  waitedMs: number;
  error?: string | null;
  traceparent?: string | null;
  tracestate?: string | null;
}

/** The spans of the retry table scheduler's drains. @internal */
export interface DrainTracing {
  /** Starts the span of a row's drain; returns the context its copy carries, or null when nothing traces. */
  start(row: DrainedRow): { traceparent: string; tracestate?: string } | null;
  /** Ends the span of row `rowId`'s drain, as failed when `error` is given. */
  end(drain: { rowId: number; error?: string | null }): void;
}

/**
 * The spans of a scheduler's drains, or undefined when `@opentelemetry/api`
 * is not installed. Each is a child of the context the row kept (the `send
 * retry-table` span of the attempt that stored it). @internal
 */
export function drainTracing(): DrainTracing | undefined {
  const a = loadApi();
  if (!a) return undefined;
  const drains = new Map<number, Span>();
  return {
    start(row) {
      const carrier: Record<string, unknown> = {};
      if (row.traceparent) carrier.traceparent = row.traceparent;
      if (row.tracestate) carrier.tracestate = row.tracestate;
      const parent = a.propagation.extract(a.ROOT_CONTEXT, carrier, headerGetter);
      const span = tracerOf(a).startSpan(`send ${row.queue}`, { kind: a.SpanKind.PRODUCER }, parent);
      // Without a provider the span is a no-op: the row keeps its own context.
      if (!span.isRecording()) return null;
      span.setAttributes({
        ...SEND,
        'messaging.destination.name': row.queue,
        'messaging.rabbitmq.destination.routing_key': row.queue,
        'messaging.message.body.size': row.bodySize,
        'rabbit_retry.outcome': 'drain',
        'rabbit_retry.row_id': row.rowId,
        'rabbit_retry.attempt': row.attempt,
        'rabbit_retry.delay': Math.round(row.waitedMs),
        ...(row.messageId ? { 'messaging.message.id': row.messageId } : {}),
        ...(row.dependency ? { 'rabbit_retry.dependency': row.dependency } : {}),
        ...(row.error ? { 'rabbit_retry.error': row.error } : {}),
      });
      drains.get(row.rowId)?.end();
      drains.set(row.rowId, span);
      const out = injected(a, parent, span);
      return out.traceparent ? { traceparent: out.traceparent, tracestate: out.tracestate } : null;
    },
    end(drain) {
      const span = drains.get(drain.rowId);
      if (!span) return;
      drains.delete(drain.rowId);
      if (drain.error) span.setStatus({ code: a.SpanStatusCode.ERROR, message: drain.error });
      span.end();
    },
  };
}
