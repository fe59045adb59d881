/**
 * The operators' console: parked messages grouped by failure, replayed or
 * purged by group at a safe rate, and the retry table's dependencies, in a
 * web page served by {@link startConsole} (`rabbit-retry ui`) or mounted in a
 * service with {@link RabbitRetryConsole.handle}.
 */
export {
  RabbitRetryConsole,
  CONSOLE_TOKEN_HEADER,
  CONSOLE_TOKEN_ENV,
  CONSOLE_MIN_TOKEN_LENGTH,
  type ConsoleOptions,
  type ConsoleHandler,
  type ConsoleErrorCode,
  type ConsoleState,
  type QueueView,
  type TableView,
  type DependencyView,
  type RowView,
  type GroupsAnswer,
} from './console';
export { startConsole, DEFAULT_CONSOLE_PORT, type StartConsoleOptions, type ConsoleServer } from './server';
export { fingerprint, normalizeMessage, userFrame, type Fingerprint } from './fingerprint';
export { messageKey, type Grouping, type ParkedGroup, type MessageSummary, type MessageDetail, type BodyView } from './views';
export type { JobView, JobKind, JobScope } from './jobs';
export type { KnownQueue, ManagementStatus } from './discovery';
