//! What operators read and do: the outbox's counts, its parked rows (listed,
//! put back, deleted), and the inbox's duplicate counts beside them.

use std::time::SystemTime;

use super::Outbox;
use crate::error::Result;
use crate::table::row::{column, table_error};

/// Counts of the outbox.
#[derive(Debug, Clone, Default)]
pub(crate) struct OutboxStats {
    /// Rows waiting to be published.
    pub pending: i64,
    /// Rows parked.
    pub parked: i64,
    /// Age in ms of the oldest pending row; 0 when there is none.
    pub oldest_pending_age_ms: i64,
}

/// A parked row as operators see it (without the body).
#[derive(Debug, Clone)]
pub(crate) struct ParkedRow {
    pub id: i64,
    pub exchange: String,
    pub routing_key: String,
    pub ordering_key: Option<String>,
    pub message_id: Option<String>,
    pub attempts: i32,
    pub created_at: SystemTime,
    pub parked_at: SystemTime,
    pub park_reason: Option<String>,
    pub last_error: Option<String>,
}

/// How many deliveries a consumer skipped as already handled.
#[derive(Debug, Clone)]
pub(crate) struct InboxDuplicates {
    pub consumer: String,
    pub duplicates: i64,
    pub last_at: SystemTime,
}

impl Outbox {
    /// Pending and parked rows, and the oldest pending row's age (read
    /// through the index of pending rows).
    pub(crate) async fn stats(&self) -> Result<OutboxStats> {
        let err = |e| table_error("outbox stats", e);
        let client = self.store.client().await?;
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM rabbit_retry_outbox WHERE parked_at IS NULL),
                        (SELECT count(*) FROM rabbit_retry_outbox WHERE parked_at IS NOT NULL),
                        COALESCE((SELECT (EXTRACT(EPOCH FROM now() - created_at) * 1000)::bigint
                                  FROM rabbit_retry_outbox WHERE parked_at IS NULL ORDER BY id LIMIT 1), 0)",
                &[],
            )
            .await
            .map_err(err)?;
        Ok(OutboxStats {
            pending: column(&row, 0)?,
            parked: column(&row, 1)?,
            oldest_pending_age_ms: column::<i64>(&row, 2)?.max(0),
        })
    }

    /// Parked rows, oldest first, at most `limit`.
    pub(crate) async fn list_parked(&self, limit: i64) -> Result<Vec<ParkedRow>> {
        let client = self.store.client().await?;
        let rows = client
            .query(
                "SELECT id, exchange, routing_key, ordering_key, properties->>'messageId', attempts,
                        created_at, parked_at, park_reason, last_error
                 FROM rabbit_retry_outbox WHERE parked_at IS NOT NULL ORDER BY id LIMIT $1",
                &[&limit],
            )
            .await
            .map_err(|e| table_error("outbox listParked", e))?;
        rows.iter()
            .map(|r| {
                Ok(ParkedRow {
                    id: column(r, 0)?,
                    exchange: column(r, 1)?,
                    routing_key: column(r, 2)?,
                    ordering_key: column(r, 3)?,
                    message_id: column(r, 4)?,
                    attempts: column(r, 5)?,
                    created_at: column(r, 6)?,
                    parked_at: column(r, 7)?,
                    park_reason: column(r, 8)?,
                    last_error: column(r, 9)?,
                })
            })
            .collect()
    }

    /// Puts parked rows back to be published (their refusals forgotten);
    /// resolves to how many of `ids` were parked.
    pub(crate) async fn retry_parked(&self, ids: &[i64]) -> Result<u64> {
        let client = self.store.client().await?;
        client
            .execute(
                "UPDATE rabbit_retry_outbox SET parked_at = NULL, park_reason = NULL, attempts = 0
                 WHERE id = ANY($1) AND parked_at IS NOT NULL",
                &[&ids],
            )
            .await
            .map_err(|e| table_error("outbox retryParked", e))
    }

    /// Deletes parked rows; resolves to how many of `ids` were parked.
    pub(crate) async fn delete_parked(&self, ids: &[i64]) -> Result<u64> {
        let client = self.store.client().await?;
        client
            .execute(
                "DELETE FROM rabbit_retry_outbox WHERE id = ANY($1) AND parked_at IS NOT NULL",
                &[&ids],
            )
            .await
            .map_err(|e| table_error("outbox deleteParked", e))
    }

    /// Each consumer's count of deliveries its inbox skipped as duplicates.
    pub(crate) async fn inbox_duplicates(&self) -> Result<Vec<InboxDuplicates>> {
        let client = self.store.client().await?;
        let rows = client
            .query(
                "SELECT consumer, n, last_at FROM rabbit_retry_inbox_duplicates ORDER BY consumer",
                &[],
            )
            .await
            .map_err(|e| table_error("inbox duplicates", e))?;
        rows.iter()
            .map(|r| {
                Ok(InboxDuplicates {
                    consumer: column(r, 0)?,
                    duplicates: column(r, 1)?,
                    last_at: column(r, 2)?,
                })
            })
            .collect()
    }
}
