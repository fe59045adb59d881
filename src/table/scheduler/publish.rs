//! Publishing the rows of a batch: each with its drain's trace context, all
//! together with pipelined confirms, and what a stop leaves of them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use serde::Deserialize;
use tokio::sync::watch;

use super::stop::{within_grace, STOP_CONFIRM_WAIT};
use super::trace::{stored_trace, DrainRow, DrainTracer, TracerSlot, TRACER_WAIT};
use crate::amqp::connection::Broker;
use crate::amqp::fields::with_trace;
use crate::error::{Error, ErrorKind, Result};
use crate::table::store::RetryStore;

/// What publishing a row takes.
pub(super) struct Drainer {
    pub(super) store: Arc<RetryStore>,
    pub(super) broker: Arc<Broker>,
    pub(super) tracer: TracerSlot,
}

/// A claimed row.
pub(super) struct Claimed {
    pub(super) id: i64,
    pub(super) queue: String,
    pub(super) body: Vec<u8>,
    pub(super) properties: serde_json::Value,
    pub(super) attempt: i32,
    pub(super) dependency: Option<String>,
    pub(super) message_id: Option<String>,
    pub(super) error: Option<String>,
    pub(super) waited_ms: f64,
}

/// How the publish of one row of a batch ended.
#[derive(Debug)]
pub(super) enum Outcome {
    /// The broker confirmed it: the row is deleted.
    Confirmed,
    /// It failed: the row waits and is tried again.
    Failed(Error),
    /// A stop came before it was sent: the row stays as it was.
    NotSent,
    /// A stop came, and its confirm did not within [`STOP_CONFIRM_WAIT`]: the
    /// row stays as it was, though its message may be in the queue.
    Unconfirmed,
}

/// Publishes the rows of a batch together (pipelined confirms). `publish`
/// resolves to `None` when it saw a stop before sending its row. Once a stop
/// is asked for, rows not sent yet are not sent, and the publishes in flight
/// get [`STOP_CONFIRM_WAIT`] for their confirms.
pub(super) async fn publish_all<'r, R, F, Fut>(
    rows: &'r [R],
    stopped: &watch::Receiver<bool>,
    publish: F,
) -> Vec<Outcome>
where
    F: Fn(&'r R) -> Fut,
    Fut: Future<Output = Option<Result<()>>>,
{
    let sends = rows.iter().map(|row| {
        let send = publish(row);
        async move {
            if *stopped.borrow() {
                return Outcome::NotSent;
            }
            match within_grace(stopped, STOP_CONFIRM_WAIT, send).await {
                Some(Some(Ok(()))) => Outcome::Confirmed,
                Some(Some(Err(e))) => Outcome::Failed(e),
                Some(None) => Outcome::NotSent,
                None => Outcome::Unconfirmed,
            }
        }
    });
    futures_util::future::join_all(sends).await
}

impl Drainer {
    /// Publishes one claimed row (with its drain's trace context, when a
    /// tracer gives one) and waits for the confirm; `None` when a stop came
    /// before it was sent.
    pub(super) async fn publish(
        &self,
        row: &Claimed,
        tracer: Option<&dyn DrainTracer>,
        stopped: &watch::Receiver<bool>,
    ) -> Option<Result<()>> {
        let props = match BasicProperties::deserialize(&row.properties) {
            Ok(props) => props,
            Err(e) => {
                return Some(Err(Error::new(
                    ErrorKind::RetryTable,
                    format!(
                        "the stored properties of row {} cannot be read: {e}",
                        row.id
                    ),
                )))
            }
        };
        let props = match tracer {
            Some(tracer) => {
                let drain = DrainRow {
                    id: row.id,
                    queue: row.queue.clone(),
                    attempt: row.attempt,
                    dependency: row.dependency.clone(),
                    message_id: row.message_id.clone(),
                    body_size: row.body.len(),
                    waited_ms: row.waited_ms,
                    error: row.error.clone(),
                    trace: stored_trace(&props),
                };
                let start = tokio::time::timeout(TRACER_WAIT, tracer.start(drain));
                match within_grace(stopped, Duration::ZERO, start).await? {
                    Ok(Some(trace)) => {
                        let headers = props.headers().clone().unwrap_or_default();
                        props.with_headers(with_trace(headers, &trace))
                    }
                    _ => props,
                }
            }
            None => props,
        };
        if *stopped.borrow() {
            return None;
        }
        Some(
            self.broker
                .republish("", &row.queue, &row.body, props)
                .await,
        )
    }
}
