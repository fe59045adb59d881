//! The W3C trace context headers a message carries.

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

/// Header: the W3C trace context's `traceparent`.
pub(crate) const TRACEPARENT: &str = "traceparent";
/// Header: the W3C trace context's `tracestate`.
pub(crate) const TRACESTATE: &str = "tracestate";

/// `headers` with the W3C trace context `trace` (`traceparent`, and
/// `tracestate` when there is one) in place of theirs.
pub(crate) fn with_trace(headers: FieldTable, trace: &(String, Option<String>)) -> FieldTable {
    let mut rest = headers.inner().clone();
    rest.remove(&ShortString::from(TRACESTATE));
    let mut headers = FieldTable::from(rest);
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
    headers.insert(TRACEPARENT.into(), text(&trace.0));
    if let Some(state) = &trace.1 {
        headers.insert(TRACESTATE.into(), text(state));
    }
    headers
}
