//! The shape of `message_retries` and `rabbit_retry_pauses`: the migrations,
//! run once each under an advisory lock, and the check that a table made by
//! someone else has the columns the statements need.

use super::row::{column, table_error};
use super::store::RetryStore;
use crate::error::{Error, ErrorKind, Result};

/// The migrations, in order; each runs once, recorded in `rabbit_retry_migrations`.
pub(super) const MIGRATIONS: &[(i32, &str)] = &[
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
    (
        3,
        // The drain rate shared by every scheduler (see `rate`), and indexes
        // for a table of millions: due rows in order, a dependency's or a
        // tenant's rows oldest first, the ids of rows held for a person.
        "CREATE TABLE rabbit_retry_rates (
        bucket     text PRIMARY KEY,
        rate       float8 NOT NULL CHECK (rate > 0),
        tokens     float8 NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX message_retries_oldest ON message_retries (first_failed_at, id);
    CREATE INDEX message_retries_dependency_oldest ON message_retries (dependency, first_failed_at, id);
    CREATE INDEX message_retries_tenant_oldest ON message_retries (tenant, first_failed_at, id);
    CREATE INDEX message_retries_held ON message_retries (id) WHERE next_attempt_at IS NULL;
    CREATE INDEX message_retries_paused ON message_retries (id) WHERE paused;
    DROP INDEX IF EXISTS message_retries_dependency;
    DROP INDEX IF EXISTS message_retries_tenant;",
    ),
    (
        4,
        // Row counts by dependency, paused and held, kept by statement-level
        // triggers (one aggregate per statement, so batches stay cheap): what
        // `stats()` reads instead of counting a table of millions.
        "CREATE TABLE rabbit_retry_counts (
        dep_key        text    NOT NULL,
        has_dependency boolean NOT NULL,
        paused         boolean NOT NULL,
        held           boolean NOT NULL,
        n              bigint  NOT NULL,
        PRIMARY KEY (dep_key, has_dependency, paused, held)
    );
    INSERT INTO rabbit_retry_counts
        SELECT COALESCE(dependency, ''), dependency IS NOT NULL, paused, next_attempt_at IS NULL, count(*)
        FROM message_retries GROUP BY 1, 2, 3, 4;
    CREATE FUNCTION rabbit_retry_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO rabbit_retry_counts AS c (dep_key, has_dependency, paused, held, n)
                SELECT COALESCE(dependency, ''), dependency IS NOT NULL, paused, next_attempt_at IS NULL, count(*)
                FROM rabbit_retry_new GROUP BY 1, 2, 3, 4
            ON CONFLICT (dep_key, has_dependency, paused, held) DO UPDATE SET n = c.n + EXCLUDED.n;
        END IF;
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            INSERT INTO rabbit_retry_counts AS c (dep_key, has_dependency, paused, held, n)
                SELECT COALESCE(dependency, ''), dependency IS NOT NULL, paused, next_attempt_at IS NULL, -count(*)
                FROM rabbit_retry_old GROUP BY 1, 2, 3, 4
            ON CONFLICT (dep_key, has_dependency, paused, held) DO UPDATE SET n = c.n + EXCLUDED.n;
        END IF;
        RETURN NULL;
    END $$;
    CREATE FUNCTION rabbit_retry_count_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM rabbit_retry_counts;
        RETURN NULL;
    END $$;
    CREATE TRIGGER rabbit_retry_count_insert AFTER INSERT ON message_retries
        REFERENCING NEW TABLE AS rabbit_retry_new FOR EACH STATEMENT EXECUTE PROCEDURE rabbit_retry_count();
    CREATE TRIGGER rabbit_retry_count_update AFTER UPDATE ON message_retries
        REFERENCING OLD TABLE AS rabbit_retry_old NEW TABLE AS rabbit_retry_new
        FOR EACH STATEMENT EXECUTE PROCEDURE rabbit_retry_count();
    CREATE TRIGGER rabbit_retry_count_delete AFTER DELETE ON message_retries
        REFERENCING OLD TABLE AS rabbit_retry_old FOR EACH STATEMENT EXECUTE PROCEDURE rabbit_retry_count();
    CREATE TRIGGER rabbit_retry_count_truncate AFTER TRUNCATE ON message_retries
        FOR EACH STATEMENT EXECUTE PROCEDURE rabbit_retry_count_truncate();",
    ),
    (
        5,
        // The inbox: the ids of the messages a consumer's handler has
        // committed, written in the handler's own transaction, and how many
        // deliveries each consumer skipped as already handled.
        "CREATE TABLE rabbit_retry_inbox (
        consumer    text        NOT NULL,
        message_id  text        NOT NULL,
        handled_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, message_id)
    );
    CREATE INDEX rabbit_retry_inbox_handled ON rabbit_retry_inbox (handled_at);
    CREATE TABLE rabbit_retry_inbox_duplicates (
        consumer text        PRIMARY KEY,
        n        bigint      NOT NULL,
        last_at  timestamptz NOT NULL DEFAULT now()
    );",
    ),
    (
        6,
        // The outbox: messages written in the user's transaction, published
        // by a relay once committed, deleted after the broker's confirm;
        // rows that cannot be delivered stay, parked with a reason.
        "CREATE TABLE rabbit_retry_outbox (
        id           bigserial   PRIMARY KEY,
        exchange     text        NOT NULL,
        routing_key  text        NOT NULL,
        body         bytea       NOT NULL,
        properties   jsonb       NOT NULL,
        ordering_key text,
        created_at   timestamptz NOT NULL DEFAULT now(),
        attempts     integer     NOT NULL DEFAULT 0,
        parked_at    timestamptz,
        park_reason  text,
        last_error   text
    );
    CREATE INDEX rabbit_retry_outbox_pending ON rabbit_retry_outbox (id) WHERE parked_at IS NULL;
    CREATE INDEX rabbit_retry_outbox_ordered ON rabbit_retry_outbox (ordering_key, id) WHERE parked_at IS NULL;",
    ),
];

/// The migrations as `(version, statements)`, for a process that reaches the
/// database through a pool of its own (the inbox, the outbox's writer): it
/// runs them under [`MIGRATION_LOCK`], recorded in `rabbit_retry_migrations`,
/// as [`RetryStore::migrate`] does.
pub(crate) fn migrations() -> &'static [(i32, &'static str)] {
    MIGRATIONS
}

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

/// The advisory lock key of the migrations (any constant both processes agree on).
pub(crate) const MIGRATION_LOCK: i64 = 0x7261_6262_6974_7274; // "rabbitrt"

impl RetryStore {
    /// Runs the migrations this database has not run yet.
    pub(super) async fn migrate(&self) -> Result<()> {
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
            .map(|r| column(r, 0))
            .collect::<Result<_>>()?;
        for (version, sql) in MIGRATIONS {
            if applied.contains(version) {
                continue;
            }
            let exists: bool = tx
                .query_one("SELECT to_regclass('message_retries') IS NOT NULL", &[])
                .await
                .map_err(|e| table_error("migration", e))
                .and_then(|r| column(&r, 0))?;
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

    /// Checks that the tables have every column the statements use, of the right type.
    pub(super) async fn check_shape(&self) -> Result<()> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns
                 WHERE table_name = 'message_retries' AND table_schema = current_schema()",
                &[],
            )
            .await
            .map_err(|e| table_error("reading the table's shape", e))?;
        let have: Vec<(String, String)> = rows
            .iter()
            .map(|r| Ok((column(r, 0)?, column(r, 1)?)))
            .collect::<Result<_>>()?;
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
                    "table message_retries in {} has another shape ({}); rename or drop it, or point {} at another database",
                    self.safe_url(),
                    problems.join(", "),
                    self.option()
                ),
            ))
        }
    }
}
