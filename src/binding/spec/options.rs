// Written by `npm run options` (scripts/options.ts) from lib/options/consume.ts: do not edit.

//! `rr.consume`'s options as the native layer takes them, each absent when left out: the TypeScript layer passes them
//! flattened, and the native layer holds the rules of their values and applies their defaults (`ConsumeSpec`).

use napi_derive::napi;

/// What to consume and how to treat failures, as the TypeScript layer passes it (one field for each of
/// `rr.consume`'s options that crosses, declared in lib/options/consume.ts).
#[napi(object)]
pub struct ConsumeOptions {
    /// `queue`: The work queue; declared durable if missing (see `ConsumeOptions.assertQueue`).
    pub queue: String,
    /// `exchange`: An exchange to declare (durable) and bind the queue to.
    pub exchange: Option<String>,
    /// `exchangeType`: The exchange's type. @default 'topic'
    pub exchange_type: Option<String>,
    /// `routingKey`: The binding key, or several (each a binding to `exchange`). @default the queue
    /// name
    pub routing_key: Option<String>,
    /// `prefetch`: At most this many handlers in flight. @default `consumeDefaults().prefetch`
    pub prefetch: Option<u32>,
    /// `consumerTag`: The consumer's tag on the work queue (1 to 255 bytes), which the management
    /// UI shows and each `Message` carries. @default one the broker makes (`amq.ctag-…`)
    pub consumer_tag: Option<String>,
    /// `queueType`: Queue type of the work, retry and parked queues. @default 'classic'
    pub queue_type: Option<String>,
    /// `deliveryLimit`: Quorum queues only: after this many deliveries of one message that were
    /// never settled (the process crashed on it, or the broker took it back from a handler that
    /// outlived `consumerTimeoutMs`), the message parks with `retry-reason: delivery-limit` (or
    /// `consumer-timeout`) without calling the handler again. @default
    /// `consumeDefaults().deliveryLimit`
    pub delivery_limit: Option<u32>,
    /// `consumerTimeoutMs`: Quorum queues only: how long the broker lets a delivery stay unacked
    /// before it takes it back (`x-consumer-timeout`, RabbitMQ 4.3). @default
    /// `consumeDefaults().consumerTimeoutMs`
    pub consumer_timeout_ms: Option<u32>,
    /// `assertQueue`: `false` consumes a work queue that exists as it is: it is checked (it must
    /// exist) but never declared, so its arguments, whoever set them, stay as they are; what the
    /// chosen mode depends on (`brokerDelay`'s `x-delayed-retry-*` arguments) is still checked.
    /// @default true
    pub assert_queue: Option<bool>,
    /// `queueArguments`: Arguments added to the work queue's declaration, for a queue that exists
    /// with arguments of its own (for example `{ 'x-max-length': 100000 }` set by an operator, or a
    /// dead-letter exchange from an earlier setup).
    pub queue_arguments: Option<String>,
    /// `retryQueueArguments`: Arguments added to every retry queue's declaration.
    pub retry_queue_arguments: Option<String>,
    /// `parkedQueueArguments`: Arguments added to the parked queue's declaration.
    pub parked_queue_arguments: Option<String>,
    /// `onFailure.delays`: One retry queue per delay, tried in order; after the last the message
    /// parks. @default ['5s', '1m', '10m']
    pub delays: Vec<String>,
    /// `onFailure.brokerDelay.min`: The delay after the first failure, and the step each later
    /// failure adds: `'5s'`, or milliseconds.
    pub broker_delay_min: Option<String>,
    /// `onFailure.brokerDelay.max`: The longest delay: `'5m'`, or milliseconds.
    pub broker_delay_max: Option<String>,
    /// `onFailure.brokerDelay.attempts`: Returns to the broker before a retryable failure parks as
    /// exhausted; at least 1.
    pub broker_delay_attempts: Option<u32>,
    /// `onFailure.retryHeaders`: The `retry-*` headers of a copy bound for a retry queue. @default
    /// 'minimal'
    pub full_retry_headers: Option<bool>,
    /// `onFailure.table.maxAttempts`: Attempts through the table before the message parks as
    /// exhausted. @default `consumeDefaults().tableMaxAttempts`
    pub table_max_attempts: Option<u32>,
    /// `onFailure.faults.exchange`: The exchange of the fault events: declared (durable, `topic`)
    /// if it does not exist.
    pub faults_exchange: Option<String>,
    /// `recovery.initialDelayMs`: The first wait, in milliseconds. @default
    /// `consumeDefaults().recoveryInitialDelayMs`
    pub recovery_initial_delay_ms: Option<u32>,
    /// `recovery.maxDelayMs`: The longest wait, in milliseconds. @default
    /// `consumeDefaults().recoveryMaxDelayMs`
    pub recovery_max_delay_ms: Option<u32>,
    /// `recovery.maxAttempts`: Give up after this many tries: the consumer closes and emits
    /// `error`. @default Infinity (never give up)
    pub recovery_max_attempts: Option<u32>,
    /// `recovery.stepTimeoutMs`: How long one broker round trip of starting, recovering or stopping
    /// the consumer (declare, channel open, qos, consume, cancel, ack, channel close) may take
    /// before it counts as failed: a broker that stops answering cannot hold recovery or `close()`
    /// for good. @default `consumeDefaults().recoveryStepTimeoutMs`
    pub recovery_step_timeout_ms: Option<u32>,
    /// More binding keys, to the same exchange, beside `routingKey` (the rest of a `routingKey`
    /// list).
    pub more_routing_keys: Option<Vec<String>>,
    /// Whether failures go to the retry table after the delays (`onFailure.table` was given).
    /// @default false
    pub table: Option<bool>,
    /// Whether the consumer's caller waits on where each failed message goes (the microservices
    /// transport): the deliveries the verdict refuses before their handler are then handed over
    /// too, from the first. @default false
    pub watch_moves: Option<bool>,
}
