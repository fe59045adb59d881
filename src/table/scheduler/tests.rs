//! How a batch's publishes and the scheduler's waits end on a stop: rows not
//! sent stay unsent, confirms in flight get `STOP_CONFIRM_WAIT`, and nothing
//! waits longer. Publishes are scripted futures; time is tokio's paused clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::publish::{publish_all, Outcome};
use super::stop::{within_grace, STOP_CONFIRM_WAIT};
use crate::error::{Error, ErrorKind, Result};

/// How a scripted publish ends.
#[derive(Debug, Clone, Copy)]
enum Script {
    /// Confirmed after this long.
    ConfirmAfter(Duration),
    /// Refused after this long.
    FailAfter(Duration),
    /// Never confirmed.
    Never,
    /// Saw the stop before sending.
    StoppedFirst,
}

async fn scripted(script: Script, polled: &AtomicUsize) -> Option<Result<()>> {
    polled.fetch_add(1, Ordering::SeqCst);
    match script {
        Script::ConfirmAfter(d) => {
            tokio::time::sleep(d).await;
            Some(Ok(()))
        }
        Script::FailAfter(d) => {
            tokio::time::sleep(d).await;
            Some(Err(Error::new(ErrorKind::PublishNacked, "refused")))
        }
        Script::Never => std::future::pending().await,
        Script::StoppedFirst => None,
    }
}

fn kinds(sent: &[Outcome]) -> Vec<&'static str> {
    sent.iter()
        .map(|s| match s {
            Outcome::Confirmed => "confirmed",
            Outcome::Failed(_) => "failed",
            Outcome::NotSent => "not sent",
            Outcome::Unconfirmed => "unconfirmed",
        })
        .collect()
}

/// Asks for a stop `after` from now.
fn stop_after(stop: watch::Sender<bool>, after: Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let _ = stop.send(true);
        // Kept until the test ends: a dropped sender is a stop of its own.
        std::future::pending::<()>().await;
    });
}

#[tokio::test(start_paused = true)]
async fn without_a_stop_every_publish_runs_to_its_end() {
    let (_stop, stopped) = watch::channel(false);
    let polled = AtomicUsize::new(0);
    let rows = [
        Script::ConfirmAfter(Duration::from_millis(10)),
        Script::FailAfter(Duration::from_millis(20)),
        Script::ConfirmAfter(Duration::from_secs(20)),
    ];
    let started = Instant::now();
    let sent = publish_all(&rows, &stopped, |s| scripted(*s, &polled)).await;
    assert_eq!(kinds(&sent), ["confirmed", "failed", "confirmed"]);
    assert_eq!(started.elapsed(), Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn after_a_stop_no_row_is_sent() {
    let (stop, stopped) = watch::channel(false);
    stop.send(true).unwrap();
    let polled = AtomicUsize::new(0);
    let rows = [Script::ConfirmAfter(Duration::from_millis(10)); 500];
    let started = Instant::now();
    let sent = publish_all(&rows, &stopped, |s| scripted(*s, &polled)).await;
    assert!(sent.iter().all(|s| matches!(s, Outcome::NotSent)));
    assert_eq!(polled.load(Ordering::SeqCst), 0, "no publish was started");
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_stop_gives_the_confirms_in_flight_a_second_then_leaves_their_rows() {
    let (stop, stopped) = watch::channel(false);
    stop_after(stop, Duration::from_millis(300));
    let polled = AtomicUsize::new(0);
    let rows = [
        Script::ConfirmAfter(Duration::from_millis(100)),
        Script::ConfirmAfter(Duration::from_millis(900)),
        Script::ConfirmAfter(Duration::from_secs(30)),
        Script::Never,
        Script::FailAfter(Duration::from_millis(200)),
        Script::StoppedFirst,
    ];
    let started = Instant::now();
    let sent = publish_all(&rows, &stopped, |s| scripted(*s, &polled)).await;
    assert_eq!(
        kinds(&sent),
        [
            "confirmed",
            "confirmed",
            "unconfirmed",
            "unconfirmed",
            "failed",
            "not sent"
        ]
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(300) + STOP_CONFIRM_WAIT
    );
}

#[tokio::test(start_paused = true)]
async fn confirms_that_all_come_within_the_bound_end_the_wait_early() {
    let (stop, stopped) = watch::channel(false);
    stop_after(stop, Duration::from_millis(100));
    let polled = AtomicUsize::new(0);
    let rows = [Script::ConfirmAfter(Duration::from_millis(400)); 3];
    let started = Instant::now();
    let sent = publish_all(&rows, &stopped, |s| scripted(*s, &polled)).await;
    assert_eq!(kinds(&sent), ["confirmed"; 3]);
    assert_eq!(started.elapsed(), Duration::from_millis(400));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_handle_is_a_stop() {
    let (stop, stopped) = watch::channel(false);
    let polled = AtomicUsize::new(0);
    let rows = [Script::Never];
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(stop);
    });
    let started = Instant::now();
    let sent = publish_all(&rows, &stopped, |s| scripted(*s, &polled)).await;
    assert_eq!(kinds(&sent), ["unconfirmed"]);
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(50) + STOP_CONFIRM_WAIT
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_without_grace_ends_with_the_stop() {
    let (stop, stopped) = watch::channel(false);
    stop_after(stop, Duration::from_millis(700));
    let started = Instant::now();
    // A token that would come in 10 s, or a statement that hangs.
    let cut = within_grace(
        &stopped,
        Duration::ZERO,
        tokio::time::sleep(Duration::from_secs(10)),
    )
    .await;
    assert!(cut.is_none());
    assert_eq!(started.elapsed(), Duration::from_millis(700));
    // Once stopped, a wait that does not end at once is not waited for.
    let started = Instant::now();
    assert!(
        within_grace(&stopped, Duration::ZERO, std::future::pending::<()>())
            .await
            .is_none()
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
    // One that does is still taken.
    assert_eq!(
        within_grace(&stopped, Duration::ZERO, async { 7 }).await,
        Some(7)
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_with_grace_gets_it_from_the_stop() {
    let (stop, stopped) = watch::channel(false);
    stop_after(stop, Duration::from_millis(200));
    let started = Instant::now();
    let done = within_grace(
        &stopped,
        Duration::from_secs(1),
        tokio::time::sleep(Duration::from_millis(900)),
    )
    .await;
    assert!(done.is_some());
    assert_eq!(started.elapsed(), Duration::from_millis(900));
    let started = Instant::now();
    let cut = within_grace(
        &stopped,
        Duration::from_secs(1),
        tokio::time::sleep(Duration::from_secs(5)),
    )
    .await;
    assert!(cut.is_none());
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}
