//! What crosses between the consumer and JavaScript, in one place: a batch of
//! deliveries (metadata as JSON, bodies in buffers) and events, each event one
//! JSON object tagged by `kind`, the shape `lib/wire.ts` reads.
//!
//! `lib/wire.ts` types both by hand; the tests here keep it honest: they
//! write an example of every event kind and every form of delivery metadata
//! to `__test__/fixtures/wire-schema.ts`, which the TypeScript check holds
//! against those types, and fail when that file differs from what this
//! code writes.

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

use super::convert::{json_str, write_properties_json};
use crate::consumer::{DeliveryView, Event};

/// `events` as a JSON array, each [`Event`] serialised as it is (its serde
/// attributes give the shape `lib/wire.ts` types).
pub(crate) fn events_json(events: &[Event]) -> String {
    if events.is_empty() {
        return "[]".into();
    }
    // Serialising plain strings and numbers cannot fail.
    serde_json::to_string(events).unwrap_or_else(|_| "[]".into())
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
    /// The small bodies, back to back; each delivery's `offset` and `length` locate its own.
    pub bodies: Buffer,
    /// The large bodies; a delivery's `large` indexes its own.
    pub large: Vec<Buffer>,
    /// Short message and correlation ids: where a delivery's `properties` has a number for one, it indexes this list.
    pub strings: Vec<String>,
    /// Events to report: a JSON array of [`Event`]s.
    pub events: String,
    /// True when the consumer is closed and drained.
    pub closed: bool,
}

/// Bodies up to this size share the batch's buffer; larger ones get their own
/// (no copy, and a kept message does not hold other messages' bodies).
const SHARED_BODY_MAX: usize = 16 * 1024;

/// One delivery's metadata, appended to `out` as a JSON object (`DeliveryMeta`
/// in `lib/wire.ts`): `id`, `exchange`, `routingKey`, `redelivered`,
/// `deliveryTag` (the broker's, on the channel it came on), `attempt`, `table: true` when a retryable failure of this attempt goes to
/// the retry table, `parks: true` when it parks, either `offset` and `length` (its body in the shared
/// buffer) or `large` (the index of its own buffer), and `properties` (as
/// [`MessageProperties`](super::convert::MessageProperties) names them,
/// headers included).
fn delivery_meta(out: &mut Vec<u8>, d: &DeliveryView<'_>, body: BodyAt, strings: &mut Vec<String>) {
    use std::io::Write;
    // Written by hand: the keys are fixed, and a map per delivery would cost
    // an allocation per key. Strings go through serde_json for escaping.
    let _ = write!(out, "{{\"id\":{},\"exchange\":", d.id);
    json_str(out, d.delivery.exchange.as_str());
    out.extend_from_slice(b",\"routingKey\":");
    json_str(out, d.delivery.routing_key.as_str());
    let _ = write!(
        out,
        ",\"redelivered\":{},\"deliveryTag\":{},\"attempt\":{},",
        d.delivery.redelivered, d.delivery.delivery_tag, d.attempt
    );
    if d.table_bound {
        out.extend_from_slice(b"\"table\":true,");
    }
    if d.parks {
        out.extend_from_slice(b"\"parks\":true,");
    }
    if d.refused {
        out.extend_from_slice(b"\"refused\":true,");
    }
    let _ = match body {
        BodyAt::Shared { offset, len } => write!(out, "\"offset\":{offset},\"length\":{len}"),
        BodyAt::Own(index) => write!(out, "\"large\":{index}"),
    };
    out.extend_from_slice(b",\"properties\":");
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
    let mut meta = Vec::with_capacity(deliveries.len() * 320 + 2);
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
    use std::collections::BTreeSet;

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
        // A short id crosses beside the JSON (as an index), a long one in it.
        let message_id = if id == 1 { "48213" } else { "order-48213" };
        d.properties = BasicProperties::default().with_message_id(message_id.into());
        d
    }

    fn view(d: &Delivery) -> DeliveryView<'_> {
        DeliveryView {
            id: d.delivery_tag,
            attempt: 1,
            table_bound: d.delivery_tag == 3,
            parks: d.delivery_tag == 2,
            refused: d.delivery_tag == 4,
            delivery: d,
        }
    }

    /// One delivery with its body in the shared buffer, one with a buffer of
    /// its own (whose retryable failure parks), one whose failure goes to
    /// the retry table, and one refused before its handler.
    fn deliveries() -> [Delivery; 4] {
        [
            delivery(1, b"{\"orderId\":48213}".to_vec()),
            delivery(2, vec![b'x'; SHARED_BODY_MAX + 1]),
            delivery(3, b"second".to_vec()),
            delivery(4, b"refused".to_vec()),
        ]
    }

    /// Each event kind's place in [`every_event`]. A new kind does not
    /// compile until it has an arm here; give it an example there too.
    fn kind_index(e: &Event) -> usize {
        match e {
            Event::Retried { .. } => 0,
            Event::Parked { .. } => 1,
            Event::Stored { .. } => 2,
            Event::PublishFailed { .. } => 3,
            Event::Disconnected { .. } => 4,
            Event::Recovered { .. } => 5,
            Event::ConsumerError { .. } => 6,
            Event::Tally { .. } => 7,
            Event::TakenBack { .. } => 8,
        }
    }

    /// An example of every kind of event, in [`kind_index`] order.
    fn every_event() -> Vec<Event> {
        vec![
            Event::Retried {
                id: 1,
                message_id: Some("m1".into()),
                target: "q.retry.5s".into(),
                attempt: 1,
                delay: "5s".into(),
                error: "503".into(),
            },
            Event::Parked {
                id: 4,
                message_id: Some("m4".into()),
                target: "q.parked".into(),
                reason: "exhausted".into(),
                attempt: 3,
                error: "still 503".into(),
                fault_error: None,
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
            Event::Disconnected {
                error: Error::new(ErrorKind::Connection, "lost"),
                url: "amqp://app:***@node1:5672".into(),
            },
            Event::Recovered {
                attempts: 2,
                after_ms: 350,
                url: "amqp://node2".into(),
            },
            Event::ConsumerError {
                error: Error::new(ErrorKind::Connection, "ack failed"),
            },
            Event::Tally {
                retried: [("5s".to_owned(), 37), ("1m".to_owned(), 2)].into(),
                parked: [("exhausted".to_owned(), 1)].into(),
            },
            Event::TakenBack { id: 5, acked: true },
        ]
    }

    #[test]
    fn every_event_crosses_tagged_with_only_its_fields() {
        let events = every_event();
        let wire: Value = serde_json::from_str(&events_json(&events)).unwrap();
        assert_eq!(
            wire,
            json!([
                {"kind": "retry", "id": 1, "messageId": "m1", "target": "q.retry.5s", "reason": "retry", "attempt": 1, "delay": "5s", "error": "503"},
                {"kind": "parked", "id": 4, "messageId": "m4", "target": "q.parked", "reason": "exhausted", "attempt": 3, "error": "still 503", "faultError": null},
                {"kind": "stored", "id": 2, "messageId": null, "reason": "retry-table", "rowId": 7, "attempt": 4, "dependency": "carrier", "error": "down"},
                {"kind": "publish-failed", "id": 3, "messageId": null, "target": "q.parked", "error": "[UNROUTABLE] gone"},
                {"kind": "disconnected", "error": "[CONNECTION] lost", "url": "amqp://app:***@node1:5672"},
                {"kind": "recovered", "attempts": 2, "afterMs": 350, "url": "amqp://node2"},
                {"kind": "error", "error": "[CONNECTION] ack failed"},
                {"kind": "tally", "retried": {"1m": 2, "5s": 37}, "parked": {"exhausted": 1}},
                {"kind": "taken-back", "id": 5, "acked": true},
            ])
        );
        assert_eq!(events_json(&[]), "[]");
    }

    #[test]
    fn a_batch_locates_every_body_and_keeps_the_events_in_order() {
        let deliveries = deliveries();
        let views: Vec<DeliveryView<'_>> = deliveries.iter().map(view).collect();
        let events = [Event::Disconnected {
            error: Error::new(ErrorKind::Connection, "lost"),
            url: "amqp://app:***@node1:5672".into(),
        }];
        let batch = to_batch(&views, &events, false);
        assert!(!batch.closed);
        let meta: Vec<Value> = serde_json::from_str(&batch.meta).unwrap();
        assert_eq!(meta.len(), 4);
        assert_eq!(meta[3]["refused"], true);
        assert!(meta[0].get("refused").is_none());
        let body = |m: &Value| -> Vec<u8> {
            match m.get("large") {
                Some(l) => batch.large[l.as_u64().unwrap() as usize].to_vec(),
                None => {
                    let (o, n) = (
                        m["offset"].as_u64().unwrap() as usize,
                        m["length"].as_u64().unwrap() as usize,
                    );
                    batch.bodies[o..o + n].to_vec()
                }
            }
        };
        for (m, d) in meta.iter().zip(&deliveries) {
            assert_eq!(body(m), d.data);
        }
        assert_eq!(meta[1]["id"], 2);
        assert_eq!(meta[1]["redelivered"], true);
        assert_eq!(meta[1]["deliveryTag"], 2);
        assert_eq!(meta[0]["exchange"], "shipments");
        assert_eq!(meta[0]["routingKey"], "shipment.requested");
        assert_eq!(meta[0]["attempt"], 1);
        assert_eq!(meta[2]["table"], true);
        assert!(meta[0].get("table").is_none());
        assert_eq!(meta[1]["parks"], true);
        assert!(meta[0].get("parks").is_none());
        assert_eq!(meta[0]["properties"]["messageId"], 0);
        assert_eq!(batch.strings, ["48213"]);
        assert_eq!(meta[1]["properties"]["messageId"], "order-48213");
        let events: Value = serde_json::from_str(&batch.events).unwrap();
        assert_eq!(
            events,
            json!([{"kind": "disconnected", "error": "[CONNECTION] lost", "url": "amqp://app:***@node1:5672"}])
        );
        assert!(to_batch(&[], &[], true).closed);
    }

    /// Where the examples of what crosses are kept for the TypeScript check.
    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/__test__/fixtures/wire-schema.ts"
    );

    /// The fixture as this code writes it: every event kind and every form of
    /// delivery metadata, each held by the TypeScript check against the type
    /// `lib/wire.ts` declares for it.
    fn fixture() -> String {
        let events = every_event();
        let kinds: BTreeSet<usize> = events.iter().map(kind_index).collect();
        assert_eq!(kinds.len(), 9, "an example of every event kind");
        let deliveries = deliveries();
        let views: Vec<DeliveryView<'_>> = deliveries.iter().map(view).collect();
        let meta: Value = serde_json::from_str(&to_batch(&views, &[], false).meta).unwrap();
        let events: Value = serde_json::from_str(&events_json(&events)).unwrap();
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap();
        format!(
            "// Written by `cargo test` (src/binding/wire.rs) from what the native side sends: do not edit.\n\
             // After a change to what crosses, `RABBIT_RETRY_WRITE_FIXTURES=1 cargo test` writes it again,\n\
             // and `npm run typecheck` holds it against lib/wire.ts.\n\
             import type {{ DeliveryMeta, WireEvent }} from '../../lib/wire';\n\n\
             /** One event of every kind, as the consumer serialises it. */\n\
             export const EVENTS = {} satisfies WireEvent[];\n\n\
             /** Delivery metadata: a body in the shared buffer (a short message id beside the JSON), a body in its own buffer (whose retryable failure parks), a failure bound for the retry table, a delivery refused before its handler (handed over to be watched). */\n\
             export const DELIVERIES = {} satisfies DeliveryMeta[];\n",
            pretty(&events),
            pretty(&meta)
        )
    }

    #[test]
    fn the_typescript_fixture_is_what_crosses() {
        let want = fixture();
        if std::env::var_os("RABBIT_RETRY_WRITE_FIXTURES").is_some() {
            std::fs::write(FIXTURE, &want).unwrap();
        }
        let have = std::fs::read_to_string(FIXTURE).unwrap_or_default();
        assert!(
            have == want,
            "{FIXTURE} differs from what crosses: run `RABBIT_RETRY_WRITE_FIXTURES=1 cargo test`, \
             then `npm run typecheck` to hold lib/wire.ts to it"
        );
    }
}
