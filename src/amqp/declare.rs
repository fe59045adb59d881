//! Declarations outside a consumer's topology: the exchanges, queues and
//! exchange-to-exchange bindings an application lists up front (golevelup's
//! module `exchanges`, `queues` and `exchangeBindings`). Each runs on a
//! throwaway channel, as a refused declare closes its channel.

use lapin::options::{ExchangeBindOptions, ExchangeDeclareOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::ExchangeKind;

use super::connection::Broker;
use super::fields::short_name;
use crate::error::{amqp_reply, broker_error, Error, ErrorKind, Result};

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
        Some((406, text)) if text.contains("unknown exchange type") => Error::new(
            ErrorKind::InvalidOptions,
            format!("the broker refused {what}: {text}; enable the plugin that provides the type, or use 'direct', 'fanout', 'topic' or 'headers'"),
        ),
        Some((406, text)) => Error::new(
            ErrorKind::TopologyMismatch,
            format!("{what} exists with other options or arguments: {text}"),
        ),
        _ => broker_error(format!("declaring {what} failed: {e}"), &e),
    }
}

/// The exchange type `kind` names, when the broker could know it: one of
/// AMQP's four, or a plugin's, whose names begin with `x-`
/// (`x-delayed-message`). Any other name is refused before it is sent:
/// RabbitMQ 3.x closes the whole connection over a type it does not know.
pub(crate) fn checked_exchange_kind(kind: &str) -> Result<ExchangeKind> {
    match exchange_kind(kind) {
        ExchangeKind::Custom(name) if !name.starts_with("x-") || name.len() < 3 => {
            Err(Error::new(
                ErrorKind::InvalidOptions,
                format!(
                    "exchange type '{name}' is not one the broker has: use 'direct', 'fanout', 'topic' or 'headers', or a plugin's type (its name begins with 'x-')"
                ),
            ))
        }
        kind => Ok(kind),
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
    let kind = checked_exchange_kind(kind)?;
    if let (ExchangeKind::Custom(plugin), false) = (&kind, d.passive) {
        check_plugin_type(broker, name, plugin).await?;
    }
    let ch = broker.channel().await?;
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

/// Whether the broker knows the plugin's exchange type `plugin`. RabbitMQ
/// 4.x refuses a type it does not know by closing the channel; 3.x closes
/// the connection, and every channel of it: there it is asked on a
/// connection of its own.
async fn check_plugin_type(broker: &Broker, name: &str, plugin: &str) -> Result<()> {
    let version = broker.server_version().await;
    let three = version
        .as_deref()
        .and_then(crate::retry::versions::major_minor)
        .is_some_and(|(major, _)| major < 4);
    if !three {
        return Ok(());
    }
    let exchange = short_name("exchange", name)?;
    let conn = broker.scratch_connection().await?;
    let asked = async {
        let ch = conn.create_channel().await?;
        ch.exchange_declare(
            exchange,
            ExchangeKind::Custom(plugin.to_owned()),
            ExchangeDeclareOptions {
                passive: false,
                durable: false,
                auto_delete: true,
                internal: false,
                nowait: false,
            },
            FieldTable::default(),
        )
        .await
    }
    .await;
    let _ = conn.close(200, "exchange type checked".into()).await;
    match asked {
        Err(e) if unknown_type(&e) => Err(unknown_type_error(plugin)),
        _ => Ok(()),
    }
}

/// Whether the broker refused a declare for its exchange type.
fn unknown_type(e: &lapin::Error) -> bool {
    amqp_reply(e).is_some_and(|(_, text)| text.contains("unknown exchange type"))
}

fn unknown_type_error(plugin: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOptions,
        format!("the broker does not know exchange type '{plugin}': enable the plugin that provides it (rabbitmq-plugins enable …), or use 'direct', 'fanout', 'topic' or 'headers'"),
    )
}

/// Declares the queue `name`, or with `passive` checks that it exists. A
/// queue needs a name: the broker would name a queue declared as `''` and
/// keep it, durable, under a name nobody asked for.
pub(crate) async fn declare_queue(broker: &Broker, name: &str, d: Declaration) -> Result<()> {
    if name.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidOptions,
            "a queue needs a name: the broker would give a queue declared as '' a name of its own (amq.gen-…) that nobody could consume by",
        ));
    }
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
        broker_error(
            format!("binding exchange '{destination}' to exchange '{source}' with '{pattern}' failed: {e}"),
            &e,
        )
    })?;
    let _ = ch.close(200, "done".into()).await;
    Ok(())
}
