//! The broker round trips of starting, recovering and stopping a consumer,
//! each bounded in time.

use std::time::Duration;

use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::Channel;

use super::config::ConsumerConfig;
use crate::amqp::connection::Broker;
use crate::amqp::topology::Topology;
use crate::error::{Error, ErrorKind, Result};

/// Declares the topology and subscribes: a channel with the prefetch set and
/// a lapin consumer on the work queue.
pub(super) async fn subscribe(
    broker: &Broker,
    config: &ConsumerConfig,
) -> Result<(Channel, lapin::Consumer)> {
    let queue = &config.topology.queue;
    let step = config.recovery.step_timeout;
    declare(broker, &config.topology, step).await?;
    let ch = bounded("opening a channel", step, broker.channel()).await?;
    bounded("basic.qos", step, async {
        ch.basic_qos(config.prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| {
                Error::with_source(ErrorKind::Connection, format!("basic.qos failed: {e}"), e)
            })
    })
    .await?;
    let mut arguments = FieldTable::default();
    if let Some(ms) = config.consumer_timeout_ms {
        // Classic queues on 4.3 refuse it; spec.rs allows it on quorum only.
        arguments.insert(
            "x-consumer-timeout".into(),
            lapin::types::AMQPValue::LongLongInt(i64::from(ms)),
        );
    }
    let consumer = bounded("basic.consume", step, async {
        ch.basic_consume(
            queue.as_str().into(),
            config.consumer_tag.as_deref().unwrap_or("").into(),
            BasicConsumeOptions::default(),
            arguments,
        )
        .await
        .map_err(|e| {
            Error::with_source(
                ErrorKind::Connection,
                format!("could not consume from '{queue}': {e}"),
                e,
            )
        })
    })
    .await?;
    Ok((ch, consumer))
}

/// Runs one broker round trip of starting, recovering or stopping, failing it
/// when the broker does not answer within `limit`: a step that never
/// completes must not hold the consumer (and its `close`) for good.
pub(super) async fn bounded<T>(
    what: &str,
    limit: Duration,
    step: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(limit, step).await.unwrap_or_else(|_| {
        Err(Error::new(
            ErrorKind::Connection,
            format!(
                "{what} got no answer from the broker within {} ms",
                limit.as_millis()
            ),
        ))
    })
}

/// Closes `ch`, waiting at most `limit` for the broker.
pub(super) async fn close_channel(ch: &Channel, reason: &str, limit: Duration) {
    if ch.status().connected() {
        let _ = tokio::time::timeout(limit, ch.close(200, reason.into())).await;
    }
}

/// Checks and declares `topology`, each broker round trip bounded by `limit`.
pub(super) async fn declare(broker: &Broker, topology: &Topology, limit: Duration) -> Result<()> {
    bounded("declaring the queues", limit, topology.declare(broker)).await
}
