//! The failures JavaScript settles, as they cross: an array of
//! [`FailureInfo`] objects, each read into the consumer's [`Failure`].

use napi_derive::napi;

use super::convert::invalid;
use super::table::from_epoch_ms;
use crate::consumer::{Failure, TableFailure};
use crate::retry::Thrown;

/// A delivery whose handler threw, and its error, passed as data so its
/// stack survives. `settle` takes an array of these.
#[napi(object)]
pub struct FailureInfo {
    /// The delivery's id.
    pub id: i64,
    /// The error's name or class.
    pub name: String,
    /// Its message.
    pub message: String,
    /// Its stack.
    pub stack: String,
    /// What the handler threw: a `NoHandlerError` (`no-handler`), a
    /// `ReplyRefusedError` (`reply-refused`), an `InboxRefusedError`
    /// (`inbox-refused`), or an error the `retryable`
    /// predicate (or a `NonRetryableError`) says another attempt cannot
    /// (`non-retryable`) or could (`retryable`) get past. Where the message
    /// goes is the verdict's to decide (`retry::verdict`).
    #[napi(
        ts_type = "'no-handler' | 'reply-refused' | 'inbox-refused' | 'non-retryable' | 'retryable'"
    )]
    pub kind: String,
    /// For the retry table: what the row waits on, whose it is, and when it is due.
    pub table: Option<TableInfo>,
    /// The W3C `traceparent` the moved copy carries (the span of its move).
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that goes with it.
    pub tracestate: Option<String>,
}

/// What a row of the retry table gets, worked out by `onFailure.table`.
#[napi(object)]
pub struct TableInfo {
    /// What the message waits on.
    pub dependency: Option<String>,
    /// Whose message it is.
    pub tenant: Option<String>,
    /// When it is due, ms since the epoch; `null` waits for a person.
    pub next_attempt_at_ms: Option<f64>,
}

/// `info` as the consumer's failure, by delivery id; a kind no failure has
/// is refused.
pub(crate) fn failure_of(info: FailureInfo) -> napi::Result<(u64, Failure)> {
    let thrown = Thrown::from_report(&info.kind).ok_or_else(|| {
        invalid("a failure's kind is 'no-handler', 'reply-refused', 'inbox-refused', 'non-retryable' or 'retryable'")
    })?;
    let failure = Failure {
        name: info.name,
        message: info.message,
        stack: info.stack,
        thrown: Some(thrown),
        trace: info.traceparent.map(|parent| (parent, info.tracestate)),
        table: info.table.map(|t| TableFailure {
            dependency: t.dependency,
            tenant: t.tenant,
            next_attempt_at: t.next_attempt_at_ms.map(from_epoch_ms),
        }),
    };
    Ok((info.id as u64, failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(kind: &str) -> FailureInfo {
        FailureInfo {
            id: 1,
            name: "Error".into(),
            message: "m".into(),
            stack: String::new(),
            kind: kind.into(),
            table: None,
            traceparent: None,
            tracestate: None,
        }
    }

    #[test]
    fn a_failure_reads_with_every_field() {
        let (id, f) = failure_of(FailureInfo {
            id: 7,
            name: "TypeError".into(),
            message: "carrier 503".into(),
            stack: "TypeError: carrier 503\n    at x".into(),
            kind: "retryable".into(),
            table: Some(TableInfo {
                dependency: Some("carrier".into()),
                tenant: None,
                next_attempt_at_ms: Some(1_700_000_000_000.0),
            }),
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
            tracestate: Some("a=b".into()),
        })
        .expect("read");
        assert_eq!(id, 7);
        assert_eq!(f.name, "TypeError");
        assert_eq!(f.message, "carrier 503");
        assert_eq!(f.stack, "TypeError: carrier 503\n    at x");
        assert!(matches!(f.thrown, Some(Thrown::Retryable)));
        let table = f.table.expect("table");
        assert_eq!(table.dependency.as_deref(), Some("carrier"));
        assert_eq!(table.tenant, None);
        assert_eq!(
            table.next_attempt_at,
            Some(from_epoch_ms(1_700_000_000_000.0))
        );
        let (parent, state) = f.trace.expect("trace");
        assert_eq!(
            parent,
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        );
        assert_eq!(state.as_deref(), Some("a=b"));
    }

    #[test]
    fn absent_options_read_as_none() {
        let (_, f) = failure_of(info("non-retryable")).expect("read");
        assert!(f.table.is_none());
        assert!(f.trace.is_none());
        assert!(matches!(f.thrown, Some(Thrown::NonRetryable)));
    }

    #[test]
    fn an_unknown_kind_is_refused() {
        assert!(failure_of(info("maybe")).is_err());
        assert!(failure_of(info("")).is_err());
    }
}
