//! What crosses between the consumer and JavaScript, in one place: a batch of
//! deliveries (metadata as JSON, bodies in buffers) and events, each event one
//! JSON object tagged by `kind`, the shape `lib/wire.ts` reads.

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde::Serialize;

use super::convert::{json_str, write_properties_json};
use crate::consumer::{DeliveryView, Event};
use crate::retry::Route;

/// An event as JavaScript receives it: `kind` says which, and each kind has
/// exactly its own fields (`lib/wire.ts` has the same union).
#[derive(Debug, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub(crate) enum WireEvent<'a> {
    /// Sent to a retry queue and acked; `reason` is the copy's `retry-reason`.
    Retry {
        id: u64,
        message_id: Option<&'a str>,
        target: &'a str,
        reason: &'static str,
        attempt: u32,
        delay: &'a str,
        error: &'a str,
    },
    /// Sent to the parked queue and acked.
    Parked {
        id: u64,
        message_id: Option<&'a str>,
        target: &'a str,
        reason: &'a str,
        attempt: u32,
        error: &'a str,
    },
    /// Stored in the retry table and acked; `reason` is the row's `retry-reason`.
    Stored {
        id: u64,
        message_id: Option<&'a str>,
        reason: &'static str,
        row_id: i64,
        attempt: u32,
        dependency: Option<&'a str>,
        error: &'a str,
    },
    /// The republish failed; the delivery stays unacked. `error` is `[CODE] message`.
    PublishFailed {
        id: u64,
        message_id: Option<&'a str>,
        target: &'a str,
        error: String,
    },
    /// The channel or connection was lost; `error` is `[CODE] message`.
    Disconnected { error: String, url: &'a str },
    /// Consuming again after `attempts` tries, `after_ms` after the loss.
    Recovered {
        attempts: u32,
        after_ms: u64,
        url: &'a str,
    },
    /// The consumer itself failed; `error` is `[CODE] message`.
    Error { error: String },
}

impl<'a> From<&'a Event> for WireEvent<'a> {
    fn from(e: &'a Event) -> Self {
        match e {
            Event::Retried {
                id,
                message_id,
                target,
                attempt,
                delay,
                error,
            } => WireEvent::Retry {
                id: *id,
                message_id: message_id.as_deref(),
                target,
                reason: Route::RETRY_REASON,
                attempt: *attempt,
                delay,
                error,
            },
            Event::Parked {
                id,
                message_id,
                target,
                reason,
                attempt,
                error,
            } => WireEvent::Parked {
                id: *id,
                message_id: message_id.as_deref(),
                target,
                reason,
                attempt: *attempt,
                error,
            },
            Event::Stored {
                id,
                message_id,
                row_id,
                attempt,
                dependency,
                error,
            } => WireEvent::Stored {
                id: *id,
                message_id: message_id.as_deref(),
                reason: Route::TABLE_REASON,
                row_id: *row_id,
                attempt: *attempt,
                dependency: dependency.as_deref(),
                error,
            },
            Event::PublishFailed {
                id,
                message_id,
                target,
                error,
            } => WireEvent::PublishFailed {
                id: *id,
                message_id: message_id.as_deref(),
                target,
                error: error.coded_message(),
            },
            Event::Disconnected { error, url } => WireEvent::Disconnected {
                error: error.coded_message(),
                url,
            },
            Event::Recovered {
                attempts,
                after_ms,
                url,
            } => WireEvent::Recovered {
                attempts: *attempts,
                after_ms: *after_ms,
                url,
            },
            Event::ConsumerError { error } => WireEvent::Error {
                error: error.coded_message(),
            },
        }
    }
}

/// `events` as a JSON array of [`WireEvent`]s.
pub(crate) fn events_json(events: &[Event]) -> String {
    if events.is_empty() {
        return "[]".into();
    }
    let wire: Vec<WireEvent<'_>> = events.iter().map(WireEvent::from).collect();
    // Serialising plain strings and numbers cannot fail.
    serde_json::to_string(&wire).unwrap_or_else(|_| "[]".into())
}

/// One pull: deliveries to handle, events to report, and whether the consumer
/// has closed (then no more deliveries come).
///
/// Deliveries cross in a form that costs JavaScript a few calls per batch
/// rather than dozens per message: their metadata as one JSON array (see
/// [`delivery_meta`]), the small bodies back to back in one buffer, and each
/// large body in a buffer of its own.
#[napi(object)]
pub struct NativeBatch {
    /// The deliveries' metadata, a JSON array with one object per delivery.
    pub meta: String,
    /// The small bodies, back to back; each delivery's `o` and `n` locate its own.
    pub bodies: Buffer,
    /// The large bodies; a delivery's `l` indexes its own.
    pub large: Vec<Buffer>,
    /// Short message and correlation ids: where a delivery's `p` has a number for one, it indexes this list.
    pub strings: Vec<String>,
    /// Events to report: a JSON array of [`WireEvent`]s.
    pub events: String,
    /// True when the consumer is closed and drained.
    pub closed: bool,
}

/// Bodies up to this size share the batch's buffer; larger ones get their own
/// (no copy, and a kept message does not hold other messages' bodies).
const SHARED_BODY_MAX: usize = 16 * 1024;

/// One delivery's metadata, appended to `out` as a JSON object:
/// `i` id, `x` exchange, `k` routing key, `r` redelivered, `a` attempt,
/// `p` properties (as [`MessageProperties`](super::convert::MessageProperties) names them, headers included),
/// either `o`/`n` (offset and length in the shared buffer) or `l` (index
/// of its own buffer), and `t: 1` when a retryable failure of this attempt
/// goes to the retry table.
fn delivery_meta(out: &mut Vec<u8>, d: &DeliveryView<'_>, body: BodyAt, strings: &mut Vec<String>) {
    use std::io::Write;
    // Written by hand: the keys are fixed, and a map per delivery would cost
    // an allocation per key. Strings go through serde_json for escaping.
    let _ = write!(out, "{{\"i\":{},\"x\":", d.id);
    json_str(out, d.delivery.exchange.as_str());
    out.extend_from_slice(b",\"k\":");
    json_str(out, d.delivery.routing_key.as_str());
    let _ = write!(
        out,
        ",\"r\":{},\"a\":{},",
        d.delivery.redelivered, d.attempt
    );
    if d.table_bound {
        out.extend_from_slice(b"\"t\":1,");
    }
    let _ = match body {
        BodyAt::Shared { offset, len } => write!(out, "\"o\":{offset},\"n\":{len}"),
        BodyAt::Own(index) => write!(out, "\"l\":{index}"),
    };
    out.extend_from_slice(b",\"p\":");
    write_properties_json(out, &d.delivery.properties, strings);
    out.push(b'}');
}

#[derive(Clone, Copy)]
enum BodyAt {
    Shared { offset: usize, len: usize },
    Own(usize),
}

/// Deliveries and events as JavaScript receives them, each body copied once:
/// the small ones into the shared buffer, each large one into its own.
pub(super) fn to_batch(
    deliveries: &[DeliveryView<'_>],
    events: &[Event],
    closed: bool,
) -> NativeBatch {
    let shared_len: usize = deliveries
        .iter()
        .map(|d| d.delivery.data.len())
        .filter(|n| *n <= SHARED_BODY_MAX)
        .sum();
    let mut meta = Vec::with_capacity(deliveries.len() * 256 + 2);
    let mut bodies = Vec::with_capacity(shared_len);
    let mut large = Vec::new();
    let mut strings = Vec::new();
    meta.push(b'[');
    for d in deliveries {
        if meta.len() > 1 {
            meta.push(b',');
        }
        let body = &d.delivery.data;
        let at = if body.len() <= SHARED_BODY_MAX {
            let offset = bodies.len();
            bodies.extend_from_slice(body);
            BodyAt::Shared {
                offset,
                len: body.len(),
            }
        } else {
            large.push(Buffer::from(body.as_slice()));
            BodyAt::Own(large.len() - 1)
        };
        delivery_meta(&mut meta, d, at, &mut strings);
    }
    meta.push(b']');
    NativeBatch {
        // serde_json writes UTF-8.
        meta: String::from_utf8(meta).unwrap_or_else(|_| "[]".into()),
        bodies: bodies.into(),
        large,
        strings,
        events: events_json(events),
        closed,
    }
}

#[cfg(test)]
mod tests {
    use lapin::message::Delivery;
    use lapin::BasicProperties;
    use serde_json::{json, Value};

    use super::*;
    use crate::error::{Error, ErrorKind};

    fn delivery(id: u64, body: Vec<u8>) -> Delivery {
        let mut d = Delivery::mock(
            id,
            "shipments".into(),
            "shipment.requested".into(),
            id == 2,
            body,
        );
        d.properties = BasicProperties::default().with_message_id("order-48213".into());
        d
    }

    fn view(d: &Delivery) -> DeliveryView<'_> {
        DeliveryView {
            id: d.delivery_tag,
            attempt: 1,
            table_bound: d.delivery_tag == 3,
            delivery: d,
        }
    }

    #[test]
    fn every_event_crosses_tagged_with_only_its_fields() {
        let events = vec![
            Event::Retried {
                id: 1,
                message_id: Some("m1".into()),
                target: "q.retry.5s".into(),
                attempt: 1,
                delay: "5s".into(),
                error: "503".into(),
            },
            Event::Stored {
                id: 2,
                message_id: None,
                row_id: 7,
                attempt: 4,
                dependency: Some("carrier".into()),
                error: "down".into(),
            },
            Event::PublishFailed {
                id: 3,
                message_id: None,
                target: "q.parked".into(),
                error: Error::new(ErrorKind::Unroutable, "gone"),
            },
            Event::Recovered {
                attempts: 2,
                after_ms: 350,
                url: "amqp://node2".into(),
            },
        ];
        let wire: Value = serde_json::from_str(&events_json(&events)).unwrap();
        assert_eq!(
            wire,
            json!([
                {"kind": "retry", "id": 1, "messageId": "m1", "target": "q.retry.5s", "reason": "retry", "attempt": 1, "delay": "5s", "error": "503"},
                {"kind": "stored", "id": 2, "messageId": null, "reason": "retry-table", "rowId": 7, "attempt": 4, "dependency": "carrier", "error": "down"},
                {"kind": "publish-failed", "id": 3, "messageId": null, "target": "q.parked", "error": "[UNROUTABLE] gone"},
                {"kind": "recovered", "attempts": 2, "afterMs": 350, "url": "amqp://node2"},
            ])
        );
        assert_eq!(events_json(&[]), "[]");
    }

    #[test]
    fn a_batch_locates_every_body_and_keeps_the_events_in_order() {
        let large = vec![b'x'; SHARED_BODY_MAX + 1];
        let deliveries = [
            delivery(1, b"{\"orderId\":48213}".to_vec()),
            delivery(2, large.clone()),
            delivery(3, b"second".to_vec()),
        ];
        let views: Vec<DeliveryView<'_>> = deliveries.iter().map(view).collect();
        let events = [Event::Disconnected {
            error: Error::new(ErrorKind::Connection, "lost"),
            url: "amqp://app:***@node1:5672".into(),
        }];
        let batch = to_batch(&views, &events, false);
        assert!(!batch.closed);
        let meta: Vec<Value> = serde_json::from_str(&batch.meta).unwrap();
        assert_eq!(meta.len(), 3);
        let body = |m: &Value| -> Vec<u8> {
            match m.get("l") {
                Some(l) => batch.large[l.as_u64().unwrap() as usize].to_vec(),
                None => {
                    let (o, n) = (
                        m["o"].as_u64().unwrap() as usize,
                        m["n"].as_u64().unwrap() as usize,
                    );
                    batch.bodies[o..o + n].to_vec()
                }
            }
        };
        assert_eq!(body(&meta[0]), b"{\"orderId\":48213}");
        assert_eq!(body(&meta[1]), large);
        assert_eq!(body(&meta[2]), b"second");
        assert_eq!(meta[1]["i"], 2);
        assert_eq!(meta[1]["r"], true);
        assert_eq!(meta[0]["x"], "shipments");
        assert_eq!(meta[0]["k"], "shipment.requested");
        assert_eq!(meta[2]["t"], 1);
        assert!(meta[0].get("t").is_none());
        let events: Value = serde_json::from_str(&batch.events).unwrap();
        assert_eq!(
            events,
            json!([{"kind": "disconnected", "error": "[CONNECTION] lost", "url": "amqp://app:***@node1:5672"}])
        );
        assert!(to_batch(&[], &[], true).closed);
    }
}
