//! What the verdict weighs, read from a consumer's configuration and from a
//! delivery (fields that decode, the broker's delivery count), and the
//! failure a delivery refused before its handler parks with.

use lapin::message::Delivery;

use super::{ConsumerConfig, Failure};
use crate::amqp::fields::{attempt_of, header, to_field_value, undecodable_field};
use crate::retry::{Facts, ParkReason, Policy, Route};

/// The delays, retry table, delivery limit and broker delay of `config`.
pub(super) fn policy(config: &ConsumerConfig) -> Policy<'_> {
    Policy {
        delays: &config.topology.delays,
        table_attempts: config.table.as_ref().map(|t| t.max_attempts),
        delivery_limit: config.topology.delivery_limit,
        broker_delay: config.topology.broker_delay,
    }
}

/// Earlier failed attempts of delivery `d`: its `retry-attempt` (or its
/// `x-death` count), or with `brokerDelay` the broker's `x-delivery-count`,
/// since the broker returns the message itself and no header is written.
pub(super) fn attempt(config: &ConsumerConfig, d: &Delivery) -> u32 {
    if config.topology.broker_delay.is_some() {
        let count = delivery_count(d).unwrap_or(0);
        return u32::try_from(count).unwrap_or(u32::MAX);
    }
    attempt_of(d.properties.headers().as_ref(), &config.topology.queue)
}

/// What is true of delivery `d` after `attempt` earlier failed attempts,
/// taken back `timeouts` times by the broker's consumer timeout.
pub(super) fn facts(d: &Delivery, attempt: u32, timeouts: u32) -> Facts {
    Facts {
        attempt,
        delivery_count: delivery_count(d),
        timeouts,
        undecodable: undecodable_field(&d.exchange, &d.routing_key, &d.properties).is_some(),
        ..Facts::default()
    }
}

/// The broker's `x-delivery-count` of `d` (quorum queues), read only from a
/// redelivery: the broker writes it on a message it delivers again, and on
/// a first delivery (`redelivered` false) the header, if any, is a
/// producer's, which must not count as the broker's.
fn delivery_count(d: &Delivery) -> Option<u64> {
    if !d.redelivered {
        return None;
    }
    header(d.properties.headers().as_ref(), "x-delivery-count")
        .map(to_field_value)
        .and_then(|v| v.as_count())
}

/// The failure delivery `d` parks with when the verdict refuses it before
/// its handler (sending it to `route`): which field does not decode, how
/// often it was delivered, or how often the consumer timeout took it back
/// (`timeouts`, of `timeout_ms` each).
pub(super) fn refusal(
    d: &Delivery,
    route: &Route,
    delivery_limit: Option<u32>,
    (timeouts, timeout_ms): (u32, Option<u32>),
) -> Failure {
    let (name, message) = match route {
        Route::Park {
            reason: ParkReason::ConsumerTimeout,
            ..
        } => {
            let limit = delivery_limit.unwrap_or_default();
            let after = timeout_ms.map_or_else(String::new, |ms| format!(" of {ms} ms"));
            (
                "ConsumerTimeout",
                format!(
                    "the broker took it back {timeouts} time(s) from a handler that outlived the consumer timeout{after} (consumerTimeoutMs), reaching the delivery limit of {limit}: parked without calling the handler again"
                ),
            )
        }
        Route::Park {
            reason: ParkReason::DeliveryLimit,
            ..
        } => {
            let deliveries = delivery_count(d).unwrap_or(0) + 1;
            let limit = delivery_limit.unwrap_or_default();
            (
                "DeliveryLimitExceeded",
                format!(
                    "delivered {deliveries} times without being acked or rejected (limit {limit}): the consumer most likely crashes on this message, so it was parked without calling the handler again"
                ),
            )
        }
        // Undecodable: the only other reason to refuse a delivery before its handler.
        _ => (
            "UndecodableMessage",
            undecodable_field(&d.exchange, &d.routing_key, &d.properties).unwrap_or_default(),
        ),
    };
    Failure {
        name: name.into(),
        message,
        ..Failure::default()
    }
}
