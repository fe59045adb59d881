//! The retry table as JavaScript sees it: selectors, rows and counts.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

use crate::table::scheduler::{DrainRow, DrainTracer, StopReport, Trace};
use crate::table::store::{ListFilter, RowInfo, Selector, TableStats};

/// Which rows `pause` and `resume` touch; every field given must match.
#[napi(object)]
pub struct NativeSelector {
    /// Rows of this dependency.
    pub dependency: Option<String>,
    /// Rows of this tenant.
    pub tenant: Option<String>,
    /// Rows whose error has this name.
    pub error_name: Option<String>,
}

impl From<NativeSelector> for Selector {
    fn from(s: NativeSelector) -> Self {
        Selector {
            dependency: s.dependency,
            tenant: s.tenant,
            error_name: s.error_name,
        }
    }
}

/// What `list` returns.
#[napi(object)]
pub struct NativeListFilter {
    /// Rows of this dependency.
    pub dependency: Option<String>,
    /// Rows of this tenant.
    pub tenant: Option<String>,
    /// Only rows due now.
    pub due: Option<bool>,
    /// At most this many. @default 100
    pub limit: Option<u32>,
}

impl From<NativeListFilter> for ListFilter {
    fn from(f: NativeListFilter) -> Self {
        ListFilter {
            dependency: f.dependency,
            tenant: f.tenant,
            due: f.due.unwrap_or(false),
            limit: i64::from(f.limit.unwrap_or(100)),
        }
    }
}

/// A row of the retry table.
#[napi(object)]
pub struct NativeRow {
    /// Row id.
    pub id: f64,
    /// The work queue.
    pub queue: String,
    /// `retry-attempt` when published again.
    pub attempt: i32,
    /// Due time in ms since the epoch; `null` waits for a person.
    pub next_attempt_at_ms: Option<f64>,
    /// Paused rows are not published.
    pub paused: bool,
    /// What it waits on.
    pub dependency: Option<String>,
    /// Whose it is.
    pub tenant: Option<String>,
    /// The last error message.
    pub last_error: Option<String>,
    /// The last error name.
    pub error_name: Option<String>,
    /// The message id.
    pub message_id: Option<String>,
    /// The correlation id.
    pub correlation_id: Option<String>,
    /// First failure, ms since the epoch.
    pub first_failed_at_ms: f64,
    /// Last change, ms since the epoch.
    pub updated_at_ms: f64,
}

/// Milliseconds since the epoch.
pub(crate) fn epoch_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

/// A time from milliseconds since the epoch.
pub(crate) fn from_epoch_ms(ms: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0.0) as u64)
}

impl From<RowInfo> for NativeRow {
    fn from(r: RowInfo) -> Self {
        NativeRow {
            id: r.id as f64,
            queue: r.queue,
            attempt: r.attempt,
            next_attempt_at_ms: r.next_attempt_at.map(epoch_ms),
            paused: r.paused,
            dependency: r.dependency,
            tenant: r.tenant,
            last_error: r.last_error,
            error_name: r.error_name,
            message_id: r.message_id,
            correlation_id: r.correlation_id,
            first_failed_at_ms: epoch_ms(r.first_failed_at),
            updated_at_ms: epoch_ms(r.updated_at),
        }
    }
}

/// Rows of one dependency.
#[napi(object)]
pub struct NativeDependencyCount {
    /// The dependency; `null` for rows without one.
    pub dependency: Option<String>,
    /// Rows.
    pub rows: f64,
}

/// Counts of the retry table and of this process's scheduler.
#[napi(object)]
pub struct NativeTableStats {
    /// Rows in all.
    pub rows: f64,
    /// Paused rows.
    pub paused: f64,
    /// Rows waiting for a person.
    pub held: f64,
    /// Rows due now and not paused.
    pub due: f64,
    /// Rows by dependency.
    pub by_dependency: Vec<NativeDependencyCount>,
    /// Age in ms of the oldest row whose due time has passed.
    pub oldest_due_age_ms: f64,
    /// Rows this process's scheduler published.
    pub scheduler_published: f64,
    /// Publishes of this process's scheduler that failed.
    pub scheduler_publish_failed: f64,
}

impl NativeTableStats {
    pub(crate) fn new(s: TableStats, published: u64, failed: u64) -> Self {
        NativeTableStats {
            rows: s.rows as f64,
            paused: s.paused as f64,
            held: s.held as f64,
            due: s.due as f64,
            by_dependency: s
                .by_dependency
                .into_iter()
                .map(|(dependency, rows)| NativeDependencyCount {
                    dependency,
                    rows: rows as f64,
                })
                .collect(),
            oldest_due_age_ms: s.oldest_due_age_ms as f64,
            scheduler_published: published as f64,
            scheduler_publish_failed: failed as f64,
        }
    }
}

/// What this process's scheduler had done when it stopped.
#[napi(object)]
pub struct NativeSchedulerStop {
    /// Rows it published (and deleted) since it started.
    pub published: f64,
    /// Rows it published that stay in the table: no confirm came within a
    /// second of the stop (or their delete was not committed). They are
    /// published again.
    pub unconfirmed: f64,
    /// Rows due (and not paused) in the table once it stopped; `null` when
    /// the database did not answer within a second.
    pub due: Option<f64>,
}

impl From<StopReport> for NativeSchedulerStop {
    fn from(r: StopReport) -> Self {
        NativeSchedulerStop {
            published: r.published as f64,
            unconfirmed: r.unconfirmed as f64,
            due: r.due.map(|n| n as f64),
        }
    }
}

/// A due row of the retry table the scheduler is about to publish.
#[napi(object)]
pub struct NativeDrainRow {
    /// Row id.
    pub row_id: f64,
    /// The work queue it goes back to.
    pub queue: String,
    /// Attempts that failed before it was stored.
    pub attempt: i32,
    /// Its dependency, if any.
    pub dependency: Option<String>,
    /// Its message id, if any.
    pub message_id: Option<String>,
    /// Its body's size in bytes.
    pub body_size: u32,
    /// Milliseconds since it was stored or last changed.
    pub waited_ms: f64,
    /// The error it was stored with.
    pub error: Option<String>,
    /// The `traceparent` its stored copy carries.
    pub traceparent: Option<String>,
    /// The `tracestate` its stored copy carries.
    pub tracestate: Option<String>,
}

/// The trace context a drained copy carries instead of the row's own.
#[napi(object)]
pub struct NativeDrainTrace {
    /// Its `traceparent`.
    pub traceparent: String,
    /// Its `tracestate`, if any.
    pub tracestate: Option<String>,
}

/// The end of a row's drain.
#[napi(object)]
pub struct NativeDrainEnd {
    /// Row id.
    pub row_id: f64,
    /// Why its publish failed, when it did (the row waits and is tried again).
    pub error: Option<String>,
}

/// Calls `start` on the JavaScript thread before each drain, and `end` after.
pub(crate) type DrainStartFn = ThreadsafeFunction<
    NativeDrainRow,
    Option<NativeDrainTrace>,
    NativeDrainRow,
    Status,
    false,
    true,
>;
/// See [`DrainStartFn`].
pub(crate) type DrainEndFn =
    ThreadsafeFunction<NativeDrainEnd, (), NativeDrainEnd, Status, false, true>;

/// The scheduler's tracer in JavaScript. Both functions are weak: they do
/// not keep the process alive.
pub(crate) struct JsDrainTracer {
    pub start: Arc<DrainStartFn>,
    pub end: DrainEndFn,
}

impl DrainTracer for JsDrainTracer {
    fn start(&self, row: DrainRow) -> Pin<Box<dyn Future<Output = Option<Trace>> + Send>> {
        let (traceparent, tracestate) = match row.trace {
            Some((parent, state)) => (Some(parent), state),
            None => (None, None),
        };
        let row = NativeDrainRow {
            row_id: row.id as f64,
            queue: row.queue,
            attempt: row.attempt,
            dependency: row.dependency,
            message_id: row.message_id,
            body_size: u32::try_from(row.body_size).unwrap_or(u32::MAX),
            waited_ms: row.waited_ms,
            error: row.error,
            traceparent,
            tracestate,
        };
        let start = self.start.clone();
        Box::pin(async move {
            // A tracer that throws or returns nothing leaves the row's own context.
            let trace = start.call_async_catch(row).await.ok().flatten()?;
            Some((trace.traceparent, trace.tracestate))
        })
    }

    fn end(&self, id: i64, error: Option<String>) {
        self.end.call(
            NativeDrainEnd {
                row_id: id as f64,
                error,
            },
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }
}

/// One migration of the tables in PostgreSQL.
#[napi(object)]
pub(crate) struct NativeMigration {
    pub version: i32,
    pub sql: String,
}

/// The tables' migrations in order, and the advisory lock key (as decimal
/// text: it does not fit a JavaScript number) they run under, for the inbox
/// and the outbox's writer, which reach the database through the user's pool.
#[napi(object)]
pub(crate) struct NativeSchema {
    pub lock: String,
    pub migrations: Vec<NativeMigration>,
}

/// The schema the retry table's store migrates to, for a pool of the user's.
#[napi]
pub(crate) fn table_schema() -> NativeSchema {
    use crate::table::schema::{migrations, MIGRATION_LOCK};
    NativeSchema {
        lock: MIGRATION_LOCK.to_string(),
        migrations: migrations()
            .iter()
            .map(|(version, sql)| NativeMigration {
                version: *version,
                sql: (*sql).to_string(),
            })
            .collect(),
    }
}
