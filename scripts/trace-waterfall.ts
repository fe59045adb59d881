/**
 * `npm run trace:waterfall`: one retried message's trace, from a real run,
 * drawn as a trace viewer shows it (docs/trace-waterfall.svg).
 *
 * A producer on amqplib with OpenTelemetry's amqplib instrumentation publishes
 * shipment.requested for order 48213; the rabbit-retry consumer's carrier call
 * fails twice with a 503 and succeeds on the third attempt. The spans go to an
 * in-memory exporter and are drawn one row each, indented under their parent,
 * on a common time axis.
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { InMemorySpanExporter, BasicTracerProvider, ReadableSpan } from '@opentelemetry/sdk-trace-base';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { exporter, provider } = require('../__test__/fixtures/otel-sdk.js') as { exporter: InMemorySpanExporter; provider: BasicTracerProvider };

// After the instrumentation, so that amqplib is patched.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const amqp = require('amqplib') as typeof import('amqplib');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { RabbitRetry, parkedQueueName, retryQueueName } = require('../lib') as typeof import('../lib');

const URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const OUT = join(__dirname, '..', 'docs', 'trace-waterfall.svg');

const ms = (t: [number, number]) => t[0] * 1000 + t[1] / 1e6;

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** The spans of one trace as rows: depth-first under their parents, each level by start time. */
function rows(spans: ReadableSpan[]): { span: ReadableSpan; depth: number }[] {
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  const children = new Map<string | undefined, ReadableSpan[]>();
  for (const s of spans) {
    const parent = s.parentSpanContext?.spanId;
    const key = parent && ids.has(parent) ? parent : undefined;
    children.set(key, [...(children.get(key) ?? []), s]);
  }
  const out: { span: ReadableSpan; depth: number }[] = [];
  const walk = (key: string | undefined, depth: number) => {
    for (const s of (children.get(key) ?? []).sort((a, b) => ms(a.startTime) - ms(b.startTime))) {
      out.push({ span: s, depth });
      walk(s.spanContext().spanId, depth + 1);
    }
  };
  walk(undefined, 0);
  return out;
}

function svg(spans: ReadableSpan[]): string {
  const list = rows(spans);
  const t0 = Math.min(...spans.map((s) => ms(s.startTime)));
  const t1 = Math.max(...spans.map((s) => ms(s.endTime)));
  const label = 420;
  const width = 1000;
  const axis = width - label - 70;
  const rowH = 26;
  const top = 64;
  const height = top + list.length * rowH + 40;
  const x = (t: number) => label + ((t - t0) / (t1 - t0)) * axis;
  const colour = (s: ReadableSpan) =>
    s.status.code === SpanStatusCode.ERROR ? '#d9534f' : s.kind === SpanKind.CONSUMER ? '#5b8def' : s.kind === SpanKind.PRODUCER ? '#3fa773' : '#9a7fd1';
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="ui-monospace, Menlo, Consolas, monospace" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="12" y="22" font-size="14" font-weight="bold">Trace of order 48213: two carrier 503s, then success (one trace, ${spans.length} spans, ${((t1 - t0) / 1000).toFixed(2)} s)</text>`,
    `<text x="12" y="42" fill="#555">green: send (producer) · blue: process (consumer) · red: status error · purple: the handler's own span</text>`,
  ];
  for (let s = 0; s <= Math.floor((t1 - t0) / 500); s++) {
    const t = t0 + s * 500;
    parts.push(`<line x1="${x(t).toFixed(1)}" y1="${top - 6}" x2="${x(t).toFixed(1)}" y2="${height - 30}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${x(t).toFixed(1)}" y="${height - 14}" text-anchor="middle" fill="#777">${(s * 0.5).toFixed(1)} s</text>`);
  }
  list.forEach(({ span, depth }, i) => {
    const y = top + i * rowH;
    const start = x(ms(span.startTime));
    const w = Math.max(2, x(ms(span.endTime)) - start);
    const attempt = span.attributes['rabbit_retry.attempt'];
    const extra = span.kind === SpanKind.CONSUMER && attempt !== undefined ? ` (attempt ${String(attempt)})` : '';
    parts.push(`<text x="${12 + depth * 14}" y="${y + 16}">${escape(span.name + extra)}</text>`);
    parts.push(`<rect x="${start.toFixed(1)}" y="${y + 4}" width="${w.toFixed(1)}" height="16" rx="2" fill="${colour(span)}"/>`);
    const dur = ms(span.endTime) - ms(span.startTime);
    parts.push(`<text x="${(start + w + 4).toFixed(1)}" y="${y + 16}" fill="#555">${dur < 10 ? dur.toFixed(1) : dur.toFixed(0)} ms</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

async function main(): Promise<void> {
  const queue = 'shipment.requested.traced';
  const delays = ['500ms', '1s'] as const;
  const rr = await RabbitRetry.connect({ url: URL });
  const names = [queue, parkedQueueName(queue), ...delays.map((d) => retryQueueName(queue, d))];
  const admin = await amqp.connect(URL);
  const ach = await admin.createChannel();
  for (const q of names) await ach.deleteQueue(q);
  await admin.close();
  const tracer = trace.getTracer('shipping-service');
  let calls = 0;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const consumer = await rr.consume({ queue, onFailure: { delays: [...delays] } }, async () => {
    calls++;
    await tracer.startActiveSpan('POST carrier /rates', async (span) => {
      await new Promise((r) => setTimeout(r, 20));
      if (calls < 3) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: '503' });
        span.end();
        throw new Error('carrier answered 503 Service Unavailable');
      }
      span.end();
    });
    done();
  });
  const conn = await amqp.connect(URL);
  const ch = await conn.createConfirmChannel();
  ch.sendToQueue(queue, Buffer.from(JSON.stringify({ orderId: 48213 })), { messageId: 'order-48213', persistent: true });
  await ch.waitForConfirms();
  await finished;
  await new Promise((r) => setTimeout(r, 300));
  await consumer.close();
  for (const q of names) await ch.deleteQueue(q);
  await conn.close();
  await rr.close();
  await provider.forceFlush();
  const spans = exporter
    .getFinishedSpans()
    .filter((s) => !s.name.startsWith('publish <default>') || s.attributes['messaging.rabbitmq.routing_key'] === queue);
  const traceIds = new Set(spans.map((s) => s.spanContext().traceId));
  if (traceIds.size !== 1) throw new Error(`expected one trace, got ${traceIds.size}`);
  mkdirSync(join(__dirname, '..', 'docs'), { recursive: true });
  writeFileSync(OUT, svg(spans));
  console.log(`trace-waterfall: ${spans.length} spans in one trace -> ${OUT}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
