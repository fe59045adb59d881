/**
 * The operators' console: parked messages grouped by failure, replayed or
 * purged by group at a safe rate, and the retry table's dependencies, in a
 * web page served by {@link startConsole} (`rabbit-retry ui`) or mounted in a
 * service with {@link RabbitRetryConsole.handle}.
 */
export { RabbitRetryConsole } from './console';
export { CONSOLE_TOKEN_HEADER, CONSOLE_TOKEN_ENV, CONSOLE_MIN_TOKEN_LENGTH } from './auth';
export type { ConsoleOptions } from './options';
export type { ConsoleHandler, ConsoleErrorCode } from './http';
export type { ConsoleState, QueueView } from './state';
export type { TableView, DependencyView, RowView } from './table-view';
export type { OutboxView, ParkedOutboxRowView, InboxDuplicatesView } from './outbox-view';
export type { GroupsAnswer } from './groups';
export type { EditAnswer } from './edit';
export type { EditView } from './edit-view';
export type { Timeline, Timelines, TimelineGroup, TimelineResolution } from './timeline';
export { startConsole, DEFAULT_CONSOLE_PORT, type StartConsoleOptions, type ConsoleServer } from './server';
export { fingerprint, normalizeMessage, userFrame, type Fingerprint } from './fingerprint';
export { messageKey, type Grouping, type ParkedGroup, type MessageSummary, type MessageDetail, type BodyView } from './views';
export type { JobView, JobKind, JobScope } from './jobs';
export type { KnownQueue, ManagementStatus } from './discovery';
