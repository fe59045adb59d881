//! How JavaScript settled a delivery: handled, or failed with an error that
//! crosses as data.

use std::time::SystemTime;

use crate::retry::ParkReason;

/// How JavaScript settled a delivery.
#[derive(Debug, Clone)]
pub(super) enum Settlement {
    /// The handler resolved: ack.
    Ack,
    /// The handler threw: retry or park.
    Fail(Failure),
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
    /// Whether another attempt could succeed.
    pub retryable: bool,
    /// Park at once with this reason, whatever the delays and `retryable` say.
    pub park: Option<ParkReason>,
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
