/**
 * The layers of lib/, from the ground up, for .dependency-cruiser.cjs and scripts/check-structure.mjs. A module
 * may import modules of its own layer and of lower ones:
 *
 *   base      native, errors, contract, support/error-text, support/redact, telemetry/otel, telemetry/otel-api: no
 *             library module below them
 *   model     options/ (but for its checks, keys and native form), each part's options (table/options,
 *             circuit/options, inbox/options, outbox/options), sql/transaction, message, wire, telemetry/metrics: what
 *             the options and a message are, and what rabbit-retry needs of the user's database
 *   tools     messaging/, options/keys, options/check, options/consume-check.generated, support/fence, support/log,
 *             telemetry/tracing, sql/
 *   circuit   circuit/: one dependency's breaker, which consumers share
 *   parts     table/, parked/, consumer/, inbox/, outbox/: each stands alone, none imports another
 *   client    client, options/native: the RabbitRetry connection that puts the parts together
 *   surfaces  console/, testing/: built on the client
 *   entries   index (the package's main export) and cli/: what a user reaches first
 *   nestjs    nestjs/: the NestJS module, over the main export
 *   micro     microservices/: the NestJS transport, over the NestJS module
 *
 * A module is named by its file (`lib/errors.ts`, `lib/support/fence.ts`) or its folder (`lib/consumer/`, which
 * also takes a `lib/consumer.ts` beside it). A file named more closely by another entry belongs to that entry's
 * layer: `lib/table/options.ts` is the model's, the rest of `lib/table/` the parts'. scripts/check-structure.mjs
 * refuses a lib/ file that no layer names, so a new module is placed on purpose.
 */
const LAYERS = [
  ['base', ['native', 'errors', 'contract', 'support/error-text', 'support/redact', 'telemetry/otel', 'telemetry/otel-api']],
  ['model', ['options', 'table/options', 'circuit/options', 'inbox/options', 'outbox/options', 'sql/transaction', 'message', 'wire', 'telemetry/metrics']],
  ['tools', ['messaging', 'options/keys', 'options/check', 'options/consume-check.generated', 'support/fence', 'support/log', 'telemetry/tracing', 'sql']],
  ['circuit', ['circuit']],
  ['parts', ['table', 'parked', 'consumer', 'inbox', 'outbox']],
  ['client', ['client', 'options/native']],
  ['surfaces', ['console', 'testing']],
  ['entries', ['index', 'cli']],
  ['nestjs', ['nestjs']],
  ['micro', ['microservices']],
];

const ALL = LAYERS.flatMap(([, modules]) => modules);

/** One module's pattern: its file, or its folder but for the files other entries name more closely. */
function one(name) {
  const closer = ALL.filter((other) => other.startsWith(`${name}/`)).map((other) => other.slice(name.length + 1));
  const except = closer.length === 0 ? '' : `(?!(${closer.join('|')})(\\.ts$|/))`;
  return `${name}(\\.ts$|/${except})`;
}

/** A path pattern for these modules: each as a file of lib/ or as a folder. */
const pathOf = (names) => `^lib/(${names.map(one).join('|')})`;

module.exports = { LAYERS, pathOf };
