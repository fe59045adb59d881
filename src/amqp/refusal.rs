//! What the broker refuses a publish for by closing its channel, and which
//! publishes of a closed channel a refusal is charged to.
//!
//! RabbitMQ answers a publish it refuses for its content (a property value,
//! a header of the wrong type, a body over `max_message_size`, a missing or
//! internal exchange) by closing the channel, and with it every publish in
//! flight there: those sent before the refused one were taken, those after
//! it were dropped, and no confirm comes for either. So what can be told
//! before a publish is sent is told here ([`Limits::check`]), and the
//! publish is refused alone, never sent. A refusal nobody foresaw is charged
//! to the publishes its close text names ([`charged_to`]); the others of
//! the channel learn that their outcome is unknown, never that they were
//! refused.

use std::sync::atomic::{AtomicUsize, Ordering};

use lapin::types::AMQPValue;
use lapin::BasicProperties;

use super::fields::{properties_size, CONTENT_HEADER_OVERHEAD};

/// RabbitMQ 3.8 to 3.13's default `max_message_size`: 128 MiB.
pub(crate) const MAX_MESSAGE_SIZE_3: usize = 128 << 20;
/// RabbitMQ 4.x's default `max_message_size`: 16 MiB.
pub(crate) const MAX_MESSAGE_SIZE_4: usize = 16 << 20;

/// The longest `expiration` RabbitMQ takes, in milliseconds.
const MAX_EXPIRATION_MS: u64 = 4_294_967_295;

/// The headers RabbitMQ routes by (sender-selected distribution): each must
/// be an array when present, or the broker closes the channel.
pub(crate) const ROUTING_HEADERS: [&str; 2] = ["CC", "BCC"];

/// Why the broker would refuse a publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A property or header the broker does not take.
    Properties(String),
    /// A body over the broker's `max_message_size`.
    TooLarge(String),
}

impl Refused {
    /// Why, in words.
    pub(crate) fn reason(&self) -> &str {
        match self {
            Refused::Properties(why) | Refused::TooLarge(why) => why,
        }
    }
}

/// What one connection's broker takes: its user, its frame size, its
/// message size (the version's default until a refusal names the one it
/// was configured with), and whether it checks the delivery mode.
#[derive(Debug)]
pub(crate) struct Limits {
    user: String,
    frame_max: AtomicUsize,
    max_message_size: AtomicUsize,
    /// RabbitMQ 3.x refuses a delivery mode other than 1 or 2; 4.x takes any.
    checks_delivery_mode: bool,
}

impl Limits {
    /// The limits of a connection of `user` to a broker of `version`
    /// (`3.10.8`, `4.3.6`; `None`: unknown, taken as 4.x's stricter size)
    /// whose frames hold `frame_max` bytes.
    pub(crate) fn new(user: &str, version: Option<&str>, frame_max: usize) -> Limits {
        let major = version
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse::<u32>().ok());
        let three = major.is_some_and(|m| m < 4);
        Limits {
            user: user.to_owned(),
            frame_max: AtomicUsize::new(frame_max),
            max_message_size: AtomicUsize::new(if three {
                MAX_MESSAGE_SIZE_3
            } else {
                MAX_MESSAGE_SIZE_4
            }),
            checks_delivery_mode: three,
        }
    }

    /// A new connection's frame size.
    pub(crate) fn set_frame_max(&self, frame_max: usize) {
        self.frame_max.store(frame_max, Ordering::Relaxed);
    }

    /// The largest body the broker takes, as far as this client knows.
    pub(crate) fn max_message_size(&self) -> usize {
        self.max_message_size.load(Ordering::Relaxed)
    }

    /// Learns what the broker's close `text` tells of its limits: the
    /// `max_message_size` it was configured with.
    pub(crate) fn learn(&self, text: &str) {
        if let Some(max) = configured_max_size(text) {
            self.max_message_size.store(max, Ordering::Relaxed);
        }
    }

    /// Why the broker would refuse a publish of `body_len` bytes with
    /// `properties`, if it would.
    pub(crate) fn check(
        &self,
        properties: &BasicProperties,
        body_len: usize,
    ) -> Result<(), Refused> {
        check_properties(
            properties,
            &self.user,
            self.frame_max.load(Ordering::Relaxed),
            self.checks_delivery_mode,
        )
        .map_err(Refused::Properties)?;
        let max = self.max_message_size();
        if body_len > max {
            return Err(Refused::TooLarge(format!(
                "its body is {body_len} bytes, more than the broker's max_message_size of {max}"
            )));
        }
        Ok(())
    }
}

/// Why the broker would refuse a publish with `properties` on a connection
/// of `user` whose frames hold `frame_max` bytes, if it would: another
/// user's `user-id`, an `expiration` that is not a whole number of ms, a
/// routing header that is not an array, properties larger than a frame,
/// and, where `delivery_mode` is checked (RabbitMQ 3.x), a delivery mode
/// other than 1 or 2.
pub(crate) fn check_properties(
    properties: &BasicProperties,
    user: &str,
    frame_max: usize,
    delivery_mode: bool,
) -> Result<(), String> {
    if let Some(id) = properties.user_id() {
        if id.as_str() != user {
            return Err(format!(
                "its user-id '{}' is not the connection's user '{user}', and the broker refuses a publish with another user's id",
                id.as_str()
            ));
        }
    }
    if let Some(exp) = properties.expiration() {
        check_expiration(exp.as_str())?;
    }
    if delivery_mode {
        if let Some(mode) = properties.delivery_mode() {
            if *mode != 1 && *mode != 2 {
                return Err(format!(
                    "its delivery mode is {mode}, and the broker takes 1 (transient) or 2 (persistent)"
                ));
            }
        }
    }
    if let Some(headers) = properties.headers() {
        for name in ROUTING_HEADERS {
            match headers.inner().get(name) {
                None | Some(AMQPValue::FieldArray(_)) => {}
                Some(_) => {
                    return Err(format!(
                        "its '{name}' header is not an array of queue names or routing keys, and the broker refuses it"
                    ))
                }
            }
        }
    }
    let size = CONTENT_HEADER_OVERHEAD + properties_size(properties);
    if size > frame_max {
        return Err(format!(
            "its properties and headers take {size} bytes, more than the {frame_max} of a frame"
        ));
    }
    Ok(())
}

/// Whether RabbitMQ takes `exp` as an `expiration`: a whole number of
/// milliseconds, written in digits, at most 4294967295.
pub(crate) fn check_expiration(exp: &str) -> Result<(), String> {
    let digits = !exp.is_empty() && exp.len() <= 10 && exp.bytes().all(|b| b.is_ascii_digit());
    match exp.parse::<u64>() {
        Ok(ms) if digits && ms <= MAX_EXPIRATION_MS => Ok(()),
        _ => Err(format!(
            "its expiration '{exp}' is not a whole number of milliseconds up to {MAX_EXPIRATION_MS}, and the broker refuses it"
        )),
    }
}

/// The `max_message_size` a close text of RabbitMQ names ("message size N
/// is larger than configured max size M").
fn configured_max_size(text: &str) -> Option<usize> {
    let (_, rest) = text.split_once("configured max size ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether the broker's close of a channel with `code` and `text` refused
/// the publish of `body_len` bytes to `exchange`: the close names its
/// exchange (404 no exchange, 403 an internal or forbidden one), or its
/// size (406 over `max_message_size`). Every property the broker refuses is
/// checked before a publish is sent ([`Limits::check`]), so a close over a
/// property names none of the publishes sent. A publish the close does not
/// name lost its channel to another publish's refusal.
pub(crate) fn charged_to(code: u16, text: &str, exchange: &str, body_len: usize) -> bool {
    match code {
        404 | 403 => text.contains(&format!("exchange '{exchange}'")),
        406 => text.contains(&format!("message size {body_len} is larger")),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
