/**
 * The layers of lib/, from the ground up, for .dependency-cruiser.cjs and scripts/check-structure.mjs. A module
 * may import modules of its own layer and of lower ones:
 *
 *   base      native, errors, error-text, otel, otel-api, redact, contract: no library module below them
 *   model     options, outbox-options, delay, recovery, message, wire, metrics, transaction, inbox-options: what
 *             the options and a message are, and what rabbit-retry needs of the user's database
 *   tools     names, topic, declare, option-keys, check-options, fence, log, tracing, publish, replies, request, sql
 *   circuit   circuit: one dependency's breaker, which consumers share
 *   parts     table, parked, consumer/, inbox/, outbox/: each stands alone, none imports another
 *   client    client, native-options: the RabbitRetry connection that puts the parts together
 *   surfaces  console/, testing/: built on the client
 *   entries   index (the package's main export) and cli/: what a user reaches first
 *   nestjs    nestjs/: the NestJS module, over the main export
 *   micro     microservices/: the NestJS transport, over the NestJS module
 *
 * A module is named by its file (`lib/fence.ts`) or its folder (`lib/consumer/`, which also takes a
 * `lib/consumer.ts` beside it). scripts/check-structure.mjs refuses a lib/ file that no layer names, so a new
 * module is placed on purpose.
 */
const LAYERS = [
  ['base', ['native', 'errors', 'error-text', 'otel', 'otel-api', 'redact', 'contract']],
  ['model', ['options', 'outbox-options', 'delay', 'recovery', 'message', 'wire', 'metrics', 'transaction', 'inbox-options']],
  ['tools', ['names', 'topic', 'declare', 'option-keys', 'check-options', 'fence', 'log', 'tracing', 'publish', 'replies', 'request', 'sql']],
  ['circuit', ['circuit']],
  ['parts', ['table', 'parked', 'consumer', 'inbox', 'outbox']],
  ['client', ['client', 'native-options']],
  ['surfaces', ['console', 'testing']],
  ['entries', ['index', 'cli']],
  ['nestjs', ['nestjs']],
  ['micro', ['microservices']],
];

/** A path pattern for these modules: each as a file of lib/ or as a folder. */
const pathOf = (names) => `^lib/(${names.join('|')})(\\.ts$|/)`;

module.exports = { LAYERS, pathOf };
