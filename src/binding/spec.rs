//! The options of `consume`, their rules and their defaults, in one place:
//! [`ConsumeSpec::validate`] and [`consume_defaults`].

use std::sync::Arc;
use std::time::Duration;

use lapin::types::FieldTable;
use napi_derive::napi;

use super::convert::{invalid, js_error};
use crate::amqp::fields::table_from_json;
use crate::amqp::topology::{ExtraArguments, QueueType, Topology};
use crate::consumer::{
    ConsumerConfig, Recovery, TableConfig, DEFAULT_CONSUMER_TIMEOUT_MS, DEFAULT_DELIVERY_LIMIT,
    DEFAULT_PREFETCH, DEFAULT_TABLE_MAX_ATTEMPTS,
};
use crate::retry::{parse_delays, validate_name, validate_topology_names, Backoff, BrokerDelay};
use crate::table::store::RetryStore;

mod options;
#[cfg(test)]
mod tests;

pub(crate) use options::ConsumeOptions;

/// The exchange types `exchangeType` takes; the first is its default.
const EXCHANGE_TYPES: [&str; 4] = ["topic", "direct", "fanout", "headers"];

/// A consumer's configuration from its [`ConsumeOptions`], checked against
/// every rule of `consume` and with the defaults applied: everything but the
/// retry table's connection, which is the client's.
#[derive(Debug)]
pub(crate) struct ConsumeSpec {
    topology: Topology,
    prefetch: u16,
    recovery: Recovery,
    /// Attempts through the retry table, when failures go there.
    table_max_attempts: Option<u32>,
    /// Quorum queues: the consumer's `x-consumer-timeout`.
    consumer_timeout_ms: Option<u32>,
    /// The consumer's tag, when the options name one.
    consumer_tag: Option<String>,
    /// Every `retry-*` header on a retried copy.
    full_retry_headers: bool,
    /// The caller waits on where each failed message goes.
    watch_moves: bool,
}

impl ConsumeSpec {
    /// Checks `options` and applies the defaults, declaring nothing; refuses
    /// with `INVALID_OPTIONS` naming the option. The option rules come first,
    /// in the order of the options' checks in TypeScript, then the delays, the
    /// names, and the queue arguments.
    pub(crate) fn validate(options: ConsumeOptions) -> napi::Result<Self> {
        let prefetch = match options.prefetch {
            None => DEFAULT_PREFETCH,
            Some(n) => u16::try_from(n).ok().filter(|p| *p >= 1).ok_or_else(|| {
                invalid(format!(
                    "prefetch must be a whole number from 1 to 65535, got {n}"
                ))
            })?,
        };
        let queue_type = match options.queue_type.as_deref() {
            None => QueueType::Classic,
            // The value is not echoed: a string in the wrong option can be a secret.
            Some(t) => QueueType::parse(t).map_err(|_| {
                invalid("queueType must be 'classic' or 'quorum', got another string")
            })?,
        };
        let exchange_type = match options.exchange_type.as_deref() {
            None => EXCHANGE_TYPES[0].to_owned(),
            Some(t) if EXCHANGE_TYPES.contains(&t) => t.to_owned(),
            Some(_) => return Err(invalid(
                "exchangeType must be 'topic', 'direct', 'fanout' or 'headers', got another string",
            )),
        };
        let broker_delay = broker_delay(&options, queue_type)?;
        let delivery_limit = match broker_delay {
            None => delivery_limit(queue_type, options.delivery_limit)?,
            Some(b) => Some(broker_delay_limit(b, options.delivery_limit)?),
        };
        let consumer_timeout_ms = consumer_timeout(queue_type, options.consumer_timeout_ms)?;
        let recovery = recovery(&options)?;
        let table_max_attempts = match (options.table.unwrap_or(false), options.table_max_attempts)
        {
            (false, None) => None,
            (false, Some(_)) => {
                return Err(invalid("onFailure.table.maxAttempts needs onFailure.table"))
            }
            (true, None) => Some(DEFAULT_TABLE_MAX_ATTEMPTS),
            (true, Some(0)) => {
                return Err(invalid(
                    "onFailure.table.maxAttempts must be a whole number of at least 1, got 0",
                ))
            }
            (true, Some(n)) => Some(n),
        };
        let delays =
            parse_delays(&options.delays).map_err(|e| invalid(format!("onFailure.delays: {e}")))?;
        validate_name("queue name", &options.queue, false)
            .map_err(|e| invalid(format!("queue: {e}")))?;
        validate_topology_names(&options.queue, &delays)
            .map_err(|e| invalid(format!("queue: {e}")))?;
        if let Some(x) = &options.exchange {
            validate_name("exchange name", x, false)
                .map_err(|e| invalid(format!("exchange: {e}")))?;
        }
        if let Some(x) = &options.faults_exchange {
            validate_name("exchange name", x, false)
                .map_err(|e| invalid(format!("onFailure.faults.exchange: {e}")))?;
        }
        let routing_key = options.routing_key.unwrap_or_else(|| options.queue.clone());
        validate_name("routing key", &routing_key, true)
            .map_err(|e| invalid(format!("routingKey: {e}")))?;
        let more_routing_keys = options.more_routing_keys.unwrap_or_default();
        for key in &more_routing_keys {
            validate_name("routing key", key, true)
                .map_err(|e| invalid(format!("routingKey: {e}")))?;
        }
        if let Some(tag) = &options.consumer_tag {
            validate_name("consumer tag", tag, false)
                .map_err(|e| invalid(format!("consumerTag: {e}")))?;
        }
        let topology = Topology {
            queue: options.queue,
            exchange: options.exchange,
            exchange_type,
            routing_key,
            more_routing_keys,
            queue_type,
            delays,
            delivery_limit,
            broker_delay,
            assert_queue: options.assert_queue.unwrap_or(true),
            faults_exchange: options.faults_exchange,
            extra: ExtraArguments {
                work: arguments("queueArguments", options.queue_arguments.as_deref())?,
                retry: arguments(
                    "retryQueueArguments",
                    options.retry_queue_arguments.as_deref(),
                )?,
                parked: arguments(
                    "parkedQueueArguments",
                    options.parked_queue_arguments.as_deref(),
                )?,
            },
        };
        topology.check().map_err(js_error)?;
        Ok(Self {
            topology,
            prefetch,
            recovery,
            table_max_attempts,
            consumer_timeout_ms,
            consumer_tag: options.consumer_tag,
            full_retry_headers: options.full_retry_headers.unwrap_or(false),
            watch_moves: options.watch_moves.unwrap_or(false),
        })
    }

    /// The consumer's configuration with the client's retry table, `store`,
    /// which `onFailure.table` needs.
    pub(crate) fn into_config(
        self,
        store: Option<&Arc<RetryStore>>,
    ) -> napi::Result<ConsumerConfig> {
        let table = match (self.table_max_attempts, store) {
            (None, _) => None,
            (Some(max_attempts), Some(store)) => Some(TableConfig {
                store: store.clone(),
                max_attempts,
            }),
            (Some(_), None) => {
                return Err(invalid(
                    "onFailure.table needs a retry table: connect with { retryTable: { url: 'postgres://…' } }",
                ))
            }
        };
        Ok(ConsumerConfig {
            topology: self.topology,
            prefetch: self.prefetch,
            recovery: self.recovery,
            table,
            consumer_timeout_ms: self.consumer_timeout_ms,
            consumer_tag: self.consumer_tag,
            full_retry_headers: self.full_retry_headers,
            watch_moves: self.watch_moves,
        })
    }
}

/// The quorum delivery limit: at least 1, and one below the largest count, as
/// the broker's own limit is set one above it; only quorum queues count
/// deliveries.
fn delivery_limit(queue_type: QueueType, limit: Option<u32>) -> napi::Result<Option<u32>> {
    match (queue_type, limit) {
        (_, Some(n)) if n == 0 || n == u32::MAX => Err(invalid(format!(
            "deliveryLimit must be a whole number of at least 1, got {n}"
        ))),
        (QueueType::Quorum, None) => Ok(Some(DEFAULT_DELIVERY_LIMIT)),
        (QueueType::Quorum, Some(n)) => Ok(Some(n)),
        (QueueType::Classic, None) => Ok(None),
        (QueueType::Classic, Some(_)) => Err(invalid(
            "deliveryLimit needs queueType 'quorum': classic queues do not count deliveries",
        )),
    }
}

/// `onFailure.brokerDelay`, checked: all three fields, on a quorum queue,
/// instead of `delays` and the retry table.
fn broker_delay(
    options: &ConsumeOptions,
    queue_type: QueueType,
) -> napi::Result<Option<BrokerDelay>> {
    let (min, max, attempts) = match (
        &options.broker_delay_min,
        &options.broker_delay_max,
        options.broker_delay_attempts,
    ) {
        (None, None, None) => return Ok(None),
        (Some(min), Some(max), Some(attempts)) => (min, max, attempts),
        _ => {
            return Err(invalid(
                "onFailure.brokerDelay needs min, max and attempts, for example { min: '5s', max: '5m', attempts: 5 }",
            ))
        }
    };
    if !options.delays.is_empty() {
        return Err(invalid(
            "onFailure.delays and onFailure.brokerDelay are two ways to retry: use one, brokerDelay (the broker holds the message, RabbitMQ 4.3 quorum queues) or delays (retry queues)",
        ));
    }
    if options.table.unwrap_or(false) {
        return Err(invalid(
            "onFailure.brokerDelay cannot be followed by onFailure.table: use onFailure.delays with the table, or raise brokerDelay.attempts",
        ));
    }
    if queue_type != QueueType::Quorum {
        return Err(invalid(
            "onFailure.brokerDelay needs queueType 'quorum': only RabbitMQ 4.3's quorum queues hold a rejected message in a delayed state; set queueType: 'quorum', or use onFailure.delays on a classic queue",
        ));
    }
    BrokerDelay::parse(min, max, attempts)
        .map(Some)
        .map_err(|e| invalid(format!("onFailure.brokerDelay.{e}")))
}

/// The delivery limit with `brokerDelay`: every failed attempt counts as a
/// delivery, so the limit sits above the attempts (`attempts + 1` unless
/// `deliveryLimit` says more).
fn broker_delay_limit(b: BrokerDelay, limit: Option<u32>) -> napi::Result<u32> {
    match limit {
        None => Ok(b.attempts.saturating_add(1).min(u32::MAX - 1)),
        Some(n) if n > b.attempts && n != u32::MAX => Ok(n),
        Some(n) => Err(invalid(format!(
            "deliveryLimit ({n}) must be above onFailure.brokerDelay.attempts ({}): with brokerDelay every failed attempt counts as a delivery; leave deliveryLimit out to get attempts + 1",
            b.attempts
        ))),
    }
}

/// The quorum consumer timeout: at least 1 ms; RabbitMQ 4.3 refuses
/// `x-consumer-timeout` on a classic queue, which never times a consumer out.
fn consumer_timeout(queue_type: QueueType, ms: Option<u32>) -> napi::Result<Option<u32>> {
    match (queue_type, ms) {
        (_, Some(0)) => Err(invalid(
            "consumerTimeoutMs must be a whole number of milliseconds of at least 1, got 0",
        )),
        (QueueType::Quorum, None) => Ok(Some(DEFAULT_CONSUMER_TIMEOUT_MS)),
        (QueueType::Quorum, Some(n)) => Ok(Some(n)),
        (QueueType::Classic, None) => Ok(None),
        (QueueType::Classic, Some(_)) => Err(invalid(
            "consumerTimeoutMs needs queueType 'quorum': RabbitMQ 4.3 evaluates no consumer timeout on classic queues (stuckAfterMs reports a handler that runs too long)",
        )),
    }
}

/// Reconnecting after a loss: each wait at least 1 ms, at least 1 try.
fn recovery(options: &ConsumeOptions) -> napi::Result<Recovery> {
    let defaults = Recovery::default();
    let millis = |option: &str, value: Option<u32>, default: Duration| match value {
        None => Ok(default),
        Some(0) => Err(invalid(format!(
            "{option} must be a whole number of milliseconds, got 0"
        ))),
        Some(ms) => Ok(Duration::from_millis(u64::from(ms))),
    };
    Ok(Recovery {
        backoff: Backoff {
            initial: millis(
                "recovery.initialDelayMs",
                options.recovery_initial_delay_ms,
                defaults.backoff.initial,
            )?,
            max: millis(
                "recovery.maxDelayMs",
                options.recovery_max_delay_ms,
                defaults.backoff.max,
            )?,
        },
        step_timeout: millis(
            "recovery.stepTimeoutMs",
            options.recovery_step_timeout_ms,
            defaults.step_timeout,
        )?,
        max_attempts: match options.recovery_max_attempts {
            Some(0) => {
                return Err(invalid(
                    "recovery.maxAttempts must be a whole number of at least 1, or Infinity, got 0",
                ))
            }
            n => n.or(defaults.max_attempts),
        },
    })
}

/// Queue arguments from their JSON form: an object of names to strings,
/// numbers and booleans.
pub(super) fn arguments(option: &str, json: Option<&str>) -> napi::Result<FieldTable> {
    let Some(json) = json else {
        return Ok(FieldTable::default());
    };
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| invalid(format!("{option} must be an object: {e}")))?;
    let Some(map) = value.as_object() else {
        return Err(invalid(format!(
            "{option} must be an object of argument names to values"
        )));
    };
    if let Some((key, _)) = map
        .iter()
        .find(|(_, v)| !(v.is_string() || v.is_number() || v.is_boolean()))
    {
        return Err(invalid(format!(
            "{option}['{key}'] must be a string, a number or a boolean"
        )));
    }
    table_from_json(&value).map_err(|e| invalid(format!("{option}: {e}")))
}

/// The defaults `consume` applies to options left out.
#[napi(object)]
pub(crate) struct ConsumeDefaults {
    /// Handlers in flight at most.
    pub prefetch: u32,
    /// Quorum only: deliveries after which a message parks without reaching the handler.
    pub delivery_limit: u32,
    /// Quorum only: the consumer's `x-consumer-timeout`, in ms.
    pub consumer_timeout_ms: u32,
    /// Attempts through the retry table before a message parks.
    pub table_max_attempts: u32,
    /// First wait before reconnecting, in ms.
    pub recovery_initial_delay_ms: u32,
    /// Longest wait between reconnect tries, in ms.
    pub recovery_max_delay_ms: u32,
    /// How long one broker round trip of starting, recovering or stopping may take, in ms.
    pub recovery_step_timeout_ms: u32,
}

/// The defaults `consume` applies to options left out, for the TypeScript
/// layer, which writes none of its own.
#[napi]
pub(crate) fn consume_defaults() -> ConsumeDefaults {
    let recovery = Recovery::default();
    let millis = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
    ConsumeDefaults {
        prefetch: u32::from(DEFAULT_PREFETCH),
        delivery_limit: DEFAULT_DELIVERY_LIMIT,
        consumer_timeout_ms: DEFAULT_CONSUMER_TIMEOUT_MS,
        table_max_attempts: DEFAULT_TABLE_MAX_ATTEMPTS,
        recovery_initial_delay_ms: millis(recovery.backoff.initial),
        recovery_max_delay_ms: millis(recovery.backoff.max),
        recovery_step_timeout_ms: millis(recovery.step_timeout),
    }
}
