//! The scheduler's loop: it sets the shared rates once, then takes tokens,
//! drains a batch of due rows, gives back the tokens it did not use, and
//! waits as long as what it found says.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::publish::Drainer;
use super::rates::{LocalLimit, SchedulerRates, DEFAULT_TABLE_RATE};
use super::stop::{pause, within_grace, STOP_GIVE_BACK_WAIT};
use super::SchedulerCounters;
use crate::error::Error;
use crate::table::rate::TABLE_BUCKET;

/// How long the scheduler waits before looking again when nothing is due.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// Rows in one batch at most.
const MAX_DRAIN_BATCH: i64 = 500;
/// How often the scheduler reads which dependencies have rates of their own.
const RATES_REFRESH: Duration = Duration::from_secs(5);

/// A short wait, within bounds.
fn wait(secs: f64) -> Duration {
    Duration::from_secs_f64(secs.clamp(0.005, IDLE_POLL.as_secs_f64()))
}

/// Drains due rows at `rates` until asked to stop.
pub(super) async fn run(
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
