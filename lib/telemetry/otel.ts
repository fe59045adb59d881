/**
 * What the options say of OpenTelemetry's metrics, without naming
 * `@opentelemetry/api` (an optional peer dependency): the package itself is
 * loaded by lib/telemetry/otel-api.ts.
 */
import { otelApi } from './otel-api';

/** The part of an OpenTelemetry `MeterProvider` rabbit-retry uses. */
export interface MeterProviderLike {
  /** Returns a meter (an `@opentelemetry/api` `Meter`). */
  getMeter(name: string, version?: string): unknown;
}

/** `provider`, else the global meter provider of `@opentelemetry/api` when it is installed. @internal */
export function meterProviderOr(provider: MeterProviderLike | undefined): MeterProviderLike | undefined {
  return provider ?? otelApi()?.metrics;
}
