//! A consumer of one work queue. A single task per consumer takes the
//! deliveries, hands them to JavaScript in batches through a [`Sink`],
//! acks the ones JavaScript settled as handled and routes the failures
//! (confirmed republish to a retry or parked queue, then ack; acks go out as
//! one `multiple` frame for each settled prefix of delivery tags).
//!
//! `handle` is the API the binding calls, `facts` what the verdict
//! (`retry::verdict`) weighs of a delivery, `link` what the task needs from the
//! broker (lapin, or a scripted broker in tests), `steps` the bounded broker
//! round trips of starting, recovering and stopping, `sink` where deliveries
//! and events go, `task` the state machine that owns the channel (consume,
//! settle, recover, stop), `failure` republishes a failed delivery (or stores
//! it in the retry table), and `acks` orders the acks.

mod acks;
mod facts;
mod failure;
mod handle;
mod link;
mod sink;
mod steps;
mod task;

pub(crate) use handle::ConsumerHandle;
pub(crate) use sink::{DeliveryView, Sink};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lapin::message::Delivery;
use tokio::sync::oneshot;

use crate::amqp::topology::Topology;
use crate::error::Error;
use crate::retry::{Backoff, Thrown};
use crate::table::store::RetryStore;
use acks::{AckLedger, AckOp};

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

/// How long `stop` waits for the broker to finish a cancel before it goes on.
const CANCEL_DRAIN: Duration = Duration::from_secs(5);

/// How long settled deliveries wait behind an unsettled one before they are
/// acked one by one: a republish waiting for its confirm (which usually comes
/// within milliseconds, and then one `multiple` ack covers them all), or a
/// handler still running while fewer than half the prefetch wait behind it.
const ACK_MAX_HOLD: Duration = Duration::from_millis(100);

/// How long a consumer with nothing in flight keeps deliveries whose
/// republish failed before it reopens its channel so the broker redelivers them.
const HELD_RELEASE_IDLE: Duration = Duration::from_secs(5);

/// Room kept free in a republished message's header frame for what the broker
/// adds when a retry queue dead-letters it back (`x-death`, `x-first-death-*`,
/// `x-last-death-*`), so the copy still fits one frame when it comes back.
const BROKER_HEADROOM: usize = 2048;

/// Deliveries taken from lapin's queue at most before JavaScript is woken.
const MAX_DRAIN: usize = 256;

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
}

/// A handler's error, as data (JavaScript passes name, message and stack).
#[derive(Debug, Clone, Default)]
pub(crate) struct Failure {
    /// The error's name or class.
    pub name: String,
    /// The error's message.
    pub message: String,
    /// The error's stack.
    pub stack: String,
    /// What the handler threw, as JavaScript reports it; `None` for a
    /// delivery refused before its handler ran.
    pub thrown: Option<Thrown>,
    /// Where the row goes when the route is the retry table.
    pub table: Option<TableFailure>,
    /// The trace context the moved copy carries instead of the delivery's:
    /// `traceparent`, and `tracestate` when there is one.
    pub trace: Option<(String, Option<String>)>,
}

/// What JavaScript worked out for a row of the retry table.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableFailure {
    /// What the message waits on.
    pub dependency: Option<String>,
    /// Whose message it is.
    pub tenant: Option<String>,
    /// When it is due; `None` waits for a person.
    pub next_attempt_at: Option<SystemTime>,
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

/// How JavaScript settled a delivery.
#[derive(Debug, Clone)]
enum Settlement {
    /// The handler resolved: ack.
    Ack,
    /// The handler threw: retry or park.
    Fail(Failure),
}

/// What happened to a failed delivery, or to the consumer.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// Sent to a retry queue and acked.
    Retried {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// The retry queue.
        target: String,
        /// The `retry-attempt` written.
        attempt: u32,
        /// The delay's label.
        delay: String,
        /// The handler's error message.
        error: String,
    },
    /// Sent to the parked queue and acked.
    Parked {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// The parked queue.
        target: String,
        /// `exhausted` or `non-retryable`.
        reason: String,
        /// The `retry-attempt` written.
        attempt: u32,
        /// The handler's error message.
        error: String,
    },
    /// Stored in the retry table and acked.
    Stored {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// The row id.
        row_id: i64,
        /// The `retry-attempt` stored.
        attempt: u32,
        /// What it waits on.
        dependency: Option<String>,
        /// The handler's error message.
        error: String,
    },
    /// The republish failed; the delivery stays unacked and the broker
    /// redelivers it when the channel closes.
    PublishFailed {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// Where it was meant to go.
        target: String,
        /// Why it failed.
        error: Error,
    },
    /// The channel or connection was lost; the consumer is recovering.
    Disconnected {
        /// What happened.
        error: Error,
        /// The node it was consuming from, without the URL's password.
        url: String,
    },
    /// The consumer is consuming again.
    Recovered {
        /// Tries it took.
        attempts: u32,
        /// Milliseconds since the loss.
        after_ms: u64,
        /// The node it consumes from now, without the URL's password.
        url: String,
    },
    /// The consumer itself hit an error (a failed ack, a closed channel).
    ConsumerError {
        /// What went wrong.
        error: Error,
    },
}

/// What a probe found in the work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeOutcome {
    /// No message was ready.
    Empty,
    /// A message was taken and handed to the probe's sink.
    Taken,
    /// The message taken was refused before any handler (too large, too
    /// many deliveries) and parked: take another.
    Refused,
}

enum Command {
    /// Where deliveries and events go from now on.
    Attach(Box<dyn Sink>),
    SettleMany(Vec<u64>, Vec<(u64, Failure)>),
    Stop(oneshot::Sender<()>),
    /// Stops taking deliveries and keeps the channel for what is in flight.
    Pause(oneshot::Sender<()>),
    /// Consumes again after a pause.
    Resume(oneshot::Sender<crate::error::Result<()>>),
    /// While paused: takes the next message of the work queue and hands it
    /// to the sink given; replies whether there was one.
    Probe(
        Box<dyn Sink>,
        oneshot::Sender<crate::error::Result<ProbeOutcome>>,
    ),
    /// Gives back deliveries JavaScript never started, in their place.
    Release(Vec<u64>),
    /// Replies with the events not handed to the sink.
    Finish(oneshot::Sender<Vec<Event>>),
}

/// What a consumer is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConsumerState {
    /// Receiving deliveries.
    Connected,
    /// The channel or connection was lost; reconnecting with backoff.
    Recovering,
    /// Closed, or recovery gave up.
    Closed,
}

impl ConsumerState {
    /// `connected`, `recovering` or `closed`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ConsumerState::Connected => "connected",
            ConsumerState::Recovering => "recovering",
            ConsumerState::Closed => "closed",
        }
    }
}

pub(super) struct Pending {
    delivery: Delivery,
    attempt: u32,
    /// Whether a retryable failure of this attempt goes to the retry table.
    table_bound: bool,
}

/// Locks `m`, also after a panic elsewhere poisoned it: the state behind these
/// locks (the inbox's items, the consumer's state) is valid at every step.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
