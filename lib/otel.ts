/**
 * `@opentelemetry/api`, an optional peer dependency, loaded in one place:
 * traces, the consumers' metrics and the retry table's gauge all reach it
 * through {@link otelApi}, and each works without it.
 */
import type { Context, Span, SpanKind, SpanStatusCode, Tracer } from '@opentelemetry/api';

/** The part of an OpenTelemetry `MeterProvider` rabbit-retry uses. */
export interface MeterProviderLike {
  /** Returns a meter (an `@opentelemetry/api` `Meter`). */
  getMeter(name: string, version?: string): unknown;
}

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
  metrics: MeterProviderLike;
  ROOT_CONTEXT: Context;
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

/** `provider`, else the global meter provider of `@opentelemetry/api` when it is installed. @internal */
export function meterProviderOr(provider: MeterProviderLike | undefined): MeterProviderLike | undefined {
  return provider ?? otelApi()?.metrics;
}
