//! The rates a scheduler drains at: the shared ones it sets on the database,
//! and the per-process limit it keeps itself.

use std::time::Duration;

use tokio::time::Instant;

use crate::table::rate::BURST_SECS;

/// The rates a scheduler drains at, rows a second.
#[derive(Debug, Clone, Default)]
pub(crate) struct SchedulerRates {
    /// The whole table's, shared by every scheduler on the database; it
    /// replaces what another scheduler set. `None` leaves it as it is (or
    /// sets [`DEFAULT_TABLE_RATE`] when none is set).
    pub table: Option<f64>,
    /// This process's own limit, on top of the shared one.
    pub per_process: Option<f64>,
    /// Dependencies' own shared rates, set when the scheduler starts.
    pub dependencies: Vec<(String, f64)>,
}

/// The whole table's shared rate when no scheduler set one, rows a second.
pub(super) const DEFAULT_TABLE_RATE: f64 = 50.0;

/// The per-process limit: a local token bucket holding at most
/// `BURST_SECS` of its rate.
pub(super) struct LocalLimit {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl LocalLimit {
    pub(super) fn new(rate: f64) -> Self {
        LocalLimit {
            rate,
            tokens: 0.0,
            at: Instant::now(),
        }
    }

    pub(super) fn available(&mut self) -> i64 {
        let now = Instant::now();
        let cap = (self.rate * BURST_SECS).max(1.0);
        self.tokens = (self.tokens + self.rate * (now - self.at).as_secs_f64()).min(cap);
        self.at = now;
        self.tokens.floor() as i64
    }

    pub(super) fn spend(&mut self, n: i64) {
        self.tokens -= n as f64;
    }

    pub(super) fn until_next(&self) -> Duration {
        Duration::from_secs_f64(((1.0 - self.tokens) / self.rate).max(0.0))
    }
}
