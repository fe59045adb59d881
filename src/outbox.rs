//! The outbox relay: messages an application wrote into
//! `rabbit_retry_outbox` inside its own transaction are published once that
//! transaction committed, and deleted after the broker's confirm.
//!
//! A batch is one transaction: up to `batch_size` pending rows claimed in id
//! order with `FOR UPDATE SKIP LOCKED` (relays in several processes share the
//! rows and never take the same one), published mandatory on a confirm
//! channel of the relay's own, all sent before the confirms are awaited, and
//! settled: confirmed rows deleted, rows that can never be delivered parked
//! with a reason (see [`outcome`]), the rest left as they were. A relay that
//! dies mid-batch rolls the batch back, and its rows are published again:
//! at least once, at most one batch twice.
//!
//! Ordered relays keep the rows of one `ordering_key` in id order: a key's
//! rows are taken only under a transaction-scoped advisory lock on the key
//! (one relay at a time), sent one after the other, and the first of them
//! that is not confirmed stops the rest of its key in that batch.
//!
//! A stop is heard in every wait: a batch not yet publishing rolls back;
//! one publishing sends no more rows, gives the confirms in flight
//! a second (`STOP_CONFIRM_WAIT`), and commits what it settled.

mod claim;
mod outcome;
#[cfg(test)]
pub(crate) use outcome::PARK_REASONS;
mod relay;
mod rows;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::amqp::connection::Broker;
use crate::table::scheduler::stop::end_within_bound;
use crate::table::store::RetryStore;

/// How a relay works.
#[derive(Debug, Clone)]
pub(crate) struct RelayConfig {
    /// Rows in one batch at most.
    pub batch_size: i64,
    /// Whether the rows of one `ordering_key` are published in id order.
    pub ordered: bool,
    /// The longest wait between two looks at an empty outbox.
    pub poll_interval: Duration,
}

/// Counts since the relay started.
#[derive(Debug, Default)]
pub(crate) struct RelayCounters {
    /// Rows published and deleted.
    pub published: AtomicU64,
    /// Rows this relay parked.
    pub parked: AtomicU64,
    /// Rows of the batch in hand published and still in the table (their
    /// delete not committed, or their confirm cut short by a stop).
    pub unsettled: AtomicU64,
    /// Batches that could not reach the database or the broker.
    pub errors: AtomicU64,
}

/// What a relay had done when it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RelayStop {
    /// Rows it published and deleted.
    pub published: u64,
    /// Rows it parked.
    pub parked: u64,
    /// Rows it published that stay in the table, to be published again.
    pub unconfirmed: u64,
}

enum Task {
    Running(tokio::task::JoinHandle<()>),
    Stopped(RelayStop),
}

/// A running relay; stops when `stop` is called or it is dropped.
pub(crate) struct RelayHandle {
    stop: watch::Sender<bool>,
    task: tokio::sync::Mutex<Task>,
    /// Its counts.
    pub counters: Arc<RelayCounters>,
}

impl RelayHandle {
    /// Starts a relay publishing `store`'s outbox through `broker`.
    pub(crate) fn start(
        store: Arc<RetryStore>,
        broker: Arc<Broker>,
        config: RelayConfig,
    ) -> RelayHandle {
        let (stop, stopped) = watch::channel(false);
        let counters = Arc::new(RelayCounters::default());
        let relay = relay::Relay::new(store, broker, config, counters.clone());
        let task = tokio::spawn(relay.run(stopped));
        RelayHandle {
            stop,
            task: tokio::sync::Mutex::new(Task::Running(task)),
            counters,
        }
    }

    /// Stops: at once when idle, within a second for the confirms and a commit
    /// mid-batch, after three seconds at the latest (the batch in hand then
    /// rolls back). Every call resolves to the same report.
    pub(crate) async fn stop(&self) -> RelayStop {
        let _ = self.stop.send(true);
        let mut task = self.task.lock().await;
        let report = match &mut *task {
            Task::Stopped(report) => return *report,
            Task::Running(running) => {
                end_within_bound(running).await;
                RelayStop {
                    published: self.counters.published.load(Ordering::Relaxed),
                    parked: self.counters.parked.load(Ordering::Relaxed),
                    unconfirmed: self.counters.unsettled.load(Ordering::Relaxed),
                }
            }
        };
        *task = Task::Stopped(report);
        report
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// The outbox of one database, for operators: counts, parked rows.
pub(crate) struct Outbox {
    store: Arc<RetryStore>,
}

impl Outbox {
    /// The outbox in `store`'s database.
    pub(crate) fn new(store: Arc<RetryStore>) -> Outbox {
        Outbox { store }
    }
}
