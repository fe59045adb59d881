//! Deciding where a failed message goes next.

use super::delay::Delay;

/// Why a message is parked instead of retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParkReason {
    /// The handler said the failure will not go away by retrying.
    NonRetryable,
    /// Every configured delay has been used.
    Exhausted,
    /// The broker delivered the message more often than allowed without it
    /// ever being settled: the consumer most likely crashes on it.
    DeliveryLimit,
    /// A short string of the message (a header name, a property such as
    /// `message-id`, the routing key) is not UTF-8: parked as it came,
    /// without calling the handler.
    Undecodable,
    /// The producer's headers leave no room in the frame for the `retry-*`
    /// headers: parked, with the largest of them dropped and named.
    HeadersTooLarge,
    /// No handler takes the message (a pattern nobody handles): JavaScript
    /// parks it at once, whatever the delays.
    NoHandler,
    /// The broker refused the reply to the request (its `reply-to`, a
    /// property): JavaScript parks it at once, since every other attempt
    /// would be refused alike.
    ReplyRefused,
    /// The retry table cannot store the message (a value PostgreSQL refuses,
    /// or one over its limits): parked instead of left unacked, where it
    /// would come back and be refused again.
    TableRefused,
}

impl ParkReason {
    /// The value written to the `retry-reason` header.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            ParkReason::NonRetryable => "non-retryable",
            ParkReason::Exhausted => "exhausted",
            ParkReason::DeliveryLimit => "delivery-limit",
            ParkReason::Undecodable => "undecodable",
            ParkReason::HeadersTooLarge => "headers-too-large",
            ParkReason::NoHandler => "no-handler",
            ParkReason::ReplyRefused => "reply-refused",
            ParkReason::TableRefused => "table-refused",
        }
    }

    /// The reason JavaScript may ask a failure to park with, by its header
    /// value; `None` for every other value (the other reasons are the
    /// consumer's own to decide).
    pub(crate) fn requested(value: &str) -> Option<ParkReason> {
        match value {
            "no-handler" => Some(ParkReason::NoHandler),
            "reply-refused" => Some(ParkReason::ReplyRefused),
            _ => None,
        }
    }
}

/// Where a failed message goes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// Publish to the retry queue for `delay`.
    Retry {
        /// How long the message waits before coming back.
        delay: Delay,
        /// Position of `delay` in the configured list.
        index: usize,
        /// The attempt count to record on the republished message.
        next_attempt: u32,
    },
    /// Store in the retry table, to be published again when its row is due.
    Table {
        /// The attempt count to record on the stored message.
        next_attempt: u32,
    },
    /// Publish to the parked queue for a person to look at.
    Park {
        /// Why the message is parked.
        reason: ParkReason,
        /// The number of earlier failed attempts.
        attempt: u32,
    },
}

impl Route {
    /// The `retry-reason` of a copy sent to a retry queue.
    pub(crate) const RETRY_REASON: &'static str = "retry";
    /// The `retry-reason` of a message stored in the retry table.
    pub(crate) const TABLE_REASON: &'static str = "retry-table";

    /// The value written to the `retry-reason` header.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Route::Retry { .. } => Self::RETRY_REASON,
            Route::Table { .. } => Self::TABLE_REASON,
            Route::Park { reason, .. } => reason.as_str(),
        }
    }

    /// The value written to the `retry-attempt` header.
    pub(crate) fn attempt_header(&self) -> u32 {
        match *self {
            Route::Retry { next_attempt, .. } => next_attempt,
            Route::Table { next_attempt } => next_attempt,
            Route::Park { attempt, .. } => attempt,
        }
    }
}

/// Whether a delivery must be parked without calling the handler: the broker's
/// delivery count (`x-delivery-count` of quorum queues: 0 or absent on the
/// first delivery) shows it was delivered `limit` times already without being
/// settled. The handler thus runs at most `limit` times for one message.
pub(crate) fn exceeds_delivery_limit(delivery_count: Option<u64>, limit: u32) -> bool {
    delivery_count.is_some_and(|c| c >= u64::from(limit))
}

/// Routes a failure when a retry table follows the retry queues: the delays
/// first, then up to `table_attempts` more attempts through the table, then
/// the parked queue. Without a table this is [`route_failure`].
pub(crate) fn route_failure_with_table(
    attempt: u32,
    delays: &[Delay],
    retryable: bool,
    table_attempts: Option<u32>,
) -> Route {
    let route = route_failure(attempt, delays, retryable);
    match (route, table_attempts) {
        (
            Route::Park {
                reason: ParkReason::Exhausted,
                ..
            },
            Some(max),
        ) if u64::from(attempt) < delays.len() as u64 + u64::from(max) => Route::Table {
            next_attempt: attempt.saturating_add(1),
        },
        (route, _) => route,
    }
}

/// Routes a failure after `attempt` earlier failed attempts: non-retryable
/// failures park at once, retryable ones take the next delay until the list
/// runs out.
pub(crate) fn route_failure(attempt: u32, delays: &[Delay], retryable: bool) -> Route {
    if !retryable {
        return Route::Park {
            reason: ParkReason::NonRetryable,
            attempt,
        };
    }
    let index = usize::try_from(attempt).unwrap_or(usize::MAX);
    match delays.get(index) {
        Some(&delay) => Route::Retry {
            delay,
            index,
            next_attempt: attempt.saturating_add(1),
        },
        None => Route::Park {
            reason: ParkReason::Exhausted,
            attempt,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ms: u64) -> Delay {
        Delay::from_millis(ms).unwrap()
    }

    fn retry(ms: u64, index: usize) -> Route {
        Route::Retry {
            delay: d(ms),
            index,
            next_attempt: index as u32 + 1,
        }
    }

    fn park(reason: ParkReason, attempt: u32) -> Route {
        Route::Park { reason, attempt }
    }

    #[test]
    fn outcome_table() {
        use ParkReason::*;
        let three = [d(5_000), d(60_000), d(600_000)];
        let cases: Vec<(u32, &[Delay], bool, Route)> = vec![
            (0, &[], true, park(Exhausted, 0)),
            (0, &[], false, park(NonRetryable, 0)),
            (5, &[], true, park(Exhausted, 5)),
            (0, &three, true, retry(5_000, 0)),
            (1, &three, true, retry(60_000, 1)),
            (2, &three, true, retry(600_000, 2)),
            (3, &three, true, park(Exhausted, 3)),
            (4, &three, true, park(Exhausted, 4)),
            (1_000, &three, true, park(Exhausted, 1_000)),
            (u32::MAX, &three, true, park(Exhausted, u32::MAX)),
            (0, &three, false, park(NonRetryable, 0)),
            (2, &three, false, park(NonRetryable, 2)),
            (9, &three, false, park(NonRetryable, 9)),
            (u32::MAX, &three, false, park(NonRetryable, u32::MAX)),
        ];
        for (attempt, delays, retryable, want) in cases {
            assert_eq!(
                route_failure(attempt, delays, retryable),
                want,
                "attempt {attempt}, {} delays, retryable {retryable}",
                delays.len()
            );
        }
    }

    #[test]
    fn header_values() {
        let cases = [
            (retry(5_000, 0), "retry", 1),
            (retry(60_000, 1), "retry", 2),
            (park(ParkReason::Exhausted, 3), "exhausted", 3),
            (park(ParkReason::NonRetryable, 0), "non-retryable", 0),
        ];
        for (route, reason, attempt) in cases {
            assert_eq!(route.reason(), reason, "{route:?}");
            assert_eq!(route.attempt_header(), attempt, "{route:?}");
        }
        assert_eq!(ParkReason::Exhausted.as_str(), "exhausted");
        assert_eq!(ParkReason::NonRetryable.as_str(), "non-retryable");
        assert_eq!(ParkReason::NoHandler.as_str(), "no-handler");
    }

    #[test]
    fn javascript_may_ask_for_no_handler_and_reply_refused_only() {
        assert_eq!(
            ParkReason::requested("no-handler"),
            Some(ParkReason::NoHandler)
        );
        assert_eq!(
            ParkReason::requested("reply-refused"),
            Some(ParkReason::ReplyRefused)
        );
        assert_eq!(ParkReason::TableRefused.as_str(), "table-refused");
        for other in [
            "exhausted",
            "non-retryable",
            "delivery-limit",
            "undecodable",
            "table-refused",
            "",
            "No-Handler",
        ] {
            assert_eq!(ParkReason::requested(other), None, "{other}");
        }
    }
}

#[cfg(test)]
mod delivery_limit_tests {
    use super::*;

    #[test]
    fn parks_only_once_the_limit_is_reached() {
        let cases = [
            (None, 3, false),
            (Some(0), 3, false),
            (Some(2), 3, false),
            (Some(3), 3, true),
            (Some(40), 3, true),
            (Some(0), 0, true),
            (None, 0, false),
        ];
        for (count, limit, want) in cases {
            assert_eq!(
                exceeds_delivery_limit(count, limit),
                want,
                "{count:?} {limit}"
            );
        }
        assert_eq!(ParkReason::DeliveryLimit.as_str(), "delivery-limit");
    }
}

#[cfg(test)]
mod table_route_tests {
    use super::*;

    fn d(ms: u64) -> Delay {
        Delay::from_millis(ms).unwrap()
    }

    #[test]
    fn delays_first_then_the_table_then_parked() {
        let delays = [d(5000), d(60_000)];
        let table = |n| route_failure_with_table(n, &delays, true, Some(3));
        assert!(matches!(table(0), Route::Retry { index: 0, .. }));
        assert!(matches!(table(1), Route::Retry { index: 1, .. }));
        assert_eq!(table(2), Route::Table { next_attempt: 3 });
        assert_eq!(table(4), Route::Table { next_attempt: 5 });
        assert_eq!(
            table(5),
            Route::Park {
                reason: ParkReason::Exhausted,
                attempt: 5
            }
        );
        // Not retryable parks at once, table or not.
        assert_eq!(
            route_failure_with_table(0, &delays, false, Some(3)),
            Route::Park {
                reason: ParkReason::NonRetryable,
                attempt: 0
            }
        );
        // The table alone.
        assert_eq!(
            route_failure_with_table(0, &[], true, Some(1)),
            Route::Table { next_attempt: 1 }
        );
        assert!(matches!(
            route_failure_with_table(1, &[], true, Some(1)),
            Route::Park { .. }
        ));
        // No table: as route_failure.
        assert_eq!(
            route_failure_with_table(2, &delays, true, None),
            route_failure(2, &delays, true)
        );
        assert_eq!(Route::Table { next_attempt: 1 }.reason(), "retry-table");
        assert_eq!(Route::Table { next_attempt: 7 }.attempt_header(), 7);
    }
}
