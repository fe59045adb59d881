//! Names of the queues derived from a work queue, and their limits.

use std::fmt;

use super::delay::{parse_delay, Delay};

/// AMQP short strings, which hold queue and exchange names, are at most 255 bytes.
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// The retry queue for `delay`: `"{queue}.retry.{label}"`.
pub(crate) fn retry_queue_name(queue: &str, delay: Delay) -> String {
    format!("{queue}.retry.{}", delay.label())
}

/// The queue where messages go when they will not be retried: `"{queue}.parked"`.
pub(crate) fn parked_queue_name(queue: &str) -> String {
    format!("{queue}.parked")
}

/// What a queue's name says it is, by the names this library gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueRole<'a> {
    /// `{queue}.retry.{label}`: a retry queue of work queue `queue`.
    Retry {
        /// The work queue.
        queue: &'a str,
        /// The delay's label, as [`Delay::label`] writes it.
        label: &'a str,
    },
    /// `{queue}.parked`: the parked queue of work queue `queue`.
    Parked {
        /// The work queue.
        queue: &'a str,
    },
    /// Any other name, a work queue's among them.
    Other,
}

/// Reads `name` as [`retry_queue_name`] and [`parked_queue_name`] write them:
/// a retry queue's label is a delay's own label (`1m`, not `60s`), so
/// `a.retry.b.retry.5s` is a retry queue of `a.retry.b`.
pub(crate) fn queue_role(name: &str) -> QueueRole<'_> {
    if let Some(queue) = name.strip_suffix(".parked").filter(|q| !q.is_empty()) {
        return QueueRole::Parked { queue };
    }
    const RETRY: &str = ".retry.";
    match name.rfind(RETRY) {
        Some(at) if at > 0 && is_label(&name[at + RETRY.len()..]) => QueueRole::Retry {
            queue: &name[..at],
            label: &name[at + RETRY.len()..],
        },
        _ => QueueRole::Other,
    }
}

/// Whether `s` is a delay's label as [`Delay::label`] writes it.
fn is_label(s: &str) -> bool {
    parse_delay(s).is_ok_and(|d| d.label() == s)
}

/// Why a name cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameError {
    /// The name is empty where one is required.
    Empty {
        /// What the name is for, such as "queue name".
        what: String,
    },
    /// The name does not fit in an AMQP short string.
    TooLong {
        /// What the name is for, such as "queue name".
        what: String,
        /// The name's length in bytes.
        len: usize,
    },
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty { what } => {
                let subject = match what.strip_suffix(" name").unwrap_or(what) {
                    "queue" => "work queue",
                    other => other,
                };
                write!(f, "{what} is empty: give the {subject} a name")
            }
            NameError::TooLong { what, len } => write!(
                f,
                "{what} is {len} bytes long; AMQP names are at most {MAX_NAME_BYTES} bytes"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Checks that `name` fits in an AMQP short string, and is non-empty unless
/// `allow_empty` (the default exchange is named "").
pub(crate) fn validate_name(what: &str, name: &str, allow_empty: bool) -> Result<(), NameError> {
    if name.is_empty() && !allow_empty {
        return Err(NameError::Empty { what: what.into() });
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(NameError::TooLong {
            what: what.into(),
            len: name.len(),
        });
    }
    Ok(())
}

/// Checks the work queue name and every name derived from it, so a long
/// queue name fails at setup rather than when the first retry is declared.
pub(crate) fn validate_topology_names(queue: &str, delays: &[Delay]) -> Result<(), NameError> {
    validate_name("queue name", queue, false)?;
    for &delay in delays {
        validate_name("retry queue name", &retry_queue_name(queue, delay), false)?;
    }
    validate_name("parked queue name", &parked_queue_name(queue), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ms: u64) -> Delay {
        Delay::from_millis(ms).unwrap()
    }

    #[test]
    fn derived_names() {
        assert_eq!(retry_queue_name("orders", d(5_000)), "orders.retry.5s");
        assert_eq!(retry_queue_name("orders", d(1_500)), "orders.retry.1500ms");
        assert_eq!(retry_queue_name("orders", d(7_200_000)), "orders.retry.2h");
        assert_eq!(parked_queue_name("orders"), "orders.parked");
    }

    #[test]
    fn roles() {
        let retry = |queue, label| QueueRole::Retry { queue, label };
        let cases = [
            ("orders.retry.5s", retry("orders", "5s")),
            ("a.retry.b.retry.1500ms", retry("a.retry.b", "1500ms")),
            (
                "shipment.requested.retry.2h",
                retry("shipment.requested", "2h"),
            ),
            ("orders.parked", QueueRole::Parked { queue: "orders" }),
            (
                "a.retry.5s.parked",
                QueueRole::Parked {
                    queue: "a.retry.5s",
                },
            ),
            ("orders", QueueRole::Other),
            (".parked", QueueRole::Other),
            (".retry.5s", QueueRole::Other),
            ("orders.retry.5s.x", QueueRole::Other),
            ("orders.retry.", QueueRole::Other),
            ("orders.retry.later", QueueRole::Other),
            ("orders.retry.60s", QueueRole::Other),
            ("orders.retry. 5s", QueueRole::Other),
        ];
        for (name, want) in cases {
            assert_eq!(queue_role(name), want, "{name}");
        }
        let q = "orders";
        assert_eq!(queue_role(&retry_queue_name(q, d(60_000))), retry(q, "1m"));
        assert_eq!(
            queue_role(&parked_queue_name(q)),
            QueueRole::Parked { queue: q }
        );
    }

    #[test]
    fn validate() {
        let too_long = |what: &str, len| {
            Err(NameError::TooLong {
                what: what.into(),
                len,
            })
        };
        let cases = [
            (
                "queue name",
                String::new(),
                false,
                Err(NameError::Empty {
                    what: "queue name".into(),
                }),
            ),
            ("exchange name", String::new(), true, Ok(())),
            ("queue name", "q".into(), false, Ok(())),
            ("queue name", "a".repeat(255), false, Ok(())),
            (
                "queue name",
                "a".repeat(256),
                false,
                too_long("queue name", 256),
            ),
            (
                "exchange name",
                "a".repeat(300),
                true,
                too_long("exchange name", 300),
            ),
            // 128 two-byte chars: 128 chars but 256 bytes.
            (
                "queue name",
                "é".repeat(128),
                false,
                too_long("queue name", 256),
            ),
        ];
        for (what, name, allow_empty, want) in cases {
            assert_eq!(
                validate_name(what, &name, allow_empty),
                want,
                "{what} {}",
                name.len()
            );
        }
    }

    #[test]
    fn topology() {
        let delays = [d(5_000), d(1_500)];
        assert_eq!(validate_topology_names("orders", &delays), Ok(()));
        assert_eq!(
            validate_topology_names("", &delays),
            Err(NameError::Empty {
                what: "queue name".into()
            })
        );
        // 248 + ".parked" = 255 fits, 248 + ".retry.5s" = 257 does not.
        let q = "a".repeat(248);
        assert_eq!(validate_topology_names(&q, &[]), Ok(()));
        assert_eq!(
            validate_topology_names(&q, &delays),
            Err(NameError::TooLong {
                what: "retry queue name".into(),
                len: 257
            })
        );
        let q = "a".repeat(249);
        assert_eq!(
            validate_topology_names(&q, &[]),
            Err(NameError::TooLong {
                what: "parked queue name".into(),
                len: 256
            })
        );
        let q = "a".repeat(256);
        assert_eq!(
            validate_topology_names(&q, &[]),
            Err(NameError::TooLong {
                what: "queue name".into(),
                len: 256
            })
        );
    }

    #[test]
    fn messages() {
        assert_eq!(
            NameError::Empty {
                what: "queue name".into()
            }
            .to_string(),
            "queue name is empty: give the work queue a name"
        );
        assert_eq!(
            NameError::Empty {
                what: "exchange name".into()
            }
            .to_string(),
            "exchange name is empty: give the exchange a name"
        );
        assert_eq!(
            NameError::TooLong {
                what: "queue name".into(),
                len: 300
            }
            .to_string(),
            "queue name is 300 bytes long; AMQP names are at most 255 bytes"
        );
        let e: Box<dyn std::error::Error> = Box::new(NameError::Empty { what: "x".into() });
        assert!(!e.to_string().is_empty());
    }
}
