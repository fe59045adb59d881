//! The failure verdict: where a delivery goes (its handler, a retry queue,
//! the retry table or the parked queue, and why it parks), decided in one
//! place from what the handler threw, as JavaScript reports it, and from
//! what is true of the delivery. Every other part of the consumer asks
//! [`verdict`] and does what it says.

use super::broker_delay::BrokerDelay;
use super::delay::Delay;
use super::route::{ParkReason, Route};

/// What a handler threw, as JavaScript reports it (the `kind` of a failure
/// it settles). JavaScript only reports; the verdict decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Thrown {
    /// A `NoHandlerError`: no handler takes the message (a pattern nobody
    /// handles).
    NoHandler,
    /// A `ReplyRefusedError`: the broker refused the reply to the request
    /// (its `reply-to`), as it would on every other attempt.
    ReplyRefused,
    /// An `InboxRefusedError`: the inbox's database refused what the message
    /// holds (its key), as it would on every other attempt.
    InboxRefused,
    /// A `NonRetryableError`, or the `retryable` predicate answered no (or
    /// gave no boolean answer).
    NonRetryable,
    /// The `retryable` predicate answered yes.
    Retryable,
}

impl Thrown {
    /// Every kind, in the order JavaScript checks for them.
    pub(crate) const ALL: [Thrown; 5] = [
        Thrown::NoHandler,
        Thrown::ReplyRefused,
        Thrown::InboxRefused,
        Thrown::NonRetryable,
        Thrown::Retryable,
    ];

    /// Its name in a failure's report (`FailureInfo.kind`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Thrown::NoHandler => "no-handler",
            Thrown::ReplyRefused => "reply-refused",
            Thrown::InboxRefused => "inbox-refused",
            Thrown::NonRetryable => "non-retryable",
            Thrown::Retryable => "retryable",
        }
    }

    /// The kind a report names; `None` for a name JavaScript never sends.
    pub(crate) fn from_report(kind: &str) -> Option<Thrown> {
        Thrown::ALL.into_iter().find(|t| t.as_str() == kind)
    }
}

/// What a consumer was configured with, as far as the verdict cares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy<'a> {
    /// The delays of the retry queues, in order.
    pub delays: &'a [Delay],
    /// Attempts through the retry table after the delays; `None`: no table.
    pub table_attempts: Option<u32>,
    /// Quorum queues: the deliveries of one message after which it parks
    /// without reaching its handler again.
    pub delivery_limit: Option<u32>,
    /// The broker's own delayed retry, instead of `delays` and the table.
    pub broker_delay: Option<BrokerDelay>,
}

/// What is true of one delivery, as far as the verdict cares. The last two
/// are learned while moving a failed message, and park it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Earlier failed attempts (`retry-attempt`, or counted from `x-death`;
    /// with `brokerDelay`, the broker's `x-delivery-count`).
    pub attempt: u32,
    /// The broker's `x-delivery-count` (quorum queues: 0 or absent on the
    /// first delivery).
    pub delivery_count: Option<u64>,
    /// How often the broker took the message back from a handler that
    /// outlived the consumer timeout, as the consumer counted it (RabbitMQ
    /// 4.3 leaves it out of `x-delivery-count`).
    pub timeouts: u32,
    /// A short string of the message (a header name, a property such as
    /// `message-id`, the routing key) is not UTF-8.
    pub undecodable: bool,
    /// The producer's headers leave no room in the frame for the `retry-*`
    /// headers.
    pub headers_too_large: bool,
    /// The retry table cannot store the message (a value PostgreSQL refuses,
    /// or one over its limits).
    pub table_refused: bool,
}

/// Where a delivery goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// To its handler: nothing keeps it from there and the handler has not
    /// run yet.
    Handle {
        /// Whether a retryable failure of this attempt goes to the retry
        /// table, so JavaScript knows to ask `onFailure.table` about the row.
        table_bound: bool,
        /// Whether a retryable failure of this attempt parks (no retry is
        /// left), so JavaScript knows to read the error's stack for the copy.
        parks: bool,
    },
    /// Out of the work queue: to a retry queue, the retry table or the
    /// parked queue.
    Route(Route),
}

/// The verdict on a delivery: `thrown` is what its handler threw, as
/// JavaScript reports it, or `None` when the handler has not run.
///
/// In order, the first that holds decides:
/// 1. headers too large for the frame: park as `headers-too-large`;
/// 2. the retry table refused it: park as `table-refused`;
/// 3. undecodable: park as `undecodable`, without calling the handler;
/// 4. delivered `delivery_limit` times already: park as `delivery-limit`,
///    without calling the handler again (it most likely crashes on it); or
///    as `consumer-timeout` when the consumer timeouts the consumer counted
///    make up the rest;
/// 5. the handler has not run: to the handler;
/// 6. no handler, reply refused, inbox refused, not retryable: park as
///    `no-handler`, `reply-refused`, `inbox-refused`, `non-retryable`,
///    whatever the delays;
/// 7. retryable: the next delay while there is one, then the retry table
///    for up to `table_attempts` more attempts, then park as `exhausted`;
///    with `broker_delay`, back to the broker while fewer than its
///    `attempts` deliveries failed, then park as `exhausted`.
pub(crate) fn verdict(thrown: Option<Thrown>, facts: &Facts, policy: &Policy) -> Verdict {
    let park = |reason| {
        Verdict::Route(Route::Park {
            reason,
            attempt: facts.attempt,
        })
    };
    if facts.headers_too_large {
        return park(ParkReason::HeadersTooLarge);
    }
    if facts.table_refused {
        return park(ParkReason::TableRefused);
    }
    if facts.undecodable {
        return park(ParkReason::Undecodable);
    }
    if policy
        .delivery_limit
        .is_some_and(|limit| exceeds_delivery_limit(facts.delivery_count, limit))
    {
        return park(ParkReason::DeliveryLimit);
    }
    if policy
        .delivery_limit
        .is_some_and(|limit| facts.timeouts > 0 && deliveries(facts) >= u64::from(limit))
    {
        return park(ParkReason::ConsumerTimeout);
    }
    match thrown {
        None => {
            let next = retried(facts.attempt, policy);
            Verdict::Handle {
                table_bound: matches!(next, Route::Table { .. }),
                parks: matches!(next, Route::Park { .. }),
            }
        }
        Some(Thrown::NoHandler) => park(ParkReason::NoHandler),
        Some(Thrown::ReplyRefused) => park(ParkReason::ReplyRefused),
        Some(Thrown::InboxRefused) => park(ParkReason::InboxRefused),
        Some(Thrown::NonRetryable) => park(ParkReason::NonRetryable),
        Some(Thrown::Retryable) => Verdict::Route(retried(facts.attempt, policy)),
    }
}

/// Whether the broker's delivery count shows the message was delivered
/// `limit` times already without being settled: the handler thus runs at
/// most `limit` times for one message.
fn exceeds_delivery_limit(delivery_count: Option<u64>, limit: u32) -> bool {
    delivery_count.is_some_and(|c| c >= u64::from(limit))
}

/// The deliveries of the message before this one that were never settled:
/// the broker's count and the consumer timeouts it left out of it.
fn deliveries(facts: &Facts) -> u64 {
    facts
        .delivery_count
        .unwrap_or(0)
        .saturating_add(u64::from(facts.timeouts))
}

/// Where a retryable failure after `attempt` earlier failed attempts goes:
/// the delays first, then the retry table, then the parked queue.
fn retried(attempt: u32, policy: &Policy) -> Route {
    if let Some(b) = policy.broker_delay {
        let next_attempt = attempt.saturating_add(1);
        return if attempt < b.attempts {
            Route::Return {
                delay: b.delay_after(next_attempt),
                next_attempt,
            }
        } else {
            Route::Park {
                reason: ParkReason::Exhausted,
                attempt,
            }
        };
    }
    let index = usize::try_from(attempt).unwrap_or(usize::MAX);
    if let Some(&delay) = policy.delays.get(index) {
        return Route::Retry {
            delay,
            index,
            next_attempt: attempt.saturating_add(1),
        };
    }
    match policy.table_attempts {
        Some(max) if u64::from(attempt) < policy.delays.len() as u64 + u64::from(max) => {
            Route::Table {
                next_attempt: attempt.saturating_add(1),
            }
        }
        _ => Route::Park {
            reason: ParkReason::Exhausted,
            attempt,
        },
    }
}

#[cfg(test)]
mod tests;
