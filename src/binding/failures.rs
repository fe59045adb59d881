//! The failures JavaScript settles, as they cross: one JSON array per call
//! (`JSON.stringify` of [`FailureInfo`]s), read here in one pass. A JSON text
//! costs JavaScript one call and this side one parse, where an array of
//! objects costs a property lookup for every field of every failure.

use std::borrow::Cow;

use napi_derive::napi;
use serde::Deserialize;

use super::convert::invalid;
use super::table::from_epoch_ms;
use crate::consumer::{Failure, TableFailure};
use crate::retry::Thrown;

/// A delivery whose handler threw, and its error, passed as data so its
/// stack survives. `settle` takes a JSON array of these.
#[napi(object)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FailureInfo {
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
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TableInfo {
    /// What the message waits on.
    pub dependency: Option<String>,
    /// Whose message it is.
    pub tenant: Option<String>,
    /// When it is due, ms since the epoch; `null` waits for a person.
    pub next_attempt_at_ms: Option<f64>,
}

/// The failures of a JSON array of [`FailureInfo`]s (`''` is none), by
/// delivery id. A lone surrogate in a string (`JSON.stringify` writes one
/// as its escape) reads as U+FFFD, as a JavaScript string crossing on its
/// own does; text that is not such an array, or a kind no failure has, is
/// refused.
pub(crate) fn failures_of(json: &str) -> napi::Result<Vec<(u64, Failure)>> {
    if json.is_empty() {
        return Ok(Vec::new());
    }
    let infos: Vec<FailureInfo> =
        serde_json::from_str(&mend_lone_surrogates(json)).map_err(|e| {
            invalid(format!(
                "the failures to settle are not a JSON array of failures: {e}"
            ))
        })?;
    infos.into_iter().map(failure_of).collect()
}

fn failure_of(info: FailureInfo) -> napi::Result<(u64, Failure)> {
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

/// `json` with every `\uXXXX` escape of a lone surrogate written as
/// `\ufffd`, which serde_json takes (it refuses lone surrogates in strings).
/// Borrows when there is none, which a scan for `\u` tells at once.
fn mend_lone_surrogates(json: &str) -> Cow<'_, str> {
    if !json.contains("\\u") {
        return Cow::Borrowed(json);
    }
    let b = json.as_bytes();
    let hex_at = |i: usize| -> Option<u16> {
        let s = json.get(i..i + 4)?;
        u16::from_str_radix(s, 16).ok()
    };
    // A `\u` escape at `i` (the backslash) and its code unit.
    let escape_at = |i: usize| -> Option<u16> {
        if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u') {
            hex_at(i + 2)
        } else {
            None
        }
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(i) else {
            // Another escape (`\\`, `\"`, `\n`...): skip it whole, so an
            // escaped backslash is never read as the start of one.
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                if matches!(escape_at(i + 6), Some(0xDC00..=0xDFFF)) {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let s = out.get_or_insert_with(|| String::with_capacity(json.len()));
            s.push_str(&json[copied..i]);
            s.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut s) => {
            s.push_str(&json[copied..]);
            Cow::Owned(s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(json: &str) -> (u64, Failure) {
        let mut all = failures_of(json).expect("read");
        assert_eq!(all.len(), 1);
        all.remove(0)
    }

    #[test]
    fn none_is_an_empty_text() {
        assert!(failures_of("").expect("read").is_empty());
        assert!(failures_of("[]").expect("read").is_empty());
    }

    #[test]
    fn a_failure_reads_with_every_field() {
        let (id, f) = one(
            r#"[{"id":7,"name":"TypeError","message":"carrier 503","stack":"TypeError: carrier 503\n    at x","kind":"retryable",
                "table":{"dependency":"carrier","tenant":null,"nextAttemptAtMs":1700000000000},
                "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=b"}]"#,
        );
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
        let (_, f) =
            one(r#"[{"id":1,"name":"Error","message":"m","stack":"","kind":"non-retryable"}]"#);
        assert!(f.table.is_none());
        assert!(f.trace.is_none());
        assert!(matches!(f.thrown, Some(Thrown::NonRetryable)));
    }

    #[test]
    fn an_unknown_kind_or_a_wrong_shape_is_refused() {
        assert!(
            failures_of(r#"[{"id":1,"name":"E","message":"m","stack":"","kind":"maybe"}]"#)
                .is_err()
        );
        assert!(failures_of(r#"[{"id":1,"name":"E","message":"m","kind":"retryable"}]"#).is_err());
        assert!(failures_of(r#"{"id":1}"#).is_err());
        assert!(failures_of("not json").is_err());
    }

    #[test]
    fn lone_surrogates_read_as_replacement_characters() {
        // JSON.stringify('\ud800 \udc00 x\ud800') and a pair, as it writes them.
        let (_, f) = one(
            r#"[{"id":1,"name":"\ud800","message":"\ud800 \udc00 x\ud800","stack":"😀 \\ud800 \ud83d\ude00","kind":"retryable"}]"#,
        );
        assert_eq!(f.name, "\u{fffd}");
        assert_eq!(f.message, "\u{fffd} \u{fffd} x\u{fffd}");
        // An escaped backslash followed by `ud800` is text, and a pair is one character.
        assert_eq!(f.stack, "😀 \\ud800 😀");
    }

    #[test]
    fn mending_borrows_when_nothing_is_lone() {
        assert!(matches!(
            mend_lone_surrogates(r#"["a\n\\u","\ud83d\ude00","\u00e9"]"#),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            mend_lone_surrogates(r#"["\udfff\ud800\ud800\udc00"]"#),
            r#"["\ufffd\ufffd\ud800\udc00"]"#
        );
        // A truncated escape at the end is left for the parser to refuse.
        assert_eq!(mend_lone_surrogates(r#"["\ud8"#), r#"["\ud8"#);
    }
}
