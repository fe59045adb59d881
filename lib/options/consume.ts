/**
 * Every option of `rr.consume`, declared once (see lib/options/declare.ts):
 * `scripts/options.ts` writes from this the option types and their keys
 * (lib/options/consume.generated.ts), their checks and native form
 * (lib/options/consume-check.generated.ts), the native layer's struct
 * (src/binding/spec/options.rs) and defaults (src/consumer/defaults.rs), and
 * the table of docs/api.md. Callbacks are declared here too, by their
 * signature: they cannot cross, and are called in TypeScript.
 */
import type { Shape } from './declare';

/** Whole-number limits the checks name. */
const U32 = 4294967295;

/** What the consume options' written files import. */
export const CONSUME_IMPORTS = [
  "import type { InboxOptions } from '../inbox/options';",
  "import type { Message } from '../message';",
  "import type { Delay } from './delay';",
  "import type { ParkedAlert, QueueArguments, RetryTableAlert } from './values';",
  "import type { OptionKeys } from './shape';",
];

const recovery: Shape = {
  name: 'RecoveryOptions',
  doc: 'Reconnecting after a lost channel or connection: exponential backoff with jitter.',
  asOption: {
    doc: 'How the consumer reconnects after losing its channel or connection.',
    default: 'each field its own',
    row: 'how the consumer reconnects: `initialDelayMs` (500), `maxDelayMs` (30000), `maxAttempts` (never give up), `stepTimeoutMs` (15000)',
  },
  fields: {
    initialDelayMs: {
      type: 'number',
      doc: 'The first wait, in milliseconds.',
      default: '500',
      rule: { kind: 'native-whole', what: 'a whole number of milliseconds' },
      native: {
        field: 'recovery_initial_delay_ms',
        rust: 'u32',
        as: 'same',
        default: { name: 'DEFAULT_RECOVERY_INITIAL_DELAY_MS', rust: 'u64', value: '500' },
      },
    },
    maxDelayMs: {
      type: 'number',
      doc: 'The longest wait, in milliseconds.',
      default: '30000',
      rule: { kind: 'native-whole', what: 'a whole number of milliseconds' },
      native: {
        field: 'recovery_max_delay_ms',
        rust: 'u32',
        as: 'same',
        default: { name: 'DEFAULT_RECOVERY_MAX_DELAY_MS', rust: 'u64', value: '30_000' },
      },
    },
    maxAttempts: {
      type: 'number',
      doc: 'Give up after this many tries: the consumer closes and emits `error`.',
      default: 'Infinity (never give up)',
      rule: { kind: 'by-hand' },
      native: { field: 'recovery_max_attempts', rust: 'u32', as: 'by-hand' },
    },
    stepTimeoutMs: {
      type: 'number',
      doc:
        'How long one broker round trip of starting, recovering or stopping the consumer (declare, channel open, qos, consume, ' +
        'cancel, ack, channel close) may take before it counts as failed: a broker that stops answering cannot hold recovery or ' +
        '`close()` for good.',
      default: '15000',
      rule: { kind: 'native-whole', what: 'a whole number of milliseconds' },
      native: {
        field: 'recovery_step_timeout_ms',
        rust: 'u32',
        as: 'same',
        default: { name: 'DEFAULT_STEP_TIMEOUT_MS', rust: 'u64', value: '15_000' },
      },
    },
  },
};

const brokerDelay: Shape = {
  name: 'BrokerDelayOptions',
  doc: "The broker's own delayed retry (see {@link OnFailureOptions.brokerDelay}).",
  asOption: {
    doc: 'RabbitMQ 4.3 quorum queues, instead of `delays`: the broker holds a failed message itself, without retry queues (docs/broker-delay.md).',
    row: "`{ min, max, attempts }`: RabbitMQ 4.3 quorum queues hold a failed message themselves, without retry queues ([the broker's delayed retry](broker-delay.md))",
  },
  fields: {
    min: {
      type: 'Delay',
      doc: "The delay after the first failure, and the step each later failure adds: `'5s'`, or milliseconds.",
      required: true,
      rule: { kind: 'by-hand' },
      native: { field: 'broker_delay_min', rust: 'String', as: 'delay' },
    },
    max: {
      type: 'Delay',
      doc: "The longest delay: `'5m'`, or milliseconds.",
      required: true,
      rule: { kind: 'by-hand' },
      native: { field: 'broker_delay_max', rust: 'String', as: 'delay' },
    },
    attempts: {
      type: 'number',
      doc: 'Returns to the broker before a retryable failure parks as exhausted; at least 1.',
      required: true,
      rule: { kind: 'by-hand' },
      native: { field: 'broker_delay_attempts', rust: 'u32', as: 'same' },
    },
  },
};

const table: Shape = {
  name: 'TableRouteOptions',
  doc: 'How failures go into the retry table.',
  asOption: {
    doc:
      'After the delays, store failures in the retry table (PostgreSQL, see `ConnectOptions.retryTable`) instead of parking them: ' +
      'for failures that wait on a person or a condition, not a clock. `delays: []` uses the table alone.',
    row: '`{ dependency, tenant, nextAttemptAt, maxAttempts }`: the [retry table](retry-table.md)',
  },
  fields: {
    dependency: {
      type: '(err: unknown, msg: Message) => string | undefined',
      doc:
        'What the message waits on (a carrier, a service), for `pause`/`resume`/`pauseWhen`. A throw, or an answer other than a ' +
        'string or `undefined`, stores the row without one (with a warning).',
      rule: { kind: 'function' },
    },
    tenant: {
      type: '(msg: Message) => string | undefined',
      doc:
        'Whose message it is, for `pause`/`resume`. A throw, or an answer other than a string or `undefined`, stores the row ' +
        'without one (with a warning).',
      rule: { kind: 'function' },
    },
    nextAttemptAt: {
      type: '(err: unknown, attempt: number) => Date | null',
      doc:
        'When the row is due: a Date, or `null` to wait for a person (`resume`, `retryNow`). `attempt` is the attempt count the ' +
        'row carries. A throw, an invalid Date or any other answer makes it due in one minute (with a warning).',
      default: 'one minute from now',
      rule: { kind: 'function' },
    },
    maxAttempts: {
      type: 'number',
      doc: 'Attempts through the table before the message parks as exhausted.',
      default: '10',
      rule: { kind: 'native-whole', what: 'a whole number of at least 1' },
      native: {
        field: 'table_max_attempts',
        rust: 'u32',
        as: 'same',
        default: { name: 'DEFAULT_TABLE_MAX_ATTEMPTS', rust: 'u32', value: '10' },
      },
    },
  },
};

const circuit: Shape = {
  name: 'CircuitOptions',
  doc: "A consumer's circuit breaker (see {@link OnFailureOptions.circuit}).",
  asOption: {
    doc:
      'A circuit breaker: after a run of retryable failures the consumer stops taking messages (they wait in the work queue, in ' +
      'order), probes the dependency every `probeEvery`, and consumes again when a probe succeeds, sending what waits in its retry ' +
      'queues back at once. Consumers of one process that name the same `dependency` share one circuit.',
    row: '`{ dependency, openAfter, probeEvery, closeAfter, check, returnRate }`: [outage mode](outage-mode.md#reference-options)',
  },
  fields: {
    dependency: {
      type: 'string',
      doc: 'What the circuit guards (a carrier, a service). Consumers of one process that name the same dependency share one circuit, with the same options.',
      default: "the work queue's name: a circuit of its own",
      rule: { kind: 'by-hand' },
    },
    openAfter: {
      type: '{\n    /** Retryable failures that open it. */\n    failures: number;\n    /** The window they fall in. */\n    within: Delay;\n  }',
      doc:
        'It opens after this many retryable failures (errors the `retryable` predicate retries) within this window. A ' +
        '{@link NonRetryableError} does not count: it says the message is bad, not the dependency.',
      default: "{ failures: 5, within: '10s' }",
      rule: { kind: 'by-hand' },
    },
    probeEvery: { type: 'Delay', doc: 'While open, a probe this often.', default: "'5s'", rule: { kind: 'by-hand' } },
    closeAfter: { type: 'number', doc: 'Probes that must succeed in a row to close it.', default: '1', rule: { kind: 'by-hand' } },
    check: {
      type: '() => Promise<boolean> | boolean',
      doc:
        'A health check of the dependency. When given, it is the probe: called every `probeEvery` while open (no message is ' +
        'spent), `true` closes the circuit. `false`, a throw or a rejection (of any value), an answer that is not a boolean, or no ' +
        'answer within `probeEvery` is a failed check: it keeps the circuit open (with a warning, but for `false`), and the next ' +
        'check comes `probeEvery` later.',
      rule: { kind: 'function', what: 'a function () => Promise<boolean>' },
    },
    returnRate: {
      type: 'number',
      doc:
        "When it closes, the messages waiting in the consumer's retry queues are sent back to the work queue at once, at this many " +
        'a second (each acked in its retry queue only after the broker confirmed its copy).',
      default: '50',
      rule: { kind: 'by-hand' },
    },
  },
};

const faults: Shape = {
  name: 'FaultOptions',
  doc: 'Fault events: one for every message that parks, for other services to compensate or alert (see {@link OnFailureOptions.faults}).',
  asOption: {
    doc:
      'Publish a fault event for every message that parks: JSON with its ids, queue, park reason, error, attempts, when it ' +
      "first failed and when it parked, and where it was first published; routed by the work queue's name, confirmed after the " +
      'park was confirmed and before the ack (at least once, never for a message that did not park). A fault event the broker ' +
      'refuses does not hold up parking: the consumer emits `faultFailed`.',
    row: "`{ exchange }`: a fault event for every message that parks, routed by the work queue's name ([fault events](parked-messages.md#fault-events))",
  },
  fields: {
    exchange: {
      type: 'string',
      doc: 'The exchange of the fault events: declared (durable, `topic`) if it does not exist.',
      required: true,
      rule: { kind: 'string', nonEmpty: true, what: 'a non-empty string: the exchange of the fault events' },
      native: { field: 'faults_exchange', rust: 'String', as: 'same' },
    },
  },
};

const onFailure: Shape = {
  name: 'OnFailureOptions',
  doc: 'What to do when a handler throws.',
  asOption: { doc: 'What to do when the handler throws.' },
  fields: {
    delays: {
      type: 'readonly Delay[]',
      doc: 'One retry queue per delay, tried in order; after the last the message parks. `[]` parks on the first failure.',
      default: "['5s', '1m', '10m']",
      rule: { kind: 'by-hand' },
      native: { field: 'delays', rust: 'Vec<String>', as: 'by-hand' },
    },
    brokerDelay,
    retryable: {
      type: '(err: unknown, msg: Message) => boolean',
      doc:
        'Whether an error is worth another attempt: `true` retries the message, `false` parks it at once (`retry-reason: ' +
        'non-retryable`). It is called synchronously and must return a boolean. Anything else it returns (`undefined`, a number, a ' +
        'string, a Promise from an async function) parks the message as non-retryable and logs a warning naming what it returned ' +
        '(once per consumer for each kind of value); a returned Promise is not awaited, and its rejection is ignored. A predicate ' +
        'that throws parks the message too. A {@link NonRetryableError} always parks, whatever this says.',
      default: 'every error but a {@link NonRetryableError}',
      rule: { kind: 'function', what: 'a function (err, msg) => boolean' },
      row: 'whether an error is worth another attempt; must return a boolean',
    },
    stackOnRetry: {
      type: 'boolean',
      doc: "The error's stack (`retry-error-stack`) on every retried copy too, not only on one that parks or goes to the retry table.",
      default: 'false',
      rule: { kind: 'boolean' },
      row: "the error's stack on a retried copy too, not only on a parked one",
    },
    retryHeaders: {
      type: "'minimal' | 'full'",
      doc:
        "The `retry-*` headers of a copy bound for a retry queue. `'minimal'`: `retry-attempt`, `retry-last-error`, " +
        '`retry-first-failed-at`, `retry-original-exchange` and `retry-original-routing-key` (and the stack with `stackOnRetry`), ' +
        "what counting its attempts and parking it later need; each header costs the broker CPU on every retry. `'full'`: the " +
        "parked copy's ten as well (`retry-reason`, `retry-error-name`, `retry-error-stack`, `retry-failed-at`, `retry-queue`). A " +
        'parked copy and a row of the retry table always carry every header.',
      default: "'minimal'",
      rule: { kind: 'oneOf', values: ['minimal', 'full'] },
      native: { field: 'full_retry_headers', rust: 'bool', as: 'full' },
      row: "`'full'`: every `retry-*` header on a retried copy, not only those counting and parking need ([headers](failure-path.md#headers-of-a-republished-message))",
    },
    table,
    circuit,
    faults,
  },
};

const alert: Shape = {
  name: 'AlertOptions',
  doc: 'Checks the parked queue on a timer and alerts once each time its depth rises above a threshold.',
  asOption: {
    doc: 'Alert when the parked queue fills up.',
    row: "`{ parkedAbove, oldestDueAboveMs, every ('1m'), onAlert, onTableAlert }`: [parked messages](parked-messages.md#1-notice)",
  },
  fields: {
    parkedAbove: { type: 'number', doc: 'Alert when the parked queue holds more than this many messages.', rule: { kind: 'by-hand' } },
    oldestDueAboveMs: {
      type: 'number',
      doc: "Alert when the retry table's oldest due row is older than this many milliseconds (a stopped scheduler).",
      rule: { kind: 'by-hand' },
    },
    every: { type: 'Delay', doc: 'How often to check.', default: "'1m'", rule: { kind: 'by-hand' } },
    onAlert: {
      type: '(alert: ParkedAlert) => void',
      doc:
        'Called on each crossing of `parkedAbove` (the consumer also emits `alert`). What it throws, or a rejection of a Promise it ' +
        'returns, is logged as a warning; the checks go on.',
      rule: { kind: 'function' },
    },
    onTableAlert: {
      type: '(alert: RetryTableAlert) => void',
      doc:
        'Called on each crossing of `oldestDueAboveMs` (the consumer also emits `tableAlert`). What it throws, or a rejection of a ' +
        'Promise it returns, is logged as a warning; the checks go on.',
      rule: { kind: 'function' },
    },
  },
};

/** `rr.consume`'s options. */
export const CONSUME: Shape = {
  name: 'ConsumeOptions',
  doc: 'What a consumer consumes, and how.',
  fields: {
    queue: {
      type: 'string',
      doc: 'The work queue; declared durable if missing (see {@link ConsumeOptions.assertQueue}).',
      required: true,
      rule: { kind: 'string', nonEmpty: true, what: 'a non-empty string: the work queue to consume' },
      native: { field: 'queue', rust: 'String', as: 'same' },
    },
    exchange: {
      type: 'string',
      doc: 'An exchange to declare (durable) and bind the queue to.',
      rule: { kind: 'string' },
      native: { field: 'exchange', rust: 'String', as: 'same' },
    },
    exchangeType: {
      type: "'topic' | 'direct' | 'fanout' | 'headers'",
      doc: "The exchange's type.",
      default: "'topic'",
      rule: { kind: 'string', what: "'topic', 'direct', 'fanout' or 'headers'" },
      native: { field: 'exchange_type', rust: 'String', as: 'same' },
    },
    routingKey: {
      type: 'string | readonly string[]',
      doc: 'The binding key, or several (each a binding to `exchange`).',
      default: 'the queue name',
      rule: { kind: 'by-hand' },
      native: { field: 'routing_key', rust: 'String', as: 'by-hand' },
    },
    prefetch: {
      type: 'number',
      doc: 'At most this many handlers in flight.',
      default: '10',
      rule: { kind: 'native-whole', what: 'a whole number from 1 to 65535' },
      native: { field: 'prefetch', rust: 'u32', as: 'same', default: { name: 'DEFAULT_PREFETCH', rust: 'u16', value: '10' } },
    },
    consumerTag: {
      type: 'string',
      doc: "The consumer's tag on the work queue (1 to 255 bytes), which the management UI shows and each {@link Message} carries.",
      default: 'one the broker makes (`amq.ctag-…`)',
      rule: { kind: 'string', nonEmpty: true },
      native: { field: 'consumer_tag', rust: 'String', as: 'same' },
      row: "the consumer's tag (the management UI shows it); each `Message` carries it as `msg.consumerTag`",
    },
    queueType: {
      type: "'classic' | 'quorum'",
      doc: 'Queue type of the work, retry and parked queues. Quorum queues are replicated; their retry queues dead-letter at-least-once.',
      default: "'classic'",
      rule: { kind: 'string', what: "'classic' or 'quorum'" },
      native: { field: 'queue_type', rust: 'String', as: 'same' },
    },
    deliveryLimit: {
      type: 'number',
      doc:
        'Quorum queues only: after this many deliveries of one message that were never settled (the process crashed on it, or the ' +
        'broker took it back from a handler that outlived `consumerTimeoutMs`), the message parks with `retry-reason: ' +
        "delivery-limit` (or `consumer-timeout`) without calling the handler again. The broker's own `x-delivery-limit` is set one " +
        'above it, dead-lettering to the parked queue, as a backstop.',
      default: '5',
      rule: { kind: 'native-whole', what: 'a whole number of at least 1' },
      native: {
        field: 'delivery_limit',
        rust: 'u32',
        as: 'same',
        default: { name: 'DEFAULT_DELIVERY_LIMIT', rust: 'u32', value: '5' },
      },
      row: 'quorum queues: unsettled deliveries before the message parks as `delivery-limit` (or `consumer-timeout`)',
    },
    consumerTimeoutMs: {
      type: 'number',
      doc:
        'Quorum queues only: how long the broker lets a delivery stay unacked before it takes it back (`x-consumer-timeout`, ' +
        "RabbitMQ 4.3). When it passes, the broker returns the consumer's unacked messages to the queue and cancels the consumer, " +
        'which subscribes again; the handlers still running then are not stopped, their messages are handled again, and each such ' +
        'return counts toward `deliveryLimit`. The default asks for the largest value, so that no delivery is taken back from a ' +
        'running handler; `stuckAfterMs` reports a handler that runs too long. RabbitMQ 3.x ignores it (its channel-wide ' +
        '`consumer_timeout`, 30 minutes by default, closes the channel instead); classic queues refuse it.',
      default: '2147483647 (about 24.8 days)',
      rule: { kind: 'native-whole', what: 'a whole number of milliseconds of at least 1' },
      native: {
        field: 'consumer_timeout_ms',
        rust: 'u32',
        as: 'same',
        default: { name: 'DEFAULT_CONSUMER_TIMEOUT_MS', rust: 'u32', value: '2_147_483_647' },
      },
      row: 'quorum queues: `x-consumer-timeout` (RabbitMQ 4.3; see [RabbitMQ versions](rabbitmq-versions.md))',
    },
    assertQueue: {
      type: 'boolean',
      doc:
        '`false` consumes a work queue that exists as it is: it is checked (it must exist) but never declared, so its arguments, ' +
        "whoever set them, stay as they are; what the chosen mode depends on (`brokerDelay`'s `x-delayed-retry-*` arguments) is " +
        'still checked. The retry and parked queues are still declared, and the exchange and binding when given. With a quorum ' +
        "queue that rabbit-retry does not declare, the broker's `x-delivery-limit` backstop is whatever the queue has.",
      default: 'true',
      rule: { kind: 'boolean' },
      native: { field: 'assert_queue', rust: 'bool', as: 'same' },
      row: '`false` consumes an existing work queue as it is (what the chosen mode needs of it is still checked)',
    },
    queueArguments: {
      type: 'QueueArguments',
      doc:
        "Arguments added to the work queue's declaration, for a queue that exists with arguments of its own (for example " +
        "`{ 'x-max-length': 100000 }` set by an operator, or a dead-letter exchange from an earlier setup). A queue that exists with " +
        'other arguments fails `consume` with a TopologyMismatchError that names the argument and this option. Not ' +
        '`x-queue-type` (see {@link ConsumeOptions.queueType}), nor, on quorum queues, the dead-lettering that ' +
        '{@link ConsumeOptions.deliveryLimit} sets.',
      rule: { kind: 'by-hand' },
      native: { field: 'queue_arguments', rust: 'String', as: 'json' },
      row: 'arguments added to the declaration ([queues that already exist](failure-path.md#queues-that-already-exist))',
    },
    retryQueueArguments: {
      type: 'QueueArguments',
      doc:
        "Arguments added to every retry queue's declaration. Not the TTL or the dead-lettering (the retry topology sets them), nor " +
        "`x-expires`; a length limit needs `'x-overflow': 'reject-publish'`, so that a full retry queue refuses the republish (the " +
        'original stays unacked) instead of dropping its oldest message.',
      rule: { kind: 'by-hand' },
      native: { field: 'retry_queue_arguments', rust: 'String', as: 'json' },
      row: "arguments added to every retry queue's declaration",
    },
    parkedQueueArguments: {
      type: 'QueueArguments',
      doc:
        "Arguments added to the parked queue's declaration. Not `x-expires` or `x-message-ttl` (parked messages would vanish " +
        "unread); a length limit needs `'x-overflow': 'reject-publish'`.",
      rule: { kind: 'by-hand' },
      native: { field: 'parked_queue_arguments', rust: 'String', as: 'json' },
      row: "arguments added to the parked queue's declaration",
    },
    onFailure,
    alert,
    recovery,
    stuckAfterMs: {
      type: 'number',
      doc:
        'A handler that has not settled its message after this many milliseconds counts as stuck: the consumer emits `stuck` once ' +
        'for that delivery (or logs a warning when nobody listens), `stats().stuck` counts it and `health()` reports the consumer ' +
        'unhealthy until it settles.',
      default: '300000 (5 minutes)',
      rule: { kind: 'whole', min: 1, max: 0x7fffffff, what: 'a whole number of milliseconds from 1 to 2147483647' },
      row: 'a handler running longer counts as stuck (`stuck`, `health()`)',
    },
    inbox: {
      type: 'InboxOptions',
      doc:
        "Runs each handler in a transaction of your PostgreSQL database that also records the message's id: a message whose " +
        'effects were committed is acked and never handled again (the handler gets `{ tx }` second). See the inbox guide.',
      rule: { kind: 'by-hand' },
      row:
        '`{ pool }` or `{ adapter }`, with `consumer`, `key`, `retention`, `cleanupEvery`, `migrate`, `group`, `groupTimeout`: the handler runs in your ' +
        'transaction and gets `{ tx }` ([the inbox](inbox-outbox.md#reference))',
    },
  },
};

/** The native fields no option sets: the library's own, for the consumer it starts. */
export const CONSUME_NATIVE_ONLY = [
  {
    field: 'more_routing_keys',
    rust: 'Vec<String>',
    doc: 'More binding keys, to the same exchange, beside `routingKey` (the rest of a `routingKey` list).',
  },
  {
    field: 'table',
    rust: 'bool',
    doc: 'Whether failures go to the retry table after the delays (`onFailure.table` was given). @default false',
  },
  {
    field: 'watch_moves',
    rust: 'bool',
    doc:
      "Whether the consumer's caller waits on where each failed message goes (the microservices transport): the deliveries the " +
      'verdict refuses before their handler are then handed over too, from the first. @default false',
  },
] as const;

/** The largest whole number the native layer takes. */
export const NATIVE_WHOLE_MAX = U32;
