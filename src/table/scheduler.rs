//! Publishes due rows of the retry table back to their work queues, in
//! batches: a batch is claimed with `FOR UPDATE SKIP LOCKED` (so schedulers
//! in several processes never take the same row), published with pipelined
//! confirms, and its confirmed rows deleted in the same transaction; rows
//! whose publish failed wait and are tried again. The rate is shared by every
//! scheduler on the database (see `rate`), and a batch is never larger than
//! the tokens taken for it: a scheduler killed between the confirms and the
//! commit publishes at most that one batch again.
//!
//! A stop is heard in every wait: for a token, for the database, for a
//! tracer. Rows of the batch in hand not yet sent are not sent, the confirms
//! in flight get [`STOP_CONFIRM_WAIT`](stop::STOP_CONFIRM_WAIT), the confirmed rows are deleted, and
//! every other row stays in the table as it was, due as before. A row whose
//! confirm had not come stays too: its message may be in the queue already,
//! and the next drain publishes it again (at least once).

mod drain;
mod publish;
mod rates;
mod run;
pub(crate) mod stop;
mod trace;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use self::publish::Drainer;
use self::stop::{end_within_bound, STOP_COUNT_WAIT};
use self::trace::TracerSlot;
use super::store::RetryStore;
use crate::amqp::connection::Broker;

pub(crate) use self::rates::SchedulerRates;
pub(crate) use self::trace::{DrainRow, DrainTracer, Trace};

/// Counts since the scheduler started.
#[derive(Debug, Default)]
pub(crate) struct SchedulerCounters {
    /// Rows published and deleted.
    pub published: AtomicU64,
    /// Rows whose publish failed (they wait and are tried again).
    pub publish_failed: AtomicU64,
    /// Times the database could not be reached.
    pub database_errors: AtomicU64,
    /// Rows of the batch in hand that were published but are still in the
    /// table: their confirm had not come when a stop cut the wait short, or
    /// their delete was not committed. They are published again later.
    pub unsettled: AtomicU64,
}

/// What a scheduler had done when it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StopReport {
    /// Rows it published and deleted since it started.
    pub published: u64,
    /// Rows it published that stay in the table (see [`SchedulerCounters::unsettled`]).
    pub unconfirmed: u64,
    /// Rows due (and not paused) in the table once it stopped; `None` when
    /// the database did not answer in time.
    pub due: Option<i64>,
}

/// A scheduler's task, or what it reported once stopped.
enum Task {
    Running(tokio::task::JoinHandle<()>),
    Stopped(StopReport),
}

/// A running scheduler; stops when `stop` is called or it is dropped.
pub(crate) struct SchedulerHandle {
    stop: watch::Sender<bool>,
    task: tokio::sync::Mutex<Task>,
    store: Arc<RetryStore>,
    /// Its counts.
    pub counters: Arc<SchedulerCounters>,
    tracer: TracerSlot,
}

impl SchedulerHandle {
    /// Starts a scheduler draining at `rates`.
    pub(crate) fn start(
        store: Arc<RetryStore>,
        broker: Arc<Broker>,
        rates: SchedulerRates,
    ) -> SchedulerHandle {
        let (stop, stopped) = watch::channel(false);
        let counters = Arc::new(SchedulerCounters::default());
        let tracer = TracerSlot::default();
        let task = tokio::spawn(run::run(
            Drainer {
                store: store.clone(),
                broker,
                tracer: tracer.clone(),
            },
            rates,
            stopped,
            counters.clone(),
        ));
        SchedulerHandle {
            stop,
            task: tokio::sync::Mutex::new(Task::Running(task)),
            store,
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

    /// Stops: within [`STOP_CONFIRM_WAIT`](stop::STOP_CONFIRM_WAIT) and a commit when it is
    /// publishing a batch, at once otherwise (see the module's notes), and
    /// after [`STOP_BOUND`](stop::STOP_BOUND) at the latest. Every call resolves to the same report.
    pub(crate) async fn stop(&self) -> StopReport {
        let _ = self.stop.send(true);
        let mut task = self.task.lock().await;
        let report = match &mut *task {
            Task::Stopped(report) => return *report,
            Task::Running(running) => {
                // Past the bound, the rows it had published count as unsettled.
                end_within_bound(running).await;
                let due = tokio::time::timeout(STOP_COUNT_WAIT, self.store.due_rows())
                    .await
                    .ok()
                    .and_then(|r| r.ok());
                StopReport {
                    published: self.counters.published.load(Ordering::Relaxed),
                    unconfirmed: self.counters.unsettled.load(Ordering::Relaxed),
                    due,
                }
            }
        };
        *task = Task::Stopped(report);
        report
    }
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

#[cfg(test)]
mod tests;
