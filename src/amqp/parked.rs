//! Operations on a queue nobody consumes (the parked queue): its depth, and a
//! session that takes messages with `basic.get` without acking them, so an
//! operator can look at them and move some back, each acked only after its
//! publish was confirmed. Whatever the session still holds when it closes goes
//! back to the queue.

mod edit;

use std::collections::HashMap;
use std::sync::Arc;

use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::Channel;
use tokio::sync::Mutex;

use super::connection::Broker;
use super::fields::{now_ms, short_name, with_trace};
use super::publisher::republish_properties;
pub(crate) use edit::{not_editable, Edit};

use crate::error::{amqp_reply, broker_error, Error, ErrorKind, Result};
use crate::retry::headers::{RETRY_ATTEMPT, RETRY_REPLAYED_AT};
use crate::retry::{is_broker_death_header, is_routing_header, time::iso8601_utc};

/// Depth and consumers of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueInfo {
    /// Messages ready in the queue.
    pub messages: u32,
    /// Consumers subscribed to it.
    pub consumers: u32,
}

/// The depth and consumer count of `queue`, or `None` when it does not exist.
pub(crate) async fn queue_info(broker: &Broker, queue: &str) -> Result<Option<QueueInfo>> {
    // A passive declare of a missing queue closes its channel: use a throwaway one.
    let ch = broker.channel().await?;
    let res = ch
        .queue_declare(
            short_name("queue", queue)?,
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await;
    match res {
        Ok(q) => {
            let _ = ch.close(200, "done".into()).await;
            Ok(Some(QueueInfo {
                messages: q.message_count(),
                consumers: q.consumer_count(),
            }))
        }
        Err(e) => match amqp_reply(&e) {
            Some((404, _)) => Ok(None),
            _ => Err(Error::new(
                ErrorKind::Connection,
                format!("could not read queue '{queue}': {e}"),
            )),
        },
    }
}

/// Removes every ready message of `queue`; returns how many.
pub(crate) async fn purge(broker: &Broker, queue: &str) -> Result<u32> {
    let ch = broker.channel().await?;
    let n = ch
        .queue_purge(short_name("queue", queue)?, QueuePurgeOptions::default())
        .await
        .map_err(|e| match amqp_reply(&e) {
            Some((404, _)) => Error::new(
                ErrorKind::InvalidOptions,
                format!("queue '{queue}' does not exist"),
            ),
            _ => broker_error(format!("purging '{queue}' failed: {e}"), &e),
        })?;
    let _ = ch.close(200, "done".into()).await;
    Ok(n)
}

/// Deletes `queue` with its messages; how many it held, or `None` when it did
/// not exist.
pub(crate) async fn delete_queue(broker: &Broker, queue: &str) -> Result<Option<u32>> {
    if queue_info(broker, queue).await?.is_none() {
        return Ok(None);
    }
    let ch = broker.channel().await?;
    let n = ch
        .queue_delete(short_name("queue", queue)?, QueueDeleteOptions::default())
        .await
        .map_err(|e| broker_error(format!("deleting queue '{queue}' failed: {e}"), &e))?;
    let _ = ch.close(200, "done".into()).await;
    Ok(Some(n))
}

/// Declares `queue` as a state queue: durable, holding only its newest
/// message (the broker drops the older from the head).
pub(crate) async fn declare_state_queue(broker: &Broker, queue: &str) -> Result<()> {
    let ch = broker.channel().await?;
    let mut args = FieldTable::default();
    args.insert("x-max-length".into(), AMQPValue::LongLongInt(1));
    let options = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare(short_name("queue", queue)?, options, args)
        .await
        .map_err(|e| match amqp_reply(&e) {
            Some((406, text)) => Error::new(
                ErrorKind::TopologyMismatch,
                format!("queue '{queue}' exists with other arguments than a state queue's (x-max-length 1): {text}"),
            ),
            _ => broker_error(format!("declaring queue '{queue}' failed: {e}"), &e),
        })?;
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}

/// Deletes `exchange`; a missing one counts as deleted.
pub(crate) async fn delete_exchange(broker: &Broker, exchange: &str) -> Result<()> {
    let ch = broker.channel().await?;
    ch.exchange_delete(
        short_name("exchange", exchange)?,
        ExchangeDeleteOptions::default(),
    )
    .await
    .map_err(|e| broker_error(format!("deleting exchange '{exchange}' failed: {e}"), &e))?;
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}

/// Binds `queue` to `exchange` with `routing_key` (both must exist); binding
/// twice binds once.
pub(crate) async fn bind_queue(
    broker: &Broker,
    queue: &str,
    exchange: &str,
    routing_key: &str,
) -> Result<()> {
    let ch = broker.channel().await?;
    ch.queue_bind(
        short_name("queue", queue)?,
        short_name("exchange", exchange)?,
        short_name("routing key", routing_key)?,
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(|e| {
        broker_error(
            format!(
                "binding queue '{queue}' to exchange '{exchange}' with '{routing_key}' failed: {e}"
            ),
            &e,
        )
    })?;
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}

/// A message taken from the queue and held unacked by a session.
#[derive(Debug, Clone)]
pub(crate) struct HeldMessage {
    /// The message as delivered; its delivery tag is the session's id for it.
    pub delivery: Arc<Delivery>,
    /// Messages left in the queue after this one was taken.
    pub remaining: u32,
}

/// How [`ParkedSession::replay`] sends a message back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Replay<'a> {
    /// Its attempt count reset, with a `retry-replayed-at` header.
    Reset,
    /// Its headers as they are.
    KeepAttempt,
    /// As [`Replay::Reset`], with an operator's edit and its audit trail.
    Edited(&'a Edit),
}

/// Takes messages from one queue without acking them.
pub(crate) struct ParkedSession {
    queue: String,
    channel: Channel,
    held: Mutex<HashMap<u64, Arc<Delivery>>>,
}

impl ParkedSession {
    /// Opens a session on `queue`, which must exist.
    pub(crate) async fn open(broker: &Broker, queue: &str) -> Result<ParkedSession> {
        if queue_info(broker, queue).await?.is_none() {
            return Err(Error::new(
                ErrorKind::InvalidOptions,
                format!("queue '{queue}' does not exist; is the name right, and has a consumer of its work queue run?"),
            ));
        }
        let channel = broker.channel().await?;
        Ok(ParkedSession {
            queue: queue.to_owned(),
            channel,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// Takes the next message, or `None` when the queue has no more ready.
    pub(crate) async fn get(&self) -> Result<Option<HeldMessage>> {
        let got = self
            .channel
            .basic_get(
                short_name("queue", &self.queue)?,
                BasicGetOptions { no_ack: false },
            )
            .await
            .map_err(|e| broker_error(format!("reading '{}' failed: {e}", self.queue), &e))?;
        let Some(m) = got else {
            return Ok(None);
        };
        let delivery = Arc::new(m.delivery);
        self.held
            .lock()
            .await
            .insert(delivery.delivery_tag, delivery.clone());
        Ok(Some(HeldMessage {
            delivery,
            remaining: m.message_count,
        }))
    }

    /// Publishes held message `id` to `exchange` with `routing_key` with its
    /// attempt count reset to 0 and a `retry-replayed-at` header (or, with
    /// [`Replay::KeepAttempt`], its headers as they are: a message of a retry
    /// queue sent back before its delay ends; or, with [`Replay::Edited`],
    /// the edit's body and headers and its audit trail), waits for the
    /// confirm, then acks it. On failure the message stays held (and goes
    /// back to the queue when the session closes). Returns what an edit
    /// changed (`body`, `header <name>`); nothing for a replay.
    pub(crate) async fn replay(
        &self,
        broker: &Broker,
        id: u64,
        (exchange, routing_key): (&str, &str),
        trace: Option<(String, Option<String>)>,
        how: Replay<'_>,
    ) -> Result<Vec<String>> {
        let delivery = self.held.lock().await.get(&id).cloned().ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidOptions,
                format!("message {id} is not held by this session"),
            )
        })?;
        let keep_attempt = matches!(how, Replay::KeepAttempt);
        let edit = match how {
            Replay::Edited(edit) => Some(edit),
            _ => None,
        };
        let mut headers = FieldTable::default();
        let mut removed = Vec::new();
        if let Some(h) = delivery.properties.headers() {
            for (k, v) in h.inner() {
                let name = k.as_str();
                if edit.is_some_and(|e| e.removes(name)) {
                    removed.push(name.to_owned());
                } else if (keep_attempt || !is_broker_death_header(name))
                    && !is_routing_header(name)
                {
                    headers.insert(k.clone(), v.clone());
                }
            }
        }
        if let Some(trace) = &trace {
            // The replayed message continues the trace of the replay.
            headers = with_trace(headers, trace);
        }
        let mut changed = Vec::new();
        if !keep_attempt {
            let now = iso8601_utc(now_ms());
            headers.insert(RETRY_ATTEMPT.into(), AMQPValue::LongLongInt(0));
            headers.insert(
                RETRY_REPLAYED_AT.into(),
                AMQPValue::LongString(LongString::from(now.clone().into_bytes())),
            );
            if let Some(edit) = edit {
                changed = edit.apply(&delivery.data, &removed, &mut headers, &now);
            }
        }
        let props = republish_properties(&delivery.properties, headers, broker.user());
        let body = edit
            .and_then(|e| e.body.as_deref())
            .unwrap_or(&delivery.data);
        broker.publish(exchange, routing_key, body, props).await?;
        delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(|e| {
                Error::with_source(
                    ErrorKind::Connection,
                    format!("message {id} was replayed but its ack failed; it stays parked too, so it may run twice: {e}"), e)
            })?;
        self.held.lock().await.remove(&id);
        Ok(changed)
    }

    /// Acks held message `id` without publishing it anywhere: it leaves the
    /// queue for good. The messages the session still holds keep their places.
    pub(crate) async fn discard(&self, id: u64) -> Result<()> {
        let delivery = self.held.lock().await.get(&id).cloned().ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidOptions,
                format!("message {id} is not held by this session"),
            )
        })?;
        delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(|e| {
                Error::with_source(
                    ErrorKind::Connection,
                    format!("deleting message {id} failed; it stays parked: {e}"),
                    e,
                )
            })?;
        self.held.lock().await.remove(&id);
        Ok(())
    }

    /// Gives back every message held, up to delivery tag `last`, and waits
    /// until the queue holds them again. A channel's own commands reach the
    /// queue in order, so the passive declare after the nack answers only
    /// once the queue took them back: whoever reads the depth next (a
    /// `count()` after a `peek()`) sees them. A channel close alone gives
    /// them back too, but the broker may answer it first. Failures are left
    /// to the close: closing the channel gives the messages back anyway.
    async fn give_back(&self, last: u64) {
        let nack = self
            .channel
            .basic_nack(
                last,
                BasicNackOptions {
                    multiple: true,
                    requeue: true,
                },
            )
            .await;
        if nack.is_err() {
            return;
        }
        if let Ok(queue) = short_name("queue", &self.queue) {
            let _ = self
                .channel
                .queue_declare(
                    queue,
                    QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await;
        }
    }

    /// Closes the session; every message still held goes back to the queue,
    /// and is counted there again by the time this returns.
    pub(crate) async fn close(&self) -> Result<()> {
        let last = {
            let mut held = self.held.lock().await;
            let last = held.keys().max().copied();
            held.clear();
            last
        };
        if self.channel.status().connected() {
            if let Some(tag) = last {
                self.give_back(tag).await;
            }
            self.channel
                .close(200, "session closed".into())
                .await
                .map_err(|e| {
                    Error::with_source(
                        ErrorKind::Connection,
                        format!("closing the session failed: {e}"),
                        e,
                    )
                })?;
        }
        Ok(())
    }
}
