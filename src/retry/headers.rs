//! The `retry-*` headers written on a republished message, kept small
//! enough that the message still fits in one AMQP frame.

use super::route::Route;
use super::time::iso8601_utc;

/// RabbitMQ's default frame_max; all headers must fit in one frame.
pub const FRAME_MAX: usize = 131_072;
/// Room left in the frame for everything besides our headers and the
/// user's kept headers (spring-amqp keeps the same 20,000 bytes spare).
pub const HEADER_HEADROOM: usize = 20_000;
/// The longest error message stored in `retry-last-error`.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 8 * 1024;
/// The longest error name stored in `retry-error-name`.
pub const MAX_ERROR_NAME_BYTES: usize = 200;

/// Header: the number of failed attempts so far.
pub const RETRY_ATTEMPT: &str = "retry-attempt";
/// Header: "retry", "exhausted" or "non-retryable".
pub const RETRY_REASON: &str = "retry-reason";
/// Header: the latest error message.
pub const RETRY_LAST_ERROR: &str = "retry-last-error";
/// Header: the latest error's type name.
pub const RETRY_ERROR_NAME: &str = "retry-error-name";
/// Header: the latest error's stack trace, cut to fit the frame.
pub const RETRY_ERROR_STACK: &str = "retry-error-stack";
/// Header: when the latest failure happened.
pub const RETRY_FAILED_AT: &str = "retry-failed-at";
/// Header: when the first failure happened.
pub const RETRY_FIRST_FAILED_AT: &str = "retry-first-failed-at";
/// Header: the exchange the message was first published to.
pub const RETRY_ORIGINAL_EXCHANGE: &str = "retry-original-exchange";
/// Header: the routing key the message was first published with.
pub const RETRY_ORIGINAL_ROUTING_KEY: &str = "retry-original-routing-key";
/// Header: the work queue that failed the message.
pub const RETRY_QUEUE: &str = "retry-queue";

/// Rough per-entry cost on the wire beyond name and value bytes (name
/// length, type tag, value length), so the budget errs on the safe side.
const ENTRY_OVERHEAD: usize = 10;

/// A header value the core writes.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    /// A signed 64-bit integer.
    Int(i64),
    /// A UTF-8 string.
    Str(String),
}

impl HeaderValue {
    fn value_len(&self) -> usize {
        match self {
            HeaderValue::Int(_) => 8,
            HeaderValue::Str(s) => s.len(),
        }
    }
}

/// What is known about one failure, for building its headers.
pub struct FailureInput<'a> {
    /// Where the message goes next.
    pub route: &'a Route,
    /// The work queue that failed the message.
    pub queue: &'a str,
    /// The error's type name; empty means unknown.
    pub error_name: &'a str,
    /// The error message.
    pub error_message: &'a str,
    /// The error's stack trace.
    pub error_stack: &'a str,
    /// The time of the failure, in milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// The exchange this delivery came from.
    pub delivery_exchange: &'a str,
    /// The routing key of this delivery.
    pub delivery_routing_key: &'a str,
    /// `retry-first-failed-at` from an earlier hop, if any.
    pub previous_first_failed_at: Option<&'a str>,
    /// `retry-original-exchange` from an earlier hop, if any.
    pub previous_original_exchange: Option<&'a str>,
    /// `retry-original-routing-key` from an earlier hop, if any.
    pub previous_original_routing_key: Option<&'a str>,
    /// The encoded size of the user's headers kept on the republished message.
    pub kept_headers_bytes: usize,
}

/// Builds the `retry-*` headers for a failure, in a fixed order. The stack
/// trace gets whatever room is left in the frame, so a huge stack cannot
/// make the republish fail.
pub fn failure_headers(input: &FailureInput) -> Vec<(&'static str, HeaderValue)> {
    let failed_at = iso8601_utc(input.now_ms);
    let first_failed_at = match input.previous_first_failed_at {
        Some(prev) if !prev.is_empty() => prev.to_string(),
        _ => failed_at.clone(),
    };
    let error_name = if input.error_name.trim().is_empty() {
        "Error".to_string()
    } else {
        cut_utf8(input.error_name, MAX_ERROR_NAME_BYTES)
    };
    let str_value = |s: &str| HeaderValue::Str(s.to_string());

    let mut headers = vec![
        (
            RETRY_ATTEMPT,
            HeaderValue::Int(i64::from(input.route.attempt_header())),
        ),
        (RETRY_REASON, str_value(input.route.reason())),
        (
            RETRY_LAST_ERROR,
            HeaderValue::Str(cut_utf8(input.error_message, MAX_ERROR_MESSAGE_BYTES)),
        ),
        (RETRY_ERROR_NAME, HeaderValue::Str(error_name)),
        (RETRY_FAILED_AT, HeaderValue::Str(failed_at)),
        (RETRY_FIRST_FAILED_AT, HeaderValue::Str(first_failed_at)),
        (
            RETRY_ORIGINAL_EXCHANGE,
            str_value(
                input
                    .previous_original_exchange
                    .unwrap_or(input.delivery_exchange),
            ),
        ),
        (
            RETRY_ORIGINAL_ROUTING_KEY,
            str_value(
                input
                    .previous_original_routing_key
                    .unwrap_or(input.delivery_routing_key),
            ),
        ),
        (RETRY_QUEUE, str_value(input.queue)),
    ];

    let others: usize = headers
        .iter()
        .map(|(name, value)| name.len() + value.value_len() + ENTRY_OVERHEAD)
        .sum();
    let stack_budget = (FRAME_MAX - HEADER_HEADROOM)
        .saturating_sub(input.kept_headers_bytes)
        .saturating_sub(others)
        .saturating_sub(RETRY_ERROR_STACK.len() + ENTRY_OVERHEAD);
    let stack = cut_utf8(input.error_stack, stack_budget);
    // The stack goes after the error name, before failed-at.
    headers.insert(4, (RETRY_ERROR_STACK, HeaderValue::Str(stack)));
    headers
}

/// Cuts `s` to at most `max_bytes`, ending it with a `"\n…[cut N bytes]"`
/// marker so readers know text is missing. Never splits a UTF-8 character;
/// returns an empty string when not even the marker fits.
pub fn cut_utf8(s: &str, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s.to_string();
    }
    // The marker is longest when everything is cut, so sizing it for that
    // case guarantees the real marker fits too.
    let longest_marker = marker(s.len()).len();
    let Some(room) = max_bytes.checked_sub(longest_marker) else {
        return String::new();
    };
    let mut end = room;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(max_bytes);
    out.push_str(&s[..end]);
    out.push_str(&marker(s.len() - end));
    out
}

fn marker(cut: usize) -> String {
    format!("\n…[cut {cut} bytes]")
}

/// True for headers that describe the broker's dead-letter history; they
/// are stripped on republish so they neither grow without bound nor
/// confuse the next hop's count.
pub fn is_broker_death_header(name: &str) -> bool {
    name == "x-death"
        || name == "x-delivery-count"
        || name.starts_with("x-first-death-")
        || name.starts_with("x-last-death-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::delay::Delay;
    use crate::retry::route::ParkReason;

    fn retry_route() -> Route {
        Route::Retry {
            delay: Delay::from_millis(5_000).unwrap(),
            index: 0,
            next_attempt: 1,
        }
    }

    fn input<'a>(route: &'a Route) -> FailureInput<'a> {
        FailureInput {
            route,
            queue: "orders",
            error_name: "TypeError",
            error_message: "boom",
            error_stack: "TypeError: boom\n    at f (a.js:1:1)",
            now_ms: 1_798_590_862_123,
            delivery_exchange: "shop",
            delivery_routing_key: "order.created",
            previous_first_failed_at: None,
            previous_original_exchange: None,
            previous_original_routing_key: None,
            kept_headers_bytes: 0,
        }
    }

    fn get<'h>(h: &'h [(&'static str, HeaderValue)], name: &str) -> &'h HeaderValue {
        &h.iter().find(|(n, _)| *n == name).unwrap().1
    }

    fn get_str<'h>(h: &'h [(&'static str, HeaderValue)], name: &str) -> &'h str {
        match get(h, name) {
            HeaderValue::Str(s) => s,
            other => panic!("{name} is {other:?}"),
        }
    }

    fn total_size(h: &[(&'static str, HeaderValue)]) -> usize {
        h.iter().map(|(n, v)| n.len() + v.value_len()).sum()
    }

    #[test]
    fn first_hop() {
        let route = retry_route();
        let h = failure_headers(&input(&route));
        let s = |v: &str| HeaderValue::Str(v.into());
        assert_eq!(
            h,
            vec![
                ("retry-attempt", HeaderValue::Int(1)),
                ("retry-reason", s("retry")),
                ("retry-last-error", s("boom")),
                ("retry-error-name", s("TypeError")),
                (
                    "retry-error-stack",
                    s("TypeError: boom\n    at f (a.js:1:1)")
                ),
                ("retry-failed-at", s("2026-12-30T00:34:22.123Z")),
                ("retry-first-failed-at", s("2026-12-30T00:34:22.123Z")),
                ("retry-original-exchange", s("shop")),
                ("retry-original-routing-key", s("order.created")),
                ("retry-queue", s("orders")),
            ]
        );
    }

    #[test]
    fn every_route() {
        let delay = Delay::from_millis(60_000).unwrap();
        let cases = [
            (retry_route(), 1, "retry"),
            (
                Route::Retry {
                    delay,
                    index: 1,
                    next_attempt: 2,
                },
                2,
                "retry",
            ),
            (
                Route::Park {
                    reason: ParkReason::Exhausted,
                    attempt: 3,
                },
                3,
                "exhausted",
            ),
            (
                Route::Park {
                    reason: ParkReason::NonRetryable,
                    attempt: 0,
                },
                0,
                "non-retryable",
            ),
            (
                Route::Park {
                    reason: ParkReason::Exhausted,
                    attempt: u32::MAX,
                },
                i64::from(u32::MAX),
                "exhausted",
            ),
        ];
        for (route, attempt, reason) in cases {
            let h = failure_headers(&input(&route));
            assert_eq!(h.len(), 10);
            assert_eq!(
                get(&h, RETRY_ATTEMPT),
                &HeaderValue::Int(attempt),
                "{route:?}"
            );
            assert_eq!(get_str(&h, RETRY_REASON), reason, "{route:?}");
        }
    }

    #[test]
    fn later_hop_keeps_history() {
        let route = retry_route();
        let mut i = input(&route);
        i.delivery_exchange = "";
        i.delivery_routing_key = "orders";
        i.previous_first_failed_at = Some("2026-01-01T00:00:00.000Z");
        i.previous_original_exchange = Some("shop");
        i.previous_original_routing_key = Some("order.created");
        let h = failure_headers(&i);
        assert_eq!(
            get_str(&h, RETRY_FIRST_FAILED_AT),
            "2026-01-01T00:00:00.000Z"
        );
        assert_eq!(get_str(&h, RETRY_FAILED_AT), "2026-12-30T00:34:22.123Z");
        assert_eq!(get_str(&h, RETRY_ORIGINAL_EXCHANGE), "shop");
        assert_eq!(get_str(&h, RETRY_ORIGINAL_ROUTING_KEY), "order.created");

        // An empty first-failed-at is useless, an empty exchange is the default one.
        i.previous_first_failed_at = Some("");
        i.previous_original_exchange = Some("");
        let h = failure_headers(&i);
        assert_eq!(
            get_str(&h, RETRY_FIRST_FAILED_AT),
            "2026-12-30T00:34:22.123Z"
        );
        assert_eq!(get_str(&h, RETRY_ORIGINAL_EXCHANGE), "");
    }

    #[test]
    fn error_name() {
        let route = retry_route();
        let long = "N".repeat(1_000);
        let cases = [
            ("", "Error".to_string()),
            ("  ", "Error".to_string()),
            ("E", "E".to_string()),
        ];
        for (name, want) in cases {
            let mut i = input(&route);
            i.error_name = name;
            assert_eq!(get_str(&failure_headers(&i), RETRY_ERROR_NAME), want);
        }
        let mut i = input(&route);
        i.error_name = &long;
        let h = failure_headers(&i);
        let name = get_str(&h, RETRY_ERROR_NAME);
        assert!(name.len() <= MAX_ERROR_NAME_BYTES);
        assert!(name.ends_with(" bytes]"));
    }

    #[test]
    fn huge_message_and_stack_fit_the_frame() {
        let route = retry_route();
        let big = "x".repeat(1 << 20);
        let mut i = input(&route);
        i.error_message = &big;
        i.error_stack = &big;
        let h = failure_headers(&i);
        let total = total_size(&h);
        assert!(total < FRAME_MAX - HEADER_HEADROOM / 2, "{total}");
        assert!(total <= FRAME_MAX - HEADER_HEADROOM, "{total}");
        assert!(get_str(&h, RETRY_LAST_ERROR).len() <= MAX_ERROR_MESSAGE_BYTES);
        let stack = get_str(&h, RETRY_ERROR_STACK);
        assert!(
            stack.len() > 100_000,
            "stack uses the room left: {}",
            stack.len()
        );
        assert!(stack.ends_with(" bytes]"));

        i.kept_headers_bytes = 50_000;
        let h = failure_headers(&i);
        let total = total_size(&h);
        assert!(total + 50_000 <= FRAME_MAX - HEADER_HEADROOM, "{total}");
    }

    #[test]
    fn kept_headers_larger_than_frame() {
        let route = retry_route();
        let big = "y".repeat(1 << 20);
        for kept in [
            FRAME_MAX - HEADER_HEADROOM,
            FRAME_MAX,
            10 * FRAME_MAX,
            usize::MAX,
        ] {
            let mut i = input(&route);
            i.error_stack = &big;
            i.kept_headers_bytes = kept;
            let h = failure_headers(&i);
            assert_eq!(get_str(&h, RETRY_ERROR_STACK), "", "kept {kept}");
        }
    }

    #[test]
    fn cut_exact() {
        // "\n…[cut 100 bytes]" is 19 bytes, so 11 bytes of text fit in 30.
        assert_eq!(
            cut_utf8(&"a".repeat(100), 30),
            format!("{}\n…[cut 89 bytes]", "a".repeat(11))
        );
        // Marker alone does not fit.
        assert_eq!(cut_utf8(&"a".repeat(100), 18), "");
        assert_eq!(cut_utf8(&"a".repeat(100), 0), "");
        // Exactly room for the marker and no text.
        assert_eq!(cut_utf8(&"a".repeat(100), 19), "\n…[cut 100 bytes]");
    }

    #[test]
    fn cut_never_splits_chars() {
        let texts = [
            "é".repeat(100),
            "😀".repeat(100),
            "aé😀".repeat(50),
            "a😀".repeat(40),
        ];
        for s in &texts {
            for max in 0..=s.len() + 1 {
                let got = cut_utf8(s, max);
                assert!(got.len() <= max, "{max}");
                if s.len() <= max {
                    assert_eq!(&got, s);
                } else if !got.is_empty() {
                    let (kept, mark) = got.split_once('\n').unwrap();
                    assert!(s.starts_with(kept));
                    assert_eq!(mark, format!("…[cut {} bytes]", s.len() - kept.len()));
                }
            }
        }
        // The cut point falls inside a multibyte char: 2 + 19 = 21 would take
        // half of "é", so only "a" is kept.
        let s = format!("a{}", "é".repeat(60));
        assert_eq!(cut_utf8(&s, 21), "a\n…[cut 120 bytes]");
    }

    #[test]
    fn broker_death_headers() {
        let cases = [
            ("x-death", true),
            ("x-first-death-queue", true),
            ("x-first-death-reason", true),
            ("x-first-death-exchange", true),
            ("x-last-death-queue", true),
            ("x-last-death-reason", true),
            ("x-delivery-count", true),
            ("X-Death", false),
            ("x-deaths", false),
            ("x-first-death", false),
            ("retry-attempt", false),
            ("x-message-ttl", false),
            ("", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_broker_death_header(name), want, "{name}");
        }
    }
}
