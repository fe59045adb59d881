/**
 * The options of rabbit-retry's API: the client's and a consumer's, their
 * types, the tables of their keys and the defaults applied in TypeScript
 * (lib/options/check.ts checks them). A part's own options stand in its folder
 * (table/options.ts, circuit/options.ts, inbox/options.ts, outbox/options.ts)
 * and are handed on from here.
 * The defaults of the consume options the native layer takes are the native
 * layer's (`consumeDefaults()`); the `@default`s here describe them.
 */
import type { MessageProperties } from '../message';
import type { OutboxOptions } from '../outbox/options';
import type { RetryTableOptions } from '../table/options';
import type { MeterProviderLike } from '../telemetry/otel';
import type { OptionKeys } from './shape';

export { type Delay, DEFAULT_DELAYS } from './delay';
export type { OptionKeys } from './shape';
export { type QueueArguments, type ParkedAlert, type RetryTableAlert } from './values';
export {
  type ConsumeOptions,
  type OnFailureOptions,
  type BrokerDelayOptions,
  type TableRouteOptions,
  type CircuitOptions,
  type AlertOptions,
  type RecoveryOptions,
  type FaultOptions,
  CONSUME_OPTION_KEYS,
  ON_FAILURE_OPTION_KEYS,
  BROKER_DELAY_OPTION_KEYS,
  TABLE_ROUTE_OPTION_KEYS,
  CIRCUIT_OPTION_KEYS,
  ALERT_OPTION_KEYS,
  RECOVERY_OPTION_KEYS,
  FAULT_OPTION_KEYS,
} from './consume.generated';
export { type RetryTableOptions, RETRY_TABLE_OPTION_KEYS } from '../table/options';

/** How to connect to the broker. */
export interface ConnectOptions {
  /**
   * `amqp://user:password@host:5672/vhost`, or the URLs of the nodes of one
   * cluster: the client connects to one of them and, when its connection is
   * lost, moves to the next.
   * @default process.env.AMQP_URL (several separated by commas), else `amqp://guest:guest@127.0.0.1:5672`
   */
  url?: string | readonly string[];
  /**
   * The order the nodes of `url` are tried in: `shuffle` spreads the clients
   * of a fleet over the nodes; `ordered` tries them as listed (a preferred
   * node first).
   * @default 'shuffle'
   */
  hostOrder?: 'shuffle' | 'ordered';
  /** The name the broker's tools show for this connection. */
  connectionName?: string;
  /** Heartbeat in seconds. @default the broker's (60) */
  heartbeat?: number;
  /** Milliseconds to wait for the broker before `connect` rejects. @default 10000 */
  connectTimeoutMs?: number;
  /** Milliseconds to wait for a publisher confirm before a publish counts as failed. @default 30000 */
  confirmTimeoutMs?: number;
  /** TLS settings for `amqps://` URLs. */
  tls?: TlsOptions;
  /** The retry table in PostgreSQL, for `onFailure.table`. */
  retryTable?: RetryTableOptions;
  /** The transactional outbox in PostgreSQL, and its relay. */
  outbox?: OutboxOptions;
  /**
   * Where warnings go when nobody listens for a consumer's `error` event. A
   * logger that throws, or returns a Promise that rejects, is ignored.
   * @default console
   */
  logger?: Logger;
  /** The OpenTelemetry meter provider for metrics. @default the global one of `@opentelemetry/api` when installed; else no metrics */
  meterProvider?: MeterProviderLike;
}

/** The keys of {@link ConnectOptions}. @internal */
export const CONNECT_OPTION_KEYS = {
  url: true,
  hostOrder: true,
  connectionName: true,
  heartbeat: true,
  connectTimeoutMs: true,
  confirmTimeoutMs: true,
  tls: true,
  retryTable: true,
  outbox: true,
  logger: true,
  meterProvider: true,
} satisfies OptionKeys<ConnectOptions>;

/** TLS settings for `amqps://` URLs. */
export interface TlsOptions {
  /** A PEM file of certificate authorities to trust (instead of the system's). */
  caFile?: string;
  /** Certificate authorities to trust, PEM. */
  ca?: string | Buffer;
  /** A PEM client certificate file, for brokers that authenticate clients by certificate. */
  certFile?: string;
  /** The PEM PKCS#8 private key file of `certFile`. */
  keyFile?: string;
}

/** The keys of {@link TlsOptions}. @internal */
export const TLS_OPTION_KEYS = { caFile: true, ca: true, certFile: true, keyFile: true } satisfies OptionKeys<TlsOptions>;

/** The part of a logger rabbit-retry uses. */
export interface Logger {
  /** Logs a warning. */
  warn(message: string): void;
  /** Logs an error. */
  error(message: string): void;
}

/** How long a handler may run before it counts as stuck: 5 minutes. */
export const DEFAULT_STUCK_AFTER_MS = 300_000;

/** Options of `Consumer.close` and `RabbitRetry.close`. */
export interface CloseOptions {
  /**
   * How long to wait for in-flight handlers. When it passes, the consumer's
   * channel closes anyway and the broker takes back, unacked, the messages of
   * the handlers still running (they are redelivered); what those handlers do
   * afterwards is dropped. `Infinity` waits for ever.
   * @default 30000
   */
  timeoutMs?: number;
}

/** The keys of {@link CloseOptions}. @internal */
export const CLOSE_OPTION_KEYS = { timeoutMs: true } satisfies OptionKeys<CloseOptions>;

/** How long `close` waits for in-flight handlers by default: 30 seconds. */
export const DEFAULT_CLOSE_TIMEOUT_MS = 30_000;

/** Options of {@link RabbitRetry.publish}. */
export interface PublishOptions extends Omit<MessageProperties, 'timestamp' | 'expiration' | 'deliveryMode'> {
  /** A `Date`, or seconds since the epoch. */
  timestamp?: Date | number;
  /** Per-message TTL in milliseconds. */
  expiration?: string | number;
  /** Whether the broker writes the message to disk. @default true */
  persistent?: boolean;
  /** Application headers. */
  headers?: Record<string, unknown>;
}
