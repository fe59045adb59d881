//! What a consumer is told: its queues, prefetch, recovery and retry table,
//! and the defaults of the options that set them.

use std::sync::Arc;
use std::time::Duration;

use crate::amqp::topology::Topology;
use crate::retry::Backoff;
use crate::table::store::RetryStore;

pub(crate) use super::defaults::{
    DEFAULT_CONSUMER_TIMEOUT_MS, DEFAULT_DELIVERY_LIMIT, DEFAULT_PREFETCH,
    DEFAULT_TABLE_MAX_ATTEMPTS,
};
use super::defaults::{
    DEFAULT_RECOVERY_INITIAL_DELAY_MS, DEFAULT_RECOVERY_MAX_DELAY_MS, DEFAULT_STEP_TIMEOUT_MS,
};

/// How long one broker round trip of starting, recovering or stopping a
/// consumer (declare, channel open, qos, consume, cancel, close, ack) may
/// take, unless the consumer's options say otherwise.
pub(crate) const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_millis(DEFAULT_STEP_TIMEOUT_MS);

/// How a consumer comes back after its channel or connection is lost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recovery {
    /// The wait between tries.
    pub backoff: Backoff,
    /// Give up after this many tries; `None` never gives up.
    pub max_attempts: Option<u32>,
    /// How long one broker round trip of starting, recovering or stopping may
    /// take before it counts as failed.
    pub step_timeout: Duration,
}

impl Default for Recovery {
    fn default() -> Self {
        Self {
            backoff: Backoff {
                initial: Duration::from_millis(DEFAULT_RECOVERY_INITIAL_DELAY_MS),
                max: Duration::from_millis(DEFAULT_RECOVERY_MAX_DELAY_MS),
            },
            max_attempts: None,
            step_timeout: DEFAULT_STEP_TIMEOUT,
        }
    }
}

/// What a consumer needs besides the broker.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerConfig {
    /// The queues to declare and consume.
    pub topology: Topology,
    /// At most this many deliveries unacknowledged at once.
    pub prefetch: u16,
    /// Reconnecting after a loss.
    pub recovery: Recovery,
    /// The retry table, when failures go there after the retry queues.
    pub table: Option<TableConfig>,
    /// Quorum queues: the `x-consumer-timeout` consumer argument, in ms.
    pub consumer_timeout_ms: Option<u32>,
    /// The consumer's tag; `None` lets the broker make one.
    pub consumer_tag: Option<String>,
    /// Every `retry-*` header on a retried copy (`onFailure.retryHeaders:
    /// 'full'`), not only those counting and parking need.
    pub full_retry_headers: bool,
    /// JavaScript waits on where each failed message goes, from the first
    /// delivery: those the verdict refuses before their handler are handed
    /// over too, to be watched.
    pub watch_moves: bool,
}

/// The retry table after the retry queues.
#[derive(Clone)]
pub(crate) struct TableConfig {
    /// The table.
    pub store: Arc<RetryStore>,
    /// Attempts through the table before the message parks as exhausted.
    pub max_attempts: u32,
}

impl std::fmt::Debug for TableConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableConfig")
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}
