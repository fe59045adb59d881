//! Claiming a batch: pending rows in id order, locked for this relay's
//! transaction, and how they are grouped into chains sent one after the
//! other (the rows of one ordering key) or each on its own.

use tokio_postgres::{Row, Transaction};

use crate::error::Result;
use crate::table::row::{column, table_error};

/// A claimed row.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OutboxRow {
    pub(super) id: i64,
    pub(super) exchange: String,
    pub(super) routing_key: String,
    pub(super) body: Vec<u8>,
    pub(super) properties: serde_json::Value,
    pub(super) ordering_key: Option<String>,
    pub(super) attempts: i32,
}

const COLUMNS: &str = "id, exchange, routing_key, body, properties, ordering_key, attempts";

/// The namespace of the ordering keys' advisory locks (the two-key form, apart
/// from the one-key locks of the migrations).
const KEY_LOCKS: i32 = 0x6f62_7872; // "obxr"

/// How many pending keyed rows an ordered relay looks through, per row of a
/// batch, for keys no other relay holds.
const KEY_SCAN_FACTOR: i64 = 4;

fn read(row: &Row) -> Result<OutboxRow> {
    Ok(OutboxRow {
        id: column(row, 0)?,
        exchange: column(row, 1)?,
        routing_key: column(row, 2)?,
        body: column(row, 3)?,
        properties: column(row, 4)?,
        ordering_key: column(row, 5)?,
        attempts: column(row, 6)?,
    })
}

/// Claims up to `batch` pending rows in `tx`. Unordered: the oldest rows no
/// other relay holds. Ordered: rows without a key as unordered, and every
/// pending row (up to `batch`) of the keys this transaction could lock,
/// oldest first; of both, the `batch` oldest.
pub(super) async fn claim(
    tx: &Transaction<'_>,
    batch: i64,
    ordered: bool,
) -> Result<Vec<OutboxRow>> {
    let err = |e| table_error("outbox relay: claiming rows", e);
    let keyless = if ordered {
        "AND ordering_key IS NULL"
    } else {
        ""
    };
    let free = tx
        .query(
            &format!(
                "SELECT {COLUMNS} FROM rabbit_retry_outbox
                 WHERE parked_at IS NULL {keyless}
                 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"
            ),
            &[&batch],
        )
        .await
        .map_err(err)?;
    let free = free.iter().map(read).collect::<Result<Vec<_>>>()?;
    if !ordered {
        return Ok(free);
    }
    let scan = batch.saturating_mul(KEY_SCAN_FACTOR);
    let keys: Vec<String> = tx
        .query(
            "SELECT k FROM (
                 SELECT DISTINCT ordering_key AS k FROM (
                     SELECT ordering_key FROM rabbit_retry_outbox
                     WHERE parked_at IS NULL AND ordering_key IS NOT NULL
                     ORDER BY id LIMIT $1) pending) keys
             WHERE pg_try_advisory_xact_lock($2, hashtext(k))",
            &[&scan, &KEY_LOCKS],
        )
        .await
        .map_err(err)?
        .iter()
        .map(|r| column(r, 0))
        .collect::<Result<_>>()?;
    if keys.is_empty() {
        return Ok(free);
    }
    // Under the keys' locks, no other ordered relay takes these rows: wait
    // for a lock an operator's statement may hold rather than skip a row.
    let keyed = tx
        .query(
            &format!(
                "SELECT {COLUMNS} FROM rabbit_retry_outbox
                 WHERE parked_at IS NULL AND ordering_key = ANY($1)
                 ORDER BY id LIMIT $2 FOR UPDATE"
            ),
            &[&keys, &batch],
        )
        .await
        .map_err(err)?;
    let keyed = keyed.iter().map(read).collect::<Result<Vec<_>>>()?;
    Ok(oldest(free, keyed, batch as usize))
}

/// The `n` oldest of two lists each in id order, in id order: each key's
/// rows kept are the first of its rows.
pub(super) fn oldest(a: Vec<OutboxRow>, b: Vec<OutboxRow>, n: usize) -> Vec<OutboxRow> {
    let mut all: Vec<OutboxRow> = a.into_iter().chain(b).collect();
    all.sort_by_key(|r| r.id);
    all.truncate(n);
    all
}

/// The rows (indexes into `rows`, in id order) grouped into chains: each
/// chain is sent one row after the other, the chains side by side. Ordered,
/// the rows of one key make one chain; any other row is a chain of its own.
pub(super) fn chains(rows: &[OutboxRow], ordered: bool) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut by_key: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        match row.ordering_key.as_deref().filter(|_| ordered) {
            Some(key) => match by_key.get(key) {
                Some(&chain) => out[chain].push(i),
                None => {
                    by_key.insert(key, out.len());
                    out.push(vec![i]);
                }
            },
            None => out.push(vec![i]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{chains, oldest, OutboxRow};

    fn row(id: i64, key: Option<&str>) -> OutboxRow {
        OutboxRow {
            id,
            exchange: String::new(),
            routing_key: "q".into(),
            body: Vec::new(),
            properties: serde_json::json!({}),
            ordering_key: key.map(str::to_owned),
            attempts: 0,
        }
    }

    #[test]
    fn the_oldest_rows_of_both_claims_make_the_batch() {
        let free = vec![row(1, None), row(4, None), row(9, None)];
        let keyed = vec![row(2, Some("a")), row(3, Some("b")), row(5, Some("a"))];
        let ids: Vec<i64> = oldest(free, keyed, 4).iter().map(|r| r.id).collect();
        assert_eq!(ids, [1, 2, 3, 4]);
    }

    #[test]
    fn ordered_rows_of_a_key_form_one_chain_in_id_order() {
        let rows = [
            row(1, Some("a")),
            row(2, None),
            row(3, Some("b")),
            row(4, Some("a")),
            row(5, None),
            row(6, Some("a")),
        ];
        assert_eq!(
            chains(&rows, true),
            vec![vec![0, 3, 5], vec![1], vec![2], vec![4]]
        );
        // Unordered: every row on its own, whatever its key.
        assert_eq!(chains(&rows, false).len(), 6);
    }
}
