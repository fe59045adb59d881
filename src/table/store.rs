//! `message_retries` in PostgreSQL: the migration, the shape check, and every
//! statement the consumer, the scheduler and the operators run.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::types::ToSql;
use tokio_postgres::NoTls;

use crate::amqp::connection::redact_url;
use crate::amqp::error::{Error, ErrorKind, Result};

/// The migrations, in order; each runs once, recorded in `rabbit_retry_migrations`.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE message_retries (
        id              bigserial PRIMARY KEY,
        queue           text        NOT NULL,
        body            bytea       NOT NULL,
        properties      jsonb       NOT NULL,
        attempt         integer     NOT NULL,
        next_attempt_at timestamptz,
        paused          boolean     NOT NULL DEFAULT false,
        dependency      text,
        tenant          text,
        last_error      text,
        error_name      text,
        message_id      text,
        correlation_id  text,
        first_failed_at timestamptz NOT NULL,
        updated_at      timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX message_retries_due ON message_retries (next_attempt_at, id)
        WHERE NOT paused AND next_attempt_at IS NOT NULL;
    CREATE INDEX message_retries_dependency ON message_retries (dependency);
    CREATE INDEX message_retries_tenant ON message_retries (tenant);",
    ),
    (
        2,
        // A pause is a state of a dependency, tenant or error, not only of the rows
        // there are now: rows stored later for a paused selector start paused.
        "CREATE TABLE rabbit_retry_pauses (
        dependency text,
        tenant     text,
        error_name text,
        paused_at  timestamptz NOT NULL DEFAULT now(),
        CHECK (dependency IS NOT NULL OR tenant IS NOT NULL OR error_name IS NOT NULL)
    );
    CREATE UNIQUE INDEX rabbit_retry_pauses_selector ON rabbit_retry_pauses
        (COALESCE(dependency, ''), COALESCE(tenant, ''), COALESCE(error_name, ''));",
    ),
];

/// The columns the library reads and writes, with their types as
/// `information_schema` names them.
const SHAPE: &[(&str, &str)] = &[
    ("id", "bigint"),
    ("queue", "text"),
    ("body", "bytea"),
    ("properties", "jsonb"),
    ("attempt", "integer"),
    ("next_attempt_at", "timestamp with time zone"),
    ("paused", "boolean"),
    ("dependency", "text"),
    ("tenant", "text"),
    ("last_error", "text"),
    ("error_name", "text"),
    ("message_id", "text"),
    ("correlation_id", "text"),
    ("first_failed_at", "timestamp with time zone"),
    ("updated_at", "timestamp with time zone"),
];

/// Whether a pause (`p`) covers a row (`m`): every field the pause gives matches.
const PAUSE_MATCHES: &str = "(p.dependency IS NULL OR p.dependency = m.dependency)
     AND (p.tenant IS NULL OR p.tenant = m.tenant)
     AND (p.error_name IS NULL OR p.error_name = m.error_name)";

/// The advisory lock key of the migrations (any constant both processes agree on).
const MIGRATION_LOCK: i64 = 0x7261_6262_6974_7274; // "rabbitrt"

/// A failed message on its way into the table.
#[derive(Debug, Clone)]
pub struct NewRow {
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

/// Which rows `pause` and `resume` touch; every field given must match.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// Rows of this dependency.
    pub dependency: Option<String>,
    /// Rows of this tenant.
    pub tenant: Option<String>,
    /// Rows whose error has this name.
    pub error_name: Option<String>,
}

/// What `list` returns.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
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
pub struct TableStats {
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

/// The table and a pool of connections to its database.
pub struct RetryStore {
    pool: Pool,
    safe_url: String,
}

fn table_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::RetryTable, format!("{what}: {e}"))
}

impl RetryStore {
    /// Connects, applies the migrations under an advisory lock, and checks the
    /// table's shape.
    pub async fn connect(url: &str) -> Result<Arc<RetryStore>> {
        let safe_url = redact_url(url);
        let pg: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| {
            let e = crate::amqp::connection::redact_in(&e.to_string(), url);
            Error::new(
                ErrorKind::InvalidOptions,
                format!("retryTable.url {safe_url} is not a PostgreSQL URL ({e}): use postgres://user:password@host:5432/database"),
            )
        })?;
        let manager = Manager::from_config(
            pg,
            NoTls,
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
        let store = Arc::new(RetryStore { pool, safe_url });
        store.migrate().await?;
        store.check_shape().await?;
        Ok(store)
    }

    /// The URL without its password.
    pub fn safe_url(&self) -> &str {
        &self.safe_url
    }

    /// A pooled connection.
    pub async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| {
            table_error(
                &format!(
                    "could not reach the retry table's database at {}",
                    self.safe_url
                ),
                e,
            )
        })
    }

    async fn migrate(&self) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| table_error("migration", e))?;
        // Two processes starting at once: one migrates, the other waits and finds it done.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(|e| table_error("migration lock", e))?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS rabbit_retry_migrations (
                version integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await
        .map_err(|e| table_error("migration", e))?;
        let applied: Vec<i32> = tx
            .query("SELECT version FROM rabbit_retry_migrations", &[])
            .await
            .map_err(|e| table_error("migration", e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for (version, sql) in MIGRATIONS {
            if applied.contains(version) {
                continue;
            }
            let exists: bool = tx
                .query_one("SELECT to_regclass('message_retries') IS NOT NULL", &[])
                .await
                .map_err(|e| table_error("migration", e))?
                .get(0);
            if *version == 1 && exists {
                // A table made by someone else: the shape check says whether it fits.
                tx.execute(
                    "INSERT INTO rabbit_retry_migrations (version) VALUES ($1)",
                    &[version],
                )
                .await
                .map_err(|e| table_error("migration", e))?;
                continue;
            }
            tx.batch_execute(sql)
                .await
                .map_err(|e| table_error(&format!("migration {version}"), e))?;
            tx.execute(
                "INSERT INTO rabbit_retry_migrations (version) VALUES ($1)",
                &[version],
            )
            .await
            .map_err(|e| table_error("migration", e))?;
        }
        tx.commit().await.map_err(|e| table_error("migration", e))
    }

    async fn check_shape(&self) -> Result<()> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns
                 WHERE table_name = 'message_retries' AND table_schema = current_schema()",
                &[],
            )
            .await
            .map_err(|e| table_error("reading the table's shape", e))?;
        let have: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut problems = Vec::new();
        for (name, ty) in SHAPE {
            match have.iter().find(|(n, _)| n == name) {
                None => problems.push(format!("column '{name}' is missing")),
                Some((_, t)) if t != ty => {
                    problems.push(format!("column '{name}' is {t}, not {ty}"))
                }
                _ => {}
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::RetryTable,
                format!(
                    "table message_retries in {} has another shape ({}); rename or drop it, or point retryTable.url at another database",
                    self.safe_url,
                    problems.join(", ")
                ),
            ))
        }
    }

    /// Stores a failed message in one transaction; returns the row id.
    pub async fn insert(&self, row: &NewRow) -> Result<i64> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| table_error("insert", e))?;
        let attempt = i32::try_from(row.attempt).unwrap_or(i32::MAX);
        let id: i64 = tx
            .query_one(
                &format!(
                    "INSERT INTO message_retries (queue, body, properties, attempt, next_attempt_at,
                        dependency, tenant, last_error, error_name, message_id, correlation_id, first_failed_at, paused)
                     SELECT $1, $2, $3, $4, $5, $6::text, $7::text, $8, $9::text, $10, $11, $12,
                        EXISTS (SELECT 1 FROM rabbit_retry_pauses p,
                                (SELECT $6::text AS dependency, $7::text AS tenant, $9::text AS error_name) m
                                WHERE {PAUSE_MATCHES})
                     RETURNING id"
                ),
                &[
                    &row.queue,
                    &row.body,
                    &row.properties,
                    &attempt,
                    &row.next_attempt_at,
                    &row.dependency,
                    &row.tenant,
                    &row.last_error,
                    &row.error_name,
                    &row.message_id,
                    &row.correlation_id,
                    &row.first_failed_at,
                ],
            )
            .await
            .map_err(|e| table_error("insert into message_retries", e))?
            .get(0);
        tx.commit()
            .await
            .map_err(|e| table_error("commit of the insert", e))?;
        Ok(id)
    }

    fn selector_sql(sel: &Selector) -> Result<(String, Vec<String>)> {
        let mut clauses = Vec::new();
        let mut params = Vec::new();
        for (col, v) in [
            ("dependency", &sel.dependency),
            ("tenant", &sel.tenant),
            ("error_name", &sel.error_name),
        ] {
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
    pub async fn pause(&self, sel: &Selector) -> Result<u64> {
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
    pub async fn resume(&self, sel: &Selector) -> Result<u64> {
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
    pub async fn is_paused(&self, sel: &Selector) -> Result<bool> {
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
        Ok(row.get(0))
    }

    /// Makes row `id` due now (and not paused); false when there is no such row.
    pub async fn retry_now(&self, id: i64) -> Result<bool> {
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
    pub async fn list(&self, f: &ListFilter) -> Result<Vec<RowInfo>> {
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
        Ok(rows
            .iter()
            .map(|r| RowInfo {
                id: r.get(0),
                queue: r.get(1),
                attempt: r.get(2),
                next_attempt_at: r.get(3),
                paused: r.get(4),
                dependency: r.get(5),
                tenant: r.get(6),
                last_error: r.get(7),
                error_name: r.get(8),
                message_id: r.get(9),
                correlation_id: r.get(10),
                first_failed_at: r.get(11),
                updated_at: r.get(12),
            })
            .collect())
    }

    /// Counts by dependency, paused, held and due, and the oldest due row's age.
    pub async fn stats(&self) -> Result<TableStats> {
        let client = self.client().await?;
        let totals = client
            .query_one(
                "SELECT count(*),
                        count(*) FILTER (WHERE paused),
                        count(*) FILTER (WHERE next_attempt_at IS NULL),
                        count(*) FILTER (WHERE NOT paused AND next_attempt_at <= now()),
                        COALESCE((EXTRACT(EPOCH FROM now() - min(next_attempt_at) FILTER (WHERE NOT paused AND next_attempt_at <= now())) * 1000)::bigint, 0)
                 FROM message_retries",
                &[],
            )
            .await
            .map_err(|e| table_error("stats", e))?;
        let by = client
            .query(
                "SELECT dependency, count(*) FROM message_retries GROUP BY dependency ORDER BY dependency NULLS LAST",
                &[],
            )
            .await
            .map_err(|e| table_error("stats", e))?;
        Ok(TableStats {
            rows: totals.get(0),
            paused: totals.get(1),
            held: totals.get(2),
            due: totals.get(3),
            oldest_due_age_ms: totals.get(4),
            by_dependency: by.iter().map(|r| (r.get(0), r.get(1))).collect(),
        })
    }
}
