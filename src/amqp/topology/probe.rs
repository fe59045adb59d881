//! The channel that declares: every refusal by the broker closes it, so it
//! is replaced after each one.

use lapin::options::{
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, ExchangeKind};

use super::mismatch::broker_error;
use super::QueueSpec;
use crate::amqp::connection::Broker;
use crate::amqp::fields::short_name;
use crate::error::{amqp_reply, Result};

/// What `check_existing` found missing.
#[derive(Default)]
pub(super) struct Missing {
    pub(super) queues: Vec<QueueSpec>,
    pub(super) exchange: bool,
}

/// A refusal by the broker, or our own error before anything was sent.
pub(super) type Refused = std::result::Result<(), lapin::Error>;

/// A channel for declaring, replaced after every refusal (which closes it).
pub(super) struct Probe<'a> {
    pub(super) broker: &'a Broker,
    pub(super) ch: Option<Channel>,
}

impl Probe<'_> {
    pub(super) async fn channel(&mut self) -> Result<&Channel> {
        let ch = match self.ch.take() {
            Some(ch) if ch.status().connected() => ch,
            _ => self.broker.channel().await?,
        };
        Ok(self.ch.insert(ch))
    }

    /// Forgets the channel when the broker closed it with `res`'s error.
    pub(super) fn settle(&mut self, res: Refused) -> Refused {
        if let Err(e) = &res {
            if amqp_reply(e).is_some() {
                self.ch = None;
            }
        }
        res
    }

    /// Whether queue `name` exists: a passive declare, which the broker
    /// refuses with 404 (closing the channel) when it does not.
    pub(super) async fn queue_exists(&mut self, name: &str) -> Result<bool> {
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let res = self.queue(name, passive, FieldTable::default()).await?;
        found("queue", name, res)
    }

    /// Whether exchange `name` exists (a passive declare, as for queues).
    pub(super) async fn exchange_exists(&mut self, name: &str) -> Result<bool> {
        let passive = ExchangeDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let res = self.exchange(name, ExchangeKind::Direct, passive).await?;
        found("exchange", name, res)
    }

    /// Declares `name` durable and of type topic, unless it exists (of
    /// whatever type): the exchange of fault events, whose bindings are its
    /// owner's.
    pub(super) async fn ensure_topic_exchange(&mut self, name: &str) -> Result<()> {
        if self.exchange_exists(name).await? {
            return Ok(());
        }
        match self.declare_exchange(name, ExchangeKind::Topic).await? {
            Ok(()) => Ok(()),
            Err(e) => Err(super::mismatch::exchange_error(name, &e)),
        }
    }

    pub(super) async fn declare_queue(&mut self, name: &str, args: FieldTable) -> Result<Refused> {
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        self.queue(name, durable, args).await
    }

    pub(super) async fn declare_exchange(
        &mut self,
        name: &str,
        kind: ExchangeKind,
    ) -> Result<Refused> {
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        self.exchange(name, kind, durable).await
    }

    async fn queue(
        &mut self,
        name: &str,
        options: QueueDeclareOptions,
        args: FieldTable,
    ) -> Result<Refused> {
        let name = short_name("queue", name)?;
        let res = self
            .channel()
            .await?
            .queue_declare(name, options, args)
            .await;
        Ok(self.settle(res.map(|_| ())))
    }

    async fn exchange(
        &mut self,
        name: &str,
        kind: ExchangeKind,
        options: ExchangeDeclareOptions,
    ) -> Result<Refused> {
        let name = short_name("exchange", name)?;
        let res = self
            .channel()
            .await?
            .exchange_declare(name, kind, options, FieldTable::default())
            .await;
        Ok(self.settle(res))
    }

    pub(super) async fn bind(&mut self, queue: &str, exchange: &str, key: &str) -> Result<Refused> {
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
    pub(super) async fn remove(&mut self, queues: &[String], exchange: Option<&str>) {
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
    pub(super) async fn finish(self) {
        if let Some(ch) = self.ch {
            if ch.status().connected() {
                let _ = ch.close(200, "declared".into()).await;
            }
        }
    }
}

/// A passive declare's answer: found, not found (404), or another refusal.
fn found(what: &str, name: &str, res: Refused) -> Result<bool> {
    match res {
        Ok(()) => Ok(true),
        Err(e) if matches!(amqp_reply(&e), Some((404, _))) => Ok(false),
        Err(e) => Err(broker_error(what, name, &e)),
    }
}
