//! What the store, the intake and the scheduler share about rows: a new
//! row, how a column is read, how a database error reads, and when a pause
//! covers a row.

use std::time::SystemTime;

use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

use crate::error::{Error, ErrorKind, Result};

/// Whether a pause (`p`) covers a row (`m`): every field the pause gives matches.
pub(super) const PAUSE_MATCHES: &str = "(p.dependency IS NULL OR p.dependency = m.dependency)
     AND (p.tenant IS NULL OR p.tenant = m.tenant)
     AND (p.error_name IS NULL OR p.error_name = m.error_name)";

/// A failed message on its way into the table.
#[derive(Debug, Clone)]
pub(crate) struct NewRow {
    /// The work queue it goes back to.
    pub queue: String,
    /// The body.
    pub body: Vec<u8>,
    /// Its properties and headers (lapin's `BasicProperties` as JSON, every AMQP type kept).
    pub properties: serde_json::Value,
    /// `retry-attempt` when it is published again.
    pub attempt: u32,
    /// When it is due; `None` waits for a person (`resume`, `retryNow`).
    pub next_attempt_at: Option<SystemTime>,
    /// What it waits on (a carrier, a service), for pause and resume.
    pub dependency: Option<String>,
    /// Whose it is, for pause and resume.
    pub tenant: Option<String>,
    /// The handler's error message.
    pub last_error: String,
    /// The handler's error name.
    pub error_name: String,
    /// The message id.
    pub message_id: Option<String>,
    /// The correlation id.
    pub correlation_id: Option<String>,
    /// When it failed first.
    pub first_failed_at: SystemTime,
}

/// Column `i` of `row` as a `T`; a column of another type (a table changed by
/// hand) is a `RETRY_TABLE` error naming it, not a panic.
pub(crate) fn column<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    row.try_get(i).map_err(|e| {
        let name = row.columns().get(i).map_or("?", |c| c.name());
        Error::with_source(
            ErrorKind::RetryTable,
            format!(
                "column '{name}' of the retry table does not read as {}: {e}",
                std::any::type_name::<T>()
            ),
            e,
        )
    })
}

/// `e`'s message followed by those of the errors under it, each once:
/// tokio-postgres and deadpool keep the cause out of their own messages.
pub(super) fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

pub(super) fn table_error(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::with_source(
        ErrorKind::RetryTable,
        format!("{what}: {}", with_causes(&e)),
        e,
    )
}
