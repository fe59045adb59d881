//! Refused declarations, turned into errors that say which argument differs,
//! what the queue has, and the option that would match.

use lapin::types::{AMQPValue, LongString};

use super::{Role, Topology};
use crate::error::{amqp_reply, refusal_kind, Error, ErrorKind};

impl Topology {
    /// The error for a refused declaration of the queue `name` of `role`.
    pub(super) fn queue_error(&self, role: Role, name: &str, e: &lapin::Error) -> Error {
        match amqp_reply(e) {
            Some((406, text)) if text.contains("invalid arg") => {
                let arg =
                    quoted_after(&text, "invalid arg '").unwrap_or_else(|| "an argument".into());
                Error::new(
                    ErrorKind::InvalidOptions,
                    format!(
                        "the broker refused '{arg}' for queue '{name}' ({text}); {}",
                        needs(&arg, role)
                    ),
                )
            }
            Some((406, text)) => self.mismatch(role, name, &text),
            _ => broker_error("queue", name, e),
        }
    }

    /// A TOPOLOGY_MISMATCH for the queue `name` of `role`, from the broker's
    /// `inequivalent arg` reply `text`: which argument, what the queue has,
    /// and the option that would match.
    pub(super) fn mismatch(&self, role: Role, name: &str, text: &str) -> Error {
        let arg = quoted_after(text, "inequivalent arg '").unwrap_or_else(|| "an argument".into());
        let current = Current::parse(text);
        Error::new(
            ErrorKind::TopologyMismatch,
            format!(
                "queue '{name}' already exists with {} ({text}); {}",
                current.describe(&arg),
                self.remedy(role, &arg, &current)
            ),
        )
    }

    /// What to change so that the declaration of a queue of `role` matches the
    /// queue that exists, whose `arg` is `current`.
    fn remedy(&self, role: Role, arg: &str, current: &Current) -> String {
        const AS_IS: &str = "or assertQueue: false to consume the queue as it is";
        let replace = match role {
            Role::Work => "set assertQueue: false to consume the queue as it is",
            Role::Retry => "this retry queue was declared with other settings: delete it once it is empty (its messages wait for a retry), or use other delays",
            Role::Parked => "this parked queue was declared with other settings: replay or move its messages, then delete it",
        };
        match arg {
            "durable" | "exclusive" | "auto_delete" => match role {
                Role::Work => format!("rabbit-retry declares durable queues that are neither exclusive nor auto-delete; {replace}"),
                _ => replace.to_owned(),
            },
            "x-queue-type" => {
                // 3.x writes "the value 'quorum' of type 'longstr'" (or none for
                // a classic queue); 4.x and an explicit 'classic' write 'quorum'.
                let wanted = match current {
                    Current::Value { value, .. } => value.as_str(),
                    Current::Plain(value) if !value.is_empty() => value.as_str(),
                    _ => "classic",
                };
                match (wanted, role) {
                    ("classic" | "quorum", Role::Work) => format!("set queueType: '{wanted}' to match, {AS_IS}"),
                    ("classic" | "quorum", _) => format!("set queueType: '{wanted}' to match, or delete it"),
                    (other, _) => format!("a {other} queue cannot be consumed with retries: use another queue"),
                }
            }
            "x-delivery-limit" if role == Role::Work => match current.number() {
                Some(n) if n > 1 => format!(
                    "set deliveryLimit: {} to match (the broker's limit is one above it), {AS_IS}",
                    n - 1
                ),
                _ => replace.to_owned(),
            },
            // Consumed as it is, a queue without the broker's delayed retry
            // would deliver a returned message again at once: with
            // brokerDelay, the only remedies change the queue or the mode.
            "x-delayed-retry-min" | "x-delayed-retry-max" if role == Role::Work => {
                let field = &arg["x-delayed-retry-".len()..];
                match current.number() {
                    Some(n) if self.broker_delay.is_some() => format!(
                        "set onFailure.brokerDelay.{field}: {n} (milliseconds) to match"
                    ),
                    _ => delayed_retry_remedy(self.broker_delay.is_some()),
                }
            }
            "x-delayed-retry-type" if role == Role::Work => {
                delayed_retry_remedy(self.broker_delay.is_some())
            }
            _ if self.owner(role, arg).is_some() => replace.to_owned(),
            _ => {
                let option = role.option();
                let set = match current {
                    Current::None => format!("remove '{arg}' from {option}"),
                    _ => format!("set {option}: {{ '{arg}': {} }} to match", current.literal()),
                };
                match role {
                    Role::Work => format!("{set}, {AS_IS}"),
                    _ => set,
                }
            }
        }
    }
}

/// What to do about a work queue whose delayed retry differs in kind: it has
/// none and `brokerDelay` asks for it (`asked`), or the other way round.
fn delayed_retry_remedy(asked: bool) -> String {
    if asked {
        "onFailure.brokerDelay needs the work queue's x-delayed-retry-type 'failed' (with its min and max): a quorum queue's arguments cannot change, so declare the queue anew (once it is empty), or use onFailure.delays".to_owned()
    } else {
        "the queue retries on its own (x-delayed-retry-*): use onFailure.brokerDelay with its values, or assertQueue: false to consume the queue as it is".to_owned()
    }
}

/// What the broker says the existing queue has for the mismatched argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Current {
    /// The queue does not have it.
    None,
    /// A value and its AMQP type (`longstr`, `signedint`, `long`, `bool`, …).
    Value { value: String, kind: String },
    /// A flag such as `durable`: the broker's plain rendering.
    Plain(String),
}

impl Current {
    /// Parses the part after "but current is" of an `inequivalent arg` reply.
    pub(super) fn parse(text: &str) -> Current {
        let Some(at) = text.find("but current is ") else {
            return Current::Plain(String::new());
        };
        let rest = &text[at + "but current is ".len()..];
        if rest.starts_with("none") {
            return Current::None;
        }
        if let Some(value) = quoted_after(rest, "the value '") {
            let kind = quoted_after(rest, "of type '").unwrap_or_default();
            return Current::Value { value, kind };
        }
        Current::Plain(quoted_after(rest, "'").unwrap_or_else(|| rest.trim().to_owned()))
    }

    /// The value as the broker wrote it.
    fn text(&self) -> &str {
        match self {
            Current::Value { value, .. } | Current::Plain(value) => value,
            Current::None => "",
        }
    }

    fn number(&self) -> Option<i64> {
        match self {
            // 4.3 writes a number without its type: "current is '200'".
            Current::Value { value, .. } | Current::Plain(value) => value.parse().ok(),
            Current::None => None,
        }
    }

    /// The value as a JavaScript literal.
    fn literal(&self) -> String {
        match self {
            Current::Value { value, kind } => match kind.as_str() {
                "bool" => value.clone(),
                "longstr" | "shortstr" => js_string(value),
                _ if value.parse::<f64>().is_ok() => value.clone(),
                _ => js_string(value),
            },
            Current::Plain(v) => js_string(v),
            Current::None => "undefined".into(),
        }
    }

    /// "x-max-length = 1000", or "no x-max-length".
    fn describe(&self, arg: &str) -> String {
        match self {
            Current::None => format!("no '{arg}'"),
            Current::Plain(v) if v.is_empty() => format!("another '{arg}'"),
            _ => format!("'{arg}' = {}", self.literal()),
        }
    }
}

fn js_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// When the broker's reply `text` refuses a declaration for an argument's
/// value (`inequivalent arg`), that argument and the value the queue has:
/// `None` for none, a number as an integer, anything else as text.
pub(super) fn existing_value(text: &str) -> Option<(String, Option<AMQPValue>)> {
    let arg = quoted_after(text, "inequivalent arg '")?;
    let value = match Current::parse(text) {
        Current::None => None,
        current => Some(match current.number() {
            Some(n) => AMQPValue::LongLongInt(n),
            None => AMQPValue::LongString(LongString::from(current.text().as_bytes())),
        }),
    };
    Some((arg, value))
}

/// The error for a refused declaration of the exchange `name`.
pub(super) fn exchange_error(name: &str, e: &lapin::Error) -> Error {
    match amqp_reply(e) {
        Some((406, text)) => {
            let arg =
                quoted_after(&text, "inequivalent arg '").unwrap_or_else(|| "an argument".into());
            let current = Current::parse(&text);
            let remedy = match (arg.as_str(), &current) {
                ("type", Current::Plain(kind)) if !kind.is_empty() => {
                    format!("set exchangeType: '{kind}' to match")
                }
                _ => "rabbit-retry declares durable exchanges: bind the queue to a durable one, or bind it yourself and leave exchange out".to_owned(),
            };
            Error::new(
                ErrorKind::TopologyMismatch,
                format!(
                    "exchange '{name}' already exists with {} ({text}); {remedy}",
                    current.describe(&arg)
                ),
            )
        }
        _ => broker_error("exchange", name, e),
    }
}

/// Any other refusal, or a lost connection, while declaring `what` `name`.
pub(super) fn broker_error(what: &str, name: &str, e: &lapin::Error) -> Error {
    match amqp_reply(e) {
        Some((403, text)) if text.contains("reserved prefix") => Error::new(
            ErrorKind::AccessRefused,
            format!("declaring {what} '{name}' was refused: {text}; names that begin with 'amq.' are the broker's: choose another"),
        ),
        Some((403, text)) => Error::new(
            ErrorKind::AccessRefused,
            format!("declaring {what} '{name}' was refused: {text}; the user needs configure permission on it"),
        ),
        Some((code, text)) => Error::new(
            refusal_kind(code).unwrap_or(ErrorKind::Connection),
            format!("declaring {what} '{name}' failed: {code} {text}"),
        ),
        None => Error::new(
            ErrorKind::Connection,
            format!("declaring {what} '{name}' failed: {e}"),
        ),
    }
}

pub(super) fn quoted_after(text: &str, marker: &str) -> Option<String> {
    let start = text.find(marker)? + marker.len();
    let len = text[start..].find('\'')?;
    Some(text[start..start + len].to_owned())
}

/// Which setting needs which broker, for an argument the broker refused.
pub(super) fn needs(arg: &str, role: Role) -> String {
    match arg {
        "x-dead-letter-strategy" => "queueType 'quorum' needs at-least-once dead-lettering: RabbitMQ 3.10 or later with the stream_queue feature flag enabled (rabbitmqctl enable_feature_flag stream_queue)".into(),
        "x-overflow" => "queueType 'quorum' needs reject-publish overflow on quorum queues: RabbitMQ 3.10 or later".into(),
        "x-message-ttl" => "retry queues of queueType 'quorum' need message TTL on quorum queues: RabbitMQ 3.10 or later".into(),
        "x-delivery-limit" => "deliveryLimit needs quorum queues: RabbitMQ 3.8 or later".into(),
        "x-queue-type" => "queueType 'quorum' needs RabbitMQ 3.8 or later".into(),
        _ => format!("check the value in {} and that the broker supports it", role.option()),
    }
}
