//! The headers of a failed message's republished copy. The copy keeps the
//! producer's headers and gets the `retry-*` headers anew; when the frame
//! has no room for both, the producer's largest headers are dropped one by
//! one (and named in `retry-dropped-headers`) and the copy parks instead.

use super::headers::{
    entry_size, failure_headers, FailureInput, HeaderValue, RETRY_DROPPED_HEADERS,
};
use super::route::Route;

/// A header of the producer's that the copy keeps while there is room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerHeader {
    /// Its name, as text (bytes that are not UTF-8 show as U+FFFD).
    pub name: String,
    /// The bytes it takes in the header table: name, type and value.
    pub size: usize,
}

/// What the copy carries besides the producer's headers left.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CopyHeaders {
    /// Where the copy goes.
    pub route: Route,
    /// The `retry-*` headers to write; empty when not even the smallest set
    /// of them fits (the properties alone fill the frame).
    pub ours: Vec<(&'static str, HeaderValue)>,
    /// The producer's headers to drop, as indices into the list given,
    /// largest first.
    pub dropped: Vec<usize>,
    /// The value of `retry-dropped-headers`: the names of the dropped
    /// headers, joined by commas; `None` when none was dropped.
    pub dropped_names: Option<String>,
}

/// The headers of the copy of a failed message: the `retry-*` headers for
/// `failure.route`, in the room left once `producer` (the producer's headers
/// the copy keeps, in their table's order) are counted. `failure.room` is
/// the room the frame leaves for every header of the copy, the producer's and
/// ours.
///
/// While ours do not fit, the largest of the producer's headers goes (a
/// `retry-dropped-headers` of the producer's is replaced, never dropped) and
/// the copy goes to `too_large` instead: the verdict on a message whose
/// headers are too large. Without it, nothing is dropped.
pub(crate) fn copy_headers(
    failure: &FailureInput,
    producer: &[ProducerHeader],
    too_large: Option<&Route>,
) -> CopyHeaders {
    let mut route = failure.route.clone();
    let mut dropped: Vec<usize> = Vec::new();
    loop {
        let dropped_names = (!dropped.is_empty()).then(|| {
            let names: Vec<&str> = dropped.iter().map(|&i| producer[i].name.as_str()).collect();
            names.join(",")
        });
        let input = FailureInput {
            route: &route,
            room: failure.room.saturating_sub(producer_bytes(
                producer,
                &dropped,
                dropped_names.as_deref(),
            )),
            ..*failure
        };
        if let Ok(ours) = failure_headers(&input) {
            return CopyHeaders {
                route,
                ours,
                dropped,
                dropped_names,
            };
        }
        let largest = producer
            .iter()
            .enumerate()
            .filter(|(i, h)| !dropped.contains(i) && h.name != RETRY_DROPPED_HEADERS)
            // The last of equal sizes, in the table's order.
            .max_by_key(|(_, h)| h.size)
            .map(|(i, _)| i);
        match (too_large, largest) {
            (Some(parked), Some(i)) => {
                route = parked.clone();
                dropped.push(i);
            }
            // Nothing of the producer's is left to drop (the properties alone
            // fill the frame, which a broker never delivers), or nothing to
            // park with: the copy goes as it is, without ours.
            _ => {
                return CopyHeaders {
                    route,
                    ours: Vec::new(),
                    dropped,
                    dropped_names,
                }
            }
        }
    }
}

/// The bytes the producer's headers take once `dropped` are gone, with
/// `retry-dropped-headers` listing them (`list`) when any is.
fn producer_bytes(producer: &[ProducerHeader], dropped: &[usize], list: Option<&str>) -> usize {
    // A list of the producer's own is replaced by ours.
    let replaced = |h: &ProducerHeader| list.is_some() && h.name == RETRY_DROPPED_HEADERS;
    let kept: usize = producer
        .iter()
        .enumerate()
        .filter(|(i, h)| !(dropped.contains(i) || replaced(h)))
        .map(|(_, h)| h.size)
        .sum();
    kept + list.map_or(0, |names| {
        entry_size(RETRY_DROPPED_HEADERS, &HeaderValue::Str(names.to_owned()))
    })
}

#[cfg(test)]
mod tests;
