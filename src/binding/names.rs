//! The names this library gives queues and headers, for JavaScript: the
//! TypeScript layer asks for them here rather than building them again.

use napi::Either;
use napi_derive::napi;

use super::convert::invalid;
use crate::amqp::parked::not_editable;
use crate::retry::delay::{parse_delay, Delay};
use crate::retry::headers::{
    RETRY_ATTEMPT, RETRY_DROPPED_HEADERS, RETRY_EDITED_AT, RETRY_EDITED_BY, RETRY_EDITS,
    RETRY_ERROR_NAME, RETRY_ERROR_STACK, RETRY_FAILED_AT, RETRY_FIRST_FAILED_AT, RETRY_LAST_ERROR,
    RETRY_ORIGINAL_EXCHANGE, RETRY_ORIGINAL_ROUTING_KEY, RETRY_ORIGINAL_USER_ID, RETRY_QUEUE,
    RETRY_REASON, RETRY_REPLAYED_AT,
};
use crate::retry::names::retry_queue_name as retry_of;
use crate::retry::names::{parked_queue_name as parked_of, queue_role as role_of, QueueRole};

/// A delay given as milliseconds or as text (`"5s"`); refused with
/// `INVALID_OPTIONS` when it is not a positive delay RabbitMQ can hold.
fn delay_of(delay: Either<f64, String>) -> napi::Result<Delay> {
    let text = match delay {
        Either::A(ms) if ms.is_finite() && ms > 0.0 && ms.fract() == 0.0 => format!("{ms:.0}"),
        Either::A(ms) => {
            return Err(invalid(format!(
                "delay is {ms}: a number of milliseconds must be a positive whole number"
            )))
        }
        Either::B(text) => text,
    };
    parse_delay(&text).map_err(|e| invalid(format!("delay: {e}")))
}

/// The label of a delay in queue names: its largest exact unit (`500ms`,
/// `5s`, `90s`, `1m`, `2h`).
#[napi]
pub(crate) fn delay_label(delay: Either<f64, String>) -> napi::Result<String> {
    Ok(delay_of(delay)?.label())
}

/// The retry queue of `queue` for `delay`: `<queue>.retry.<label>`.
#[napi]
pub(crate) fn retry_queue_name(queue: String, delay: Either<f64, String>) -> napi::Result<String> {
    Ok(retry_of(&queue, delay_of(delay)?))
}

/// The parked queue of `queue`: `<queue>.parked`.
#[napi]
pub(crate) fn parked_queue_name(queue: String) -> String {
    parked_of(&queue)
}

/// What a queue's name says it is.
#[napi(object)]
pub(crate) struct QueueNameRole {
    /// `retry`, `parked`, or `other` (a work queue's name among others).
    pub role: String,
    /// The work queue a retry or parked queue belongs to; the name itself otherwise.
    pub queue: String,
    /// A retry queue's delay label.
    pub delay: Option<String>,
}

/// Reads a queue's name as the library writes retry and parked queue names.
#[napi]
pub(crate) fn queue_role(name: String) -> QueueNameRole {
    let (role, queue, delay) = match role_of(&name) {
        QueueRole::Retry { queue, label } => ("retry", queue, Some(label.to_owned())),
        QueueRole::Parked { queue } => ("parked", queue, None),
        QueueRole::Other => ("other", name.as_str(), None),
    };
    QueueNameRole {
        role: role.into(),
        queue: queue.to_owned(),
        delay,
    }
}

/// The headers the library writes on a message it moves.
#[napi(object)]
pub(crate) struct HeaderNames {
    /// Failed attempts so far.
    pub attempt: String,
    /// `retry`, `retry-table`, or why it parked.
    pub reason: String,
    /// The latest error's message.
    pub last_error: String,
    /// The latest error's name.
    pub error_name: String,
    /// The latest error's stack.
    pub error_stack: String,
    /// When the latest failure happened.
    pub failed_at: String,
    /// When the first failure happened.
    pub first_failed_at: String,
    /// The exchange the message was first published to.
    pub original_exchange: String,
    /// The routing key it was first published with.
    pub original_routing_key: String,
    /// The work queue that failed it.
    pub queue: String,
    /// The `user-id` property of a message another user published.
    pub original_user_id: String,
    /// The producer's headers dropped to fit the frame.
    pub dropped_headers: String,
    /// When an operator sent it back from its parked queue.
    pub replayed_at: String,
    /// Who edited it last.
    pub edited_by: String,
    /// When it was edited last.
    pub edited_at: String,
    /// Every edit: a table each of `by`, `at` and `changed`, oldest first.
    pub edits: String,
}

/// The names of the headers the library writes.
#[napi]
pub(crate) fn header_names() -> HeaderNames {
    HeaderNames {
        attempt: RETRY_ATTEMPT.into(),
        reason: RETRY_REASON.into(),
        last_error: RETRY_LAST_ERROR.into(),
        error_name: RETRY_ERROR_NAME.into(),
        error_stack: RETRY_ERROR_STACK.into(),
        failed_at: RETRY_FAILED_AT.into(),
        first_failed_at: RETRY_FIRST_FAILED_AT.into(),
        original_exchange: RETRY_ORIGINAL_EXCHANGE.into(),
        original_routing_key: RETRY_ORIGINAL_ROUTING_KEY.into(),
        queue: RETRY_QUEUE.into(),
        original_user_id: RETRY_ORIGINAL_USER_ID.into(),
        dropped_headers: RETRY_DROPPED_HEADERS.into(),
        replayed_at: RETRY_REPLAYED_AT.into(),
        edited_by: RETRY_EDITED_BY.into(),
        edited_at: RETRY_EDITED_AT.into(),
        edits: RETRY_EDITS.into(),
    }
}

/// Why an operator's edit may not set or remove header `name` (a `retry-*`
/// header, the broker's dead-letter history, `CC`/`BCC`), or `null` when it may.
#[napi]
pub(crate) fn header_not_editable(name: String) -> Option<String> {
    not_editable(&name).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_as_numbers_and_text() {
        let label = |d| delay_label(d).map_err(|e| e.reason.clone());
        assert_eq!(label(Either::A(500.0)), Ok("500ms".into()));
        assert_eq!(label(Either::A(90_000.0)), Ok("90s".into()));
        assert_eq!(label(Either::B("120m".into())), Ok("2h".into()));
        assert_eq!(label(Either::B("1500".into())), Ok("1500ms".into()));
        for bad in [0.0, -5.0, 1.5, f64::NAN, f64::INFINITY, 1e300] {
            assert!(
                label(Either::A(bad))
                    .unwrap_err()
                    .starts_with("[INVALID_OPTIONS] delay"),
                "{bad}"
            );
        }
        for bad in ["5d", "0s", ""] {
            assert!(label(Either::B(bad.into())).is_err(), "{bad}");
        }
        assert_eq!(
            retry_queue_name("orders".into(), Either::A(60_000.0)).unwrap(),
            "orders.retry.1m"
        );
        assert_eq!(parked_queue_name("orders".into()), "orders.parked");
    }

    #[test]
    fn roles_as_javascript_reads_them() {
        let r = queue_role("orders.retry.5s".into());
        assert_eq!((r.role.as_str(), r.queue.as_str()), ("retry", "orders"));
        assert_eq!(r.delay.as_deref(), Some("5s"));
        let r = queue_role("orders.parked".into());
        assert_eq!(
            (r.role.as_str(), r.queue.as_str(), r.delay),
            ("parked", "orders", None)
        );
        let r = queue_role("orders".into());
        assert_eq!(
            (r.role.as_str(), r.queue.as_str(), r.delay),
            ("other", "orders", None)
        );
    }

    #[test]
    fn header_names_are_the_ones_written() {
        let h = header_names();
        assert_eq!(h.attempt, "retry-attempt");
        assert_eq!(h.failed_at, "retry-failed-at");
        assert_eq!(h.original_user_id, "retry-original-user-id");
    }
}
