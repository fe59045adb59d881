//! What became of each row of a batch, and what the batch then writes: the
//! confirmed rows deleted, the rows that can never be delivered parked with
//! a reason, refused ones counted, the rest left as they were.
//!
//! Park reasons:
//! - `unroutable`: the broker returned the mandatory publish (no queue bound);
//! - `exchange-not-found`: the exchange does not exist (the broker closed the
//!   channel over it; the relay opens another);
//! - `invalid-properties`: the row's `properties` (or its exchange's or routing
//!   key's length) cannot make an AMQP publish, or the broker would refuse
//!   one of them (another user's `userId`, a negative `expiration`, …);
//! - `too-large`: the body is over the broker's `max_message_size`;
//! - `refused`: the broker closed the channel over this row (its text in
//!   `last_error`), for a reason the relay could not tell before sending;
//! - `nacked`: the broker refused the publish (`basic.nack`) [`MAX_NACKS`]
//!   times; before that, each refusal counts in `attempts` and the row is
//!   tried again in a later batch.
//!
//! A publish that failed any other way (no confirm in time, the connection or
//! the channel lost) leaves its row as it was, for a later batch.

use super::claim::OutboxRow;
use crate::error::{amqp_reply, Error, ErrorKind};

/// Refusals (`basic.nack`) of one row after which it is parked.
pub(super) const MAX_NACKS: i32 = 5;

/// Why a row is parked.
pub(super) const UNROUTABLE: &str = "unroutable";
/// Why a row is parked.
pub(super) const EXCHANGE_NOT_FOUND: &str = "exchange-not-found";
/// Why a row is parked.
pub(super) const INVALID_PROPERTIES: &str = "invalid-properties";
/// Why a row is parked.
pub(super) const NACKED: &str = "nacked";
/// Why a row is parked.
pub(super) const TOO_LARGE: &str = "too-large";
/// Why a row is parked.
pub(super) const REFUSED: &str = "refused";

/// Every reason a row parks for, in the order the docs list them (for the
/// TypeScript contract, `binding::contract`).
#[cfg(test)]
pub(crate) const PARK_REASONS: [&str; 6] = [
    UNROUTABLE,
    EXCHANGE_NOT_FOUND,
    INVALID_PROPERTIES,
    TOO_LARGE,
    REFUSED,
    NACKED,
];

/// How the publish of one row ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Confirmed without a return: the row is deleted.
    Confirmed,
    /// It can never be delivered as it is: parked with this reason and error.
    Park(&'static str, String),
    /// The broker refused it (`basic.nack`).
    Nacked(String),
    /// It failed another way (timeout, connection or channel lost): the row
    /// stays as it was.
    Failed(String),
    /// Not sent: a stop came first, or an earlier row of its key failed.
    NotSent,
    /// Sent, and a stop cut the wait for its confirm short: the row stays
    /// and is published again.
    Unconfirmed,
}

/// The outcome of a publish to `exchange` that ended with `result` (the
/// publish and its confirm, as `publisher::confirmed` reads it). A refusal
/// the publisher charged to this row parks it; a channel closed over
/// another row's refusal leaves it as it was (`PUBLISH_FAILED`).
pub(super) fn outcome_of(exchange: &str, result: Result<(), Error>) -> Outcome {
    let e = match result {
        Ok(()) => return Outcome::Confirmed,
        Err(e) => e,
    };
    let closed_by = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<lapin::Error>())
        .and_then(amqp_reply);
    match e.kind {
        // The exchange does not exist: the broker said so when asked, or
        // closed the channel over it, naming it.
        ErrorKind::Unroutable if matches!(&closed_by, Some((404, text)) if text.contains(&format!("no exchange '{exchange}'"))) => {
            Outcome::Park(EXCHANGE_NOT_FOUND, e.message)
        }
        ErrorKind::Unroutable => Outcome::Park(UNROUTABLE, e.message),
        ErrorKind::PublishNacked => Outcome::Nacked(e.message),
        ErrorKind::AccessRefused | ErrorKind::PreconditionFailed | ErrorKind::NotFound => {
            Outcome::Park(REFUSED, e.message)
        }
        _ => Outcome::Failed(e.message),
    }
}

/// What a batch writes once its publishes ended.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Settlement {
    /// Rows to delete: confirmed.
    pub(super) delete: Vec<i64>,
    /// Rows to update: their ids, the park reason (`None`: not parked), the
    /// error, and the refusals to add to `attempts`.
    pub(super) ids: Vec<i64>,
    pub(super) reasons: Vec<Option<String>>,
    pub(super) errors: Vec<String>,
    pub(super) refusals: Vec<i32>,
    /// Rows parked.
    pub(super) parked: u64,
    /// Rows that failed and stay for a later batch.
    pub(super) failed: u64,
    /// Rows sent whose confirm a stop cut short.
    pub(super) unconfirmed: u64,
}

/// What to write for `rows` whose publishes ended with `outcomes` (in the
/// same order).
pub(super) fn settle(rows: &[OutboxRow], outcomes: &[Outcome]) -> Settlement {
    let mut s = Settlement::default();
    for (row, outcome) in rows.iter().zip(outcomes) {
        let (reason, error, refused) = match outcome {
            Outcome::Confirmed => {
                s.delete.push(row.id);
                continue;
            }
            Outcome::Park(reason, error) => (Some(*reason), error, 0),
            Outcome::Nacked(error) if row.attempts + 1 >= MAX_NACKS => (Some(NACKED), error, 1),
            Outcome::Nacked(error) => (None, error, 1),
            Outcome::Failed(_) => {
                s.failed += 1;
                continue;
            }
            Outcome::Unconfirmed => {
                s.unconfirmed += 1;
                continue;
            }
            Outcome::NotSent => continue,
        };
        if reason.is_some() {
            s.parked += 1;
        } else {
            s.failed += 1;
        }
        s.ids.push(row.id);
        s.reasons.push(reason.map(str::to_owned));
        // PostgreSQL's text holds no NUL (a name in the error may).
        s.errors.push(error.replace('\0', "\u{FFFD}"));
        s.refusals.push(refused);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, attempts: i32) -> OutboxRow {
        OutboxRow {
            id,
            exchange: "orders".into(),
            routing_key: "placed".into(),
            body: Vec::new(),
            properties: serde_json::json!({}),
            ordering_key: None,
            attempts,
        }
    }

    #[test]
    fn each_outcome_is_written_as_the_reasons_say() {
        let rows = [
            row(1, 0),
            row(2, 0),
            row(3, 0),
            row(4, MAX_NACKS - 1),
            row(5, 0),
            row(6, 0),
            row(7, 0),
        ];
        let outcomes = [
            Outcome::Confirmed,
            Outcome::Park(UNROUTABLE, "returned".into()),
            Outcome::Nacked("refused".into()),
            Outcome::Nacked("refused\0again".into()),
            Outcome::Failed("timeout".into()),
            Outcome::NotSent,
            Outcome::Unconfirmed,
        ];
        let s = settle(&rows, &outcomes);
        assert_eq!(s.delete, [1]);
        assert_eq!(s.ids, [2, 3, 4]);
        assert_eq!(
            s.reasons,
            [Some(UNROUTABLE.to_owned()), None, Some(NACKED.to_owned())]
        );
        assert_eq!(s.errors[2], "refused\u{FFFD}again");
        assert_eq!(s.refusals, [0, 1, 1]);
        assert_eq!((s.parked, s.failed, s.unconfirmed), (2, 2, 1));
    }

    #[test]
    fn a_confirm_read_as_an_error_tells_the_park_reason() {
        let unroutable = Error::new(ErrorKind::Unroutable, "returned");
        assert_eq!(
            outcome_of("orders", Err(unroutable)),
            Outcome::Park(UNROUTABLE, "returned".into())
        );
        let nacked = Error::new(ErrorKind::PublishNacked, "nack");
        assert_eq!(
            outcome_of("orders", Err(nacked)),
            Outcome::Nacked("nack".into())
        );
        let timeout = Error::new(ErrorKind::PublishFailed, "no confirm");
        assert_eq!(
            outcome_of("orders", Err(timeout)),
            Outcome::Failed("no confirm".into())
        );
        assert_eq!(outcome_of("orders", Ok(())), Outcome::Confirmed);
        // A refusal charged to this row parks it with the broker's words.
        let refused = Error::new(ErrorKind::PreconditionFailed, "message size 9 is larger");
        assert_eq!(
            outcome_of("orders", Err(refused)),
            Outcome::Park(REFUSED, "message size 9 is larger".into())
        );
        let internal = Error::new(ErrorKind::AccessRefused, "internal exchange 'orders'");
        assert!(matches!(
            outcome_of("orders", Err(internal)),
            Outcome::Park(REFUSED, _)
        ));
        // Another row's refusal took its channel: it stays, for a later batch.
        let lost = Error::new(ErrorKind::PublishFailed, "closed over another publish");
        assert!(matches!(
            outcome_of("orders", Err(lost)),
            Outcome::Failed(_)
        ));
    }
}
