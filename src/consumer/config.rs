//! What a consumer is told: its queues, prefetch, recovery and retry table,
//! and the defaults of the options that set them.

use std::sync::Arc;
use std::time::Duration;

use crate::amqp::topology::Topology;
use crate::retry::Backoff;
use crate::table::store::RetryStore;

/// How long one broker round trip of starting, recovering or stopping a
/// consumer (declare, channel open, qos, consume, cancel, close, ack) may
/// take, unless the consumer's options say otherwise.
pub(crate) const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// Deliveries unacknowledged at once (handlers in flight), unless the
/// consumer's options say otherwise.
pub(crate) const DEFAULT_PREFETCH: u16 = 10;

/// Deliveries of one message after which a quorum consumer parks it without
/// calling the handler, unless the consumer's options say otherwise.
pub(crate) const DEFAULT_DELIVERY_LIMIT: u32 = 5;

/// The `x-consumer-timeout` a quorum consumer asks for unless its options say
/// otherwise: the largest 32-bit value (about 24.8 days), so that a RabbitMQ
/// 4.3 quorum queue does not take a delivery back from a handler that still
/// runs (its own default is 30 minutes). Stuck handlers are reported by
/// `stuckAfterMs` instead.
pub(crate) const DEFAULT_CONSUMER_TIMEOUT_MS: u32 = 2_147_483_647;

/// Attempts through the retry table before a message parks as exhausted,
/// unless the consumer's options say otherwise.
pub(crate) const DEFAULT_TABLE_MAX_ATTEMPTS: u32 = 10;

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
            backoff: Backoff::default(),
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
