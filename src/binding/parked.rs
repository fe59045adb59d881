//! `NativeParkedSession`: messages taken from a parked queue without acking
//! them, so TypeScript can show, filter and replay them.

use std::sync::Arc;

use napi_derive::napi;

use lapin::types::FieldTable;
use napi::bindgen_prelude::Buffer;

use super::convert::{invalid, js_error};
use super::wire::{to_batch, NativeBatch};
use crate::amqp::connection::Broker;
use crate::amqp::fields::attempt_of;
use crate::amqp::fields::table_from_json;
use crate::amqp::parked::{Edit, ParkedSession, Replay};
use crate::consumer::DeliveryView;

/// Depth and consumers of a queue.
#[napi(object)]
pub struct NativeQueueInfo {
    /// Messages ready.
    pub messages: u32,
    /// Consumers subscribed.
    pub consumers: u32,
}

/// Messages held by a session, in the consumer's batch form (see
/// `NativeBatch`; each delivery's `i` is the id to replay it by), and how
/// many are left in the queue behind the last.
#[napi(object)]
pub struct NativeHeld {
    /// The messages; none when the queue is empty.
    pub batch: NativeBatch,
    /// Messages left in the queue after the last one taken.
    pub remaining: u32,
}

/// A session on one parked queue.
#[napi]
pub struct NativeParkedSession {
    broker: Arc<Broker>,
    session: Arc<ParkedSession>,
    work_queue: String,
}

impl NativeParkedSession {
    pub(crate) fn new(broker: Arc<Broker>, session: ParkedSession, work_queue: String) -> Self {
        Self {
            broker,
            session: Arc::new(session),
            work_queue,
        }
    }
}

#[napi]
impl NativeParkedSession {
    /// Takes up to `max` messages (at least one) without acking them; an
    /// empty batch when none is left.
    #[napi]
    pub async fn get(&self, max: u32) -> napi::Result<NativeHeld> {
        let mut held = Vec::new();
        let mut remaining = 0;
        while held.len() < max.max(1) as usize {
            let Some(m) = self.session.get().await.map_err(js_error)? else {
                remaining = 0;
                break;
            };
            remaining = m.remaining;
            held.push(m.delivery);
            if remaining == 0 {
                break;
            }
        }
        let views: Vec<DeliveryView<'_>> = held
            .iter()
            .map(|d| DeliveryView {
                id: d.delivery_tag,
                attempt: attempt_of(d.properties.headers().as_ref(), &self.work_queue),
                table_bound: false,
                parks: false,
                refused: false,
                delivery: d,
            })
            .collect();
        Ok(NativeHeld {
            batch: to_batch(&views, &[], views.is_empty()),
            remaining,
        })
    }

    /// Publishes held message `id` to `exchange`/`routingKey` with its attempt
    /// count reset (kept as it is with `keepAttempt`), then acks it;
    /// `traceparent` (and `tracestate`), when given, replace the copy's: the
    /// replay's own trace context.
    #[napi]
    pub async fn replay(
        &self,
        id: i64,
        exchange: String,
        routing_key: String,
        traceparent: Option<String>,
        tracestate: Option<String>,
        keep_attempt: Option<bool>,
    ) -> napi::Result<()> {
        let trace = traceparent.map(|parent| (parent, tracestate));
        let to = (exchange.as_str(), routing_key.as_str());
        let how = if keep_attempt.unwrap_or(false) {
            Replay::KeepAttempt
        } else {
            Replay::Reset
        };
        self.session
            .replay(&self.broker, id as u64, to, trace, how)
            .await
            .map(|_| ())
            .map_err(js_error)
    }

    /// Publishes an edited copy of held message `id` to `exchange`/`routingKey`
    /// (as `replay` does, its attempt count reset): `body` for the original's
    /// when given, the headers of `set` added or replaced and those of
    /// `remove` left out, with the audit trail of the edit by `by`; then acks
    /// the original. Resolves to what changed (`body`, `header <name>`).
    /// Refused with `INVALID_OPTIONS`, before anything is sent, when `set` or
    /// `remove` names a header that is not the operator's.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub async fn edit(
        &self,
        id: i64,
        exchange: String,
        routing_key: String,
        by: String,
        body: Option<Buffer>,
        set: Option<serde_json::Value>,
        remove: Option<Vec<String>>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> napi::Result<Vec<String>> {
        let set = match set.filter(|s| !s.is_null()) {
            Some(v) => table_from_json(&v).map_err(invalid)?,
            None => FieldTable::default(),
        };
        let edit = Edit::new(
            by,
            body.map(|b| b.to_vec()),
            set,
            remove.unwrap_or_default(),
        )
        .map_err(invalid)?;
        let trace = traceparent.map(|parent| (parent, tracestate));
        let to = (exchange.as_str(), routing_key.as_str());
        self.session
            .replay(&self.broker, id as u64, to, trace, Replay::Edited(&edit))
            .await
            .map_err(js_error)
    }

    /// Acks held message `id` without publishing it: it leaves the queue for
    /// good, and the messages still held keep their places.
    #[napi]
    pub async fn discard(&self, id: i64) -> napi::Result<()> {
        self.session.discard(id as u64).await.map_err(js_error)
    }

    /// Closes the session; held messages go back to the queue.
    #[napi]
    pub async fn close(&self) -> napi::Result<()> {
        self.session.close().await.map_err(js_error)
    }
}
