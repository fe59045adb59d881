//! `NativeParkedSession`: messages taken from a parked queue without acking
//! them, so TypeScript can show, filter and replay them.

use std::sync::Arc;

use napi_derive::napi;

use super::consumer::NativeDelivery;
use super::convert::{js_error, MessageProperties};
use crate::amqp::connection::Broker;
use crate::amqp::fields::attempt_of;
use crate::amqp::parked::{HeldMessage, ParkedSession};

/// Depth and consumers of a queue.
#[napi(object)]
pub struct NativeQueueInfo {
    /// Messages ready.
    pub messages: u32,
    /// Consumers subscribed.
    pub consumers: u32,
}

/// A message held by a session, and how many are left behind it.
#[napi(object)]
pub struct NativeHeld {
    /// The message.
    pub delivery: NativeDelivery,
    /// Messages left in the queue after it.
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

fn held_to_js(m: HeldMessage, work_queue: &str) -> NativeHeld {
    let headers = m.properties.headers().as_ref();
    let attempt = attempt_of(headers, work_queue);
    NativeHeld {
        delivery: NativeDelivery {
            id: m.id as i64,
            body: m.body.into(),
            exchange: m.exchange,
            routing_key: m.routing_key,
            redelivered: m.redelivered,
            attempt,
            properties: MessageProperties::from_amqp(&m.properties),
        },
        remaining: m.remaining,
    }
}

#[napi]
impl NativeParkedSession {
    /// Takes the next message without acking it; `null` when none is left.
    #[napi]
    pub async fn get(&self) -> napi::Result<Option<NativeHeld>> {
        let got = self.session.get().await.map_err(js_error)?;
        Ok(got.map(|m| held_to_js(m, &self.work_queue)))
    }

    /// Publishes held message `id` to `exchange`/`routingKey` with its attempt
    /// count reset, then acks it.
    #[napi]
    pub async fn replay(&self, id: i64, exchange: String, routing_key: String) -> napi::Result<()> {
        self.session
            .replay(&self.broker, id as u64, &exchange, &routing_key)
            .await
            .map_err(js_error)
    }

    /// Closes the session; held messages go back to the queue.
    #[napi]
    pub async fn close(&self) -> napi::Result<()> {
        self.session.close().await.map_err(js_error)
    }
}
