//! Declares the queues a consumer needs: the work queue, one retry queue per
//! delay dead-lettering back to it through the default exchange, and the
//! parked queue. Declaring is idempotent; a queue that exists with other
//! arguments is reported by name and argument.

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{Channel, ExchangeKind};

use super::error::{amqp_reply, Error, ErrorKind, Result};
use super::fields::short_name;
use crate::retry::{parked_queue_name, retry_queue_name, Delay};

/// The kind of queue declared for work, retry and parked queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueType {
    /// RabbitMQ's classic queue.
    Classic,
    /// A Raft-replicated quorum queue.
    Quorum,
}

impl QueueType {
    /// Parses `classic` or `quorum`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "classic" => Ok(QueueType::Classic),
            "quorum" => Ok(QueueType::Quorum),
            other => Err(Error::new(
                ErrorKind::InvalidOptions,
                format!("queueType '{other}' is not known: use 'classic' or 'quorum'"),
            )),
        }
    }
}

/// What to declare for one consumer.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The work queue.
    pub queue: String,
    /// An exchange to declare and bind the work queue to.
    pub exchange: Option<String>,
    /// The exchange's type (`topic`, `direct`, `fanout`, `headers`).
    pub exchange_type: String,
    /// The binding key; the queue name when not given.
    pub routing_key: String,
    /// Classic or quorum.
    pub queue_type: QueueType,
    /// One retry queue per delay.
    pub delays: Vec<Delay>,
    /// Quorum only: deliveries after which a message parks without reaching
    /// the handler. The broker's own `x-delivery-limit` is set one above it,
    /// dead-lettering to the parked queue, as a backstop.
    pub delivery_limit: Option<u32>,
}

impl Topology {
    /// The arguments of the work queue.
    pub fn work_args(&self) -> FieldTable {
        let mut args = self.base_args();
        if self.queue_type == QueueType::Quorum {
            if let Some(limit) = self.delivery_limit {
                args.insert(
                    "x-delivery-limit".into(),
                    AMQPValue::LongLongInt(i64::from(limit) + 1),
                );
                args.insert("x-dead-letter-exchange".into(), long(""));
                args.insert(
                    "x-dead-letter-routing-key".into(),
                    long(&parked_queue_name(&self.queue)),
                );
                at_least_once(&mut args);
            }
        }
        args
    }

    /// The arguments of the retry queue for `delay`.
    pub fn retry_args(&self, delay: Delay) -> FieldTable {
        let mut args = self.base_args();
        args.insert(
            "x-message-ttl".into(),
            AMQPValue::LongLongInt(delay.millis() as i64),
        );
        args.insert("x-dead-letter-exchange".into(), long(""));
        args.insert("x-dead-letter-routing-key".into(), long(&self.queue));
        if self.queue_type == QueueType::Quorum {
            // Quorum dead-lettering is at-most-once unless asked otherwise:
            // the hop back to the work queue must not lose a message.
            at_least_once(&mut args);
        }
        args
    }

    /// The arguments of the parked queue.
    pub fn parked_args(&self) -> FieldTable {
        self.base_args()
    }

    fn base_args(&self) -> FieldTable {
        let mut args = FieldTable::default();
        if self.queue_type == QueueType::Quorum {
            args.insert("x-queue-type".into(), long("quorum"));
        }
        args
    }

    /// Declares everything on `ch`. A mismatch closes the channel, so `ch`
    /// should be one opened for this purpose.
    pub async fn declare(&self, ch: &Channel) -> Result<()> {
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let parked = parked_queue_name(&self.queue);
        declare_queue(ch, &parked, durable, self.parked_args()).await?;
        for d in &self.delays {
            let name = retry_queue_name(&self.queue, *d);
            declare_queue(ch, &name, durable, self.retry_args(*d)).await?;
        }
        declare_queue(ch, &self.queue, durable, self.work_args()).await?;
        if let Some(exchange) = &self.exchange {
            let kind = match self.exchange_type.as_str() {
                "direct" => ExchangeKind::Direct,
                "fanout" => ExchangeKind::Fanout,
                "headers" => ExchangeKind::Headers,
                "topic" => ExchangeKind::Topic,
                other => ExchangeKind::Custom(other.to_owned()),
            };
            ch.exchange_declare(
                short_name("exchange", exchange)?,
                kind,
                ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| declare_error("exchange", exchange, &e))?;
            ch.queue_bind(
                short_name("queue", &self.queue)?,
                short_name("exchange", exchange)?,
                short_name("routing key", &self.routing_key)?,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| declare_error("binding of queue", &self.queue, &e))?;
        }
        Ok(())
    }
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes()))
}

/// At-least-once dead-lettering, which RabbitMQ only honours together with
/// `reject-publish` overflow.
fn at_least_once(args: &mut FieldTable) {
    args.insert("x-dead-letter-strategy".into(), long("at-least-once"));
    args.insert("x-overflow".into(), long("reject-publish"));
}

async fn declare_queue(
    ch: &Channel,
    queue: &str,
    options: QueueDeclareOptions,
    args: FieldTable,
) -> Result<()> {
    ch.queue_declare(short_name("queue", queue)?, options, args)
        .await
        .map(|_| ())
        .map_err(|e| declare_error("queue", queue, &e))
}

fn declare_error(what: &str, name: &str, e: &lapin::Error) -> Error {
    match amqp_reply(e) {
        Some((406, text)) if text.contains("invalid arg") => {
            let arg = invalid_arg(&text).unwrap_or_else(|| "an argument".into());
            Error::new(
                ErrorKind::InvalidOptions,
                format!(
                    "the broker refused '{arg}' for {what} '{name}' ({text}); {}",
                    needs(&arg)
                ),
            )
        }
        Some((406, text)) => {
            let arg = mismatched_arg(&text).unwrap_or_else(|| "an argument".into());
            Error::new(
                ErrorKind::TopologyMismatch,
                format!(
                    "{what} '{name}' already exists with a different '{arg}' ({text}); delete it or change the options to match"
                ),
            )
        }
        Some((code, text)) => Error::new(
            ErrorKind::Connection,
            format!("declaring {what} '{name}' failed: {code} {text}"),
        ),
        None => Error::new(
            ErrorKind::Connection,
            format!("declaring {what} '{name}' failed: {e}"),
        ),
    }
}

/// The argument named in the broker's `inequivalent arg 'x'` reply.
fn mismatched_arg(text: &str) -> Option<String> {
    quoted_after(text, "inequivalent arg '")
}

/// The argument named in the broker's `invalid arg 'x'` reply.
fn invalid_arg(text: &str) -> Option<String> {
    quoted_after(text, "invalid arg '")
}

fn quoted_after(text: &str, marker: &str) -> Option<String> {
    let start = text.find(marker)? + marker.len();
    let len = text[start..].find('\'')?;
    Some(text[start..start + len].to_owned())
}

/// Which setting needs which broker, for an argument the broker refused.
fn needs(arg: &str) -> &'static str {
    match arg {
        "x-dead-letter-strategy" => "queueType 'quorum' needs at-least-once dead-lettering: RabbitMQ 3.10 or later with the stream_queue feature flag enabled (rabbitmqctl enable_feature_flag stream_queue)",
        "x-overflow" => "queueType 'quorum' needs reject-publish overflow on quorum queues: RabbitMQ 3.10 or later",
        "x-message-ttl" => "retry queues of queueType 'quorum' need message TTL on quorum queues: RabbitMQ 3.10 or later",
        "x-delivery-limit" => "deliveryLimit needs quorum queues: RabbitMQ 3.8 or later",
        "x-queue-type" => "queueType 'quorum' needs RabbitMQ 3.8 or later",
        _ => "check that the broker supports this queue setting",
    }
}

#[cfg(test)]
mod tests {
    use super::{invalid_arg, mismatched_arg, needs};

    #[test]
    fn finds_the_mismatched_argument() {
        let text = "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q.retry.5s' in vhost '/': received the value '5000' of type 'long' but current is the value '999' of type 'signedint'";
        assert_eq!(mismatched_arg(text).as_deref(), Some("x-message-ttl"));
        assert_eq!(mismatched_arg("PRECONDITION_FAILED - something else"), None);
        let invalid = "PRECONDITION_FAILED - invalid arg 'x-dead-letter-strategy' for queue 'q' in vhost '/': {unsupported,...}";
        assert_eq!(
            invalid_arg(invalid).as_deref(),
            Some("x-dead-letter-strategy")
        );
        assert!(needs("x-dead-letter-strategy").contains("3.10"));
    }
}
