//! One batch: due rows claimed with `FOR UPDATE SKIP LOCKED`, cut to their
//! dependencies' rates, published, and the confirmed ones deleted in the
//! same transaction.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;

use super::publish::{publish_all, Claimed, Drainer, Outcome};
use super::stop::{within_grace, STOP_COMMIT_WAIT, STOP_CONFIRM_WAIT};
use super::SchedulerCounters;
use crate::error::{Error, ErrorKind, Result};
use crate::table::row::{column, pg_text};

/// How long a row whose publish failed waits before the next try.
const FAILED_PUBLISH_BACKOFF_SECS: f64 = 30.0;

/// What one batch did.
#[derive(Debug, Default)]
pub(super) struct Drained {
    /// Rows claimed (some may have been left for their dependency's rate).
    pub(super) claimed: usize,
    /// Rows published and deleted.
    pub(super) published: u64,
    /// Rows whose publish failed (they wait and are tried again).
    pub(super) failed: u64,
    /// Rows published whose confirm had not come when a stop cut the wait
    /// short (they stay in the table).
    pub(super) unconfirmed: u64,
}

impl Drainer {
    /// Claims up to `max` due rows (none of a dependency in `exhausted`),
    /// keeps as many of each rate-limited dependency as its bucket allows,
    /// publishes them with pipelined confirms, and deletes the confirmed ones
    /// in the same transaction. A stop before the publishes rolls the claim
    /// back; one during them is handled as [`publish_all`] says, and the rows
    /// it left are not touched.
    pub(super) async fn drain(
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
}
