//! Publishes due rows of the retry table back to their work queues: one row
//! per transaction, locked with `FOR UPDATE SKIP LOCKED` so schedulers in
//! several processes never take the same row, deleted only after the broker
//! confirmed the publish, at no more than `rate` rows a second per scheduler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lapin::BasicProperties;
use tokio::sync::watch;
use tokio::time::Instant;

use super::store::{column, RetryStore};
use crate::amqp::connection::Broker;
use crate::error::{Error, ErrorKind, Result};

/// How long the scheduler waits before looking again when nothing is due.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// How long a row whose publish failed waits before the next try.
const FAILED_PUBLISH_BACKOFF_SECS: f64 = 30.0;

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
        let task = tokio::spawn(run(store, broker, rate_per_sec, stopped, counters.clone()));
        SchedulerHandle {
            stop,
            done: tokio::sync::Mutex::new(Some(task)),
            counters,
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

async fn run(
    store: Arc<RetryStore>,
    broker: Arc<Broker>,
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
        match publish_one(&store, &broker).await {
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

/// Takes one due row: `None` when none is due, `Some(true)` when it was
/// published and deleted, `Some(false)` when its publish failed and it waits.
async fn publish_one(store: &RetryStore, broker: &Broker) -> Result<Option<bool>> {
    let db =
        |e: tokio_postgres::Error| Error::new(ErrorKind::RetryTable, format!("scheduler: {e}"));
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(db)?;
    let row = tx
        .query_opt(
            "SELECT id, queue, body, properties FROM message_retries
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
    let published = match serde_json::from_value::<BasicProperties>(properties) {
        Ok(props) => broker.republish("", &queue, &body, props).await,
        Err(e) => Err(Error::new(
            ErrorKind::RetryTable,
            format!("the stored properties of row {id} cannot be read: {e}"),
        )),
    };
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
