//! The copy's headers: the producer's kept while ours fit, the largest
//! dropped (and named) when they do not, and the copy parked then.

use super::*;
use crate::retry::delay::Delay;
use crate::retry::headers::tests::input_with_room as input;
use crate::retry::headers::RETRY_REASON;
use crate::retry::route::ParkReason;

fn retry_route() -> Route {
    Route::Retry {
        delay: Delay::from_millis(5_000).unwrap(),
        index: 0,
        next_attempt: 1,
    }
}

fn too_large() -> Route {
    Route::Park {
        reason: ParkReason::HeadersTooLarge,
        attempt: 0,
    }
}

fn producer(headers: &[(&str, usize)]) -> Vec<ProducerHeader> {
    headers
        .iter()
        .map(|&(name, size)| ProducerHeader {
            name: name.into(),
            size,
        })
        .collect()
}

/// The bytes every header of the copy takes: the producer's left, the list
/// of the dropped ones, and ours.
fn used(copy: &CopyHeaders, producer: &[ProducerHeader]) -> usize {
    let listed = copy.dropped_names.is_some();
    let kept: usize = producer
        .iter()
        .enumerate()
        .filter(|(i, h)| !(copy.dropped.contains(i) || listed && h.name == RETRY_DROPPED_HEADERS))
        .map(|(_, h)| h.size)
        .sum();
    let names = copy.dropped_names.as_ref().map_or(0, |n| {
        entry_size(RETRY_DROPPED_HEADERS, &HeaderValue::Str(n.clone()))
    });
    let ours: usize = copy.ours.iter().map(|(n, v)| entry_size(n, v)).sum();
    kept + names + ours
}

fn reason(copy: &CopyHeaders) -> &str {
    match copy.ours.iter().find(|(n, _)| *n == RETRY_REASON) {
        Some((_, HeaderValue::Str(s))) => s,
        _ => "",
    }
}

/// The producer's headers, the room for every header, what is dropped, the
/// list of it, and the route.
type Case<'a> = (
    &'a [(&'a str, usize)],
    usize,
    &'a [usize],
    Option<&'a str>,
    &'a Route,
);

#[test]
fn dropping_table() {
    let retry = retry_route();
    let park = too_large();
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // Room for all: nothing dropped, the route stands.
        (&[], 131_072, &[], None, &retry),
        (&[("a", 200), ("b", 300)], 131_072, &[], None, &retry),
        // The largest goes first, and the copy parks.
        (&[("a", 200), ("big", 10_400), ("c", 300)], 10_500, &[1], Some("big"), &park),
        // Then the next largest, while ours still do not fit.
        (&[("x", 6_000), ("y", 5_000), ("z", 100)], 5_150, &[0, 1], Some("x,y"), &park),
        // Of equal sizes, the last in the table's order.
        (&[("a", 5_000), ("b", 5_000)], 5_200, &[1], Some("b"), &park),
        // The producer's own list is replaced, never dropped nor counted.
        (&[("retry-dropped-headers", 9_000), ("big", 2_000)], 10_000, &[1], Some("big"), &park),
        // The producer's list counts while nothing is dropped.
        (&[("retry-dropped-headers", 200)], 131_072, &[], None, &retry),
    ];
    for (headers, room, dropped, names, route) in cases {
        let list = producer(headers);
        let copy = copy_headers(&input(&retry, room), &list, Some(&park));
        let what = format!("{headers:?} in {room}");
        assert_eq!(copy.dropped, dropped, "{what}");
        assert_eq!(copy.dropped_names.as_deref(), names, "{what}");
        assert_eq!(&copy.route, route, "{what}");
        assert_eq!(reason(&copy), route.reason(), "{what}");
        assert!(used(&copy, &list) <= room, "{what}: {}", used(&copy, &list));
    }
}

#[test]
fn without_room_for_ours_nor_anything_to_drop_the_copy_goes_as_it_is() {
    let retry = retry_route();
    let park = too_large();
    let copy = copy_headers(&input(&retry, 10), &[], Some(&park));
    assert_eq!(copy.route, retry);
    assert!(copy.ours.is_empty());
    assert!(copy.dropped.is_empty());
    // Only the producer's list is left, and it is never dropped.
    let list = producer(&[("retry-dropped-headers", 500)]);
    let copy = copy_headers(&input(&retry, 100), &list, Some(&park));
    assert_eq!((copy.route, copy.ours.len()), (retry, 0));
}

#[test]
fn without_a_route_for_too_large_headers_nothing_is_dropped() {
    let retry = retry_route();
    let list = producer(&[("big", 20_000)]);
    let copy = copy_headers(&input(&retry, 10_000), &list, None);
    assert_eq!(copy.route, retry);
    assert!(copy.ours.is_empty());
    assert!(copy.dropped.is_empty());
    assert_eq!(copy.dropped_names, None);
}
