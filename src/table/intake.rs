//! Failures on their way into `message_retries`, written in batches: each
//! batch is one multi-row `INSERT` in one transaction, and each failure's
//! original is acked only after the batch that holds it committed.
//!
//! Batches form by themselves: a failure is written at once when nothing is
//! being written, and those that arrive while [`MAX_IN_FLIGHT`] batches are
//! committing wait and go together in the next. A single failure is never
//! held back to fill a batch.
//!
//! A batch PostgreSQL refuses for what a row holds (see [`content_refusal`])
//! is halved until the rows it refuses stand alone: each of those is
//! answered [`Stored::Refused`], and every other row of the batch is stored.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::row::{column, content_refusal, pg_text, table_error, NewRow, Stored, PAUSE_MATCHES};
use crate::error::{Error, ErrorKind, Result};

/// Rows in one `INSERT` at most.
pub(crate) const MAX_INTAKE_BATCH: usize = 500;
/// Batches committing at once.
const MAX_IN_FLIGHT: usize = 3;

/// A row and who waits for what became of it.
type Pending = (NewRow, oneshot::Sender<Result<Stored>>);

/// The writer of one store: cheap to clone, stops when every clone is dropped.
#[derive(Clone)]
pub(crate) struct Intake {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Intake {
    /// Starts the writer on `pool`.
    pub(crate) fn start(pool: Pool) -> Intake {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_batches(pool, rx));
        Intake { tx }
    }

    /// Stores `row`; resolves to its id once its batch committed, or to
    /// the database's refusal of what it holds.
    pub(crate) async fn insert(&self, row: NewRow) -> Result<Stored> {
        let (done, id) = oneshot::channel();
        self.tx
            .send((row, done))
            .map_err(|_| Error::new(ErrorKind::Closed, "the retry table was closed"))?;
        id.await
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Closed, "the retry table was closed")))
    }
}

async fn write_batches(pool: Pool, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        // Wait for a slot first: what arrives meanwhile joins this batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_INTAKE_BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let pool = pool.clone();
        tokio::spawn(async move {
            write(&pool, batch).await;
            drop(slot);
        });
    }
}

/// Writes `batch` and answers each row. A batch the database refuses for
/// what a row holds is halved, and each half written again, until each row
/// it refuses fails alone; one it refuses for another reason (the database
/// went away) is written again row by row.
fn write(pool: &Pool, batch: Vec<Pending>) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
    Box::pin(async move {
        let (rows, answers): (Vec<NewRow>, Vec<_>) = batch.into_iter().unzip();
        let e = match insert_rows(pool, &rows).await {
            Ok(ids) => {
                for (answer, id) in answers.into_iter().zip(ids) {
                    let _ = answer.send(Ok(Stored::Row(id)));
                }
                return;
            }
            Err(e) => e,
        };
        if rows.len() == 1 {
            if let Some(answer) = answers.into_iter().next() {
                let _ = answer.send(refused_or(e));
            }
            return;
        }
        let mut batch: Vec<Pending> = rows.into_iter().zip(answers).collect();
        if content_refusal(&e).is_some() {
            let second = batch.split_off(batch.len() / 2);
            write(pool, batch).await;
            write(pool, second).await;
        } else {
            for (row, answer) in batch {
                let one = insert_rows(pool, std::slice::from_ref(&row)).await;
                let _ = answer.send(match one {
                    Ok(ids) => ids
                        .first()
                        .map(|id| Stored::Row(*id))
                        .ok_or_else(|| Error::new(ErrorKind::RetryTable, "insert stored no row")),
                    Err(e) => refused_or(e),
                });
            }
        }
    })
}

/// A single row's failed insert: [`Stored::Refused`] when the database
/// refused what it holds, else the error (the message stays unacked).
fn refused_or(e: Error) -> Result<Stored> {
    match content_refusal(&e) {
        Some(why) => Ok(Stored::Refused(why)),
        None => Err(e),
    }
}

/// One `INSERT … SELECT FROM unnest(…)` of `rows` in one transaction; the
/// ids in the order of `rows`. A row stored for a selector that is paused
/// starts paused.
pub(crate) async fn insert_rows(pool: &Pool, rows: &[NewRow]) -> Result<Vec<i64>> {
    let mut client = pool.get().await.map_err(|e| {
        table_error(
            "could not reach the retry table's database for an insert",
            e,
        )
    })?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| table_error("insert", e))?;
    // Checked before (see `check_row`): these are stored as they are.
    let col = |f: fn(&NewRow) -> Option<&str>| rows.iter().map(f).collect::<Vec<_>>();
    let queues: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
    let errors: Vec<Cow<'_, str>> = rows.iter().map(|r| pg_text(&r.last_error)).collect();
    let names: Vec<Cow<'_, str>> = rows.iter().map(|r| pg_text(&r.error_name)).collect();
    let bodies: Vec<&[u8]> = rows.iter().map(|r| r.body.as_slice()).collect();
    let properties: Vec<&serde_json::Value> = rows.iter().map(|r| &r.properties).collect();
    let attempts: Vec<i32> = rows
        .iter()
        .map(|r| i32::try_from(r.attempt).unwrap_or(i32::MAX))
        .collect();
    let next: Vec<Option<SystemTime>> = rows.iter().map(|r| r.next_attempt_at).collect();
    let dependencies = col(|r| r.dependency.as_deref());
    let tenants = col(|r| r.tenant.as_deref());
    let message_ids = col(|r| r.message_id.as_deref());
    let correlation_ids = col(|r| r.correlation_id.as_deref());
    let first: Vec<SystemTime> = rows.iter().map(|r| r.first_failed_at).collect();
    let inserted = tx
        .query(
            &format!(
                "INSERT INTO message_retries (queue, body, properties, attempt, next_attempt_at,
                    dependency, tenant, last_error, error_name, message_id, correlation_id, first_failed_at, paused)
                 SELECT m.queue, m.body, m.properties, m.attempt, m.next_attempt_at, m.dependency, m.tenant,
                    m.last_error, m.error_name, m.message_id, m.correlation_id, m.first_failed_at,
                    EXISTS (SELECT 1 FROM rabbit_retry_pauses p WHERE {PAUSE_MATCHES})
                 FROM unnest($1::text[], $2::bytea[], $3::jsonb[], $4::int4[], $5::timestamptz[], $6::text[],
                             $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[])
                      WITH ORDINALITY AS m(queue, body, properties, attempt, next_attempt_at, dependency, tenant,
                                           last_error, error_name, message_id, correlation_id, first_failed_at, n)
                 ORDER BY m.n
                 RETURNING id"
            ),
            &[
                &queues,
                &bodies,
                &properties,
                &attempts,
                &next,
                &dependencies,
                &tenants,
                &errors.iter().map(|e| e.as_ref()).collect::<Vec<&str>>(),
                &names.iter().map(|n| n.as_ref()).collect::<Vec<&str>>(),
                &message_ids,
                &correlation_ids,
                &first,
            ],
        )
        .await
        .map_err(|e| table_error("insert into message_retries", e))?;
    let mut ids = inserted
        .iter()
        .map(|r| column::<i64>(r, 0))
        .collect::<Result<Vec<_>>>()?;
    // Rows are inserted in the order of `rows`, each taking the next id of
    // the sequence: their ids ascend in that order.
    ids.sort_unstable();
    if ids.len() != rows.len() {
        return Err(Error::new(
            ErrorKind::RetryTable,
            format!(
                "insert into message_retries stored {} of {} rows",
                ids.len(),
                rows.len()
            ),
        ));
    }
    tx.commit()
        .await
        .map_err(|e| table_error("commit of the insert", e))?;
    Ok(ids)
}
