//! Declares the queues a consumer needs: the work queue, one retry queue per
//! delay dead-lettering back to it through the default exchange, and the
//! parked queue.
//!
//! Declaring checks before it creates: every queue (and the exchange) that
//! already exists is compared with what the options ask for first, so a
//! mismatch is reported, by queue, argument and the option that would match,
//! before anything new exists. Only then are the missing ones created; if one
//! of those is refused, the ones this call created are deleted again.

use lapin::options::{
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, ExchangeKind};

use super::connection::Broker;
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

/// Queue arguments the options add to the declarations, beside the ones the
/// library sets itself.
#[derive(Debug, Clone, Default)]
pub struct ExtraArguments {
    /// `queueArguments`: the work queue's.
    pub work: FieldTable,
    /// `retryQueueArguments`: every retry queue's.
    pub retry: FieldTable,
    /// `parkedQueueArguments`: the parked queue's.
    pub parked: FieldTable,
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
    /// False: the work queue is used as it exists, checked but never declared.
    pub assert_queue: bool,
    /// Arguments the options add.
    pub extra: ExtraArguments,
}

/// Which of a consumer's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Work,
    Retry,
    Parked,
}

impl Role {
    /// The option that adds arguments to this queue.
    fn option(self) -> &'static str {
        match self {
            Role::Work => "queueArguments",
            Role::Retry => "retryQueueArguments",
            Role::Parked => "parkedQueueArguments",
        }
    }
}

/// One queue to declare.
struct QueueSpec {
    name: String,
    role: Role,
    args: FieldTable,
}

/// Arguments that empty a retry or parked queue behind the consumer's back,
/// and why.
fn unsafe_argument(role: Role, key: &str, args: &FieldTable) -> Option<&'static str> {
    match key {
        "x-expires" => Some(
            "the broker deletes a queue nobody consumes after x-expires, with the messages in it",
        ),
        "x-message-ttl" if role == Role::Parked => Some(
            "parked messages would expire unread: purge them with the parked operations instead",
        ),
        "x-max-length" | "x-max-length-bytes" => {
            let refuses = matches!(
                args.inner().get(&ShortString::from("x-overflow")),
                Some(AMQPValue::LongString(s))
                    if matches!(s.as_bytes(), b"reject-publish" | b"reject-publish-dlx")
            );
            (!refuses).then_some(
                "a full queue would drop its oldest messages: add 'x-overflow': 'reject-publish', so that it refuses the republish instead and the original stays unacked",
            )
        }
        _ => None,
    }
}

impl Topology {
    /// Refuses extra arguments that the library sets itself, or that would
    /// lose messages waiting in a retry or parked queue.
    pub fn check(&self) -> Result<()> {
        // What a retry queue gets, whichever its delay.
        let retry = self.base_args(&self.extra.retry);
        let mut retry = retry;
        if self.queue_type == QueueType::Quorum {
            at_least_once(&mut retry);
        }
        for (role, extra, declared) in [
            (Role::Work, &self.extra.work, self.work_args()),
            (Role::Retry, &self.extra.retry, retry),
            (Role::Parked, &self.extra.parked, self.parked_args()),
        ] {
            for key in extra.inner().keys() {
                let key = key.as_str();
                let refused = match self.owner(role, key) {
                    Some(owner) => Some(format!("{owner} sets it")),
                    None if role != Role::Work => {
                        unsafe_argument(role, key, &declared).map(str::to_owned)
                    }
                    None => None,
                };
                if let Some(why) = refused {
                    return Err(Error::new(
                        ErrorKind::InvalidOptions,
                        format!("{} may not set '{key}': {why}", role.option()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The option that sets `key` on a queue of `role`, when the library sets it.
    fn owner(&self, role: Role, key: &str) -> Option<&'static str> {
        let quorum = self.queue_type == QueueType::Quorum;
        match (role, key) {
            (_, "x-queue-type") => Some("queueType"),
            (Role::Work, "x-delivery-limit") if quorum => Some("deliveryLimit"),
            (
                Role::Work,
                "x-dead-letter-exchange"
                | "x-dead-letter-routing-key"
                | "x-dead-letter-strategy"
                | "x-overflow",
            ) if quorum && self.delivery_limit.is_some() => {
                Some("deliveryLimit (the broker parks what exceeds it)")
            }
            (Role::Retry, "x-message-ttl") => {
                Some("onFailure.delays (a retry queue's TTL is its delay)")
            }
            (Role::Retry, "x-dead-letter-exchange" | "x-dead-letter-routing-key") => {
                Some("the retry topology (a retry queue dead-letters back to its work queue)")
            }
            (Role::Retry, "x-dead-letter-strategy" | "x-overflow") if quorum => {
                Some("queueType 'quorum' (its retry queues dead-letter at-least-once)")
            }
            _ => None,
        }
    }

    /// The arguments of the work queue.
    pub fn work_args(&self) -> FieldTable {
        let mut args = self.base_args(&self.extra.work);
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
        let mut args = self.base_args(&self.extra.retry);
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
        self.base_args(&self.extra.parked)
    }

    fn base_args(&self, extra: &FieldTable) -> FieldTable {
        let mut args = extra.clone();
        if self.queue_type == QueueType::Quorum {
            args.insert("x-queue-type".into(), long("quorum"));
        }
        args
    }

    /// The consumer's queues: the work queue, its retry queues, its parked queue.
    fn queues(&self) -> Vec<QueueSpec> {
        let mut specs = vec![QueueSpec {
            name: self.queue.clone(),
            role: Role::Work,
            args: self.work_args(),
        }];
        specs.extend(self.delays.iter().map(|d| QueueSpec {
            name: retry_queue_name(&self.queue, *d),
            role: Role::Retry,
            args: self.retry_args(*d),
        }));
        specs.push(QueueSpec {
            name: parked_queue_name(&self.queue),
            role: Role::Parked,
            args: self.parked_args(),
        });
        specs
    }

    fn exchange_kind(&self) -> ExchangeKind {
        match self.exchange_type.as_str() {
            "direct" => ExchangeKind::Direct,
            "fanout" => ExchangeKind::Fanout,
            "headers" => ExchangeKind::Headers,
            "topic" => ExchangeKind::Topic,
            other => ExchangeKind::Custom(other.to_owned()),
        }
    }

    /// Checks what exists, then declares what is missing, on channels of its
    /// own (the broker closes a channel on every refusal).
    pub async fn declare(&self, broker: &Broker) -> Result<()> {
        let mut probe = Probe { broker, ch: None };
        let declared = match self.check_existing(&mut probe).await {
            Ok(missing) => self.create_missing(&mut probe, missing).await,
            Err(e) => Err(e),
        };
        probe.finish().await;
        declared
    }

    /// Compares every queue and the exchange that exist with what the options
    /// ask for, creating nothing; returns what does not exist yet.
    async fn check_existing(&self, probe: &mut Probe<'_>) -> Result<Missing> {
        let mut missing = Missing::default();
        for spec in self.queues() {
            let exists = probe.queue_exists(&spec.name).await?;
            if spec.role == Role::Work && !self.assert_queue {
                if !exists {
                    return Err(Error::new(
                        ErrorKind::TopologyMismatch,
                        format!(
                            "queue '{}' does not exist, and assertQueue: false consumes only a queue that exists; declare it first, or leave assertQueue out so that rabbit-retry declares it",
                            spec.name
                        ),
                    ));
                }
            } else if exists {
                // Declaring a queue that exists creates nothing: the broker
                // compares the arguments and refuses a difference.
                if let Err(e) = probe.declare_queue(&spec.name, spec.args.clone()).await? {
                    return Err(self.queue_error(spec.role, &spec.name, &e));
                }
            } else {
                missing.queues.push(spec);
            }
        }
        if let Some(exchange) = &self.exchange {
            missing.exchange = !probe.exchange_exists(exchange).await?;
            if !missing.exchange {
                if let Err(e) = probe
                    .declare_exchange(exchange, self.exchange_kind())
                    .await?
                {
                    return Err(exchange_error(exchange, &e));
                }
            }
        }
        Ok(missing)
    }

    /// Creates the missing queues, the exchange and the binding; on a refusal,
    /// deletes what this call created.
    async fn create_missing(&self, probe: &mut Probe<'_>, missing: Missing) -> Result<()> {
        let mut created = Vec::new();
        let mut exchange_created = None;
        let result = async {
            for spec in missing.queues {
                if let Err(e) = probe.declare_queue(&spec.name, spec.args).await? {
                    return Err(self.queue_error(spec.role, &spec.name, &e));
                }
                created.push(spec.name);
            }
            let Some(exchange) = &self.exchange else {
                return Ok(());
            };
            if missing.exchange {
                if let Err(e) = probe
                    .declare_exchange(exchange, self.exchange_kind())
                    .await?
                {
                    return Err(exchange_error(exchange, &e));
                }
                exchange_created = Some(exchange.as_str());
            }
            if let Err(e) = probe.bind(&self.queue, exchange, &self.routing_key).await? {
                return Err(broker_error("binding of queue", &self.queue, &e));
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            probe.remove(&created, exchange_created).await;
        }
        result
    }

    /// The error for a refused declaration of the queue `name` of `role`.
    fn queue_error(&self, role: Role, name: &str, e: &lapin::Error) -> Error {
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
    fn mismatch(&self, role: Role, name: &str, text: &str) -> Error {
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
                let wanted = match current {
                    Current::Value { value, .. } => value.as_str(),
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

/// What `check_existing` found missing.
#[derive(Default)]
struct Missing {
    queues: Vec<QueueSpec>,
    exchange: bool,
}

/// A refusal by the broker, or our own error before anything was sent.
type Refused = std::result::Result<(), lapin::Error>;

/// A channel for declaring, replaced after every refusal (which closes it).
struct Probe<'a> {
    broker: &'a Broker,
    ch: Option<Channel>,
}

impl Probe<'_> {
    async fn channel(&mut self) -> Result<&Channel> {
        if !self.ch.as_ref().is_some_and(|c| c.status().connected()) {
            self.ch = Some(self.broker.channel().await?);
        }
        Ok(self.ch.as_ref().expect("opened above"))
    }

    /// Forgets the channel when the broker closed it with `res`'s error.
    fn settle(&mut self, res: Refused) -> Refused {
        if let Err(e) = &res {
            if amqp_reply(e).is_some() {
                self.ch = None;
            }
        }
        res
    }

    async fn queue_exists(&mut self, name: &str) -> Result<bool> {
        let options = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let name_s = short_name("queue", name)?;
        let res = self
            .channel()
            .await?
            .queue_declare(name_s, options, FieldTable::default())
            .await;
        match self.settle(res.map(|_| ())) {
            Ok(()) => Ok(true),
            Err(e) if matches!(amqp_reply(&e), Some((404, _))) => Ok(false),
            Err(e) => Err(broker_error("queue", name, &e)),
        }
    }

    async fn exchange_exists(&mut self, name: &str) -> Result<bool> {
        let options = ExchangeDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let name_s = short_name("exchange", name)?;
        let res = self
            .channel()
            .await?
            .exchange_declare(name_s, ExchangeKind::Direct, options, FieldTable::default())
            .await;
        match self.settle(res) {
            Ok(()) => Ok(true),
            Err(e) if matches!(amqp_reply(&e), Some((404, _))) => Ok(false),
            Err(e) => Err(broker_error("exchange", name, &e)),
        }
    }

    async fn declare_queue(&mut self, name: &str, args: FieldTable) -> Result<Refused> {
        let options = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let name = short_name("queue", name)?;
        let res = self
            .channel()
            .await?
            .queue_declare(name, options, args)
            .await;
        Ok(self.settle(res.map(|_| ())))
    }

    async fn declare_exchange(&mut self, name: &str, kind: ExchangeKind) -> Result<Refused> {
        let options = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let name = short_name("exchange", name)?;
        let res = self
            .channel()
            .await?
            .exchange_declare(name, kind, options, FieldTable::default())
            .await;
        Ok(self.settle(res))
    }

    async fn bind(&mut self, queue: &str, exchange: &str, key: &str) -> Result<Refused> {
        let (queue, exchange, key) = (
            short_name("queue", queue)?,
            short_name("exchange", exchange)?,
            short_name("routing key", key)?,
        );
        let res = self
            .channel()
            .await?
            .queue_bind(
                queue,
                exchange,
                key,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await;
        Ok(self.settle(res))
    }

    /// Deletes the queues (only while empty and unused) and the exchange (only
    /// while unused) that a failed declaration created; best effort.
    async fn remove(&mut self, queues: &[String], exchange: Option<&str>) {
        for name in queues {
            let options = QueueDeleteOptions {
                if_unused: true,
                if_empty: true,
                ..Default::default()
            };
            if let (Ok(ch), Ok(name)) = (self.channel().await, short_name("queue", name)) {
                let res = ch.queue_delete(name, options).await;
                let _ = self.settle(res.map(|_| ()));
            }
        }
        if let Some(name) = exchange {
            let options = ExchangeDeleteOptions {
                if_unused: true,
                ..Default::default()
            };
            if let (Ok(ch), Ok(name)) = (self.channel().await, short_name("exchange", name)) {
                let res = ch.exchange_delete(name, options).await;
                let _ = self.settle(res);
            }
        }
    }

    /// Closes the channel that is still open.
    async fn finish(self) {
        if let Some(ch) = self.ch {
            if ch.status().connected() {
                let _ = ch.close(200, "declared".into()).await;
            }
        }
    }
}

/// What the broker says the existing queue has for the mismatched argument.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Current {
    /// The queue does not have it.
    None,
    /// A value and its AMQP type (`longstr`, `signedint`, `long`, `bool`, …).
    Value { value: String, kind: String },
    /// A flag such as `durable`: the broker's plain rendering.
    Plain(String),
}

impl Current {
    /// Parses the part after "but current is" of an `inequivalent arg` reply.
    fn parse(text: &str) -> Current {
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

    fn number(&self) -> Option<i64> {
        match self {
            Current::Value { value, .. } => value.parse().ok(),
            _ => None,
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

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes()))
}

/// At-least-once dead-lettering, which RabbitMQ only honours together with
/// `reject-publish` overflow.
fn at_least_once(args: &mut FieldTable) {
    args.insert("x-dead-letter-strategy".into(), long("at-least-once"));
    args.insert("x-overflow".into(), long("reject-publish"));
}

/// The error for a refused declaration of the exchange `name`.
fn exchange_error(name: &str, e: &lapin::Error) -> Error {
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
fn broker_error(what: &str, name: &str, e: &lapin::Error) -> Error {
    match amqp_reply(e) {
        Some((403, text)) => Error::new(
            ErrorKind::Connection,
            format!("declaring {what} '{name}' was refused: {text}; the user needs configure permission on it"),
        ),
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

fn quoted_after(text: &str, marker: &str) -> Option<String> {
    let start = text.find(marker)? + marker.len();
    let len = text[start..].find('\'')?;
    Some(text[start..start + len].to_owned())
}

/// Which setting needs which broker, for an argument the broker refused.
fn needs(arg: &str, role: Role) -> String {
    match arg {
        "x-dead-letter-strategy" => "queueType 'quorum' needs at-least-once dead-lettering: RabbitMQ 3.10 or later with the stream_queue feature flag enabled (rabbitmqctl enable_feature_flag stream_queue)".into(),
        "x-overflow" => "queueType 'quorum' needs reject-publish overflow on quorum queues: RabbitMQ 3.10 or later".into(),
        "x-message-ttl" => "retry queues of queueType 'quorum' need message TTL on quorum queues: RabbitMQ 3.10 or later".into(),
        "x-delivery-limit" => "deliveryLimit needs quorum queues: RabbitMQ 3.8 or later".into(),
        "x-queue-type" => "queueType 'quorum' needs RabbitMQ 3.8 or later".into(),
        _ => format!("check the value in {} and that the broker supports it", role.option()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(queue_type: QueueType) -> Topology {
        Topology {
            queue: "orders".into(),
            exchange: None,
            exchange_type: "topic".into(),
            routing_key: "orders".into(),
            queue_type,
            delays: vec![crate::retry::parse_delay("5s").unwrap()],
            delivery_limit: (queue_type == QueueType::Quorum).then_some(5),
            assert_queue: true,
            extra: ExtraArguments::default(),
        }
    }

    fn table(pairs: &[(&str, AMQPValue)]) -> FieldTable {
        let mut t = FieldTable::default();
        for (k, v) in pairs {
            t.insert((*k).into(), v.clone());
        }
        t
    }

    #[test]
    fn finds_the_mismatched_argument() {
        let text = "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q.retry.5s' in vhost '/': received the value '5000' of type 'long' but current is the value '999' of type 'signedint'";
        assert_eq!(
            quoted_after(text, "inequivalent arg '").as_deref(),
            Some("x-message-ttl")
        );
        assert_eq!(
            Current::parse(text),
            Current::Value {
                value: "999".into(),
                kind: "signedint".into()
            }
        );
        let none = "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received the value '5' of type 'long' but current is none";
        assert_eq!(Current::parse(none), Current::None);
        let durable = "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'";
        assert_eq!(Current::parse(durable), Current::Plain("false".into()));
        assert!(needs("x-dead-letter-strategy", Role::Work).contains("3.10"));
    }

    #[test]
    fn a_mismatch_names_the_option_that_matches() {
        let t = topology(QueueType::Classic);
        let text = "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'orders' in vhost '/': received none but current is the value '1000' of type 'signedint'";
        let e = t.mismatch(Role::Work, "orders", text);
        assert_eq!(e.kind, ErrorKind::TopologyMismatch);
        assert!(e.message.contains("'x-max-length' = 1000"), "{}", e.message);
        assert!(
            e.message.contains(
                "set queueArguments: { 'x-max-length': 1000 } to match, or assertQueue: false"
            ),
            "{}",
            e.message
        );

        let dlx = "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'orders' in vhost '/': received none but current is the value 'old-dlx' of type 'longstr'";
        assert!(t
            .mismatch(Role::Work, "orders", dlx)
            .message
            .contains("queueArguments: { 'x-dead-letter-exchange': 'old-dlx' }"));

        let parked = "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'orders.parked' in vhost '/': received the value '10' of type 'long' but current is none";
        assert!(t
            .mismatch(Role::Parked, "orders.parked", parked)
            .message
            .contains("remove 'x-max-length' from parkedQueueArguments"));

        let quorum = "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received none but current is the value 'quorum' of type 'longstr'";
        assert!(t
            .mismatch(Role::Work, "orders", quorum)
            .message
            .contains("set queueType: 'quorum' to match"));

        let ttl = "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'orders.retry.5s' in vhost '/': received the value '5000' of type 'long' but current is the value '999' of type 'signedint'";
        assert!(t
            .mismatch(Role::Retry, "orders.retry.5s", ttl)
            .message
            .contains("delete it once it is empty"));

        let durable = "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'orders' in vhost '/': received 'true' but current is 'false'";
        assert!(t
            .mismatch(Role::Work, "orders", durable)
            .message
            .contains("assertQueue: false"));

        let q = topology(QueueType::Quorum);
        let limit = "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'orders' in vhost '/': received the value '6' of type 'long' but current is the value '21' of type 'long'";
        assert!(q
            .mismatch(Role::Work, "orders", limit)
            .message
            .contains("set deliveryLimit: 20 to match"));
    }

    #[test]
    fn extra_arguments_reach_the_declarations() {
        let mut t = topology(QueueType::Classic);
        t.extra.work = table(&[("x-max-length", AMQPValue::LongLongInt(1000))]);
        t.extra.parked = table(&[("x-queue-mode", long("lazy"))]);
        assert!(t.check().is_ok());
        assert_eq!(
            t.work_args()
                .inner()
                .get(&ShortString::from("x-max-length")),
            Some(&AMQPValue::LongLongInt(1000))
        );
        assert_eq!(
            t.parked_args()
                .inner()
                .get(&ShortString::from("x-queue-mode")),
            Some(&long("lazy"))
        );
        assert!(t
            .retry_args(t.delays[0])
            .inner()
            .get(&ShortString::from("x-max-length"))
            .is_none());
    }

    #[test]
    fn extra_arguments_may_not_take_over_the_library_s_own() {
        let refused =
            |role_args: fn(&mut ExtraArguments) -> &mut FieldTable, key: &str, qt: QueueType| {
                let mut t = topology(qt);
                role_args(&mut t.extra).insert(key.into(), long("x"));
                t.check().expect_err(key).message
            };
        assert!(refused(|e| &mut e.work, "x-queue-type", QueueType::Classic)
            .contains("queueArguments may not set 'x-queue-type': queueType sets it"));
        assert!(
            refused(|e| &mut e.retry, "x-message-ttl", QueueType::Classic)
                .contains("onFailure.delays")
        );
        assert!(refused(
            |e| &mut e.retry,
            "x-dead-letter-exchange",
            QueueType::Classic
        )
        .contains("retryQueueArguments"));
        assert!(
            refused(|e| &mut e.work, "x-dead-letter-exchange", QueueType::Quorum)
                .contains("deliveryLimit")
        );
        assert!(refused(|e| &mut e.parked, "x-expires", QueueType::Classic).contains("x-expires"));
        assert!(
            refused(|e| &mut e.parked, "x-message-ttl", QueueType::Classic)
                .contains("expire unread")
        );
        // A classic work queue's dead-letter exchange is the user's to set.
        let mut t = topology(QueueType::Classic);
        t.extra
            .work
            .insert("x-dead-letter-exchange".into(), long("dlx"));
        assert!(t.check().is_ok());
    }

    #[test]
    fn a_length_limit_on_a_retry_queue_needs_reject_publish() {
        let mut t = topology(QueueType::Classic);
        t.extra
            .retry
            .insert("x-max-length".into(), AMQPValue::LongLongInt(10));
        assert!(t
            .check()
            .unwrap_err()
            .message
            .contains("'x-overflow': 'reject-publish'"));
        t.extra
            .retry
            .insert("x-overflow".into(), long("reject-publish"));
        assert!(t.check().is_ok());
    }
}
