//! What a delivery must pass before its handler runs: fields that decode,
//! and (quorum queues) a delivery count under the limit.

use lapin::message::Delivery;

use super::settlement::Failure;
use crate::amqp::fields::{header, to_field_value, undecodable_field};
use crate::retry::{exceeds_delivery_limit, ParkReason};

/// Why a delivery must be parked without reaching the handler, if it must:
/// a short string that is not UTF-8, or (quorum queues) too many deliveries.
pub(super) fn refused(d: &Delivery, delivery_limit: Option<u32>) -> Option<(Failure, ParkReason)> {
    let failure = |name: &str, message: String| Failure {
        name: name.into(),
        message,
        retryable: false,
        ..Failure::default()
    };
    if let Some(why) = undecodable_field(&d.exchange, &d.routing_key, &d.properties) {
        return Some((failure("UndecodableMessage", why), ParkReason::Undecodable));
    }
    let limit = delivery_limit?;
    let count = header(d.properties.headers().as_ref(), "x-delivery-count")
        .map(to_field_value)
        .and_then(|v| v.as_count());
    exceeds_delivery_limit(count, limit).then(|| {
        let deliveries = count.unwrap_or(0) + 1;
        (
            failure(
                "DeliveryLimitExceeded",
                format!(
                    "delivered {deliveries} times without being acked or rejected (limit {limit}): the consumer most likely crashes on this message, so it was parked without calling the handler again"
                ),
            ),
            ParkReason::DeliveryLimit,
        )
    })
}
