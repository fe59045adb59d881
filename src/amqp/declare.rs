//! Declarations outside a consumer's topology: the exchanges, queues and
//! exchange-to-exchange bindings an application lists up front (golevelup's
//! module `exchanges`, `queues` and `exchangeBindings`). Each runs on a
//! throwaway channel, as a refused declare closes its channel.

use lapin::options::{ExchangeBindOptions, ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::ExchangeKind;

use super::connection::Broker;
use super::fields::short_name;
use crate::error::{amqp_reply, Error, ErrorKind, Result};

/// How an exchange or a queue is declared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declaration {
    /// Survives a broker restart.
    pub durable: bool,
    /// Deleted by the broker when its last binding (exchange) or consumer
    /// (queue) goes.
    pub auto_delete: bool,
    /// Exchanges: only other exchanges publish to it. Queues: only this
    /// connection uses it (`exclusive`).
    pub private: bool,
    /// Only checked: it must exist, and nothing is created.
    pub passive: bool,
    /// Its arguments (`x-…`).
    pub arguments: FieldTable,
}

/// The error of a declare of `what` (`exchange 'x'`) the broker refused.
fn refused(what: &str, passive: bool, e: lapin::Error) -> Error {
    match amqp_reply(&e) {
        Some((404, _)) if passive => Error::new(
            ErrorKind::TopologyMismatch,
            format!("{what} does not exist, and it is only checked (createIfNotExists: false); declare it first, or let rabbit-retry declare it"),
        ),
        Some((406, text)) => Error::new(
            ErrorKind::TopologyMismatch,
            format!("{what} exists with other options or arguments: {text}"),
        ),
        _ => Error::with_source(
            ErrorKind::Connection,
            format!("declaring {what} failed: {e}"),
            e,
        ),
    }
}

/// The exchange type `kind` names: one of AMQP's four, or a plugin's (such
/// as `x-delayed-message`) by its name.
pub(crate) fn exchange_kind(kind: &str) -> ExchangeKind {
    match kind {
        "direct" => ExchangeKind::Direct,
        "fanout" => ExchangeKind::Fanout,
        "headers" => ExchangeKind::Headers,
        "topic" => ExchangeKind::Topic,
        other => ExchangeKind::Custom(other.to_owned()),
    }
}

/// Declares the exchange `name` of type `kind` (`topic`, `direct`, `fanout`,
/// `headers`, or a plugin's, such as `x-delayed-message`), or with
/// `passive` checks that it exists.
pub(crate) async fn declare_exchange(
    broker: &Broker,
    name: &str,
    kind: &str,
    d: Declaration,
) -> Result<()> {
    let ch = broker.channel().await?;
    let kind = exchange_kind(kind);
    let options = ExchangeDeclareOptions {
        passive: d.passive,
        durable: d.durable,
        auto_delete: d.auto_delete,
        internal: d.private,
        nowait: false,
    };
    ch.exchange_declare(short_name("exchange", name)?, kind, options, d.arguments)
        .await
        .map_err(|e| refused(&format!("exchange '{name}'"), d.passive, e))?;
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}

/// Declares the queue `name`, or with `passive` checks that it exists.
pub(crate) async fn declare_queue(broker: &Broker, name: &str, d: Declaration) -> Result<()> {
    let ch = broker.channel().await?;
    let options = QueueDeclareOptions {
        passive: d.passive,
        durable: d.durable,
        exclusive: d.private,
        auto_delete: d.auto_delete,
        nowait: false,
    };
    ch.queue_declare(short_name("queue", name)?, options, d.arguments)
        .await
        .map_err(|e| refused(&format!("queue '{name}'"), d.passive, e))?;
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}

/// Binds the exchange `destination` to `source` with `pattern` (both must
/// exist): what `source` routes with a matching key also goes to `destination`.
pub(crate) async fn bind_exchange(
    broker: &Broker,
    destination: &str,
    source: &str,
    pattern: &str,
    arguments: FieldTable,
) -> Result<()> {
    let ch = broker.channel().await?;
    ch.exchange_bind(
        short_name("exchange", destination)?,
        short_name("exchange", source)?,
        short_name("routing key", pattern)?,
        ExchangeBindOptions::default(),
        arguments,
    )
    .await
    .map_err(|e| {
        Error::with_source(
            ErrorKind::Connection,
            format!("binding exchange '{destination}' to exchange '{source}' with '{pattern}' failed: {e}"),
            e,
        )
    })?;
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}
