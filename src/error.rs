//! Errors of the AMQP layer, each with a stable code that the TypeScript layer
//! maps to a typed error class.

use std::fmt;

/// What went wrong, as a value tests and callers can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// A queue or exchange exists with other arguments than the ones asked for.
    TopologyMismatch,
    /// A mandatory publish was returned by the broker: nothing was routed.
    Unroutable,
    /// The broker refused a publish with `basic.nack`.
    PublishNacked,
    /// A publish was not confirmed: the channel closed, or the confirm timed out.
    PublishFailed,
    /// The connection could not be made or was lost.
    Connection,
    /// An option or argument is not valid.
    InvalidOptions,
    /// The consumer or client is closed.
    Closed,
    /// The retry table's database failed or has another shape.
    RetryTable,
}

impl ErrorKind {
    /// Every kind, in the order the codes are listed to JavaScript.
    pub(crate) const ALL: [ErrorKind; 8] = [
        ErrorKind::TopologyMismatch,
        ErrorKind::Unroutable,
        ErrorKind::PublishNacked,
        ErrorKind::PublishFailed,
        ErrorKind::Connection,
        ErrorKind::InvalidOptions,
        ErrorKind::Closed,
        ErrorKind::RetryTable,
    ];

    /// The stable code carried across to JavaScript.
    pub(crate) fn code(self) -> &'static str {
        match self {
            ErrorKind::TopologyMismatch => "TOPOLOGY_MISMATCH",
            ErrorKind::Unroutable => "UNROUTABLE",
            ErrorKind::PublishNacked => "PUBLISH_NACKED",
            ErrorKind::PublishFailed => "PUBLISH_FAILED",
            ErrorKind::Connection => "CONNECTION",
            ErrorKind::InvalidOptions => "INVALID_OPTIONS",
            ErrorKind::Closed => "CLOSED",
            ErrorKind::RetryTable => "RETRY_TABLE",
        }
    }
}

/// An error of the AMQP layer: a kind and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    /// The kind, for matching.
    pub kind: ErrorKind,
    /// A message for people.
    pub message: String,
}

impl Error {
    /// Builds an error of `kind` with `message`.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// The message prefixed with the code, the form that crosses into JavaScript.
    pub(crate) fn coded_message(&self) -> String {
        format!("[{}] {}", self.kind.code(), self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.coded_message())
    }
}

impl std::error::Error for Error {}

/// Result of the AMQP layer.
pub(crate) type Result<T> = std::result::Result<T, Error>;

/// The broker's reply text and code when `err` is a protocol error (a channel or
/// connection closed by the broker), so callers can tell 404 from 406.
pub(crate) fn amqp_reply(err: &lapin::Error) -> Option<(u16, String)> {
    match err.kind() {
        lapin::ErrorKind::ProtocolError(e) => Some((e.get_id(), e.get_message().to_string())),
        _ => None,
    }
}
