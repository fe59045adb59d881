//! The drain rate, shared by every scheduler on one database: token buckets
//! kept in `rabbit_retry_rates`, one for the whole table (bucket `''`) and
//! one for each dependency given a rate of its own. A scheduler takes tokens
//! before it claims rows and gives back what it did not use, each in a short
//! transaction of its own, so schedulers never wait on each other's publishes.
//!
//! A bucket holds at most [`BURST_SECS`] of its rate: a scheduler that was
//! idle cannot publish a burst, and at 10 a second the rows go out about 10
//! each second.
//!
//! Each statement runs on a connection that goes back to the pool only once
//! it ended (see `store::Conn`): a stopping scheduler drops the statement it
//! waits on, and the connection with it.

use super::row::{column, table_error};
use super::store::RetryStore;
use crate::error::Result;

/// The bucket of the whole table.
pub(crate) const TABLE_BUCKET: &str = "";
/// A bucket holds at most this many seconds of its rate (and at least one token).
pub(crate) const BURST_SECS: f64 = 0.1;

/// A bucket's tokens now: what it had, plus what its rate added since, up to its burst.
const AVAILABLE: &str = "LEAST(GREATEST(rate * $BURST, 1), tokens + rate * EXTRACT(EPOCH FROM clock_timestamp() - updated_at))";

fn sql(s: &str) -> String {
    s.replace("$AVAILABLE", AVAILABLE)
        .replace("$BURST", &BURST_SECS.to_string())
}

impl RetryStore {
    /// Sets the rate of `bucket` (the whole table, or a dependency), in rows
    /// a second; `None` removes a dependency's own rate.
    pub(crate) async fn set_rate(&self, bucket: &str, rate: Option<f64>) -> Result<()> {
        super::store::check_param("the dependency", Some(bucket))?;
        let client = self.conn().await?;
        match rate {
            Some(rate) => client
                .execute(
                    "INSERT INTO rabbit_retry_rates (bucket, rate, tokens) VALUES ($1, $2, 0)
                     ON CONFLICT (bucket) DO UPDATE SET rate = EXCLUDED.rate",
                    &[&bucket, &rate],
                )
                .await
                .map_err(|e| table_error("setting a rate", e))?,
            None => client
                .execute(
                    "DELETE FROM rabbit_retry_rates WHERE bucket = $1 AND bucket <> ''",
                    &[&bucket],
                )
                .await
                .map_err(|e| table_error("removing a rate", e))?,
        };
        client.done();
        Ok(())
    }

    /// Sets the rate of `bucket` unless one is set.
    pub(crate) async fn ensure_rate(&self, bucket: &str, rate: f64) -> Result<()> {
        let client = self.conn().await?;
        client
            .execute(
                "INSERT INTO rabbit_retry_rates (bucket, rate, tokens) VALUES ($1, $2, 0)
                 ON CONFLICT (bucket) DO NOTHING",
                &[&bucket, &rate],
            )
            .await
            .map_err(|e| table_error("setting a rate", e))?;
        client.done();
        Ok(())
    }

    /// The rates set: the whole table's (bucket `''`) and each dependency's.
    pub(crate) async fn rates(&self) -> Result<Vec<(String, f64)>> {
        let client = self.conn().await?;
        let rows = client
            .query(
                "SELECT bucket, rate FROM rabbit_retry_rates ORDER BY bucket",
                &[],
            )
            .await
            .map_err(|e| table_error("reading the rates", e))?;
        client.done();
        rows.iter()
            .map(|r| Ok((column(r, 0)?, column(r, 1)?)))
            .collect()
    }

    /// Takes up to `want` whole tokens from `bucket`; how many it got. A
    /// bucket that does not exist has no limit.
    pub(crate) async fn take_tokens(&self, bucket: &str, want: i64) -> Result<i64> {
        let client = self.conn().await?;
        let row = client
            .query_opt(
                &sql(
                    "WITH now_ AS (
                        SELECT bucket, $AVAILABLE AS avail FROM rabbit_retry_rates WHERE bucket = $1 FOR UPDATE)
                     UPDATE rabbit_retry_rates r
                     SET tokens = now_.avail - LEAST(floor(GREATEST(now_.avail, 0)), $2::int8),
                         updated_at = clock_timestamp()
                     FROM now_ WHERE r.bucket = now_.bucket
                     RETURNING LEAST(floor(GREATEST(now_.avail, 0)), $2::int8)::int8",
                ),
                &[&bucket, &want],
            )
            .await
            .map_err(|e| table_error("taking tokens", e))?;
        client.done();
        match row {
            Some(r) => column(&r, 0),
            None => Ok(want),
        }
    }

    /// Gives `n` unused tokens back to `bucket`.
    pub(crate) async fn give_back(&self, bucket: &str, n: i64) -> Result<()> {
        if n <= 0 {
            return Ok(());
        }
        let client = self.conn().await?;
        client
            .execute(
                "UPDATE rabbit_retry_rates SET tokens = tokens + $2 WHERE bucket = $1",
                &[&bucket, &(n as f64)],
            )
            .await
            .map_err(|e| table_error("giving tokens back", e))?;
        client.done();
        Ok(())
    }

    /// The dependencies whose own bucket has no whole token now.
    pub(crate) async fn exhausted_dependencies(&self) -> Result<Vec<String>> {
        let client = self.conn().await?;
        let rows = client
            .query(
                &sql("SELECT bucket FROM rabbit_retry_rates WHERE bucket <> '' AND $AVAILABLE < 1"),
                &[],
            )
            .await
            .map_err(|e| table_error("reading the rates", e))?;
        client.done();
        rows.iter().map(|r| column(r, 0)).collect()
    }

    /// Seconds until `bucket` has a whole token again (0 when it has one).
    pub(crate) async fn refill_secs(&self, bucket: &str) -> Result<f64> {
        let client = self.conn().await?;
        let row = client
            .query_opt(
                &sql("SELECT GREATEST(0, (1 - $AVAILABLE) / NULLIF(rate, 0)) FROM rabbit_retry_rates WHERE bucket = $1"),
                &[&bucket],
            )
            .await
            .map_err(|e| table_error("reading the rates", e))?;
        client.done();
        match row {
            Some(r) => Ok(column::<Option<f64>>(&r, 0)?.unwrap_or(1.0)),
            None => Ok(0.0),
        }
    }
}
