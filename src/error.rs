//! The crate's errors, each with a stable code that the TypeScript layer maps
//! to a typed error class, and the error it came from (lapin's, an I/O
//! error, PostgreSQL's) as its source.

use std::fmt;
use std::sync::Arc;

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
    /// The broker refuses a reply for what it holds (its `reply-to`, a
    /// property), or closed the channel or connection over it.
    ReplyRefused,
    /// The broker cannot do what an option asks (an older RabbitMQ).
    BrokerUnsupported,
    /// The broker refused access (403 ACCESS_REFUSED): a reserved `amq.*`
    /// name, an internal exchange, a permission the user lacks.
    AccessRefused,
    /// Something named does not exist (404 NOT_FOUND): an exchange or queue
    /// of a binding, a declare with `passive`.
    NotFound,
    /// The broker refused a command for what it holds (406
    /// PRECONDITION_FAILED): a property value, a size, an argument.
    PreconditionFailed,
}

impl ErrorKind {
    /// Every kind, in the order the codes are listed to JavaScript.
    pub(crate) const ALL: [ErrorKind; 13] = [
        ErrorKind::TopologyMismatch,
        ErrorKind::Unroutable,
        ErrorKind::PublishNacked,
        ErrorKind::PublishFailed,
        ErrorKind::Connection,
        ErrorKind::InvalidOptions,
        ErrorKind::Closed,
        ErrorKind::RetryTable,
        ErrorKind::ReplyRefused,
        ErrorKind::BrokerUnsupported,
        ErrorKind::AccessRefused,
        ErrorKind::NotFound,
        ErrorKind::PreconditionFailed,
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
            ErrorKind::ReplyRefused => "REPLY_REFUSED",
            ErrorKind::BrokerUnsupported => "BROKER_UNSUPPORTED",
            ErrorKind::AccessRefused => "ACCESS_REFUSED",
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::PreconditionFailed => "PRECONDITION_FAILED",
        }
    }
}

/// The error an [`Error`] came from.
pub(crate) type Source = Arc<dyn std::error::Error + Send + Sync>;

/// An error: a kind, a message that says what to do, and the error it came
/// from, if another library's.
#[derive(Debug, Clone)]
pub(crate) struct Error {
    /// The kind, for matching.
    pub kind: ErrorKind,
    /// A message for people.
    pub message: String,
    /// The error this one came from.
    source: Option<Source>,
}

impl Error {
    /// Builds an error of `kind` with `message`.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Builds an error of `kind` with `message` that came from `source`.
    pub(crate) fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            kind,
            message: message.into(),
            source: Some(Arc::new(source)),
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl PartialEq for Error {
    /// Errors are equal when kind and message are: the source is detail.
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for Error {}

/// Result of the crate's operations.
pub(crate) type Result<T> = std::result::Result<T, Error>;

/// The kind of a refusal the broker closed a channel or connection with:
/// 403, 404 and 406 have kinds of their own; `None` for any other code.
pub(crate) fn refusal_kind(code: u16) -> Option<ErrorKind> {
    match code {
        403 => Some(ErrorKind::AccessRefused),
        404 => Some(ErrorKind::NotFound),
        406 => Some(ErrorKind::PreconditionFailed),
        _ => None,
    }
}

/// The error of a command the broker answered with `e`: refused (403, 404,
/// 406 keep a kind of their own), or the connection lost (`CONNECTION`).
/// `message` says what was asked and why it failed; `e` is kept as the source.
pub(crate) fn broker_error(message: String, e: &lapin::Error) -> Error {
    let kind = amqp_reply(e)
        .and_then(|(code, _)| refusal_kind(code))
        .unwrap_or(ErrorKind::Connection);
    Error::with_source(kind, message, e.clone())
}

/// The broker's reply text and code when `err` is a protocol error (a channel or
/// connection closed by the broker), so callers can tell 404 from 406.
pub(crate) fn amqp_reply(err: &lapin::Error) -> Option<(u16, String)> {
    match err.kind() {
        lapin::ErrorKind::ProtocolError(e) => Some((e.get_id(), e.get_message().to_string())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn the_source_is_kept_and_the_code_crosses_unchanged() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::with_source(ErrorKind::Connection, "could not connect: refused", io);
        assert_eq!(e.coded_message(), "[CONNECTION] could not connect: refused");
        let source = e.source().expect("a source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("the io error");
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(Error::new(ErrorKind::Closed, "closed").source().is_none());
    }
}
