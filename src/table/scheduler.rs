//! Publishes due rows of the retry table back to their work queues: one row
//! per transaction, locked with `FOR UPDATE SKIP LOCKED` so schedulers in
//! several processes never take the same row, deleted only after the broker
//! confirmed the publish, at no more than `rate` rows a second per scheduler.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use lapin::BasicProperties;
use tokio::sync::watch;
use tokio::time::Instant;

use super::store::{column, RetryStore};
use crate::amqp::connection::Broker;
use crate::amqp::fields::{header_str, with_trace};
use crate::error::{Error, ErrorKind, Result};

/// How long the scheduler waits before looking again when nothing is due.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// How long a row whose publish failed waits before the next try.
const FAILED_PUBLISH_BACKOFF_SECS: f64 = 30.0;

/// How long the scheduler waits for a tracer's headers before it publishes without them.
const TRACER_WAIT: Duration = Duration::from_secs(1);

/// A W3C trace context: `traceparent`, and `tracestate` when there is one.
pub(crate) type Trace = (String, Option<String>);

/// A due row the scheduler is about to publish, as a tracer sees it.
#[derive(Debug, Clone)]
pub(crate) struct DrainRow {
    /// Row id.
    pub id: i64,
    /// The work queue it goes back to.
    pub queue: String,
    /// Attempts that failed before it was stored.
    pub attempt: i32,
    /// Its dependency, if any.
    pub dependency: Option<String>,
    /// Its message id, if any.
    pub message_id: Option<String>,
    /// Its body's size in bytes.
    pub body_size: usize,
    /// Milliseconds since it was stored or last changed.
    pub waited_ms: f64,
    /// The error it was stored with.
    pub error: Option<String>,
    /// The trace context its stored copy carries.
    pub trace: Option<Trace>,
}

/// Sees each row the scheduler drains: `start` before the publish gives the
/// trace context the published copy carries instead of the row's own (`None`
/// keeps the row's), `end` after it, with the error when the publish failed.
pub(crate) trait DrainTracer: Send + Sync {
    /// A drain begins.
    fn start(&self, row: DrainRow) -> Pin<Box<dyn Future<Output = Option<Trace>> + Send>>;
    /// The drain of row `id` ended.
    fn end(&self, id: i64, error: Option<String>);
}

/// The tracer a running scheduler consults, set at any time.
type TracerSlot = Arc<RwLock<Option<Arc<dyn DrainTracer>>>>;

/// Counts since the scheduler started.
#[derive(Debug, Default)]
pub(crate) struct SchedulerCounters {
    /// Rows published and deleted.
    pub published: AtomicU64,
    /// Rows whose publish failed (they wait and are tried again).
    pub publish_failed: AtomicU64,
    /// Times the database could not be reached.
    pub database_errors: AtomicU64,
}

/// A running scheduler; stops when `stop` is called or it is dropped.
pub(crate) struct SchedulerHandle {
    stop: watch::Sender<bool>,
    done: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Its counts.
    pub counters: Arc<SchedulerCounters>,
    tracer: TracerSlot,
}

impl SchedulerHandle {
    /// Starts a scheduler publishing at most `rate_per_sec` rows a second.
    pub(crate) fn start(
        store: Arc<RetryStore>,
        broker: Arc<Broker>,
        rate_per_sec: f64,
    ) -> SchedulerHandle {
        let (stop, stopped) = watch::channel(false);
        let counters = Arc::new(SchedulerCounters::default());
        let tracer = TracerSlot::default();
        let task = tokio::spawn(run(
            Drainer {
                store,
                broker,
                tracer: tracer.clone(),
            },
            rate_per_sec,
            stopped,
            counters.clone(),
        ));
        SchedulerHandle {
            stop,
            done: tokio::sync::Mutex::new(Some(task)),
            counters,
            tracer,
        }
    }

    /// Lets `tracer` see every row drained from now on.
    pub(crate) fn trace_with(&self, tracer: Arc<dyn DrainTracer>) {
        if let Ok(mut slot) = self.tracer.write() {
            *slot = Some(tracer);
        }
    }

    /// Stops after the row in hand (if any) is done.
    pub(crate) async fn stop(&self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.done.lock().await.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Waits `d`, or less when asked to stop; true when asked to stop.
async fn pause(stopped: &mut watch::Receiver<bool>, until: Instant) -> bool {
    if *stopped.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(until) => *stopped.borrow(),
        _ = stopped.changed() => true,
    }
}

/// What publishing a row takes.
struct Drainer {
    store: Arc<RetryStore>,
    broker: Arc<Broker>,
    tracer: TracerSlot,
}

async fn run(
    drainer: Drainer,
    rate_per_sec: f64,
    mut stopped: watch::Receiver<bool>,
    counters: Arc<SchedulerCounters>,
) {
    let interval = Duration::from_secs_f64(1.0 / rate_per_sec.max(0.001));
    let mut next_slot = Instant::now();
    loop {
        if pause(&mut stopped, next_slot).await {
            return;
        }
        match drainer.publish_one().await {
            Ok(Some(true)) => {
                counters.published.fetch_add(1, Ordering::Relaxed);
                next_slot = next_slot.max(Instant::now() - interval) + interval;
            }
            Ok(Some(false)) => {
                counters.publish_failed.fetch_add(1, Ordering::Relaxed);
                next_slot = Instant::now() + interval;
            }
            Ok(None) => next_slot = Instant::now() + IDLE_POLL,
            Err(_) => {
                counters.database_errors.fetch_add(1, Ordering::Relaxed);
                next_slot = Instant::now() + Duration::from_secs(1);
            }
        }
    }
}

impl Drainer {
    /// Takes one due row: `None` when none is due, `Some(true)` when it was
    /// published and deleted, `Some(false)` when its publish failed and it waits.
    async fn publish_one(&self) -> Result<Option<bool>> {
        let db =
            |e: tokio_postgres::Error| Error::new(ErrorKind::RetryTable, format!("scheduler: {e}"));
        let mut client = self.store.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        let row = tx
            .query_opt(
                "SELECT id, queue, body, properties, attempt, dependency, message_id, last_error,
                        (extract(epoch FROM now() - updated_at) * 1000)::float8
                 FROM message_retries
                 WHERE NOT paused AND next_attempt_at <= now()
                 ORDER BY next_attempt_at, id
                 LIMIT 1
                 FOR UPDATE SKIP LOCKED",
                &[],
            )
            .await
            .map_err(db)?;
        let Some(row) = row else {
            tx.commit().await.map_err(db)?;
            return Ok(None);
        };
        let id: i64 = column(&row, 0)?;
        let queue: String = column(&row, 1)?;
        let body: Vec<u8> = column(&row, 2)?;
        let properties: serde_json::Value = column(&row, 3)?;
        let tracer = self.tracer.read().ok().and_then(|t| t.clone());
        let published = match serde_json::from_value::<BasicProperties>(properties) {
            Ok(props) => {
                let props = match &tracer {
                    Some(tracer) => {
                        let drain = DrainRow {
                            id,
                            queue: queue.clone(),
                            attempt: column(&row, 4)?,
                            dependency: column(&row, 5)?,
                            message_id: column(&row, 6)?,
                            body_size: body.len(),
                            waited_ms: column(&row, 8)?,
                            error: column(&row, 7)?,
                            trace: stored_trace(&props),
                        };
                        match tokio::time::timeout(TRACER_WAIT, tracer.start(drain)).await {
                            Ok(Some(trace)) => {
                                let headers = props.headers().clone().unwrap_or_default();
                                props.with_headers(with_trace(headers, &trace))
                            }
                            _ => props,
                        }
                    }
                    None => props,
                };
                self.broker.republish("", &queue, &body, props).await
            }
            Err(e) => Err(Error::new(
                ErrorKind::RetryTable,
                format!("the stored properties of row {id} cannot be read: {e}"),
            )),
        };
        if let Some(tracer) = &tracer {
            tracer.end(id, published.as_ref().err().map(|e| e.message.clone()));
        }
        match published {
            Ok(()) => {
                tx.execute("DELETE FROM message_retries WHERE id = $1", &[&id])
                    .await
                    .map_err(db)?;
                tx.commit().await.map_err(db)?;
                Ok(Some(true))
            }
            Err(e) => {
                tx.execute(
                    "UPDATE message_retries
                     SET next_attempt_at = now() + make_interval(secs => $2), last_error = $3, updated_at = now()
                     WHERE id = $1",
                    &[&id, &FAILED_PUBLISH_BACKOFF_SECS, &format!("publishing back to '{queue}' failed: {}", e.message)],
                )
                .await
                .map_err(db)?;
                tx.commit().await.map_err(db)?;
                Ok(Some(false))
            }
        }
    }
}

/// The trace context a stored copy carries.
fn stored_trace(props: &BasicProperties) -> Option<Trace> {
    let headers = props.headers().as_ref();
    header_str(headers, "traceparent").map(|parent| (parent, header_str(headers, "tracestate")))
}
