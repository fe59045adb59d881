//! The `retry-*` headers written on a republished message, kept small
//! enough that the message still fits in one AMQP frame.

use super::route::Route;
use super::time::iso8601_utc;

/// RabbitMQ's default frame_max; the content header (properties and every
/// header) must fit in one frame.
pub const FRAME_MAX: usize = 131_072;
/// The stack never takes more than the frame less this much (spring-amqp
/// keeps the same 20,000 bytes spare).
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
/// Header: the `user-id` property of a message published by another user,
/// moved here because the broker refuses a publish whose `user-id` is not the
/// publishing connection's user.
pub const RETRY_ORIGINAL_USER_ID: &str = "retry-original-user-id";
/// Header: the names of the producer's headers that were dropped because the
/// message could not fit in one frame with them.
pub const RETRY_DROPPED_HEADERS: &str = "retry-dropped-headers";

/// The headers [`failure_headers`] writes. A republish replaces these and
/// keeps every other header, `retry-*` ones of the producer's included.
pub const OWN_HEADERS: [&str; 10] = [
    RETRY_ATTEMPT,
    RETRY_REASON,
    RETRY_LAST_ERROR,
    RETRY_ERROR_NAME,
    RETRY_ERROR_STACK,
    RETRY_FAILED_AT,
    RETRY_FIRST_FAILED_AT,
    RETRY_ORIGINAL_EXCHANGE,
    RETRY_ORIGINAL_ROUTING_KEY,
    RETRY_QUEUE,
];

/// True for a header that [`failure_headers`] writes, so a republish replaces it.
pub fn is_own_header(name: &str) -> bool {
    OWN_HEADERS.contains(&name)
}

/// What goes when the headers do not fit, after the stack and the error
/// message were cut: least useful first. `retry-attempt`, `retry-reason` and
/// `retry-queue` always stay.
const DROPPABLE: [&str; 5] = [
    RETRY_ERROR_NAME,
    RETRY_FAILED_AT,
    RETRY_FIRST_FAILED_AT,
    RETRY_ORIGINAL_ROUTING_KEY,
    RETRY_ORIGINAL_EXCHANGE,
];

/// A header value the core writes.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    /// A signed 64-bit integer.
    Int(i64),
    /// A UTF-8 string.
    Str(String),
}

/// The bytes one header takes in a field table on the wire: the name with
/// its length byte, the type tag, and the value (a long-long int, or a long
/// string with its 4-byte length).
pub fn entry_size(name: &str, value: &HeaderValue) -> usize {
    1 + name.len()
        + 1
        + match value {
            HeaderValue::Int(_) => 8,
            HeaderValue::Str(s) => 4 + s.len(),
        }
}

fn total_size(headers: &[(&'static str, HeaderValue)]) -> usize {
    headers.iter().map(|(n, v)| entry_size(n, v)).sum()
}

/// Not even `retry-attempt`, `retry-reason` and `retry-queue` fit in the room
/// the frame leaves: the producer's headers fill it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom {
    /// The bytes the smallest set of headers needs.
    pub needed: usize,
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
    /// Bytes the frame leaves for these headers, once the properties and
    /// the headers kept from the message are counted.
    pub room: usize,
}

/// Builds the `retry-*` headers for a failure, in a fixed order, within
/// `input.room` bytes. When they do not fit, the stack is cut first, then the
/// error message; then the least useful headers go (see `DROPPABLE`). Fails
/// only when not even `retry-attempt`, `retry-reason` and `retry-queue` fit.
pub fn failure_headers(input: &FailureInput) -> Result<Vec<(&'static str, HeaderValue)>, NoRoom> {
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
        (
            RETRY_ERROR_STACK,
            HeaderValue::Str(cut_utf8(input.error_stack, FRAME_MAX - HEADER_HEADROOM)),
        ),
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
    // Both keep their first kilobyte while the other can give room; then
    // the stack goes before the message.
    for (text, floor) in [
        (RETRY_ERROR_STACK, KEPT_WHEN_SHORT),
        (RETRY_LAST_ERROR, KEPT_WHEN_SHORT),
        (RETRY_ERROR_STACK, 0),
        (RETRY_LAST_ERROR, 0),
    ] {
        shrink(&mut headers, text, input.room, floor);
    }
    for name in DROPPABLE {
        if total_size(&headers) <= input.room {
            break;
        }
        headers.retain(|(n, _)| *n != name);
    }
    let needed = total_size(&headers);
    if needed > input.room {
        return Err(NoRoom { needed });
    }
    Ok(headers)
}

/// How much of the stack and of the error message is kept while the other
/// can still be cut (see [`failure_headers`]).
const KEPT_WHEN_SHORT: usize = 1024;

/// Cuts the string header `name` so the headers fit in `room`, to no fewer
/// than `floor` bytes; removes it when not even the cut marker fits.
fn shrink(headers: &mut Vec<(&'static str, HeaderValue)>, name: &str, room: usize, floor: usize) {
    let total = total_size(headers);
    if total <= room {
        return;
    }
    let Some(at) = headers.iter().position(|(n, _)| *n == name) else {
        return;
    };
    let HeaderValue::Str(text) = &headers[at].1 else {
        return;
    };
    let others = total - entry_size(name, &headers[at].1);
    let empty = entry_size(name, &HeaderValue::Str(String::new()));
    let left = room
        .saturating_sub(others + empty)
        .max(floor.min(text.len()));
    if left >= text.len() {
        return;
    }
    let cut = cut_utf8(text, left);
    if cut.is_empty() {
        headers.remove(at);
    } else {
        headers[at].1 = HeaderValue::Str(cut);
    }
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
            room: FRAME_MAX,
        }
    }

    fn headers(i: &FailureInput) -> Vec<(&'static str, HeaderValue)> {
        failure_headers(i).expect("fits")
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

    #[test]
    fn first_hop() {
        let route = retry_route();
        let h = headers(&input(&route));
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
            let h = headers(&input(&route));
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
        let h = headers(&i);
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
        let h = headers(&i);
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
            assert_eq!(get_str(&headers(&i), RETRY_ERROR_NAME), want);
        }
        let mut i = input(&route);
        i.error_name = &long;
        let h = headers(&i);
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
        let h = headers(&i);
        let total = total_size(&h);
        assert!(total <= FRAME_MAX - HEADER_HEADROOM + 10_000, "{total}");
        assert!(get_str(&h, RETRY_LAST_ERROR).len() <= MAX_ERROR_MESSAGE_BYTES);
        let stack = get_str(&h, RETRY_ERROR_STACK);
        assert!(
            stack.len() > 100_000,
            "stack uses the room left: {}",
            stack.len()
        );
        assert!(stack.ends_with(" bytes]"));
    }

    #[test]
    fn every_header_counts_against_the_room() {
        let route = retry_route();
        let big = "x".repeat(1 << 20);
        let message = "m".repeat(6_000);
        for room in [100_000, 10_000, 4_000, 1_000, 500] {
            let mut i = input(&route);
            i.error_message = &message;
            i.error_stack = &big;
            i.room = room;
            let h = headers(&i);
            assert!(total_size(&h) <= room, "room {room}: {}", total_size(&h));
            assert_eq!(get(&h, RETRY_ATTEMPT), &HeaderValue::Int(1));
            assert_eq!(get_str(&h, RETRY_QUEUE), "orders");
        }
        // The stack is cut before the message is, down to its first kilobyte.
        let mut i = input(&route);
        i.error_message = &message;
        i.error_stack = &big;
        i.room = 7_600;
        let h = headers(&i);
        assert_eq!(get_str(&h, RETRY_LAST_ERROR), message);
        let stack = get_str(&h, RETRY_ERROR_STACK);
        assert!(
            stack.ends_with(" bytes]") && stack.len() > 1_000,
            "{}",
            stack.len()
        );
        // Then the message, down to its first kilobyte; both stay.
        i.room = 3_600;
        let h = headers(&i);
        let stack = get_str(&h, RETRY_ERROR_STACK);
        let msg = get_str(&h, RETRY_LAST_ERROR);
        assert!(
            stack.len() <= KEPT_WHEN_SHORT && stack.len() > 900,
            "{}",
            stack.len()
        );
        assert!(
            msg.len() > 1_000 && msg.ends_with(" bytes]"),
            "{}",
            msg.len()
        );
        // With less room than both floors, the stack gives way first.
        i.room = 1_800;
        let h = headers(&i);
        assert!(get_str(&h, RETRY_ERROR_STACK).len() < 1_000);
        assert!(get_str(&h, RETRY_LAST_ERROR).len() > 1_000);
        i.room = 1_200;
        let h = headers(&i);
        assert!(!h.iter().any(|(n, _)| *n == RETRY_ERROR_STACK));
        assert!(get_str(&h, RETRY_LAST_ERROR).len() > 500);
        // Then the message is cut, with a marker.
        i.room = 2_000;
        let h = headers(&i);
        assert!(get_str(&h, RETRY_LAST_ERROR).ends_with(" bytes]"));
        assert_eq!(get_str(&h, RETRY_ORIGINAL_EXCHANGE), "shop");
    }

    #[test]
    fn least_useful_headers_go_last() {
        let route = retry_route();
        let mut i = input(&route);
        i.room = 80;
        let h = headers(&i);
        let names: Vec<&str> = h.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, [RETRY_ATTEMPT, RETRY_REASON, RETRY_QUEUE]);
        assert!(total_size(&h) <= 80);
    }

    #[test]
    fn no_room_at_all() {
        let route = retry_route();
        for room in [0, 10, 60] {
            let mut i = input(&route);
            i.room = room;
            let err = failure_headers(&i).unwrap_err();
            assert!(err.needed > room, "{room}: {err:?}");
        }
    }

    #[test]
    fn own_headers_only() {
        for name in OWN_HEADERS {
            assert!(is_own_header(name), "{name}");
        }
        for name in [
            "retry-after",
            "retry-policy",
            "retry-count",
            RETRY_ORIGINAL_USER_ID,
            RETRY_DROPPED_HEADERS,
            "retry-replayed-at",
            "x-retry-attempt",
        ] {
            assert!(!is_own_header(name), "{name}");
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
