//! Requests that wait for a reply, over RabbitMQ's direct reply-to: one
//! channel consumes the pseudo-queue `amq.rabbitmq.reply-to` (replies are
//! never acked) and publishes every request, mandatory and confirmed, with
//! `reply-to` set to it. Direct reply-to needs both on the same channel.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::{BasicConsumeOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Consumer};
use tokio::sync::Mutex;

use super::connection::Broker;
use super::order::{SendOrder, Turn};
use super::publisher::{confirmed, forget_if_missing, publish_confirmed, OpenChannel};
use crate::error::{Error, ErrorKind, Result};

/// The pseudo-queue of direct reply-to: a request's `reply-to`, and what the
/// requesting channel consumes.
pub(crate) const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// A channel that publishes requests and receives their replies.
pub(crate) struct ReplySession {
    /// The connection, for what a request must meet before it is sent.
    broker: Arc<Broker>,
    channel: Channel,
    replies: Mutex<Consumer>,
    confirm_timeout: Duration,
    order: SendOrder,
}

impl ReplySession {
    /// Opens the channel, in confirm mode, consuming the direct reply-to
    /// pseudo-queue.
    pub(crate) async fn open(broker: &Arc<Broker>) -> Result<ReplySession> {
        let channel = broker.channel().await?;
        let failed = |what: &str, e: lapin::Error| {
            Error::with_source(ErrorKind::Connection, format!("{what}: {e}"), e)
        };
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| failed("the broker refused publisher confirms", e))?;
        let replies = channel
            .basic_consume(
                DIRECT_REPLY_TO.into(),
                "".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| failed("could not consume the direct reply-to queue", e))?;
        Ok(ReplySession {
            broker: broker.clone(),
            channel,
            replies: Mutex::new(replies),
            confirm_timeout: broker.confirm_timeout(),
            order: SendOrder::default(),
        })
    }

    /// The place among this channel's requests of one made now: the request
    /// sent with it reaches the broker after those whose turns were taken before.
    pub(crate) fn turn(&self) -> Turn {
        self.order.turn()
    }

    /// Publishes a request to `exchange` with `routing_key` in `turn`, its
    /// `reply-to` set to direct reply-to, mandatory, and waits for the
    /// broker's confirm: `UNROUTABLE` when no queue takes it or the exchange
    /// does not exist. A request the broker would refuse (a missing exchange,
    /// a property, its size) fails alone before it is sent: refused on this
    /// channel, it would close it, and every reply awaited here with it.
    pub(crate) async fn request(
        &self,
        turn: Turn,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<()> {
        if !self.channel.status().connected() {
            return Err(Error::new(
                ErrorKind::Closed,
                "the reply channel is closed; open a new one",
            ));
        }
        self.broker.check_exchange(exchange).await?;
        let properties = properties.with_reply_to(DIRECT_REPLY_TO.into());
        let confirmation = publish_confirmed(
            &self.channel,
            turn,
            self.broker.limits(),
            exchange,
            routing_key,
            body,
            properties,
            self.confirm_timeout,
        )
        .await
        .inspect_err(|e| forget_if_missing(self.broker.exchanges(), exchange, e))?;
        confirmed(exchange, routing_key, confirmation)
    }

    /// Waits for the next reply, then takes those already here behind it, up
    /// to `max` in all. Empty once the channel is closed.
    pub(crate) async fn next(&self, max: usize) -> Vec<Delivery> {
        let mut replies = self.replies.lock().await;
        let mut got = Vec::new();
        let Some(Ok(first)) = replies.next().await else {
            return got;
        };
        got.push(first);
        while got.len() < max.max(1) {
            match replies.next().now_or_never() {
                Some(Some(Ok(d))) => got.push(d),
                _ => break,
            }
        }
        got
    }

    /// Whether the channel is open.
    pub(crate) fn is_open(&self) -> bool {
        self.channel.status().connected()
    }

    /// Closes the channel; a pending [`ReplySession::next`] then ends empty.
    pub(crate) async fn close(&self) -> Result<()> {
        if self.channel.status().connected() {
            self.channel
                .close(200, "reply session closed".into())
                .await
                .map_err(|e| {
                    Error::with_source(
                        ErrorKind::Connection,
                        format!("closing the reply channel failed: {e}"),
                        e,
                    )
                })?;
        }
        Ok(())
    }
}
