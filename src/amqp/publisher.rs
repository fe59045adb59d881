//! The one place messages are published: a confirm channel separate from the
//! consuming ones, `mandatory` on every publish, and only an `Ack` without a
//! return counts as success. Publishes reach the channel in the order their
//! turns were taken (see [`super::order`]); confirms are awaited concurrently.

use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Confirmation};
use tokio::sync::Mutex;

use super::exchanges::KnownExchanges;
use super::fields::short_name;
use super::order::{SendOrder, Turn};
use super::refusal::{charged_to, Limits};
use crate::error::{amqp_reply, refusal_kind, Error, ErrorKind, Result};
use crate::retry::RETRY_ORIGINAL_USER_ID;

/// What a publisher needs of the connection it publishes on: new channels,
/// what its broker takes, and the exchanges known to exist there.
pub(crate) trait OpenChannel: Sync {
    /// Opens a channel on a live connection.
    fn open_channel(&self) -> impl std::future::Future<Output = Result<Channel>> + Send;
    /// What the broker takes of a publish.
    fn limits(&self) -> &Limits;
    /// The exchanges seen to exist.
    fn exchanges(&self) -> &KnownExchanges;
}

/// Refusals (`basic.nack`) in a row after which the confirm channel is
/// replaced: RabbitMQ 3.10 to 3.12 refuse every publish of a channel that
/// first published to a quorum queue just after its leader's node died
/// (rabbitmq-server#9241), so a publisher that kept it would never publish again.
const REFUSALS_BEFORE_NEW_CHANNEL: u32 = 3;

/// Publishes with confirms on its own channel, reopening it after the broker
/// closed it (publishing to a missing exchange closes the channel), and
/// replacing it after refusals in a row.
pub(crate) struct Publisher {
    /// Shared with each publish: a clone of the channel itself takes every one of its handles.
    channel: Mutex<Option<Arc<Channel>>>,
    confirm_timeout: Duration,
    refused_in_a_row: AtomicU32,
    order: SendOrder,
}

impl Publisher {
    /// A publisher whose channel is opened on first use.
    pub(crate) fn new(confirm_timeout: Duration) -> Self {
        Self {
            channel: Mutex::new(None),
            confirm_timeout,
            refused_in_a_row: AtomicU32::new(0),
            order: SendOrder::default(),
        }
    }

    /// The place of a publish made now among this publisher's publishes:
    /// taken when the publish is made, given to [`Publisher::publish`].
    pub(crate) fn turn(&self) -> Turn {
        self.order.turn()
    }

    /// The confirm channel, opened (again) when it is missing or closed, on a
    /// new connection when the old one is gone.
    pub(crate) async fn channel(&self, conn: &impl OpenChannel) -> Result<Arc<Channel>> {
        let mut slot = self.channel.lock().await;
        if let Some(ch) = slot.as_ref() {
            if ch.status().connected() {
                return Ok(ch.clone());
            }
        }
        // Boxed: opening is rare, and the future of every publish would
        // otherwise be as large as opening's.
        let ch = Arc::new(Box::pin(open_confirm_channel(conn)).await?);
        *slot = Some(Arc::clone(&ch));
        Ok(ch)
    }

    /// Publishes `body` to `exchange` with `routing_key`, mandatory, in
    /// `turn`, and waits for the broker's confirm. Succeeds only on an `Ack`
    /// with no return. A publish the broker would refuse by closing the
    /// channel (a property, its size, a missing exchange) fails alone,
    /// before it is sent; the exchange is asked about before the turn, so
    /// the publishes after it still reach the channel in order.
    pub(crate) async fn publish(
        &self,
        mut turn: Turn,
        conn: &impl OpenChannel,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<()> {
        // Checked before a channel is opened for a publish that cannot be sent.
        short_name("exchange", exchange)?;
        short_name("routing key", routing_key)?;
        conn.exchanges()
            .check(|| conn.open_channel(), exchange)
            .await?;
        // In turn from the channel on: a publish that opens it is sent first.
        turn.wait().await;
        let ch = self.channel(conn).await?;
        let confirmation = publish_confirmed(
            &ch,
            turn,
            conn.limits(),
            exchange,
            routing_key,
            body,
            properties,
            self.confirm_timeout,
        )
        .await
        .inspect_err(|e| forget_if_missing(conn.exchanges(), exchange, e))?;
        if matches!(confirmation, Confirmation::Nack(_)) {
            let refused = self.refused_in_a_row.fetch_add(1, Ordering::SeqCst) + 1;
            if refused >= REFUSALS_BEFORE_NEW_CHANNEL {
                Box::pin(self.replace(&ch)).await;
            }
        } else {
            self.refused_in_a_row.store(0, Ordering::SeqCst);
        }
        confirmed(exchange, routing_key, confirmation)
    }

    /// How long a publish waits for its confirm.
    pub(crate) fn confirm_timeout(&self) -> Duration {
        self.confirm_timeout
    }
}

/// A new channel of `conn` in confirm mode.
async fn open_confirm_channel(conn: &impl OpenChannel) -> Result<Channel> {
    let ch = conn.open_channel().await.map_err(|e| {
        Error::new(
            ErrorKind::Connection,
            format!("could not open the confirm channel: {}", e.message),
        )
    })?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| {
            Error::with_source(
                ErrorKind::Connection,
                format!("the broker refused publisher confirms: {e}"),
                e,
            )
        })?;
    Ok(ch)
}

/// Forgets that `exchange` exists when `e` says the broker found none.
pub(crate) fn forget_if_missing(exchanges: &KnownExchanges, exchange: &str, e: &Error) {
    if e.kind == ErrorKind::Unroutable {
        let closed = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<lapin::Error>())
            .and_then(amqp_reply);
        if matches!(closed, Some((404, _))) {
            exchanges.forget(exchange);
        }
    }
}

/// Publishes `body` to `exchange` with `routing_key` on `ch` (a channel in
/// confirm mode), mandatory, in `turn` ([`Turn::alone`] when order does not
/// matter), and waits at most `timeout` for the broker's confirm; see
/// [`confirmed`] for what the confirm means. A publish `limits` says the
/// broker would refuse fails with `PRECONDITION_FAILED` and is not sent.
#[allow(clippy::too_many_arguments)] // each is one of the publish's parts; a struct would be built per publish
pub(crate) async fn publish_confirmed(
    ch: &Channel,
    turn: Turn,
    limits: &Limits,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    properties: BasicProperties,
    timeout: Duration,
) -> Result<Confirmation> {
    let exchange_name = short_name("exchange", exchange)?;
    let key = short_name("routing key", routing_key)?;
    // Named only for an error: a publish that succeeds formats nothing.
    let target = || describe(exchange, routing_key);
    let body_len = body.len();
    if let Err(refused) = limits.check(&properties, body_len) {
        return Err(Error::new(
            ErrorKind::PreconditionFailed,
            format!(
                "the publish to {} was not sent: {}",
                target(),
                refused.reason()
            ),
        ));
    }
    let failed = |e: &lapin::Error| publish_error(&target(), exchange, body_len, limits, e);
    // Pinned here and lent to the turn, so that the publish's future is
    // stored once in this one.
    let sending = pin!(ch.basic_publish(
        exchange_name,
        key,
        BasicPublishOptions {
            mandatory: true,
            immediate: false,
        },
        body,
        properties,
    ));
    let confirm = turn.send(sending).await.map_err(|e| failed(&e))?;
    tokio::time::timeout(timeout, confirm)
        .await
        .map_err(|_| {
            Error::new(
                ErrorKind::PublishFailed,
                format!(
                    "no confirm for the publish to {} within {} ms; it may or may not have been stored",
                    target(),
                    timeout.as_millis()
                ),
            )
        })?
        .map_err(|e| failed(&e))
}

/// What the broker's confirm of a mandatory publish to `exchange` with
/// `routing_key` means: only an `Ack` without a return is a success.
pub(crate) fn confirmed(
    exchange: &str,
    routing_key: &str,
    confirmation: Confirmation,
) -> Result<()> {
    let target = || describe(exchange, routing_key);
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(returned)) => Err(Error::new(
            ErrorKind::Unroutable,
            format!(
                "the broker returned the publish to {} ({} {}): no queue is bound to it; declare the queue or check the names",
                target(),
                returned.reply_code,
                returned.reply_text
            ),
        )),
        Confirmation::Nack(_) => Err(Error::new(
            ErrorKind::PublishNacked,
            format!(
                "the broker refused the publish to {} (basic.nack): the queue may be full with reject-publish overflow, or the broker had an internal error",
                target()
            ),
        )),
        Confirmation::NotRequested => Err(Error::new(
            ErrorKind::PublishFailed,
            format!(
                "the publish to {} was not confirmed: the channel is not in confirm mode",
                target()
            ),
        )),
    }
}

impl Publisher {
    /// Drops `ch` as the confirm channel, if it still is, and closes it: the
    /// next publish opens a new one.
    pub(crate) async fn replace(&self, ch: &Channel) {
        let mut slot = self.channel.lock().await;
        if slot.as_ref().is_some_and(|c| c.id() == ch.id()) {
            *slot = None;
            self.refused_in_a_row.store(0, Ordering::SeqCst);
            drop(slot);
            let _ = tokio::time::timeout(
                self.confirm_timeout,
                ch.close(200, "replaced after refused publishes".into()),
            )
            .await;
        }
    }
}

fn describe(exchange: &str, routing_key: &str) -> String {
    if exchange.is_empty() {
        format!("queue '{routing_key}'")
    } else {
        format!("exchange '{exchange}' with routing key '{routing_key}'")
    }
}

/// Why the publish of `body_len` bytes to `exchange` (`target`, in words)
/// failed; lapin's error is kept as the source, so a caller can tell what
/// closed the channel (see [`amqp_reply`]). A refusal that closed the
/// channel is this publish's when its text names the publish (its missing
/// or refused exchange, its size): then it fails as refused (`UNROUTABLE`
/// for a missing exchange). Any other publish of the channel learns only
/// that its outcome is unknown (`PUBLISH_FAILED`): it may have been taken
/// before the refused one, or dropped after it.
fn publish_error(
    target: &str,
    exchange: &str,
    body_len: usize,
    limits: &Limits,
    e: &lapin::Error,
) -> Error {
    let Some((code, text)) = amqp_reply(e) else {
        return Error::with_source(
            ErrorKind::PublishFailed,
            format!("the publish to {target} failed: {e}"),
            e.clone(),
        );
    };
    limits.learn(&text);
    let Some(kind) = refusal_kind(code) else {
        return Error::with_source(
            ErrorKind::PublishFailed,
            format!("the publish to {target} failed: {e}"),
            e.clone(),
        );
    };
    if !charged_to(code, &text, exchange, body_len) {
        return Error::with_source(
            ErrorKind::PublishFailed,
            format!(
                "the broker closed the channel of the publish to {target} over another publish ({code} {text}); this one was not confirmed, and may or may not have been stored"
            ),
            e.clone(),
        );
    }
    match code {
        // The exchange does not exist: nothing could route the message.
        404 => Error::with_source(
            ErrorKind::Unroutable,
            format!("cannot publish to {target}: {text}; declare the exchange first"),
            e.clone(),
        ),
        _ => Error::with_source(
            kind,
            format!("the broker refused the publish to {target} ({code} {text})"),
            e.clone(),
        ),
    }
}

/// The original properties minus `expiration`, with `headers`, for a publish
/// by `user`. A `user-id` naming another user moves to the
/// `retry-original-user-id` header: the broker refuses a publish carrying
/// another user's id.
pub(crate) fn republish_properties(
    p: &BasicProperties,
    mut headers: FieldTable,
    user: &str,
) -> BasicProperties {
    let foreign_user = p
        .user_id()
        .as_ref()
        .filter(|u| u.wire_bytes().as_ref() != user.as_bytes());
    if let Some(u) = foreign_user {
        headers.insert(
            RETRY_ORIGINAL_USER_ID.into(),
            AMQPValue::LongString(LongString::from(u.wire_bytes().into_owned())),
        );
    }
    let mut out = BasicProperties::default().with_headers(headers);
    if let Some(v) = p.content_type() {
        out = out.with_content_type(v.clone());
    }
    if let Some(v) = p.content_encoding() {
        out = out.with_content_encoding(v.clone());
    }
    if let Some(v) = p.delivery_mode() {
        out = out.with_delivery_mode(*v);
    }
    if let Some(v) = p.priority() {
        out = out.with_priority(*v);
    }
    if let Some(v) = p.correlation_id() {
        out = out.with_correlation_id(v.clone());
    }
    if let Some(v) = p.reply_to() {
        out = out.with_reply_to(v.clone());
    }
    if let Some(v) = p.message_id() {
        out = out.with_message_id(v.clone());
    }
    if let Some(v) = p.timestamp() {
        out = out.with_timestamp(*v);
    }
    if let Some(v) = p.kind() {
        out = out.with_type(v.clone());
    }
    if let Some(v) = p.user_id().as_ref().filter(|_| foreign_user.is_none()) {
        out = out.with_user_id(v.clone());
    }
    if let Some(v) = p.app_id() {
        out = out.with_app_id(v.clone());
    }
    if let Some(v) = p.cluster_id() {
        out = out.with_cluster_id(v.clone());
    }
    out
}
