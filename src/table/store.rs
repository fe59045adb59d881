//! `message_retries` in PostgreSQL: the connection pool and every statement the
//! consumer, the scheduler and the operators run (the schema is in `schema`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::ToSql;

use super::intake::Intake;
use super::row::{check_row, column, table_error, text_problem, MAX_INDEXED_TEXT_BYTES};
use super::row::{with_causes, PAUSE_MATCHES};
pub(crate) use super::row::{NewRow, Stored};
use super::tls::{handshake_advice, PgTls};
use crate::error::{Error, ErrorKind, Result};
use crate::redact::{redact_in, redact_url};

/// Which rows `pause` and `resume` touch; every field given must match.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selector {
    /// Rows of this dependency.
    pub dependency: Option<String>,
    /// Rows of this tenant.
    pub tenant: Option<String>,
    /// Rows whose error has this name.
    pub error_name: Option<String>,
}

/// What `list` returns.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListFilter {
    /// Rows of this dependency.
    pub dependency: Option<String>,
    /// Rows of this tenant.
    pub tenant: Option<String>,
    /// Only rows that are due now (not paused, `next_attempt_at` passed).
    pub due: bool,
    /// At most this many, oldest first.
    pub limit: i64,
}

/// A row as operators see it (without the body).
#[derive(Debug, Clone)]
pub struct RowInfo {
    /// Row id.
    pub id: i64,
    /// The work queue.
    pub queue: String,
    /// `retry-attempt` when published again.
    pub attempt: i32,
    /// When it is due; `None` waits for a person.
    pub next_attempt_at: Option<SystemTime>,
    /// Paused rows are not published.
    pub paused: bool,
    /// The dependency.
    pub dependency: Option<String>,
    /// The tenant.
    pub tenant: Option<String>,
    /// The last error message.
    pub last_error: Option<String>,
    /// The last error name.
    pub error_name: Option<String>,
    /// The message id.
    pub message_id: Option<String>,
    /// The correlation id.
    pub correlation_id: Option<String>,
    /// When it failed first.
    pub first_failed_at: SystemTime,
    /// Last change.
    pub updated_at: SystemTime,
}

/// Counts for dashboards and alerts.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableStats {
    /// Rows in all.
    pub rows: i64,
    /// Paused rows.
    pub paused: i64,
    /// Rows waiting for a person (`next_attempt_at` null).
    pub held: i64,
    /// Rows due now and not paused.
    pub due: i64,
    /// Rows per dependency (`None`: rows without one).
    pub by_dependency: Vec<(Option<String>, i64)>,
    /// Age in ms of the oldest unpaused row whose `next_attempt_at` has passed;
    /// 0 when there is none. A scheduler that stopped shows here.
    pub oldest_due_age_ms: i64,
}

/// A connection of the pool that leaves it, closed, when dropped before
/// [`Conn::done`]: a statement cut short (a stopping scheduler drops the
/// waits it is in) may still be running on it, and would hold up whoever
/// took the connection next.
pub(crate) struct Conn(Option<deadpool_postgres::Object>);

impl Conn {
    /// Goes back to the pool: its statements ended.
    pub(crate) fn done(mut self) {
        drop(self.0.take());
    }
}

impl std::ops::Deref for Conn {
    type Target = deadpool_postgres::Object;

    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Some(client) => client,
            None => unreachable!("a connection is taken only by done or drop"),
        }
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match &mut self.0 {
            Some(client) => client,
            None => unreachable!("a connection is taken only by done or drop"),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// The table and a pool of connections to its database.
pub(crate) struct RetryStore {
    pool: Pool,
    safe_url: String,
    /// The URL as given: what the passwords to take out of the driver's
    /// errors are read from.
    url: String,
    /// The option that gave the URL (`retryTable.url`, `outbox.url`), and
    /// what errors call the database: for messages that say which one failed.
    option: &'static str,
    database: &'static str,
    intake: Intake,
}

/// Which option a store's URL came from: the retry table's or the outbox's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreFor {
    /// `retryTable.url`.
    RetryTable,
    /// `outbox.url`.
    Outbox,
}

impl RetryStore {
    /// Connects (with TLS as the URL's `sslmode` and `sslrootcert` ask, see
    /// `tls`), applies the migrations under an advisory lock, and checks the
    /// table's shape. `role` says which option gave the URL, for the errors.
    pub(crate) async fn connect(url: &str, role: StoreFor) -> Result<Arc<RetryStore>> {
        let (option, database) = match role {
            StoreFor::RetryTable => ("retryTable.url", "the retry table's database"),
            StoreFor::Outbox => ("outbox.url", "the outbox's database"),
        };
        let safe_url = redact_url(url);
        let in_url = |e: Error| Error::new(e.kind, format!("{option} {safe_url}: {}", e.message));
        let (rest, tls) = PgTls::take_from_url(url).map_err(in_url)?;
        let mut pg: tokio_postgres::Config = rest.parse().map_err(|e: tokio_postgres::Error| {
            let e = redact_in(&with_causes(&e), url);
            Error::new(
                ErrorKind::InvalidOptions,
                format!("{option} {safe_url} is not a PostgreSQL URL ({e}): use postgres://user:password@host:5432/database"),
            )
        })?;
        pg.ssl_mode(tls.driver_mode(&pg));
        let connector = tls.connector().map_err(in_url)?;
        let manager = Manager::from_config(
            pg,
            connector,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(8)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| table_error("could not build the connection pool", e))?;
        let intake = Intake::start(pool.clone());
        let store = Arc::new(RetryStore {
            pool,
            safe_url,
            url: url.to_owned(),
            option,
            database,
            intake,
        });
        store.migrate().await?;
        store.check_shape().await?;
        Ok(store)
    }

    /// The option that gave the URL (`retryTable.url`, `outbox.url`).
    pub(crate) fn option(&self) -> &'static str {
        self.option
    }

    /// The URL without its password.
    pub(crate) fn safe_url(&self) -> &str {
        &self.safe_url
    }

    /// A pooled connection. A connection that fails says why, with the causes
    /// under the pool's and tokio-postgres's own messages (a refused
    /// connection, a TLS handshake and the certificate it refused).
    /// A TLS handshake that failed says so first, and what to do about it.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| {
            let text = with_causes(&e);
            let causes = redact_in(&text, &self.url);
            let what = match handshake_advice(&e) {
                Some(advice) => format!("the TLS handshake failed: {advice} ({causes})"),
                None => causes.clone(),
            };
            let message = format!(
                "could not reach {} at {}: {what}",
                self.database, self.safe_url
            );
            // The driver's own error keeps a password it may quote: it is kept only without one.
            if causes == text {
                Error::with_source(ErrorKind::RetryTable, message, e)
            } else {
                Error::new(ErrorKind::RetryTable, message)
            }
        })
    }

    /// A pooled connection for statements a stop may cut short (see [`Conn`]).
    pub(crate) async fn conn(&self) -> Result<Conn> {
        Ok(Conn(Some(self.client().await?)))
    }

    /// Stores a failed message; resolves to its row id once the batch that
    /// holds it committed (see `intake`), or to why PostgreSQL refuses what
    /// it holds: checked first (see [`check_row`]), or refused by the
    /// database.
    pub(crate) async fn insert(&self, row: NewRow) -> Result<Stored> {
        if let Err(why) = check_row(&row) {
            return Ok(Stored::Refused(why));
        }
        self.intake.insert(row).await
    }

    fn selector_sql(sel: &Selector) -> Result<(String, Vec<String>)> {
        let mut clauses = Vec::new();
        let mut params = Vec::new();
        let fields = [
            ("dependency", "dependency", &sel.dependency),
            ("tenant", "tenant", &sel.tenant),
            ("error_name", "errorName", &sel.error_name),
        ];
        // A pause's selector is one entry of an index, all three values together.
        let all: String = fields.iter().filter_map(|(_, _, v)| v.as_deref()).collect();
        for (_, name, v) in fields {
            check_param(name, v.as_deref())?;
        }
        check_param("the selector", Some(&all))?;
        for (col, _, v) in fields {
            if let Some(v) = v {
                params.push(v.clone());
                clauses.push(format!("{col} = ${}", params.len()));
            }
        }
        if clauses.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidOptions,
                "say which rows: give dependency, tenant or errorName",
            ));
        }
        Ok((clauses.join(" AND "), params))
    }

    /// Pauses what `sel` selects: its rows now, and rows stored later, until
    /// `resume` with the same selector. Returns the rows paused now.
    pub(crate) async fn pause(&self, sel: &Selector) -> Result<u64> {
        let (clause, params) = Self::selector_sql(sel)?;
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| table_error("pause", e))?;
        tx.execute(
            "INSERT INTO rabbit_retry_pauses (dependency, tenant, error_name) VALUES ($1, $2, $3)
             ON CONFLICT (COALESCE(dependency, ''), COALESCE(tenant, ''), COALESCE(error_name, '')) DO NOTHING",
            &[&sel.dependency, &sel.tenant, &sel.error_name],
        )
        .await
        .map_err(|e| table_error("pause", e))?;
        let refs: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let n = tx
            .execute(
                &format!(
                    "UPDATE message_retries SET paused = true, updated_at = now() WHERE {clause} AND NOT paused"
                ),
                &refs,
            )
            .await
            .map_err(|e| table_error("pause", e))?;
        tx.commit().await.map_err(|e| table_error("pause", e))?;
        Ok(n)
    }

    /// Lifts the pause `sel` set, and makes its rows due now and unpaused
    /// (rows held for a person too) unless another pause still covers them.
    /// Returns the rows resumed.
    pub(crate) async fn resume(&self, sel: &Selector) -> Result<u64> {
        let (clause, params) = Self::selector_sql(sel)?;
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| table_error("resume", e))?;
        tx.execute(
            "DELETE FROM rabbit_retry_pauses
             WHERE dependency IS NOT DISTINCT FROM $1 AND tenant IS NOT DISTINCT FROM $2
               AND error_name IS NOT DISTINCT FROM $3",
            &[&sel.dependency, &sel.tenant, &sel.error_name],
        )
        .await
        .map_err(|e| table_error("resume", e))?;
        let refs: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let n = tx
            .execute(
                &format!(
                    "UPDATE message_retries m SET paused = false, next_attempt_at = now(), updated_at = now()
                     WHERE {clause}
                       AND NOT EXISTS (SELECT 1 FROM rabbit_retry_pauses p WHERE {PAUSE_MATCHES})"
                ),
                &refs,
            )
            .await
            .map_err(|e| table_error("resume", e))?;
        tx.commit().await.map_err(|e| table_error("resume", e))?;
        Ok(n)
    }

    /// Whether a pause with exactly this selector is in force.
    pub(crate) async fn is_paused(&self, sel: &Selector) -> Result<bool> {
        Self::selector_sql(sel)?;
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM rabbit_retry_pauses
                 WHERE dependency IS NOT DISTINCT FROM $1 AND tenant IS NOT DISTINCT FROM $2
                   AND error_name IS NOT DISTINCT FROM $3)",
                &[&sel.dependency, &sel.tenant, &sel.error_name],
            )
            .await
            .map_err(|e| table_error("isPaused", e))?;
        column(&row, 0)
    }

    /// Makes row `id` due now (and not paused); false when there is no such row.
    pub(crate) async fn retry_now(&self, id: i64) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE message_retries SET paused = false, next_attempt_at = now(), updated_at = now() WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(|e| table_error("retryNow", e))?;
        Ok(n > 0)
    }

    /// Rows, oldest first.
    pub(crate) async fn list(&self, f: &ListFilter) -> Result<Vec<RowInfo>> {
        // Not stored: only a NUL, which PostgreSQL's text cannot hold, is refused.
        for (name, v) in [("dependency", &f.dependency), ("tenant", &f.tenant)] {
            if let Some(problem) = v.as_deref().and_then(|v| text_problem(name, v, None)) {
                return Err(Error::new(ErrorKind::InvalidOptions, problem));
            }
        }
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, queue, attempt, next_attempt_at, paused, dependency, tenant, last_error,
                        error_name, message_id, correlation_id, first_failed_at, updated_at
                 FROM message_retries
                 WHERE ($1::text IS NULL OR dependency = $1)
                   AND ($2::text IS NULL OR tenant = $2)
                   AND (NOT $3 OR (NOT paused AND next_attempt_at <= now()))
                 ORDER BY first_failed_at, id
                 LIMIT $4",
                &[&f.dependency, &f.tenant, &f.due, &f.limit],
            )
            .await
            .map_err(|e| table_error("list", e))?;
        rows.iter()
            .map(|r| {
                Ok(RowInfo {
                    id: column(r, 0)?,
                    queue: column(r, 1)?,
                    attempt: column(r, 2)?,
                    next_attempt_at: column(r, 3)?,
                    paused: column(r, 4)?,
                    dependency: column(r, 5)?,
                    tenant: column(r, 6)?,
                    last_error: column(r, 7)?,
                    error_name: column(r, 8)?,
                    message_id: column(r, 9)?,
                    correlation_id: column(r, 10)?,
                    first_failed_at: column(r, 11)?,
                    updated_at: column(r, 12)?,
                })
            })
            .collect()
    }

    /// Counts by dependency, paused, held and due, and the oldest due row's
    /// age. The first three come from `rabbit_retry_counts` (kept by
    /// triggers), the due ones from the index of due rows: milliseconds at a
    /// million rows.
    pub(crate) async fn stats(&self) -> Result<TableStats> {
        let client = self.client().await?;
        let err = |e| table_error("stats", e);
        let totals = client
            .query_one(
                "SELECT COALESCE(sum(n), 0)::int8,
                        COALESCE(sum(n) FILTER (WHERE paused), 0)::int8,
                        COALESCE(sum(n) FILTER (WHERE held), 0)::int8
                 FROM rabbit_retry_counts",
                &[],
            )
            .await
            .map_err(err)?;
        let due = client
            .query_one(
                "SELECT count(*),
                        COALESCE((EXTRACT(EPOCH FROM now() - min(next_attempt_at)) * 1000)::bigint, 0)
                 FROM message_retries WHERE NOT paused AND next_attempt_at <= now()",
                &[],
            )
            .await
            .map_err(err)?;
        let by = client
            .query(
                "SELECT CASE WHEN has_dependency THEN dep_key END, sum(n)::int8
                 FROM rabbit_retry_counts GROUP BY 1 HAVING sum(n) > 0 ORDER BY 1 NULLS LAST",
                &[],
            )
            .await
            .map_err(err)?;
        Ok(TableStats {
            rows: column(&totals, 0)?,
            paused: column(&totals, 1)?,
            held: column(&totals, 2)?,
            due: column(&due, 0)?,
            oldest_due_age_ms: column(&due, 1)?,
            by_dependency: by
                .iter()
                .map(|r| Ok((column(r, 0)?, column(r, 1)?)))
                .collect::<Result<_>>()?,
        })
    }

    /// Rows due now and not paused (counted from the index of due rows).
    pub(crate) async fn due_rows(&self) -> Result<i64> {
        let client = self.conn().await?;
        let row = client
            .query_one(
                "SELECT count(*) FROM message_retries WHERE NOT paused AND next_attempt_at <= now()",
                &[],
            )
            .await
            .map_err(|e| table_error("counting the due rows", e))?;
        client.done();
        column(&row, 0)
    }
}

/// Refuses with `INVALID_OPTIONS` a value the caller gives (a selector's
/// dependency, a rate's) that PostgreSQL would refuse: a NUL, or more bytes
/// than an index entry takes.
pub(crate) fn check_param(name: &str, value: Option<&str>) -> Result<()> {
    match value.and_then(|v| text_problem(name, v, Some(MAX_INDEXED_TEXT_BYTES))) {
        Some(problem) => Err(Error::new(ErrorKind::InvalidOptions, problem)),
        None => Ok(()),
    }
}
