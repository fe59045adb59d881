//! The fault event of a parked message (`onFailure.faults`): JSON that says
//! which message parked, why, after how many attempts, when it first failed
//! and when it parked, and where it was first published. It goes to the
//! faults exchange with the work queue's name as routing key, confirmed,
//! after the park was confirmed and before the original is acked: at least
//! once, and never for a message that did not park.

use lapin::types::FieldTable;
use lapin::BasicProperties;
use serde::Serialize;

use crate::amqp::connection::Broker;
use crate::amqp::fields::{header_str, now_ms};
use crate::error::{amqp_reply, Error, ErrorKind};
use crate::retry::headers::{
    RETRY_FIRST_FAILED_AT, RETRY_ORIGINAL_EXCHANGE, RETRY_ORIGINAL_ROUTING_KEY,
};
use crate::retry::time::iso8601_utc;

/// The fault event's body.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Fault<'a> {
    pub message_id: Option<&'a str>,
    pub correlation_id: Option<String>,
    pub queue: &'a str,
    /// The parked copy's `retry-reason`.
    pub reason: &'a str,
    pub error: FaultError<'a>,
    /// The handler's calls for the message (the earlier failed attempts and
    /// this one).
    pub attempts: u32,
    pub first_failed_at: String,
    pub parked_at: String,
    pub original_exchange: String,
    pub original_routing_key: String,
}

/// The error the message parked with.
#[derive(Debug, Serialize)]
pub(super) struct FaultError<'a> {
    pub name: &'a str,
    pub message: &'a str,
}

impl<'a> Fault<'a> {
    /// The fault event of a copy parked with `copy`'s headers (which say when
    /// the message first failed, and where it was first published), for the
    /// delivery of `original` properties.
    pub(super) fn of(
        queue: &'a str,
        original: &BasicProperties,
        message_id: Option<&'a str>,
        copy: &BasicProperties,
        (reason, attempt): (&'a str, u32),
        error: FaultError<'a>,
    ) -> Fault<'a> {
        let headers = copy.headers().as_ref();
        let parked_at = iso8601_utc(now_ms());
        Fault {
            message_id,
            correlation_id: original
                .correlation_id()
                .as_ref()
                .map(|s| String::from_utf8_lossy(&s.wire_bytes()).into_owned()),
            queue,
            reason,
            error,
            attempts: attempt.saturating_add(1),
            first_failed_at: header_str(headers, RETRY_FIRST_FAILED_AT)
                .unwrap_or_else(|| parked_at.clone()),
            parked_at,
            original_exchange: header_str(headers, RETRY_ORIGINAL_EXCHANGE).unwrap_or_default(),
            original_routing_key: header_str(headers, RETRY_ORIGINAL_ROUTING_KEY)
                .unwrap_or_default(),
        }
    }
}

/// How the publish of a fault event ended.
#[derive(Debug)]
pub(super) enum Published {
    /// Confirmed (or no queue is bound to take it: nobody listens).
    Confirmed,
    /// The broker refused it: reported, and parking goes on.
    Refused(Error),
    /// No confirm came (the channel or connection went): the original is
    /// held, to be delivered and parked again, with its fault event.
    Lost(Error),
}

/// Publishes `fault` to `exchange` with the work queue's name as routing key,
/// on the connection's confirm channel of failed messages.
pub(super) async fn publish(broker: &Broker, exchange: &str, fault: &Fault<'_>) -> Published {
    let body = match serde_json::to_vec(fault) {
        Ok(body) => body,
        Err(e) => {
            return Published::Refused(Error::new(
                ErrorKind::InvalidOptions,
                format!("the fault event could not be written as JSON: {e}"),
            ))
        }
    };
    let properties = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_type("rabbit-retry.fault".into())
        .with_headers(FieldTable::default());
    let sent = broker
        .republish(exchange, fault.queue, &body, properties)
        .await;
    match sent {
        Ok(()) => Published::Confirmed,
        Err(e) => outcome(e),
    }
}

/// What a fault event's failed publish means for its message.
fn outcome(e: Error) -> Published {
    let closed = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<lapin::Error>())
        .and_then(amqp_reply);
    match e.kind {
        // Returned: no queue listens for fault events. (A missing exchange
        // is a refusal, which the broker's 404 under the error tells.)
        ErrorKind::Unroutable if closed.is_none() => Published::Confirmed,
        ErrorKind::PublishFailed | ErrorKind::Connection | ErrorKind::Closed => Published::Lost(e),
        _ => Published::Refused(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_return_is_not_a_refusal_and_a_lost_channel_holds_the_message() {
        let returned = Error::new(ErrorKind::Unroutable, "no queue is bound to it");
        assert!(matches!(outcome(returned), Published::Confirmed));
        let nacked = Error::new(ErrorKind::PublishNacked, "nack");
        assert!(matches!(outcome(nacked), Published::Refused(_)));
        let lost = Error::new(ErrorKind::PublishFailed, "no confirm");
        assert!(matches!(outcome(lost), Published::Lost(_)));
    }

    #[test]
    fn the_event_says_where_the_message_came_from_and_when_it_failed() {
        let mut h = FieldTable::default();
        h.insert(
            RETRY_FIRST_FAILED_AT.into(),
            lapin::types::AMQPValue::LongString("2026-12-05T01:00:00.000Z".into()),
        );
        h.insert(
            RETRY_ORIGINAL_EXCHANGE.into(),
            lapin::types::AMQPValue::LongString("shipping".into()),
        );
        h.insert(
            RETRY_ORIGINAL_ROUTING_KEY.into(),
            lapin::types::AMQPValue::LongString("shipment.requested".into()),
        );
        let copy = BasicProperties::default().with_headers(h);
        let original = BasicProperties::default().with_correlation_id("c-1".into());
        let f = Fault::of(
            "orders",
            &original,
            Some("m-1"),
            &copy,
            ("exhausted", 3),
            FaultError {
                name: "CarrierError",
                message: "503",
            },
        );
        let json: serde_json::Value = serde_json::to_value(&f).unwrap();
        assert_eq!(json["messageId"], "m-1");
        assert_eq!(json["correlationId"], "c-1");
        assert_eq!(json["queue"], "orders");
        assert_eq!(json["reason"], "exhausted");
        assert_eq!(json["attempts"], 4);
        assert_eq!(json["error"]["name"], "CarrierError");
        assert_eq!(json["firstFailedAt"], "2026-12-05T01:00:00.000Z");
        assert_eq!(json["originalExchange"], "shipping");
        assert_eq!(json["originalRoutingKey"], "shipment.requested");
        assert!(json["parkedAt"].as_str().unwrap().ends_with('Z'));
    }
}
