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
//! in flight get [`STOP_CONFIRM_WAIT`], the confirmed rows are deleted, and
//! every other row stays in the table as it was, due as before. A row whose
//! confirm had not come stays too: its message may be in the queue already,
//! and the next drain publishes it again (at least once).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use lapin::BasicProperties;
use serde::Deserialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::rate::{BURST_SECS, TABLE_BUCKET};
use super::row::{column, pg_text};
use super::store::RetryStore;
use crate::amqp::connection::Broker;
use crate::amqp::fields::{header_str, with_trace};
use crate::error::{Error, ErrorKind, Result};

/// How long the scheduler waits before looking again when nothing is due.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// How long a row whose publish failed waits before the next try.
const FAILED_PUBLISH_BACKOFF_SECS: f64 = 30.0;

/// How long the scheduler waits for a tracer's headers before it publishes without them.
const TRACER_WAIT: Duration = Duration::from_secs(1);

/// How long a stop waits for the confirms of the publishes in flight; a row
/// whose confirm has not come by then stays in the table.
pub(crate) const STOP_CONFIRM_WAIT: Duration = Duration::from_secs(1);
/// How long after a stop the batch in hand may take to commit (its confirmed
/// rows deleted); past it, those rows stay in the table too.
const STOP_COMMIT_WAIT: Duration = Duration::from_secs(1);
/// How long after a stop the scheduler may take to give back the tokens it did not use.
const STOP_GIVE_BACK_WAIT: Duration = Duration::from_millis(250);
/// The longest a stop waits for the scheduler before it drops what it was doing.
const STOP_BOUND: Duration = Duration::from_secs(3);
/// How long a stop waits for the count of due rows it reports.
const STOP_COUNT_WAIT: Duration = Duration::from_secs(1);

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
        let task = tokio::spawn(run(
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

    /// Stops: within [`STOP_CONFIRM_WAIT`] and a commit when it is
    /// publishing a batch, at once otherwise (see the module's notes), and
    /// after [`STOP_BOUND`] at the latest. Every call resolves to the same report.
    pub(crate) async fn stop(&self) -> StopReport {
        let _ = self.stop.send(true);
        let mut task = self.task.lock().await;
        let report = match &mut *task {
            Task::Stopped(report) => return *report,
            Task::Running(running) => {
                if tokio::time::timeout(STOP_BOUND, &mut *running)
                    .await
                    .is_err()
                {
                    // Dropped mid-statement: its transaction rolls back, and the
                    // rows it held stay (those it had published count as unsettled).
                    running.abort();
                    let _ = (&mut *running).await;
                }
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

/// Runs `fut` to its end, or until `grace` after a stop is asked for (at
/// once when `grace` is zero); `None` when the stop cut it short. A dropped
/// handle counts as a stop.
async fn within_grace<T>(
    stopped: &watch::Receiver<bool>,
    grace: Duration,
    fut: impl Future<Output = T>,
) -> Option<T> {
    let mut stopped = stopped.clone();
    let cut = async move {
        let _ = stopped.wait_for(|s| *s).await;
        if !grace.is_zero() {
            tokio::time::sleep(grace).await;
        }
    };
    tokio::select! {
        biased;
        out = fut => Some(out),
        () = cut => None,
    }
}

/// How the publish of one row of a batch ended.
#[derive(Debug)]
enum Outcome {
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
async fn publish_all<'r, R, F, Fut>(
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

/// What publishing a row takes.
struct Drainer {
    store: Arc<RetryStore>,
    broker: Arc<Broker>,
    tracer: TracerSlot,
}

/// The rates a scheduler drains at, rows a second.
#[derive(Debug, Clone, Default)]
pub(crate) struct SchedulerRates {
    /// The whole table's, shared by every scheduler on the database; it
    /// replaces what another scheduler set. `None` leaves it as it is (or
    /// sets [`DEFAULT_TABLE_RATE`] when none is set).
    pub table: Option<f64>,
    /// This process's own limit, on top of the shared one.
    pub per_process: Option<f64>,
    /// Dependencies' own shared rates, set when the scheduler starts.
    pub dependencies: Vec<(String, f64)>,
}

/// The whole table's shared rate when no scheduler set one, rows a second.
pub(crate) const DEFAULT_TABLE_RATE: f64 = 50.0;

/// Rows in one batch at most.
pub(crate) const MAX_DRAIN_BATCH: i64 = 500;
/// How often the scheduler reads which dependencies have rates of their own.
const RATES_REFRESH: Duration = Duration::from_secs(5);

/// The per-process limit: a local token bucket holding at most
/// `BURST_SECS` of its rate.
struct LocalLimit {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl LocalLimit {
    fn new(rate: f64) -> Self {
        LocalLimit {
            rate,
            tokens: 0.0,
            at: Instant::now(),
        }
    }

    fn available(&mut self) -> i64 {
        let now = Instant::now();
        let cap = (self.rate * BURST_SECS).max(1.0);
        self.tokens = (self.tokens + self.rate * (now - self.at).as_secs_f64()).min(cap);
        self.at = now;
        self.tokens.floor() as i64
    }

    fn spend(&mut self, n: i64) {
        self.tokens -= n as f64;
    }

    fn until_next(&self) -> Duration {
        Duration::from_secs_f64(((1.0 - self.tokens) / self.rate).max(0.0))
    }
}

/// A short wait, within bounds.
fn wait(secs: f64) -> Duration {
    Duration::from_secs_f64(secs.clamp(0.005, IDLE_POLL.as_secs_f64()))
}

async fn run(
    drainer: Drainer,
    rates: SchedulerRates,
    mut stopped: watch::Receiver<bool>,
    counters: Arc<SchedulerCounters>,
) {
    let store = drainer.store.clone();
    // The shared rates this scheduler was given, set once (tried again until the database answers).
    loop {
        let set = within_grace(&stopped, Duration::ZERO, async {
            match rates.table {
                Some(rate) => store.set_rate(TABLE_BUCKET, Some(rate)).await?,
                None => store.ensure_rate(TABLE_BUCKET, DEFAULT_TABLE_RATE).await?,
            };
            for (dependency, rate) in &rates.dependencies {
                store.set_rate(dependency, Some(*rate)).await?;
            }
            Ok::<(), Error>(())
        })
        .await;
        match set {
            None => return,
            Some(Ok(())) => break,
            Some(Err(_)) => {}
        }
        counters.database_errors.fetch_add(1, Ordering::Relaxed);
        if pause(&mut stopped, Instant::now() + Duration::from_secs(1)).await {
            return;
        }
    }
    let mut local = rates.per_process.map(LocalLimit::new);
    let mut limited: Vec<String> = Vec::new();
    let mut limited_at: Option<Instant> = None;
    let mut next = Instant::now();
    loop {
        if pause(&mut stopped, next).await {
            return;
        }
        let want = match local.as_mut() {
            Some(l) => l.available().min(MAX_DRAIN_BATCH),
            None => MAX_DRAIN_BATCH,
        };
        if want < 1 {
            next = Instant::now() + local.as_ref().map_or(IDLE_POLL, |l| l.until_next());
            continue;
        }
        // Each statement is dropped when a stop comes first (tokens a cut
        // `take_tokens` took are lost: at most a tenth of a second of the rate).
        if limited_at.is_none_or(|at| at.elapsed() >= RATES_REFRESH) {
            match within_grace(&stopped, Duration::ZERO, store.rates()).await {
                None => return,
                Some(Ok(all)) => {
                    limited = all
                        .into_iter()
                        .map(|(b, _)| b)
                        .filter(|b| !b.is_empty())
                        .collect();
                    limited_at = Some(Instant::now());
                }
                Some(Err(_)) => {}
            }
        }
        let granted = match within_grace(
            &stopped,
            Duration::ZERO,
            store.take_tokens(TABLE_BUCKET, want),
        )
        .await
        {
            None => return,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                counters.database_errors.fetch_add(1, Ordering::Relaxed);
                next = Instant::now() + Duration::from_secs(1);
                continue;
            }
        };
        if granted < 1 {
            let Some(secs) =
                within_grace(&stopped, Duration::ZERO, store.refill_secs(TABLE_BUCKET)).await
            else {
                return;
            };
            next = Instant::now() + wait(secs.unwrap_or(0.05));
            continue;
        }
        match drainer.drain(granted, &limited, &stopped, &counters).await {
            Ok(done) => {
                counters
                    .published
                    .fetch_add(done.published, Ordering::Relaxed);
                counters
                    .publish_failed
                    .fetch_add(done.failed, Ordering::Relaxed);
                let used = (done.published + done.failed + done.unconfirmed) as i64;
                if let Some(l) = local.as_mut() {
                    l.spend(used);
                }
                let _ = within_grace(
                    &stopped,
                    STOP_GIVE_BACK_WAIT,
                    store.give_back(TABLE_BUCKET, granted - used),
                )
                .await;
                next = if done.claimed == 0 {
                    Instant::now() + IDLE_POLL
                } else if done.failed > 0 && done.published == 0 {
                    // Every publish failed: the broker refuses; do not spin.
                    Instant::now() + Duration::from_secs(1)
                } else {
                    Instant::now()
                };
            }
            Err(_) => {
                let _ = within_grace(
                    &stopped,
                    STOP_GIVE_BACK_WAIT,
                    store.give_back(TABLE_BUCKET, granted),
                )
                .await;
                counters.database_errors.fetch_add(1, Ordering::Relaxed);
                next = Instant::now() + Duration::from_secs(1);
            }
        }
    }
}

/// What one batch did.
#[derive(Debug, Default)]
struct Drained {
    /// Rows claimed (some may have been left for their dependency's rate).
    claimed: usize,
    /// Rows published and deleted.
    published: u64,
    /// Rows whose publish failed (they wait and are tried again).
    failed: u64,
    /// Rows published whose confirm had not come when a stop cut the wait
    /// short (they stay in the table).
    unconfirmed: u64,
}

/// A claimed row.
struct Claimed {
    id: i64,
    queue: String,
    body: Vec<u8>,
    properties: serde_json::Value,
    attempt: i32,
    dependency: Option<String>,
    message_id: Option<String>,
    error: Option<String>,
    waited_ms: f64,
}

impl Drainer {
    /// Claims up to `max` due rows (none of a dependency in `exhausted`),
    /// keeps as many of each rate-limited dependency as its bucket allows,
    /// publishes them with pipelined confirms, and deletes the confirmed ones
    /// in the same transaction. A stop before the publishes rolls the claim
    /// back; one during them is handled as [`publish_all`] says, and the rows
    /// it left are not touched.
    async fn drain(
        &self,
        max: i64,
        limited: &[String],
        stopped: &watch::Receiver<bool>,
        counters: &SchedulerCounters,
    ) -> Result<Drained> {
        let db =
            |e: tokio_postgres::Error| Error::new(ErrorKind::RetryTable, format!("scheduler: {e}"));
        counters.unsettled.store(0, Ordering::Relaxed);
        // Until the publishes start, a stop drops the statement in hand (and
        // with the transaction, the claim): every row stays as it was.
        let exhausted = if limited.is_empty() {
            Vec::new()
        } else {
            let exhausted =
                within_grace(stopped, Duration::ZERO, self.store.exhausted_dependencies());
            let Some(exhausted) = exhausted.await else {
                return Ok(Drained::default());
            };
            exhausted?
        };
        // Dropped (closed, out of the pool) when a stop cuts a statement short.
        let Some(client) = within_grace(stopped, Duration::ZERO, self.store.conn()).await else {
            return Ok(Drained::default());
        };
        let mut client = client?;
        let Some(tx) = within_grace(stopped, Duration::ZERO, client.transaction()).await else {
            return Ok(Drained::default());
        };
        let tx = tx.map_err(db)?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&max, &exhausted];
        let claim = tx.query(
            "SELECT id, queue, body, properties, attempt, dependency, message_id, last_error,
                    (extract(epoch FROM now() - updated_at) * 1000)::float8
             FROM message_retries
             WHERE NOT paused AND next_attempt_at <= now()
               AND (dependency IS NULL OR dependency <> ALL($2::text[]))
             ORDER BY next_attempt_at, id
             LIMIT $1
             FOR UPDATE SKIP LOCKED",
            &params,
        );
        let Some(rows) = within_grace(stopped, Duration::ZERO, claim).await else {
            return Ok(Drained::default());
        };
        let rows = rows.map_err(db)?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            claimed.push(Claimed {
                id: column(row, 0)?,
                queue: column(row, 1)?,
                body: column(row, 2)?,
                properties: column(row, 3)?,
                attempt: column(row, 4)?,
                dependency: column(row, 5)?,
                message_id: column(row, 6)?,
                error: column(row, 7)?,
                waited_ms: column(row, 8)?,
            });
        }
        let mut done = Drained {
            claimed: claimed.len(),
            ..Drained::default()
        };
        if claimed.is_empty() {
            tx.commit().await.map_err(db)?;
            client.done();
            return Ok(done);
        }
        let Some(claimed) = within_grace(
            stopped,
            Duration::ZERO,
            self.within_dependency_rates(claimed, limited),
        )
        .await
        else {
            return Ok(done);
        };
        let claimed = claimed?;
        let tracer = self.tracer.read().ok().and_then(|t| t.clone());
        let results = publish_all(&claimed, stopped, |row| {
            self.publish(row, tracer.as_deref(), stopped)
        })
        .await;
        let mut deleted = Vec::new();
        let mut failed_ids = Vec::new();
        let mut failed_errors = Vec::new();
        for (row, outcome) in claimed.iter().zip(results) {
            let error = match outcome {
                Outcome::Confirmed => {
                    deleted.push(row.id);
                    None
                }
                Outcome::Failed(e) => {
                    failed_ids.push(row.id);
                    // Written into the row: a NUL (a queue name may hold one) would
                    // have the whole batch's update refused, and its rows published again.
                    let error = format!("publishing back to '{}' failed: {}", row.queue, e.message);
                    failed_errors.push(pg_text(&error).into_owned());
                    Some(e.message)
                }
                Outcome::NotSent => {
                    Some("the scheduler stopped before publishing it; the row stays".to_owned())
                }
                Outcome::Unconfirmed => {
                    done.unconfirmed += 1;
                    Some(format!(
                        "the scheduler stopped, and no confirm came within {} ms; the row stays and is published again",
                        STOP_CONFIRM_WAIT.as_millis()
                    ))
                }
            };
            if let Some(tracer) = &tracer {
                tracer.end(row.id, error);
            }
        }
        // Published and still in the table until the commit.
        counters
            .unsettled
            .store(deleted.len() as u64 + done.unconfirmed, Ordering::Relaxed);
        let write = async {
            if !deleted.is_empty() {
                tx.execute(
                    "DELETE FROM message_retries WHERE id = ANY($1)",
                    &[&deleted],
                )
                .await
                .map_err(db)?;
            }
            if !failed_ids.is_empty() {
                tx.execute(
                    "UPDATE message_retries m
                     SET next_attempt_at = now() + make_interval(secs => $3), last_error = f.error, updated_at = now()
                     FROM unnest($1::int8[], $2::text[]) AS f(id, error)
                     WHERE m.id = f.id",
                    &[&failed_ids, &failed_errors, &FAILED_PUBLISH_BACKOFF_SECS],
                )
                .await
                .map_err(db)?;
            }
            tx.commit().await.map_err(db)
        };
        match within_grace(stopped, STOP_COMMIT_WAIT, write).await {
            // Cut short: rolled back, and the published rows stay (unsettled).
            None => return Ok(done),
            Some(written) => written?,
        }
        client.done();
        counters
            .unsettled
            .store(done.unconfirmed, Ordering::Relaxed);
        done.published = deleted.len() as u64;
        done.failed = failed_ids.len() as u64;
        Ok(done)
    }

    /// Of `claimed`, the rows each rate-limited dependency's bucket allows
    /// now, in order; the others stay due for a later batch.
    async fn within_dependency_rates(
        &self,
        claimed: Vec<Claimed>,
        limited: &[String],
    ) -> Result<Vec<Claimed>> {
        if limited.is_empty() {
            return Ok(claimed);
        }
        let mut allowed: Vec<(String, i64)> = Vec::new();
        for dependency in limited {
            let n = claimed
                .iter()
                .filter(|r| r.dependency.as_deref() == Some(dependency.as_str()))
                .count() as i64;
            if n > 0 {
                allowed.push((
                    dependency.clone(),
                    self.store.take_tokens(dependency, n).await?,
                ));
            }
        }
        Ok(claimed
            .into_iter()
            .filter(|r| {
                let Some(d) = r.dependency.as_deref() else {
                    return true;
                };
                match allowed.iter_mut().find(|(name, _)| name == d) {
                    Some((_, left)) if *left > 0 => {
                        *left -= 1;
                        true
                    }
                    Some(_) => false,
                    None => true,
                }
            })
            .collect())
    }

    /// Publishes one claimed row (with its drain's trace context, when a
    /// tracer gives one) and waits for the confirm; `None` when a stop came
    /// before it was sent.
    async fn publish(
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

/// The trace context a stored copy carries.
fn stored_trace(props: &BasicProperties) -> Option<Trace> {
    let headers = props.headers().as_ref();
    header_str(headers, "traceparent").map(|parent| (parent, header_str(headers, "tracestate")))
}

#[cfg(test)]
mod tests;
