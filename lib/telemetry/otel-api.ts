/**
 * `@opentelemetry/api`, an optional peer dependency, loaded in one place:
 * traces, the consumers' metrics and the retry table's gauge all reach it
 * through {@link otelApi}, and each works without it. Its types stay in this
 * module, which no published type names, so a project without the package
 * still type-checks against rabbit-retry's declarations.
 * @internal
 */
import type { Context, Span, SpanKind, SpanStatusCode, Tracer } from '@opentelemetry/api';

/** What rabbit-retry uses of `@opentelemetry/api`. @internal */
export interface OtelApi {
  trace: {
    getTracerProvider(): { getTracer(name: string, version?: string): Tracer };
    setSpan(ctx: Context, span: Span): Context;
    getSpan(ctx: Context): Span | undefined;
  };
  context: { active(): Context; with<T>(ctx: Context, fn: () => T): T };
  propagation: {
    inject(ctx: Context, carrier: Record<string, unknown>): void;
    extract(ctx: Context, carrier: Record<string, unknown>, getter?: unknown): Context;
  };
  /** The global meter provider. */
  metrics: { getMeter(name: string, version?: string): unknown };
  ROOT_CONTEXT: Context;
  /** The provider the API hands out; its delegate is the API's no-op provider until one is registered. */
  ProxyTracerProvider: new () => { getDelegate(): unknown };
  /** The span kinds. */
  SpanKind: typeof SpanKind;
  /** A span status's codes. */
  SpanStatusCode: typeof SpanStatusCode;
}

/**
 * `@opentelemetry/api`, or undefined when it is not installed. Read anew at
 * each call (the module system keeps the module once loaded): who calls it
 * often keeps the answer.
 * @internal
 */
export function otelApi(): OtelApi | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('@opentelemetry/api') as OtelApi;
  } catch {
    return undefined;
  }
}
