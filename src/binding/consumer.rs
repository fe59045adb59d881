//! `NativeConsumer`: the delivery boundary. JavaScript pulls batches of
//! deliveries and events with one async call and settles each delivery with a
//! synchronous one.

use std::sync::Arc;

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

use super::convert::{js_error, MessageProperties};
use super::table::from_epoch_ms;
use crate::amqp::consumer::{ConsumerHandle, Event, Failure, Item, Settlement, TableFailure};

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
    /// Send failures to the retry table after the delays, for this many more attempts.
    pub table_max_attempts: Option<u32>,
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
#[napi(object)]
pub struct NativeBatch {
    /// Deliveries to handle.
    pub deliveries: Vec<NativeDelivery>,
    /// Events to report.
    pub events: Vec<NativeEvent>,
    /// True when the consumer is closed and drained.
    pub closed: bool,
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

    /// Waits for deliveries or events and returns up to `max` of them.
    #[napi]
    pub async fn recv(&self, max: u32) -> NativeBatch {
        let items = self.handle.recv(max as usize).await;
        let closed = items.is_empty();
        let mut deliveries = Vec::with_capacity(items.len());
        let mut events = Vec::new();
        for item in items {
            match item {
                Item::Delivery(d) => deliveries.push(NativeDelivery {
                    id: d.id as i64,
                    body: d.body.into(),
                    exchange: d.exchange,
                    routing_key: d.routing_key,
                    redelivered: d.redelivered,
                    attempt: d.attempt,
                    properties: MessageProperties::from_amqp(&d.properties),
                }),
                Item::Event(e) => events.push(event_to_js(e)),
            }
        }
        NativeBatch {
            deliveries,
            events,
            closed,
        }
    }

    /// The handler of delivery `id` resolved: ack it.
    #[napi]
    pub fn ack(&self, id: i64) -> napi::Result<()> {
        self.handle
            .settle(id as u64, Settlement::Ack)
            .map_err(js_error)
    }

    /// The handlers of deliveries `ids` resolved: ack them (one call for many).
    #[napi]
    pub fn ack_many(&self, ids: Vec<i64>) -> napi::Result<()> {
        for id in ids {
            self.handle
                .settle(id as u64, Settlement::Ack)
                .map_err(js_error)?;
        }
        Ok(())
    }

    /// The handler of delivery `id` threw: retry or park it.
    #[napi]
    pub fn fail(&self, id: i64, failure: FailureInfo) -> napi::Result<()> {
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
        self.handle
            .settle(id as u64, Settlement::Fail(f))
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
