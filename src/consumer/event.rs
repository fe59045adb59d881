//! What happened to a failed delivery, or to the consumer: the events
//! JavaScript receives, serialised as they are. The serde attributes here are
//! the wire shape `lib/wire.ts` types (`WireEvent`): one object per event,
//! tagged by `kind`, with camelCase fields and `error` as `[CODE] message`.

use std::collections::BTreeMap;

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;

use crate::error::Error;
use crate::retry::Route;

/// What happened to a failed delivery, or to the consumer.
#[derive(Debug, Clone, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub(crate) enum Event {
    /// Sent to a retry queue and acked. On the wire, `kind` is `retry` and
    /// `reason` the copy's `retry-reason`.
    #[serde(rename = "retry", serialize_with = "retried")]
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
        /// Why the broker refused its fault event (`onFailure.faults`), as
        /// `[CODE] message`; the message parked all the same.
        fault_error: Option<String>,
    },
    /// Stored in the retry table and acked. On the wire, `reason` is the
    /// row's `retry-reason`.
    #[serde(serialize_with = "stored")]
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
        #[serde(serialize_with = "coded")]
        error: Error,
    },
    /// The channel or connection was lost; the consumer is recovering.
    Disconnected {
        /// What happened.
        #[serde(serialize_with = "coded")]
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
    /// Moves nobody listens to one by one (no `retry` or `parked` listener,
    /// no trace to end): how many went to each retry queue, by the delay's
    /// label, and to the parked queue, by reason, since the last batch.
    Tally {
        /// Retried copies by delay label (`"5s"`).
        retried: BTreeMap<String, u32>,
        /// Parked copies by reason (`"exhausted"`).
        parked: BTreeMap<String, u32>,
    },
    /// JavaScript settled a delivery the broker had taken back (its channel
    /// was lost, or a consumer timeout returned it to the queue): nothing
    /// was acked or moved, and the broker delivers the message again.
    TakenBack {
        /// The delivery id.
        id: u64,
        /// Whether its handler had succeeded (and JavaScript counted an ack).
        acked: bool,
    },
    /// The consumer itself hit an error (a failed ack, a closed channel). On
    /// the wire, `kind` is `error`.
    #[serde(rename = "error")]
    ConsumerError {
        /// What went wrong.
        #[serde(serialize_with = "coded")]
        error: Error,
    },
}

/// An error as JavaScript reads it: `[CODE] message`, which the TypeScript
/// layer turns into its error class.
fn coded<S: Serializer>(error: &Error, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&error.coded_message())
}

/// [`Event::Retried`] with its constant `reason`; the tag is written around it.
fn retried<S: Serializer>(
    id: &u64,
    message_id: &Option<String>,
    target: &str,
    attempt: &u32,
    delay: &str,
    error: &str,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut out = s.serialize_struct("Retried", 7)?;
    out.serialize_field("id", id)?;
    out.serialize_field("messageId", message_id)?;
    out.serialize_field("target", target)?;
    out.serialize_field("reason", Route::RETRY_REASON)?;
    out.serialize_field("attempt", attempt)?;
    out.serialize_field("delay", delay)?;
    out.serialize_field("error", error)?;
    out.end()
}

/// [`Event::Stored`] with its constant `reason`; the tag is written around it.
fn stored<S: Serializer>(
    id: &u64,
    message_id: &Option<String>,
    row_id: &i64,
    attempt: &u32,
    dependency: &Option<String>,
    error: &str,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut out = s.serialize_struct("Stored", 7)?;
    out.serialize_field("id", id)?;
    out.serialize_field("messageId", message_id)?;
    out.serialize_field("reason", Route::TABLE_REASON)?;
    out.serialize_field("rowId", row_id)?;
    out.serialize_field("attempt", attempt)?;
    out.serialize_field("dependency", dependency)?;
    out.serialize_field("error", error)?;
    out.end()
}
