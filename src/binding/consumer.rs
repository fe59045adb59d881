//! `NativeConsumer`: the delivery boundary. JavaScript pulls batches of
//! deliveries and events with one async call and settles each delivery with a
//! synchronous one.

use std::sync::Arc;

use napi::bindgen_prelude::Buffer;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

use super::convert::{js_error, json_str, write_properties_json, MessageProperties};
use super::table::from_epoch_ms;
use crate::consumer::{ConsumerHandle, DeliveryData, Event, Failure, Item, TableFailure};

/// What to consume and how to treat failures.
#[napi(object)]
pub struct ConsumeOptions {
    /// The work queue.
    pub queue: String,
    /// An exchange to declare and bind the queue to.
    pub exchange: Option<String>,
    /// The exchange's type. @default "topic"
    pub exchange_type: Option<String>,
    /// The binding key. @default the queue name
    pub routing_key: Option<String>,
    /// Handlers in flight at most. @default 10
    pub prefetch: Option<u32>,
    /// `classic` or `quorum`. @default "classic"
    pub queue_type: Option<String>,
    /// The retry delays, in order.
    pub delays: Vec<String>,
    /// Quorum only: deliveries after which a message parks without reaching the handler. @default 5
    pub delivery_limit: Option<u32>,
    /// First wait before reconnecting, in ms. @default 500
    pub recovery_initial_delay_ms: Option<u32>,
    /// Longest wait between reconnect tries, in ms. @default 30000
    pub recovery_max_delay_ms: Option<u32>,
    /// Give up after this many tries; 0 or none never gives up.
    pub recovery_max_attempts: Option<u32>,
    /// How long one broker round trip of starting, recovering or stopping may take, in ms. @default 15000
    pub recovery_step_timeout_ms: Option<u32>,
    /// Send failures to the retry table after the delays, for this many more attempts.
    pub table_max_attempts: Option<u32>,
    /// False: consume the work queue as it exists, checked but never declared. @default true
    pub assert_queue: Option<bool>,
    /// Arguments added to the work queue's declaration, as a JSON object.
    pub queue_arguments: Option<String>,
    /// Arguments added to every retry queue's declaration, as a JSON object.
    pub retry_queue_arguments: Option<String>,
    /// Arguments added to the parked queue's declaration, as a JSON object.
    pub parked_queue_arguments: Option<String>,
}

/// A delivery handed to JavaScript.
#[napi(object)]
pub struct NativeDelivery {
    /// The id to settle it with.
    pub id: i64,
    /// The body.
    pub body: Buffer,
    /// The exchange it was published to.
    pub exchange: String,
    /// Its routing key.
    pub routing_key: String,
    /// Whether the broker delivered it before.
    pub redelivered: bool,
    /// Earlier failed attempts.
    pub attempt: u32,
    /// Properties and headers.
    pub properties: MessageProperties,
}

/// Something that happened to a failed message or to the consumer.
#[napi(object)]
pub struct NativeEvent {
    /// `retry`, `stored`, `parked`, `publish-failed`, `disconnected`, `recovered` or `error`.
    pub kind: String,
    /// The delivery concerned, if any.
    pub id: Option<i64>,
    /// Its message id.
    pub message_id: Option<String>,
    /// The queue it was sent to, or meant for.
    pub target: Option<String>,
    /// For `parked`: `exhausted` or `non-retryable`.
    pub reason: Option<String>,
    /// The `retry-attempt` written.
    pub attempt: Option<u32>,
    /// For `retry`: the delay's label.
    pub delay: Option<String>,
    /// For `recovered`: milliseconds since the loss.
    pub after_ms: Option<f64>,
    /// For `stored`: the row id.
    pub row_id: Option<f64>,
    /// For `stored`: what it waits on.
    pub dependency: Option<String>,
    /// The handler's error message, or the consumer's error as `[CODE] message`.
    pub error: String,
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
    /// Events to report: a JSON array of objects with [`NativeEvent`]'s fields (absent ones left out).
    pub events: String,
    /// True when the consumer is closed and drained.
    pub closed: bool,
}

/// An event as a JSON object with [`NativeEvent`]'s (JavaScript) field names.
fn event_json(e: NativeEvent) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("kind".into(), e.kind.into());
    let mut put = |k: &str, v: Option<serde_json::Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("id", e.id.map(Into::into));
    put("messageId", e.message_id.map(Into::into));
    put("target", e.target.map(Into::into));
    put("reason", e.reason.map(Into::into));
    put("attempt", e.attempt.map(Into::into));
    put("delay", e.delay.map(Into::into));
    put("afterMs", e.after_ms.map(Into::into));
    put("rowId", e.row_id.map(Into::into));
    put("dependency", e.dependency.map(Into::into));
    m.insert("error".into(), e.error.into());
    serde_json::Value::Object(m)
}

/// Bodies up to this size share the batch's buffer; larger ones get their own
/// (no copy, and a kept message does not hold other messages' bodies).
const SHARED_BODY_MAX: usize = 16 * 1024;

/// One delivery's metadata, appended to `out` as a JSON object:
/// `i` id, `x` exchange, `k` routing key, `r` redelivered, `a` attempt,
/// `p` properties (as [`MessageProperties`] names them, headers included),
/// and either `o`/`n` (offset and length in the shared buffer) or `l` (index
/// of its own buffer).
fn delivery_meta(out: &mut Vec<u8>, d: &DeliveryData, body: BodyAt, strings: &mut Vec<String>) {
    use std::io::Write;
    // Written by hand: the keys are fixed, and a map per delivery would cost
    // an allocation per key. Strings go through serde_json for escaping.
    let _ = write!(out, "{{\"i\":{},\"x\":", d.id);
    json_str(out, &d.exchange);
    out.extend_from_slice(b",\"k\":");
    json_str(out, &d.routing_key);
    let _ = write!(out, ",\"r\":{},\"a\":{},", d.redelivered, d.attempt);
    let _ = match body {
        BodyAt::Shared { offset, len } => write!(out, "\"o\":{offset},\"n\":{len}"),
        BodyAt::Own(index) => write!(out, "\"l\":{index}"),
    };
    out.extend_from_slice(b",\"p\":");
    write_properties_json(out, &d.properties, strings);
    out.push(b'}');
}

#[derive(Clone, Copy)]
enum BodyAt {
    Shared { offset: usize, len: usize },
    Own(usize),
}

/// A handler's error, passed as data so its stack survives.
#[napi(object)]
pub struct FailureInfo {
    /// The error's name or class.
    pub name: String,
    /// Its message.
    pub message: String,
    /// Its stack.
    pub stack: String,
    /// Whether another attempt could succeed.
    pub retryable: bool,
    /// For the retry table: what the row waits on, whose it is, and when it is due.
    pub table: Option<TableInfo>,
}

/// What a row of the retry table gets, worked out by `onFailure.table`.
#[napi(object)]
pub struct TableInfo {
    /// What the message waits on.
    pub dependency: Option<String>,
    /// Whose message it is.
    pub tenant: Option<String>,
    /// When it is due, ms since the epoch; `null` waits for a person.
    pub next_attempt_at_ms: Option<f64>,
}

/// A running consumer.
#[napi]
pub struct NativeConsumer {
    handle: Arc<ConsumerHandle>,
}

impl NativeConsumer {
    pub(crate) fn new(handle: ConsumerHandle) -> Self {
        Self {
            handle: Arc::new(handle),
        }
    }
}

fn event_to_js(e: Event) -> NativeEvent {
    let blank = |kind: &str, error: String| NativeEvent {
        kind: kind.into(),
        id: None,
        message_id: None,
        target: None,
        reason: None,
        attempt: None,
        delay: None,
        after_ms: None,
        row_id: None,
        dependency: None,
        error,
    };
    match e {
        Event::Retried {
            id,
            message_id,
            target,
            attempt,
            delay,
            error,
        } => NativeEvent {
            id: Some(id as i64),
            message_id,
            target: Some(target),
            attempt: Some(attempt),
            delay: Some(delay),
            ..blank("retry", error)
        },
        Event::Parked {
            id,
            message_id,
            target,
            reason,
            attempt,
            error,
        } => NativeEvent {
            id: Some(id as i64),
            message_id,
            target: Some(target),
            reason: Some(reason),
            attempt: Some(attempt),
            ..blank("parked", error)
        },
        Event::PublishFailed {
            id,
            message_id,
            target,
            error,
        } => NativeEvent {
            id: Some(id as i64),
            message_id,
            target: Some(target),
            ..blank("publish-failed", error.coded_message())
        },
        Event::Stored {
            id,
            message_id,
            row_id,
            attempt,
            dependency,
            error,
        } => NativeEvent {
            id: Some(id as i64),
            message_id,
            target: Some("retry table".into()),
            attempt: Some(attempt),
            row_id: Some(row_id as f64),
            dependency,
            ..blank("stored", error)
        },
        Event::Disconnected { error } => blank("disconnected", error.coded_message()),
        Event::Recovered { attempts, after_ms } => NativeEvent {
            attempt: Some(attempts),
            after_ms: Some(after_ms as f64),
            ..blank("recovered", String::new())
        },
        Event::ConsumerError { error } => blank("error", error.coded_message()),
    }
}

/// Deliveries and events as JavaScript receives them; no items means closed.
fn to_batch(items: Vec<Item>) -> NativeBatch {
    let closed = items.is_empty();
    let shared_len: usize = items
        .iter()
        .filter_map(|i| match i {
            Item::Delivery(d) if d.body.len() <= SHARED_BODY_MAX => Some(d.body.len()),
            _ => None,
        })
        .sum();
    let mut meta = Vec::with_capacity(items.len() * 256 + 2);
    let mut bodies = Vec::with_capacity(shared_len);
    let mut large = Vec::new();
    let mut strings = Vec::new();
    let mut events = Vec::new();
    meta.push(b'[');
    for item in items {
        match item {
            Item::Delivery(d) => {
                if meta.len() > 1 {
                    meta.push(b',');
                }
                let at = if d.body.len() <= SHARED_BODY_MAX {
                    let offset = bodies.len();
                    bodies.extend_from_slice(&d.body);
                    BodyAt::Shared {
                        offset,
                        len: d.body.len(),
                    }
                } else {
                    BodyAt::Own(large.len())
                };
                delivery_meta(&mut meta, &d, at, &mut strings);
                if let BodyAt::Own(_) = at {
                    large.push(Buffer::from(d.body));
                }
            }
            Item::Event(e) => events.push(event_json(event_to_js(e))),
        }
    }
    meta.push(b']');
    NativeBatch {
        // serde_json writes UTF-8.
        meta: String::from_utf8(meta).unwrap_or_else(|_| "[]".into()),
        bodies: bodies.into(),
        large,
        strings,
        events: if events.is_empty() {
            "[]".into()
        } else {
            serde_json::Value::Array(events).to_string()
        },
        closed,
    }
}

#[napi]
impl NativeConsumer {
    /// The work queue.
    #[napi(getter)]
    pub fn queue(&self) -> String {
        self.handle.queue().to_owned()
    }

    /// `connected`, `recovering` or `closed`.
    #[napi(getter)]
    pub fn state(&self) -> String {
        self.handle.state().as_str().to_owned()
    }

    /// Hands every batch of deliveries and events to `on_batch`, on the
    /// JavaScript thread, as they arrive (at most `max` deliveries and events
    /// a batch); the last batch has `closed` set. Called once per consumer.
    #[napi(ts_args_type = "max: number, onBatch: (batch: NativeBatch) => void")]
    pub fn start(
        &self,
        max: u32,
        on_batch: ThreadsafeFunction<NativeBatch, (), NativeBatch, Status, false>,
    ) {
        let handle = self.handle.clone();
        napi::bindgen_prelude::spawn(async move {
            loop {
                let batch = to_batch(handle.recv(max as usize).await);
                let closed = batch.closed;
                on_batch.call(batch, ThreadsafeFunctionCallMode::NonBlocking);
                if closed {
                    // Dropping the function lets the process exit once nothing else keeps it.
                    return;
                }
            }
        });
    }

    /// Settles the deliveries whose handlers finished: `acked` resolved, and
    /// `failed[i]` threw `failures[i]` (retry or park it). One call for many.
    #[napi]
    pub fn settle(
        &self,
        acked: Vec<i64>,
        failed: Vec<i64>,
        failures: Vec<FailureInfo>,
    ) -> napi::Result<()> {
        let fails = failed
            .into_iter()
            .zip(failures)
            .map(|(id, failure)| {
                let f = Failure {
                    name: failure.name,
                    message: failure.message,
                    stack: failure.stack,
                    retryable: failure.retryable,
                    table: failure.table.map(|t| TableFailure {
                        dependency: t.dependency,
                        tenant: t.tenant,
                        next_attempt_at: t.next_attempt_at_ms.map(from_epoch_ms),
                    }),
                };
                (id as u64, f)
            })
            .collect();
        self.handle
            .settle_many(acked.into_iter().map(|id| id as u64).collect(), fails)
            .map_err(js_error)
    }

    /// Stops deliveries; unstarted ones go back to the queue.
    #[napi]
    pub async fn stop(&self) -> napi::Result<()> {
        self.handle.stop().await.map_err(js_error)
    }

    /// Waits for republishes in flight and closes the consumer's channel.
    #[napi]
    pub async fn finish(&self) -> napi::Result<()> {
        self.handle.finish().await.map_err(js_error)
    }

    /// Events not pulled yet.
    #[napi]
    pub fn take_events(&self) -> Vec<NativeEvent> {
        self.handle
            .take_events()
            .into_iter()
            .map(event_to_js)
            .collect()
    }
}
