//! The `retry-*` headers written on a republished message, kept small
//! enough that the message still fits in one AMQP frame.

use super::route::Route;
use super::time::iso8601_utc;

/// RabbitMQ's default frame_max; the content header (properties and every
/// header) must fit in one frame.
pub(crate) const FRAME_MAX: usize = 131_072;
/// The stack never takes more than the frame less this much (spring-amqp
/// keeps the same 20,000 bytes spare).
pub(crate) const HEADER_HEADROOM: usize = 20_000;
/// The longest error message stored in `retry-last-error`.
pub(crate) const MAX_ERROR_MESSAGE_BYTES: usize = 8 * 1024;
/// The longest error name stored in `retry-error-name`.
pub(crate) const MAX_ERROR_NAME_BYTES: usize = 200;

/// Header: the number of failed attempts so far.
pub(crate) const RETRY_ATTEMPT: &str = "retry-attempt";
/// Header: "retry", "exhausted" or "non-retryable".
pub(crate) const RETRY_REASON: &str = "retry-reason";
/// Header: the latest error message.
pub(crate) const RETRY_LAST_ERROR: &str = "retry-last-error";
/// Header: the latest error's type name.
pub(crate) const RETRY_ERROR_NAME: &str = "retry-error-name";
/// Header: the latest error's stack trace, cut to fit the frame.
pub(crate) const RETRY_ERROR_STACK: &str = "retry-error-stack";
/// Header: when the latest failure happened.
pub(crate) const RETRY_FAILED_AT: &str = "retry-failed-at";
/// Header: when the first failure happened.
pub(crate) const RETRY_FIRST_FAILED_AT: &str = "retry-first-failed-at";
/// Header: the exchange the message was first published to.
pub(crate) const RETRY_ORIGINAL_EXCHANGE: &str = "retry-original-exchange";
/// Header: the routing key the message was first published with.
pub(crate) const RETRY_ORIGINAL_ROUTING_KEY: &str = "retry-original-routing-key";
/// Header: the work queue that failed the message.
pub(crate) const RETRY_QUEUE: &str = "retry-queue";
/// Header: the `user-id` property of a message published by another user,
/// moved here because the broker refuses a publish whose `user-id` is not the
/// publishing connection's user.
pub(crate) const RETRY_ORIGINAL_USER_ID: &str = "retry-original-user-id";
/// Header: the names of the producer's headers that were dropped because the
/// message could not fit in one frame with them.
pub(crate) const RETRY_DROPPED_HEADERS: &str = "retry-dropped-headers";
/// Header: when an operator sent the message back from its parked queue.
pub(crate) const RETRY_REPLAYED_AT: &str = "retry-replayed-at";
/// Header: who edited the message last, as the edit named them.
pub(crate) const RETRY_EDITED_BY: &str = "retry-edited-by";
/// Header: when the message was edited last.
pub(crate) const RETRY_EDITED_AT: &str = "retry-edited-at";
/// Header: every edit of the message, oldest first: a table each of `by`,
/// `at` and `changed` (`body`, `header <name>`).
pub(crate) const RETRY_EDITS: &str = "retry-edits";

/// The headers [`failure_headers`] writes. A republish replaces these and
/// keeps every other header, `retry-*` ones of the producer's included.
pub(crate) const OWN_HEADERS: [&str; 10] = [
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
pub(crate) fn is_own_header(name: &str) -> bool {
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
pub(crate) enum HeaderValue {
    /// A signed 64-bit integer.
    Int(i64),
    /// A UTF-8 string.
    Str(String),
}

/// The bytes one header takes in a field table on the wire: the name with
/// its length byte, the type tag, and the value (a long-long int, or a long
/// string with its 4-byte length).
pub(crate) fn entry_size(name: &str, value: &HeaderValue) -> usize {
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
pub(crate) struct NoRoom {
    /// The bytes the smallest set of headers needs.
    pub needed: usize,
}

/// What is known about one failure, for building its headers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailureInput<'a> {
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
    /// A copy bound for a retry queue carries only [`RETRY_COPY_HEADERS`]
    /// (and the stack when there is one): `onFailure.retryHeaders: 'minimal'`.
    pub minimal: bool,
}

/// What a retried copy carries with `onFailure.retryHeaders: 'minimal'`:
/// what counting its attempts and parking it later need, and the error. The
/// parked copy gets every header, written anew when it parks.
pub(crate) const RETRY_COPY_HEADERS: [&str; 5] = [
    RETRY_ATTEMPT,
    RETRY_LAST_ERROR,
    RETRY_FIRST_FAILED_AT,
    RETRY_ORIGINAL_EXCHANGE,
    RETRY_ORIGINAL_ROUTING_KEY,
];

/// Builds the `retry-*` headers for a failure, in a fixed order, within
/// `input.room` bytes. When they do not fit, the stack is cut first, then the
/// error message; then the least useful headers go (see `DROPPABLE`). Fails
/// only when not even `retry-attempt`, `retry-reason` and `retry-queue` fit.
pub(crate) fn failure_headers(
    input: &FailureInput,
) -> Result<Vec<(&'static str, HeaderValue)>, NoRoom> {
    // A retried copy with `retryHeaders: 'minimal'` gets only what counting
    // and parking need: the others are not even made.
    let minimal = input.minimal && matches!(input.route, Route::Retry { .. });
    let wanted = |name: &str| !minimal || RETRY_COPY_HEADERS.contains(&name);
    let failed_at = || iso8601_utc(input.now_ms);
    let str_value = |s: &str| HeaderValue::Str(s.to_string());
    let mut headers = Vec::with_capacity(OWN_HEADERS.len());
    headers.push((
        RETRY_ATTEMPT,
        HeaderValue::Int(i64::from(input.route.attempt_header())),
    ));
    if wanted(RETRY_REASON) {
        headers.push((RETRY_REASON, str_value(input.route.reason())));
    }
    headers.push((
        RETRY_LAST_ERROR,
        HeaderValue::Str(cut_utf8(input.error_message, MAX_ERROR_MESSAGE_BYTES)),
    ));
    if wanted(RETRY_ERROR_NAME) {
        let error_name = if input.error_name.trim().is_empty() {
            "Error".to_string()
        } else {
            cut_utf8(input.error_name, MAX_ERROR_NAME_BYTES)
        };
        headers.push((RETRY_ERROR_NAME, HeaderValue::Str(error_name)));
    }
    let stack = cut_utf8(input.error_stack, FRAME_MAX - HEADER_HEADROOM);
    // On a retried copy only when there is one (`stackOnRetry`).
    if wanted(RETRY_ERROR_STACK) || !stack.is_empty() {
        headers.push((RETRY_ERROR_STACK, HeaderValue::Str(stack)));
    }
    if wanted(RETRY_FAILED_AT) {
        headers.push((RETRY_FAILED_AT, HeaderValue::Str(failed_at())));
    }
    let first_failed_at = match input.previous_first_failed_at {
        Some(prev) if !prev.is_empty() => prev.to_string(),
        _ => failed_at(),
    };
    headers.push((RETRY_FIRST_FAILED_AT, HeaderValue::Str(first_failed_at)));
    headers.push((
        RETRY_ORIGINAL_EXCHANGE,
        str_value(
            input
                .previous_original_exchange
                .unwrap_or(input.delivery_exchange),
        ),
    ));
    headers.push((
        RETRY_ORIGINAL_ROUTING_KEY,
        str_value(
            input
                .previous_original_routing_key
                .unwrap_or(input.delivery_routing_key),
        ),
    ));
    if wanted(RETRY_QUEUE) {
        headers.push((RETRY_QUEUE, str_value(input.queue)));
    }
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
pub(crate) fn cut_utf8(s: &str, max_bytes: usize) -> String {
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

/// True for headers that describe the broker's dead-letter and delivery
/// history (`x-acquired-count` is RabbitMQ 4.3's count of every acquisition);
/// they are stripped on republish so they neither grow without bound nor
/// confuse the next hop's count.
pub(crate) fn is_broker_death_header(name: &str) -> bool {
    name == "x-death"
        || name == "x-delivery-count"
        || name == "x-acquired-count"
        || name.starts_with("x-first-death-")
        || name.starts_with("x-last-death-")
}

/// True for the headers RabbitMQ routes a publish by besides its routing key
/// (`CC`, `BCC`: sender-selected distribution). A copy republished with the
/// producer's `CC` would be delivered again to every queue it names, once
/// per retry, so copies never carry them.
pub(crate) fn is_routing_header(name: &str) -> bool {
    name == "CC" || name == "BCC"
}

#[cfg(test)]
pub(crate) mod tests;
