//! The failure headers: what they say, and that they fit the frame.

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

/// The failure every test here starts from: a `TypeError` of a delivery of
/// `shop`/`order.created` from `orders`, with the whole frame as room.
pub(crate) fn input(route: &Route) -> FailureInput<'_> {
    input_with_room(route, FRAME_MAX)
}

/// [`input`] with `room` bytes left for the headers.
pub(crate) fn input_with_room(route: &Route, room: usize) -> FailureInput<'_> {
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
        room,
        minimal: false,
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
        ("x-acquired-count", true),
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

#[test]
fn a_minimal_retried_copy_carries_what_counting_and_parking_need_and_a_stack_only_when_read() {
    let retry = retry_route();
    let names = |i: &FailureInput| headers(i).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    let without_stack = FailureInput {
        minimal: true,
        error_stack: "",
        ..input(&retry)
    };
    assert_eq!(
        names(&without_stack),
        vec![
            RETRY_ATTEMPT,
            RETRY_LAST_ERROR,
            RETRY_FIRST_FAILED_AT,
            RETRY_ORIGINAL_EXCHANGE,
            RETRY_ORIGINAL_ROUTING_KEY
        ]
    );
    let with_stack = FailureInput {
        minimal: true,
        ..input(&retry)
    };
    assert!(names(&with_stack).contains(&RETRY_ERROR_STACK));
    // A copy that parks carries every header, minimal or not.
    let park = Route::Park {
        reason: ParkReason::Exhausted,
        attempt: 3,
    };
    let parked = FailureInput {
        minimal: true,
        ..input(&park)
    };
    assert_eq!(names(&parked), names(&input(&park)));
    assert_eq!(names(&input(&retry)).len(), 10);
}
