//! Replies to requests, published to their `reply-to` on a connection of
//! their own.
//!
//! A reply's `reply-to` comes from whoever sent the request, and the broker
//! may refuse it: RabbitMQ 3.10 closes the whole connection (541
//! INTERNAL_ERROR) that publishes to a direct reply-to address it cannot
//! decode or whose node is not running, and any broker closes the channel of
//! a publish whose `user-id` or `expiration` it refuses. So a reply is
//! checked against those rules before it is sent ([`check_reply`]), and
//! replies go out on their own connection, whose loss takes no consumer's
//! channel with it. When the broker closes it under a reply anyway, every
//! reply that was in flight is sent again alone: the one the broker refuses
//! alone is the one it refused, and fails with `REPLY_REFUSED`.

use std::sync::Arc;

use lapin::BasicProperties;
use tokio::sync::{Mutex, RwLock};

use super::connection::{Broker, ConnectOptions};
use super::refusal::check_properties;
use super::reply::DIRECT_REPLY_TO;
use crate::error::{amqp_reply, Error, ErrorKind, Result};

/// The prefix of the addresses RabbitMQ gives direct reply-to requesters.
const DIRECT_REPLY_TO_PREFIX: &str = "amq.rabbitmq.reply-to.";

/// Tries of a reply sent alone after its channel closed under it: a channel
/// still closing when the first try began is replaced by the next.
const ALONE_TRIES: usize = 3;

/// Close codes that say nothing about the reply: a normal close, and a
/// connection an operator or a stopping node closed.
const NOT_A_REFUSAL: [u16; 2] = [200, 320];

/// The reply connection of a [`Replier`].
enum Slot {
    /// No reply was sent yet.
    Unopened,
    /// Opened on the first reply (it reconnects by itself when lost).
    Open(Arc<Broker>),
    /// The client closed.
    Closed,
}

/// The reply publisher of one client: a connection opened on the first
/// reply, and opened again after it was lost.
pub(crate) struct Replier {
    opts: ConnectOptions,
    /// The reply connection once opened; `Closed` once the client closed.
    broker: Mutex<Slot>,
    /// Replies take it shared; a reply sent alone takes it exclusively.
    gate: RwLock<()>,
}

impl Replier {
    /// A replier that connects with `opts` (the client's, under a name of
    /// its own) on its first reply.
    pub(crate) fn new(mut opts: ConnectOptions) -> Self {
        opts.connection_name = Some(match opts.connection_name.take() {
            Some(name) => format!("{name} (replies)"),
            None => "rabbit-retry (replies)".to_owned(),
        });
        Replier {
            opts,
            broker: Mutex::new(Slot::Unopened),
            gate: RwLock::new(()),
        }
    }

    /// The reply connection, opened when there is none yet.
    async fn broker(&self) -> Result<Arc<Broker>> {
        let mut slot = self.broker.lock().await;
        match &*slot {
            Slot::Open(b) => Ok(b.clone()),
            Slot::Closed => Err(Error::new(ErrorKind::Closed, "the client is closed")),
            Slot::Unopened => {
                let b = Broker::connect(self.opts.clone()).await?;
                *slot = Slot::Open(b.clone());
                Ok(b)
            }
        }
    }

    /// Publishes a reply to the default exchange with `reply_to` as routing
    /// key, mandatory, and waits for the confirm. Fails with `REPLY_REFUSED`
    /// when the broker would refuse it or did, `UNROUTABLE` when no queue
    /// took a reply to a named queue, and as any publish fails otherwise.
    ///
    /// A return of a reply to a direct reply-to address says nothing:
    /// RabbitMQ 3.x returns every such mandatory publish, delivered or not
    /// (the pseudo-queue is not a queue the default exchange routes to),
    /// and 4.x returns none, even when the requester is gone. Such a reply
    /// succeeds once the broker confirmed it.
    pub(crate) async fn reply(
        &self,
        reply_to: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<()> {
        match self.send(reply_to, body, properties).await {
            Err(e)
                if e.kind == ErrorKind::Unroutable
                    && reply_to.starts_with(DIRECT_REPLY_TO_PREFIX) =>
            {
                Ok(())
            }
            sent => sent,
        }
    }

    /// [`Replier::reply`], a return of any reply failing with `UNROUTABLE`.
    async fn send(&self, reply_to: &str, body: &[u8], properties: BasicProperties) -> Result<()> {
        let broker = self.broker().await?;
        if let Err(why) = check_reply(
            reply_to,
            &properties,
            broker.user(),
            broker.frame_max().await,
        ) {
            return Err(Error::new(
                ErrorKind::ReplyRefused,
                format!("the reply to '{reply_to}' was not sent: {why}"),
            ));
        }
        let first = {
            let _shared = self.gate.read().await;
            broker.publish("", reply_to, body, properties.clone()).await
        };
        match first {
            // Refused before it was sent (its size), or refused alone.
            Err(e) if refused_alone(&e) => {
                return Err(Error::new(
                    ErrorKind::ReplyRefused,
                    format!(
                        "the broker refused the reply to '{reply_to}': {}",
                        e.message
                    ),
                ))
            }
            Err(ref e) if lost_under(e) => {}
            done => return done,
        }
        // The channel or connection closed under this reply, and under every
        // other reply in flight with it: sent again alone, the reply the
        // broker refused is told from those it took down with it.
        let _alone = self.gate.write().await;
        let mut last = first;
        for _ in 0..ALONE_TRIES {
            let sent = broker.publish("", reply_to, body, properties.clone()).await;
            match &sent {
                Err(e) => {
                    if let Some((code, text)) = refusal(e) {
                        let closed = match lapin_source(e) {
                            Some(l) if l.is_amqp_hard_error() => "the connection of replies",
                            _ => "its channel",
                        };
                        return Err(Error::with_source(
                            ErrorKind::ReplyRefused,
                            format!(
                                "the broker refused the reply to '{reply_to}' and closed {closed} ({code} {text})"
                            ),
                            e.clone(),
                        ));
                    }
                    if !lost_under(e) {
                        return sent;
                    }
                }
                Ok(()) => return sent,
            }
            last = sent;
        }
        last
    }

    /// Closes the reply connection, if one was opened; no reply is sent after.
    pub(crate) async fn close(&self) -> Result<()> {
        let was = std::mem::replace(&mut *self.broker.lock().await, Slot::Closed);
        match was {
            Slot::Open(b) => b.close().await,
            Slot::Unopened | Slot::Closed => Ok(()),
        }
    }
}

/// lapin's error under `e`, when `e` came from one.
fn lapin_source(e: &Error) -> Option<&lapin::Error> {
    std::error::Error::source(e).and_then(|s| s.downcast_ref::<lapin::Error>())
}

/// Whether the broker refused this reply itself: before it was sent, or by
/// a close that named it (see `publisher::publish_error`).
fn refused_alone(e: &Error) -> bool {
    matches!(
        e.kind,
        ErrorKind::PreconditionFailed | ErrorKind::AccessRefused | ErrorKind::NotFound
    )
}

/// Whether the publish failed because its channel or connection went away
/// (closed by the broker, or still closing when a channel was asked of it):
/// not a timeout, not a return.
fn lost_under(e: &Error) -> bool {
    match e.kind {
        ErrorKind::PublishFailed => lapin_source(e).is_some(),
        ErrorKind::Connection => true,
        _ => false,
    }
}

/// The broker's close code and text, when it closed the channel or
/// connection under the publish for a reason other than a normal or forced
/// close.
fn refusal(e: &Error) -> Option<(u16, String)> {
    let (code, text) = amqp_reply(lapin_source(e)?)?;
    (!NOT_A_REFUSAL.contains(&code)).then_some((code, text))
}

/// Why the broker would refuse a reply to `reply_to` with `properties` on a
/// connection of `user` whose frames hold `frame_max` bytes, if it would.
pub(crate) fn check_reply(
    reply_to: &str,
    properties: &BasicProperties,
    user: &str,
    frame_max: usize,
) -> std::result::Result<(), String> {
    if reply_to.is_empty() {
        return Err("the request's reply-to is empty".to_owned());
    }
    if reply_to.len() > 255 {
        return Err(format!(
            "reply-to is {} bytes, and a routing key holds at most 255",
            reply_to.len()
        ));
    }
    check_direct_reply_to(reply_to)?;
    // The delivery mode is the caller's to choose; every other rule holds.
    check_properties(properties, user, frame_max, false)
}

/// Whether `reply_to`, when it is a direct reply-to address, is in the form
/// RabbitMQ gives: `amq.rabbitmq.reply-to.<pid>.<key>`, the pid base64 of an
/// Erlang pid on node `reply@<digits>`. Every other name is a queue's and is
/// left to routing.
pub(crate) fn check_direct_reply_to(reply_to: &str) -> std::result::Result<(), String> {
    let not_given = |why: &str| {
        Err(format!(
            "reply-to '{reply_to}' is not a direct reply-to address as RabbitMQ gives them (amq.rabbitmq.reply-to.<pid>.<key>): {why}; \
             the broker closes the connection that publishes to some such names"
        ))
    };
    if reply_to == DIRECT_REPLY_TO {
        return not_given("it is the pseudo-queue itself, which the broker replaces with the requester's own address");
    }
    let Some(suffix) = reply_to.strip_prefix(DIRECT_REPLY_TO_PREFIX) else {
        return Ok(());
    };
    let parts: Vec<&str> = suffix.split('.').collect();
    let [pid, key] = parts.as_slice() else {
        return not_given("it does not have exactly two parts after the prefix");
    };
    if pid.is_empty() || key.is_empty() {
        return not_given("a part is empty");
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return not_given("its key is not printable ASCII");
    }
    let Some(bytes) = decode_base64(pid) else {
        return not_given("its pid is not base64");
    };
    match pid_node(&bytes) {
        Some(node) if node_hash(node).is_some() => Ok(()),
        Some(_) => not_given("its pid's node is not reply@<digits>"),
        None => not_given("its pid is not an Erlang pid"),
    }
}

/// The node name of an Erlang pid in external term format (as
/// `pid_recomposition:from_binary` of RabbitMQ reads it), if `b` is one.
fn pid_node(b: &[u8]) -> Option<&str> {
    let rest = match b {
        [131, 88 | 103, rest @ ..] => rest,
        _ => return None,
    };
    let (len, rest) = match rest {
        [118, hi, lo, rest @ ..] => (usize::from(*hi) << 8 | usize::from(*lo), rest),
        [119, len, rest @ ..] => (usize::from(*len), rest),
        _ => return None,
    };
    if rest.len() < len {
        return None;
    }
    let (node, tail) = rest.split_at(len);
    // Id and serial, then a creation of 4 bytes (or 1, in the older form).
    if tail.len() != 12 && tail.len() != 9 {
        return None;
    }
    std::str::from_utf8(node).ok()
}

/// The hash of a node named `reply@<hash>`, as RabbitMQ names the node of a
/// direct reply-to pid.
fn node_hash(node: &str) -> Option<u64> {
    let (_, hash) = node.split_once('@')?;
    if hash.is_empty() || hash.len() > 10 || !hash.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    hash.parse().ok()
}

/// `s` decoded as standard base64 with its padding, as Erlang's
/// `base64:encode` writes it; `None` for anything else.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    let chunks = b.len() / 4;
    for (i, chunk) in b.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|c| **c == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != chunks) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = n << 6 | value(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests;
