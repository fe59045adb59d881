//! Declares the queues a consumer needs: the work queue, one retry queue per
//! delay dead-lettering back to it through the default exchange, and the
//! parked queue.
//!
//! Declaring checks before it creates: every queue (and the exchange) that
//! already exists is compared with what the options ask for first, so a
//! mismatch is reported, by queue, argument and the option that would match,
//! before anything new exists. Only then are the missing ones created; if one
//! of those is refused, the ones this call created are deleted again.

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::ExchangeKind;

use super::connection::Broker;
use super::declare::exchange_kind;
use crate::error::{Error, ErrorKind, Result};
use crate::retry::{
    parked_queue_name, retry_queue_name, supports_broker_delay, BrokerDelay, Delay,
};

mod mismatch;
mod probe;
mod storage;
#[cfg(test)]
mod tests;

use mismatch::{broker_error, exchange_error, existing_value};
use probe::{Missing, Probe};
use storage::as_it_is;

/// The kind of queue declared for work, retry and parked queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueType {
    /// RabbitMQ's classic queue.
    Classic,
    /// A Raft-replicated quorum queue.
    Quorum,
}

impl QueueType {
    /// Parses `classic` or `quorum`.
    pub(crate) fn parse(s: &str) -> Result<Self> {
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
pub(crate) struct ExtraArguments {
    /// `queueArguments`: the work queue's.
    pub work: FieldTable,
    /// `retryQueueArguments`: every retry queue's.
    pub retry: FieldTable,
    /// `parkedQueueArguments`: the parked queue's.
    pub parked: FieldTable,
}

/// What to declare for one consumer.
#[derive(Debug, Clone)]
pub(crate) struct Topology {
    /// The work queue.
    pub queue: String,
    /// An exchange to declare and bind the work queue to.
    pub exchange: Option<String>,
    /// The exchange's type (`topic`, `direct`, `fanout`, `headers`).
    pub exchange_type: String,
    /// The binding key; the queue name when not given.
    pub routing_key: String,
    /// More binding keys, to the same exchange.
    pub more_routing_keys: Vec<String>,
    /// Classic or quorum.
    pub queue_type: QueueType,
    /// One retry queue per delay.
    pub delays: Vec<Delay>,
    /// Quorum only: deliveries after which a message parks without reaching
    /// the handler. The broker's own `x-delivery-limit` is set one above it,
    /// dead-lettering to the parked queue, as a backstop.
    pub delivery_limit: Option<u32>,
    /// Quorum only, RabbitMQ 4.3: the broker's own delayed retry, set on the
    /// work queue (`x-delayed-retry-*`); no retry queue is declared.
    pub broker_delay: Option<BrokerDelay>,
    /// False: the work queue is used as it exists, checked but never declared.
    pub assert_queue: bool,
    /// Arguments the options add.
    pub extra: ExtraArguments,
    /// `onFailure.faults.exchange`: where a fault event of each parked
    /// message goes; declared (durable, topic) when it does not exist.
    pub faults_exchange: Option<String>,
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
    /// The arguments that are the library's to choose for it, not the
    /// options' (the storage arguments of a classic retry queue): a queue
    /// that exists with another value of one, or none, is used as it is.
    adopts: Vec<&'static str>,
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
    pub(crate) fn check(&self) -> Result<()> {
        for (role, extra, declared) in [
            (Role::Work, &self.extra.work, self.work_args()),
            (Role::Retry, &self.extra.retry, self.retry_shared_args()),
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
                "x-delayed-retry-type" | "x-delayed-retry-min" | "x-delayed-retry-max",
            ) if self.broker_delay.is_some() => Some("onFailure.brokerDelay"),
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
    pub(crate) fn work_args(&self) -> FieldTable {
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
            if let Some(b) = self.broker_delay {
                // `failed`: only a reject with requeue waits, not a nack or a
                // channel's return of what it never started.
                args.insert("x-delayed-retry-type".into(), long("failed"));
                args.insert("x-delayed-retry-min".into(), millis(b.min));
                args.insert("x-delayed-retry-max".into(), millis(b.max));
            }
        }
        args
    }

    /// The arguments of the retry queue for `delay`.
    pub(crate) fn retry_args(&self, delay: Delay) -> FieldTable {
        let mut args = self.retry_shared_args();
        args.insert(
            "x-message-ttl".into(),
            AMQPValue::LongLongInt(delay.millis() as i64),
        );
        args.insert("x-dead-letter-exchange".into(), long(""));
        args.insert("x-dead-letter-routing-key".into(), long(&self.queue));
        args
    }

    /// The arguments every retry queue gets, whichever its delay.
    fn retry_shared_args(&self) -> FieldTable {
        let mut args = self.base_args(&self.extra.retry);
        if self.queue_type == QueueType::Quorum {
            // Quorum dead-lettering is at-most-once unless asked otherwise:
            // the hop back to the work queue must not lose a message.
            at_least_once(&mut args);
        }
        args
    }

    /// The arguments of the parked queue.
    pub(crate) fn parked_args(&self) -> FieldTable {
        self.base_args(&self.extra.parked)
    }

    fn base_args(&self, extra: &FieldTable) -> FieldTable {
        let mut args = extra.clone();
        if self.queue_type == QueueType::Quorum {
            args.insert("x-queue-type".into(), long("quorum"));
        }
        args
    }

    /// The consumer's queues: the work queue, its retry queues (with the
    /// `storage` arguments the library chose for them), its parked queue.
    fn queues(&self, storage: &[(&'static str, AMQPValue)]) -> Vec<QueueSpec> {
        let mut specs = vec![QueueSpec {
            name: self.queue.clone(),
            role: Role::Work,
            args: self.work_args(),
            adopts: Vec::new(),
        }];
        let adopts = self.retry_adopts();
        specs.extend(self.delays.iter().map(|d| {
            let mut args = self.retry_args(*d);
            for (key, value) in storage {
                args.insert((*key).into(), value.clone());
            }
            QueueSpec {
                name: retry_queue_name(&self.queue, *d),
                role: Role::Retry,
                args,
                adopts: adopts.clone(),
            }
        }));
        specs.push(QueueSpec {
            name: parked_queue_name(&self.queue),
            role: Role::Parked,
            args: self.parked_args(),
            adopts: Vec::new(),
        });
        specs
    }

    fn exchange_kind(&self) -> ExchangeKind {
        exchange_kind(&self.exchange_type)
    }

    /// Checks what exists, then declares what is missing, on channels of its
    /// own (the broker closes a channel on every refusal).
    pub(crate) async fn declare(&self, broker: &Broker) -> Result<()> {
        let version = broker.server_version().await;
        if self.broker_delay.is_some() {
            check_broker_delay(version.as_deref())?;
        }
        let storage = self.retry_storage(version.as_deref());
        let mut probe = Probe { broker, ch: None };
        let declared = match self.check_existing(&mut probe, &storage).await {
            Ok(missing) => self.create_missing(&mut probe, missing).await,
            Err(e) => Err(e),
        };
        let declared = match (declared, &self.faults_exchange) {
            (Ok(()), Some(faults)) => probe.ensure_topic_exchange(faults).await,
            (declared, _) => declared,
        };
        probe.finish().await;
        declared
    }

    /// Compares every queue and the exchange that exist with what the options
    /// ask for, creating nothing; returns what does not exist yet.
    async fn check_existing(
        &self,
        probe: &mut Probe<'_>,
        storage: &[(&'static str, AMQPValue)],
    ) -> Result<Missing> {
        let mut missing = Missing::default();
        for spec in self.queues(storage) {
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
                if self.broker_delay.is_some() {
                    self.check_delayed_retry(probe, &spec).await?;
                }
            } else if exists {
                // Declaring a queue that exists creates nothing: the broker
                // compares the arguments and refuses a difference, one
                // argument at a time.
                let mut args = spec.args.clone();
                let mut adoptions = spec.adopts.len();
                while let Err(e) = probe.declare_queue(&spec.name, args.clone()).await? {
                    match as_it_is(&spec, &args, &e).filter(|_| adoptions > 0) {
                        Some(existing) => {
                            args = existing;
                            adoptions -= 1;
                        }
                        None => return Err(self.queue_error(spec.role, &spec.name, &e)),
                    }
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

    /// Checks that the work queue, consumed as it is (`assertQueue: false`),
    /// retries as `brokerDelay` needs (its `x-delayed-retry-*` arguments):
    /// without them, the broker would deliver a returned message again at
    /// once. Its other arguments are taken as the queue has them: each one the
    /// broker names as different is declared again with the queue's value, so
    /// the declaration that passes creates and changes nothing.
    async fn check_delayed_retry(&self, probe: &mut Probe<'_>, spec: &QueueSpec) -> Result<()> {
        let mut args = spec.args.clone();
        // Each round takes one argument as the queue has it.
        for _ in 0..=spec.args.inner().len() + 8 {
            let Err(e) = probe.declare_queue(&spec.name, args.clone()).await? else {
                return Ok(());
            };
            let text = match crate::error::amqp_reply(&e) {
                Some((406, text)) => text,
                _ => return Err(self.queue_error(Role::Work, &spec.name, &e)),
            };
            match existing_value(&text) {
                Some((arg, current)) if !arg.starts_with("x-delayed-retry-") => {
                    let mut inner = args.inner().clone();
                    let key = ShortString::from(arg);
                    inner.remove(&key);
                    if let Some(v) = current {
                        inner.insert(key, v);
                    }
                    args = FieldTable::from(inner);
                }
                _ => return Err(self.mismatch(Role::Work, &spec.name, &text)),
            }
        }
        Err(Error::new(
            ErrorKind::TopologyMismatch,
            format!(
                "queue '{}' could not be checked for onFailure.brokerDelay's x-delayed-retry-* arguments: the broker kept naming other arguments",
                spec.name
            ),
        ))
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
            for key in std::iter::once(&self.routing_key).chain(&self.more_routing_keys) {
                if let Err(e) = probe.bind(&self.queue, exchange, key).await? {
                    return Err(broker_error("binding of queue", &self.queue, &e));
                }
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            probe.remove(&created, exchange_created).await;
        }
        result
    }
}

/// Refuses `onFailure.brokerDelay` on a broker that reports `version`
/// older than 4.3, which would take the queue arguments and ignore them.
pub(crate) fn check_broker_delay(version: Option<&str>) -> Result<()> {
    match version {
        Some(v) if supports_broker_delay(v) => Ok(()),
        _ => Err(Error::new(
            ErrorKind::BrokerUnsupported,
            format!(
                "onFailure.brokerDelay needs RabbitMQ 4.3 or later, which holds a rejected message in a delayed state; this broker is {}: use onFailure.delays (retry queues) instead, or upgrade the broker",
                version.map_or_else(|| "of an unknown version".to_owned(), |v| format!("RabbitMQ {v}"))
            ),
        )),
    }
}

fn millis(d: Delay) -> AMQPValue {
    AMQPValue::LongLongInt(i64::try_from(d.millis()).unwrap_or(i64::MAX))
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
