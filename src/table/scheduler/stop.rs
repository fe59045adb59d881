//! How a stop is heard in every wait, and how long each part of a stop may
//! take.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How long a stop waits for the confirms of the publishes in flight; a row
/// whose confirm has not come by then stays in the table.
pub(crate) const STOP_CONFIRM_WAIT: Duration = Duration::from_secs(1);
/// How long after a stop the batch in hand may take to commit (its confirmed
/// rows deleted); past it, those rows stay in the table too.
pub(crate) const STOP_COMMIT_WAIT: Duration = Duration::from_secs(1);
/// How long after a stop the scheduler may take to give back the tokens it did not use.
pub(super) const STOP_GIVE_BACK_WAIT: Duration = Duration::from_millis(250);
/// The longest a stop waits for the scheduler before it drops what it was doing.
pub(crate) const STOP_BOUND: Duration = Duration::from_secs(3);
/// How long a stop waits for the count of due rows it reports.
pub(super) const STOP_COUNT_WAIT: Duration = Duration::from_secs(1);

/// Waits `d`, or less when asked to stop; true when asked to stop.
pub(crate) async fn pause(stopped: &mut watch::Receiver<bool>, until: Instant) -> bool {
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
pub(crate) async fn within_grace<T>(
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

/// Waits for a stopped task to end, at most [`STOP_BOUND`]; past it, drops
/// it where it is (mid-statement: its transaction rolls back, and the rows it
/// held stay).
pub(crate) async fn end_within_bound(running: &mut tokio::task::JoinHandle<()>) {
    if tokio::time::timeout(STOP_BOUND, &mut *running)
        .await
        .is_err()
    {
        running.abort();
        let _ = (&mut *running).await;
    }
}
