/**
 * rabbit-retry: the failure path of a RabbitMQ consumer. Handler errors are
 * never requeued; failed messages wait in one retry queue per delay and park
 * with their error when retries run out; every move is a confirmed publish
 * before the ack.
 */
import * as names from './native';
import type { Delay } from './options';

export { RabbitRetry, DEFAULT_URL } from './client';
export type { Body } from './messaging/publish';
export type { RequestOptions } from './messaging/request';
export { Consumer } from './consumer';
export type {
  Handler,
  ConsumerEvents,
  RetryEvent,
  ParkedEvent,
  PublishFailedEvent,
  FaultFailedEvent,
  ConsumerStats,
  ConsumerState,
  DisconnectedEvent,
  RecoveredEvent,
  StoredEvent,
  StuckEvent,
  DuplicateEvent,
  ConsumerHealth,
  CloseResult,
  SchedulerStopResult,
} from './consumer/events';
export { RetryTable, type RowSelector, type ListOptions, type RetryRow, type RetryTableStats, type PauseWhenOptions, type DependencyWatch } from './table';
export type { MeterProviderLike } from './telemetry/otel';
export {
  Outbox,
  type OutboxStats,
  type OutboxParkReason,
  type ParkedOutboxRow,
  type InboxDuplicateCount,
  type OutboxTransaction,
  type OutboxPublishOptions,
} from './outbox/outbox';
export type { OutboxOptions } from './outbox/options';
export { PARK_REASONS, OUTBOX_PARK_REASONS, NATIVE_ERROR_CODES, type ParkReason, type NativeErrorCode } from './contract';
export { Message, type MessageProperties } from './message';
export type { InboxOptions, InboxPoolOptions, InboxAdapterOptions, InboxCommonOptions, InboxContext, InboxHandler } from './inbox/options';
export {
  pgAdapter,
  typeormAdapter,
  migrateTables,
  type TransactionAdapter,
  type SqlResult,
  type PgPoolLike,
  type PgClientLike,
  type PgClientOf,
  type PgPoolWithCallback,
  type PgQueryResultLike,
  type TypeormDataSourceLike,
  type TypeormManagerLike,
  type TransactionLike,
  type AdapterTransaction,
  type QueryableLike,
} from './sql';
export {
  DEFAULT_DELAYS,
  DEFAULT_STUCK_AFTER_MS,
  DEFAULT_CLOSE_TIMEOUT_MS,
  type CloseOptions,
  type ConnectOptions,
  type ConsumeOptions,
  type QueueArguments,
  type OnFailureOptions,
  type BrokerDelayOptions,
  type Delay,
  type Logger,
  type AlertOptions,
  type ParkedAlert,
  type RetryTableAlert,
  type RecoveryOptions,
  type FaultOptions,
  type TlsOptions,
  type RetryTableOptions,
  type TableRouteOptions,
  type CircuitOptions,
  type PublishOptions,
} from './options';
export type { DeclareOptions, ExchangeDeclareOptions, QueueDeclareOptions } from './messaging/declare';
export {
  RabbitRetryError,
  NonRetryableError,
  InboxError,
  InboxRefusedError,
  AccessRefusedError,
  NotFoundError,
  PreconditionFailedError,
  NoHandlerError,
  UnsupportedOptionError,
  TopologyMismatchError,
  UnroutableError,
  PublishNackedError,
  PublishFailedError,
  ConnectionError,
  InvalidOptionsError,
  ClosedError,
  RetryTableError,
  ReplyRefusedError,
  BrokerUnsupportedError,
  RequestTimeoutError,
  RemoteError,
  NotParkedError,
  AmbiguousMessageIdError,
  type ErrorCode,
  JS_ERROR_CODES,
} from './errors';
export {
  Parked,
  ParkedMessage,
  type ParkedFilter,
  type PeekOptions,
  type ReplayOptions,
  type ReplayProgress,
  type ReplayResult,
  type ReplayTarget,
  type PurgeOptions,
  type PurgeProgress,
  type ParkedEdit,
  type EditOptions,
  type EditResult,
} from './parked';
export { parkedQueueName } from './native';

/** The label of a delay in queue names: its largest exact unit (`500ms`, `5s`, `90s`, `1m`, `2h`). */
export function delayLabel(delay: Delay): string {
  return names.delayLabel(delay);
}

/** The retry queue of `queue` for `delay`: `<queue>.retry.<label>`. */
export function retryQueueName(queue: string, delay: Delay): string {
  return names.retryQueueName(queue, delay);
}

export {
  CIRCUIT_DEFAULTS,
  type CircuitState,
  type CircuitStatus,
  type CircuitRecord,
  type CircuitCloseCause,
  type CircuitOpenEvent,
  type CircuitHalfOpenEvent,
  type CircuitClosedEvent,
} from './circuit';
export { circuitQueueName } from './consumer/circuit-io';
export {
  RabbitRetryConsole,
  startConsole,
  fingerprint,
  normalizeMessage,
  userFrame,
  messageKey,
  CONSOLE_TOKEN_HEADER,
  CONSOLE_TOKEN_ENV,
  CONSOLE_MIN_TOKEN_LENGTH,
  DEFAULT_CONSOLE_PORT,
  type ConsoleOptions,
  type ConsoleHandler,
  type ConsoleErrorCode,
  type ConsoleState,
  type ConsoleServer,
  type StartConsoleOptions,
  type QueueView,
  type TableView,
  type DependencyView,
  type RowView,
  type OutboxView,
  type ParkedOutboxRowView,
  type InboxDuplicatesView,
  type GroupsAnswer,
  type Fingerprint,
  type Grouping,
  type ParkedGroup,
  type MessageSummary,
  type MessageDetail,
  type BodyView,
  type JobView,
  type JobKind,
  type JobScope,
  type KnownQueue,
  type ManagementStatus,
  type EditAnswer,
  type EditView,
  type Timeline,
  type Timelines,
  type TimelineGroup,
  type TimelineResolution,
} from './console';
