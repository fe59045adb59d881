//! The verdict as a table: what was thrown, what is true of the delivery,
//! what the consumer was configured with, and where the delivery goes.

use super::*;
use crate::retry::BrokerDelay;

fn d(ms: u64) -> Delay {
    Delay::from_millis(ms).unwrap()
}

fn retry(ms: u64, index: usize) -> Verdict {
    Verdict::Route(Route::Retry {
        delay: d(ms),
        index,
        next_attempt: index as u32 + 1,
    })
}

fn table(next_attempt: u32) -> Verdict {
    Verdict::Route(Route::Table { next_attempt })
}

fn park(reason: ParkReason, attempt: u32) -> Verdict {
    Verdict::Route(Route::Park { reason, attempt })
}

const HANDLE: Verdict = Verdict::Handle {
    table_bound: false,
    parks: false,
};
const HANDLE_TABLE_BOUND: Verdict = Verdict::Handle {
    table_bound: true,
    parks: false,
};
/// Handled, and a retryable failure of this attempt parks: no retry is left.
const HANDLE_LAST: Verdict = Verdict::Handle {
    table_bound: false,
    parks: true,
};

fn at(attempt: u32) -> Facts {
    Facts {
        attempt,
        ..Facts::default()
    }
}

fn delivered(attempt: u32, count: Option<u64>) -> Facts {
    Facts {
        delivery_count: count,
        ..at(attempt)
    }
}

fn policy(
    delays: &[Delay],
    table_attempts: Option<u32>,
    delivery_limit: Option<u32>,
) -> Policy<'_> {
    Policy {
        delays,
        table_attempts,
        delivery_limit,
        broker_delay: None,
    }
}

#[test]
fn verdict_table() {
    use ParkReason as P;
    use Thrown::*;
    let three = &[d(5_000), d(60_000), d(600_000)][..];
    let two = &[d(5_000), d(60_000)][..];
    let none: &[Delay] = &[];
    let plain = |delays| policy(delays, None, None);
    let too_large = Facts {
        headers_too_large: true,
        ..at(2)
    };
    let refused = Facts {
        table_refused: true,
        ..at(2)
    };
    let undecodable = Facts {
        undecodable: true,
        ..at(1)
    };
    #[rustfmt::skip]
    let cases: Vec<(Option<Thrown>, Facts, Policy, Verdict)> = vec![
        // Retryable: the delays in order, then exhausted.
        (Some(Retryable), at(0), plain(none), park(P::Exhausted, 0)),
        (Some(Retryable), at(5), plain(none), park(P::Exhausted, 5)),
        (Some(Retryable), at(0), plain(three), retry(5_000, 0)),
        (Some(Retryable), at(1), plain(three), retry(60_000, 1)),
        (Some(Retryable), at(2), plain(three), retry(600_000, 2)),
        (Some(Retryable), at(3), plain(three), park(P::Exhausted, 3)),
        (Some(Retryable), at(4), plain(three), park(P::Exhausted, 4)),
        (Some(Retryable), at(1_000), plain(three), park(P::Exhausted, 1_000)),
        (Some(Retryable), at(u32::MAX), plain(three), park(P::Exhausted, u32::MAX)),
        // Not retryable: parked at once, delays or not.
        (Some(NonRetryable), at(0), plain(none), park(P::NonRetryable, 0)),
        (Some(NonRetryable), at(0), plain(three), park(P::NonRetryable, 0)),
        (Some(NonRetryable), at(2), plain(three), park(P::NonRetryable, 2)),
        (Some(NonRetryable), at(9), plain(three), park(P::NonRetryable, 9)),
        (Some(NonRetryable), at(u32::MAX), plain(three), park(P::NonRetryable, u32::MAX)),
        // No handler, a refused reply: parked at once with delays left.
        (Some(NoHandler), at(0), plain(three), park(P::NoHandler, 0)),
        (Some(ReplyRefused), at(1), plain(three), park(P::ReplyRefused, 1)),
        (Some(InboxRefused), at(0), plain(three), park(P::InboxRefused, 0)),
        (Some(NoHandler), at(0), policy(three, Some(3), None), park(P::NoHandler, 0)),
        // The delays first, then the table, then exhausted.
        (Some(Retryable), at(0), policy(two, Some(3), None), retry(5_000, 0)),
        (Some(Retryable), at(1), policy(two, Some(3), None), retry(60_000, 1)),
        (Some(Retryable), at(2), policy(two, Some(3), None), table(3)),
        (Some(Retryable), at(4), policy(two, Some(3), None), table(5)),
        (Some(Retryable), at(5), policy(two, Some(3), None), park(P::Exhausted, 5)),
        (Some(NonRetryable), at(0), policy(two, Some(3), None), park(P::NonRetryable, 0)),
        // The table alone.
        (Some(Retryable), at(0), policy(none, Some(1), None), table(1)),
        (Some(Retryable), at(1), policy(none, Some(1), None), park(P::Exhausted, 1)),
        (Some(Retryable), at(0), policy(none, Some(0), None), park(P::Exhausted, 0)),
        // Before the handler: handled, and told whether a retryable failure goes to the table.
        (None, at(0), plain(three), HANDLE),
        (None, at(3), plain(three), HANDLE_LAST),
        (None, at(1), policy(two, Some(3), None), HANDLE),
        (None, at(2), policy(two, Some(3), None), HANDLE_TABLE_BOUND),
        (None, at(5), policy(two, Some(3), None), HANDLE_LAST),
        // The delivery limit (quorum queues): parked without calling the handler again.
        (None, delivered(0, None), policy(three, None, Some(3)), HANDLE),
        (None, delivered(0, Some(0)), policy(three, None, Some(3)), HANDLE),
        (None, delivered(0, Some(2)), policy(three, None, Some(3)), HANDLE),
        (None, delivered(1, Some(3)), policy(three, None, Some(3)), park(P::DeliveryLimit, 1)),
        (None, delivered(0, Some(40)), policy(three, None, Some(3)), park(P::DeliveryLimit, 0)),
        (None, delivered(0, Some(0)), policy(three, None, Some(0)), park(P::DeliveryLimit, 0)),
        (None, delivered(0, None), policy(three, None, Some(0)), HANDLE),
        (None, delivered(0, Some(40)), plain(three), HANDLE),
        (Some(Retryable), delivered(0, Some(2)), policy(three, None, Some(3)), retry(5_000, 0)),
        // Undecodable: parked without calling the handler, whatever else holds.
        (None, undecodable, plain(three), park(P::Undecodable, 1)),
        (None, Facts { delivery_count: Some(9), ..undecodable }, policy(three, None, Some(3)), park(P::Undecodable, 1)),
        // Learned while moving it: parked, whatever was thrown.
        (Some(Retryable), refused, policy(two, Some(3), None), park(P::TableRefused, 2)),
        (Some(Retryable), too_large, policy(two, Some(3), None), park(P::HeadersTooLarge, 2)),
        (Some(NoHandler), too_large, plain(three), park(P::HeadersTooLarge, 2)),
        (Some(Retryable), Facts { table_refused: true, ..too_large }, plain(three), park(P::HeadersTooLarge, 2)),
        (None, Facts { undecodable: true, ..too_large }, plain(three), park(P::HeadersTooLarge, 2)),
        (None, Facts { delivery_count: Some(9), ..too_large }, policy(three, None, Some(3)), park(P::HeadersTooLarge, 2)),
    ];
    for (thrown, facts, policy, want) in cases {
        assert_eq!(
            verdict(thrown, &facts, &policy),
            want,
            "thrown {thrown:?}, {facts:?}, {} delays, table {:?}, limit {:?}",
            policy.delays.len(),
            policy.table_attempts,
            policy.delivery_limit,
        );
        // What the handler is told of a retryable failure is where one goes.
        if let Verdict::Handle { table_bound, parks } = verdict(None, &facts, &policy) {
            let next = verdict(Some(Retryable), &facts, &policy);
            assert_eq!(
                table_bound,
                matches!(next, Verdict::Route(Route::Table { .. })),
                "{facts:?}"
            );
            assert_eq!(
                parks,
                matches!(next, Verdict::Route(Route::Park { .. })),
                "{facts:?}"
            );
        }
    }
}

fn returned(ms: u64, next_attempt: u32) -> Verdict {
    Verdict::Route(Route::Return {
        delay: d(ms),
        next_attempt,
    })
}

#[test]
fn broker_delay_table() {
    use ParkReason as P;
    use Thrown::*;
    let b = BrokerDelay::parse("200ms", "600ms", 3).unwrap();
    // The delivery limit sits above the attempts (the spec sets attempts + 1).
    let bd = Policy {
        delays: &[],
        table_attempts: None,
        delivery_limit: Some(4),
        broker_delay: Some(b),
    };
    // `attempt` is the broker's x-delivery-count: failed deliveries so far.
    let n = |count: u32| delivered(count, Some(u64::from(count)));
    #[rustfmt::skip]
    let cases: Vec<(Option<Thrown>, Facts, Verdict)> = vec![
        // Back to the broker while fewer than `attempts` deliveries failed; the
        // delay is min × failures (this one counted), up to max.
        (Some(Retryable), delivered(0, None), returned(200, 1)),
        (Some(Retryable), n(1), returned(400, 2)),
        (Some(Retryable), n(2), returned(600, 3)),
        // Then parked, as exhausted, with the failures so far.
        (Some(Retryable), n(3), park(P::Exhausted, 3)),
        // Not retryable, no handler, a refused reply: parked at once.
        (Some(NonRetryable), delivered(0, None), park(P::NonRetryable, 0)),
        (Some(NonRetryable), n(2), park(P::NonRetryable, 2)),
        (Some(NoHandler), n(1), park(P::NoHandler, 1)),
        (Some(ReplyRefused), n(0), park(P::ReplyRefused, 0)),
        // Before the handler: handled, never table-bound; the last attempt parks.
        (None, n(0), HANDLE),
        (None, n(3), HANDLE_LAST),
        // Failed more often than the attempts allow (a crash counts too): parked
        // without calling the handler again.
        (None, n(4), park(P::DeliveryLimit, 4)),
        // Facts learned while moving it still park.
        (Some(Retryable), Facts { headers_too_large: true, ..n(1) }, park(P::HeadersTooLarge, 1)),
        (None, Facts { undecodable: true, ..n(0) }, park(P::Undecodable, 0)),
    ];
    for (thrown, facts, want) in cases {
        assert_eq!(verdict(thrown, &facts, &bd), want, "{thrown:?} {facts:?}");
    }
    let long = BrokerDelay::parse("5s", "5m", 200).unwrap();
    let p = Policy {
        delivery_limit: Some(201),
        broker_delay: Some(long),
        ..bd
    };
    assert_eq!(verdict(Some(Retryable), &n(59), &p), returned(300_000, 60));
    assert_eq!(
        verdict(Some(Retryable), &n(150), &p),
        returned(300_000, 151)
    );
}

#[test]
fn a_failure_always_routes() {
    let delays = [d(5_000)];
    for thrown in Thrown::ALL {
        for attempt in [0, 1, 2, u32::MAX] {
            for table_attempts in [None, Some(0), Some(2)] {
                for delivery_count in [None, Some(0), Some(7)] {
                    let policy = Policy {
                        delays: &delays,
                        table_attempts,
                        delivery_limit: Some(5),
                        broker_delay: None,
                    };
                    let facts = delivered(attempt, delivery_count);
                    assert!(
                        matches!(verdict(Some(thrown), &facts, &policy), Verdict::Route(_)),
                        "{thrown:?} {facts:?} {table_attempts:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn javascript_reports_five_kinds_by_name() {
    for thrown in Thrown::ALL {
        assert_eq!(Thrown::from_report(thrown.as_str()), Some(thrown));
    }
    assert_eq!(
        Thrown::ALL.map(Thrown::as_str),
        [
            "no-handler",
            "reply-refused",
            "inbox-refused",
            "non-retryable",
            "retryable"
        ]
    );
    for other in [
        "exhausted",
        "delivery-limit",
        "undecodable",
        "table-refused",
        "headers-too-large",
        "",
        "No-Handler",
        "retryable ",
    ] {
        assert_eq!(Thrown::from_report(other), None, "{other}");
    }
}

#[test]
fn consumer_timeouts_count_toward_the_delivery_limit() {
    use ParkReason as P;
    let delays = [d(5_000)];
    let limited = policy(&delays, None, Some(3));
    let timed = |count: Option<u64>, timeouts: u32| Facts {
        timeouts,
        ..delivered(0, count)
    };
    let handle = Verdict::Handle {
        table_bound: false,
        parks: false,
    };
    // Below the limit, counted together: to the handler.
    assert_eq!(verdict(None, &timed(None, 2), &limited), handle);
    assert_eq!(verdict(None, &timed(Some(1), 1), &limited), handle);
    // At it: parked, named for the timeout when timeouts made up the count.
    let parked = |reason| Verdict::Route(Route::Park { reason, attempt: 0 });
    assert_eq!(
        verdict(None, &timed(None, 3), &limited),
        parked(P::ConsumerTimeout)
    );
    assert_eq!(
        verdict(None, &timed(Some(2), 1), &limited),
        parked(P::ConsumerTimeout)
    );
    assert_eq!(
        verdict(None, &timed(Some(3), 1), &limited),
        parked(P::DeliveryLimit)
    );
    // Without a delivery limit, nothing bounds them here.
    assert_eq!(
        verdict(None, &timed(None, 9), &policy(&delays, None, None)),
        handle
    );
}
