//! Where a failed message goes next, and why it parks: the answers of
//! [`verdict`](super::verdict::verdict), and what they write in the
//! `retry-reason` and `retry-attempt` headers.

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
    /// No handler takes the message (a pattern nobody handles): parked at
    /// once, whatever the delays.
    NoHandler,
    /// The broker refused the reply to the request (its `reply-to`, a
    /// property): parked at once, since every other attempt would be
    /// refused alike.
    ReplyRefused,
    /// The retry table cannot store the message (a value PostgreSQL refuses,
    /// or one over its limits): parked instead of left unacked, where it
    /// would come back and be refused again.
    TableRefused,
    /// The inbox's database refused what the message holds (its key: a NUL,
    /// a size over the index's limit): parked at once, since every other
    /// attempt would be refused alike.
    InboxRefused,
    /// The broker took the message back from a handler that outlived
    /// `consumerTimeoutMs` as often as `deliveryLimit` allows: parked without
    /// calling the handler again.
    ConsumerTimeout,
}

impl ParkReason {
    /// Every reason, in the order the docs list them (for the TypeScript
    /// contract, `binding::contract`).
    #[cfg(test)]
    pub(crate) const ALL: [ParkReason; 10] = [
        ParkReason::Exhausted,
        ParkReason::NonRetryable,
        ParkReason::NoHandler,
        ParkReason::DeliveryLimit,
        ParkReason::ConsumerTimeout,
        ParkReason::Undecodable,
        ParkReason::HeadersTooLarge,
        ParkReason::ReplyRefused,
        ParkReason::TableRefused,
        ParkReason::InboxRefused,
    ];

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
            ParkReason::InboxRefused => "inbox-refused",
            ParkReason::ConsumerTimeout => "consumer-timeout",
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
    /// Back to the broker (`basic.reject` with requeue), which holds it for
    /// `delay` before delivering it again (`onFailure.brokerDelay`).
    Return {
        /// The delay the broker applies: `min × failures`, up to `max`.
        delay: Delay,
        /// The failed deliveries once this one is counted.
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
            Route::Retry { .. } | Route::Return { .. } => Self::RETRY_REASON,
            Route::Table { .. } => Self::TABLE_REASON,
            Route::Park { reason, .. } => reason.as_str(),
        }
    }

    /// The value written to the `retry-attempt` header.
    pub(crate) fn attempt_header(&self) -> u32 {
        match *self {
            Route::Retry { next_attempt, .. } | Route::Return { next_attempt, .. } => next_attempt,
            Route::Table { next_attempt } => next_attempt,
            Route::Park { attempt, .. } => attempt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::retry::delay::Delay;

    fn retry(ms: u64, index: usize) -> Route {
        Route::Retry {
            delay: Delay::from_millis(ms).unwrap(),
            index,
            next_attempt: index as u32 + 1,
        }
    }

    fn park(reason: ParkReason, attempt: u32) -> Route {
        Route::Park { reason, attempt }
    }

    #[test]
    fn header_values() {
        let cases = [
            (retry(5_000, 0), "retry", 1),
            (retry(60_000, 1), "retry", 2),
            (park(ParkReason::Exhausted, 3), "exhausted", 3),
            (park(ParkReason::NonRetryable, 0), "non-retryable", 0),
            (Route::Table { next_attempt: 1 }, "retry-table", 1),
            (Route::Table { next_attempt: 7 }, "retry-table", 7),
        ];
        for (route, reason, attempt) in cases {
            assert_eq!(route.reason(), reason, "{route:?}");
            assert_eq!(route.attempt_header(), attempt, "{route:?}");
        }
        use ParkReason::*;
        let reasons = [
            (NonRetryable, "non-retryable"),
            (Exhausted, "exhausted"),
            (DeliveryLimit, "delivery-limit"),
            (Undecodable, "undecodable"),
            (HeadersTooLarge, "headers-too-large"),
            (NoHandler, "no-handler"),
            (ReplyRefused, "reply-refused"),
            (TableRefused, "table-refused"),
            (InboxRefused, "inbox-refused"),
            (ConsumerTimeout, "consumer-timeout"),
        ];
        for (reason, header) in reasons {
            assert_eq!(reason.as_str(), header);
        }
    }
}
