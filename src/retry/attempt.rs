//! Counting earlier failed attempts from message headers.

/// A broker-neutral copy of the AMQP field values the core needs to read,
/// so the logic here does not depend on any client library.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldValue {
    /// AMQP boolean.
    Bool(bool),
    /// Any signed AMQP integer.
    Int(i64),
    /// Any unsigned AMQP integer.
    UInt(u64),
    /// AMQP float or double.
    Float(f64),
    /// AMQP short or long string, decoded as UTF-8.
    Str(String),
    /// AMQP byte array, or a string that is not UTF-8.
    Bytes(Vec<u8>),
    /// AMQP field array.
    Array(Vec<FieldValue>),
    /// AMQP field table, in wire order.
    Table(Vec<(String, FieldValue)>),
    /// AMQP void, or any value the core does not need.
    Void,
}

impl FieldValue {
    /// The value as a non-negative whole number, if it is one. Other
    /// clients may write counts as any integer type or as a float.
    pub(crate) fn as_count(&self) -> Option<u64> {
        match *self {
            FieldValue::Int(n) => u64::try_from(n).ok(),
            FieldValue::UInt(n) => Some(n),
            // `as` saturates, so huge floats become u64::MAX.
            FieldValue::Float(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 => Some(f as u64),
            _ => None,
        }
    }

    /// The value as text, if it is a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            FieldValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The first entry named `key`, if this is a table.
    pub(crate) fn get(&self, key: &str) -> Option<&FieldValue> {
        match self {
            FieldValue::Table(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// The number of earlier failed attempts: the larger of our `retry-attempt`
/// header and the sum of `expired` x-death counts for this queue's retry
/// queues.
///
/// RabbitMQ 3.10 merges x-death on republish and increments counts, so the
/// sum works there; RabbitMQ 4.x keeps only the newest hop with count 1, so
/// our own header is the reliable counter. Malformed input counts as nothing.
pub(crate) fn attempt_count(
    retry_attempt: Option<&FieldValue>,
    x_death: Option<&FieldValue>,
    work_queue: &str,
) -> u32 {
    let ours = retry_attempt.and_then(FieldValue::as_count).unwrap_or(0);
    let deaths = x_death.map_or(0, |x| expired_retry_deaths(x, work_queue));
    u32::try_from(ours.max(deaths)).unwrap_or(u32::MAX)
}

fn expired_retry_deaths(x_death: &FieldValue, work_queue: &str) -> u64 {
    let FieldValue::Array(entries) = x_death else {
        return 0;
    };
    let prefix = format!("{work_queue}.retry.");
    entries
        .iter()
        .filter(|e| e.get("reason").and_then(FieldValue::as_str) == Some("expired"))
        .filter(|e| {
            e.get("queue")
                .and_then(FieldValue::as_str)
                .is_some_and(|q| q.starts_with(&prefix))
        })
        .filter_map(|e| e.get("count").and_then(FieldValue::as_count))
        .fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use FieldValue::*;

    fn death(queue: &str, reason: &str, count: FieldValue) -> FieldValue {
        Table(vec![
            ("count".into(), count),
            ("reason".into(), Str(reason.into())),
            ("queue".into(), Str(queue.into())),
            ("exchange".into(), Str(String::new())),
        ])
    }

    fn expired(queue: &str, count: u64) -> FieldValue {
        death(queue, "expired", Int(count as i64))
    }

    #[test]
    fn as_count() {
        let cases = [
            (Int(0), Some(0)),
            (Int(3), Some(3)),
            (Int(-1), None),
            (UInt(u64::MAX), Some(u64::MAX)),
            (Float(2.0), Some(2)),
            (Float(2.5), None),
            (Float(-1.0), None),
            (Float(f64::NAN), None),
            (Float(f64::INFINITY), None),
            (Float(1e30), Some(u64::MAX)),
            (Str("3".into()), None),
            (Bool(true), None),
            (Bytes(vec![3]), None),
            (Array(vec![Int(1)]), None),
            (Table(vec![]), None),
            (Void, None),
        ];
        for (v, want) in cases {
            assert_eq!(v.as_count(), want, "{v:?}");
        }
    }

    #[test]
    fn as_str_and_get() {
        assert_eq!(Str("a".into()).as_str(), Some("a"));
        assert_eq!(Bytes(b"a".to_vec()).as_str(), None);
        let t = Table(vec![("k".into(), Int(1)), ("k".into(), Int(2))]);
        assert_eq!(t.get("k"), Some(&Int(1)));
        assert_eq!(t.get("x"), None);
        assert_eq!(Str("k".into()).get("k"), None);
    }

    #[test]
    fn counts() {
        let arr = |v: Vec<FieldValue>| Some(Array(v));
        let cases: Vec<(&str, Option<FieldValue>, Option<FieldValue>, u32)> = vec![
            ("nothing", None, None, 0),
            ("header only", Some(Int(2)), None, 2),
            ("header uint", Some(UInt(5)), None, 5),
            ("header float", Some(Float(3.0)), None, 3),
            ("empty x-death", None, arr(vec![]), 0),
            (
                "3.10 merged shape",
                None,
                arr(vec![expired("Q.retry.5s", 1), expired("Q.retry.1m", 1)]),
                2,
            ),
            (
                "3.10 incremented counts",
                Some(Int(3)),
                arr(vec![expired("Q.retry.5s", 2), expired("Q.retry.1m", 2)]),
                4,
            ),
            (
                "4.x newest hop only",
                Some(Int(2)),
                arr(vec![expired("Q.retry.1m", 1)]),
                2,
            ),
            (
                "other queues and reasons ignored",
                None,
                arr(vec![
                    expired("Q.retry.5s", 1),
                    expired("Other.retry.5s", 7),
                    death("Q.retry.5s", "rejected", Int(9)),
                    death("Q", "rejected", Int(9)),
                    expired("Q", 9),
                    expired("Q.parked", 9),
                ]),
                1,
            ),
            (
                "retry queue of a prefix-named queue ignored",
                None,
                arr(vec![expired("Qx.retry.5s", 4)]),
                0,
            ),
            ("x-death a string", None, Some(Str("x".into())), 0),
            ("x-death an int", None, Some(Int(5)), 0),
            ("x-death a table", None, Some(expired("Q.retry.5s", 1)), 0),
            (
                "array of strings",
                None,
                arr(vec![Str("Q.retry.5s".into()), Int(3)]),
                0,
            ),
            (
                "count as string",
                None,
                arr(vec![death("Q.retry.5s", "expired", Str("3".into()))]),
                0,
            ),
            (
                "count negative",
                None,
                arr(vec![death("Q.retry.5s", "expired", Int(-1))]),
                0,
            ),
            (
                "count float 2.0",
                None,
                arr(vec![death("Q.retry.5s", "expired", Float(2.0))]),
                2,
            ),
            (
                "count float 2.5",
                None,
                arr(vec![death("Q.retry.5s", "expired", Float(2.5))]),
                0,
            ),
            (
                "count missing",
                None,
                arr(vec![Table(vec![
                    ("queue".into(), Str("Q.retry.5s".into())),
                    ("reason".into(), Str("expired".into())),
                ])]),
                0,
            ),
            (
                "queue and reason as bytes",
                None,
                arr(vec![Table(vec![
                    ("queue".into(), Bytes(b"Q.retry.5s".to_vec())),
                    ("reason".into(), Bytes(b"expired".to_vec())),
                    ("count".into(), Int(1)),
                ])]),
                0,
            ),
            ("retry-attempt negative", Some(Int(-4)), None, 0),
            ("retry-attempt string", Some(Str("2".into())), None, 0),
            ("retry-attempt void", Some(Void), None, 0),
            ("retry-attempt huge", Some(UInt(u64::MAX)), None, u32::MAX),
            (
                "retry-attempt just above u32",
                Some(Int(1 << 32)),
                None,
                u32::MAX,
            ),
            (
                "huge counts saturate",
                None,
                arr(vec![
                    death("Q.retry.5s", "expired", UInt(u64::MAX)),
                    death("Q.retry.1m", "expired", UInt(u64::MAX)),
                ]),
                u32::MAX,
            ),
            (
                "mixed valid and malformed",
                Some(Int(1)),
                arr(vec![
                    Void,
                    expired("Q.retry.5s", 2),
                    death("Q.retry.1m", "expired", Int(-3)),
                    expired("Q.retry.1m", 1),
                ]),
                3,
            ),
        ];
        for (name, header, x_death, want) in cases {
            assert_eq!(
                attempt_count(header.as_ref(), x_death.as_ref(), "Q"),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn work_queue_with_dots() {
        let x = Array(vec![expired("Q.retry.5s", 1)]);
        assert_eq!(attempt_count(None, Some(&x), "Qx"), 0);
        assert_eq!(attempt_count(None, Some(&x), "Q.retry"), 0);
        let x = Array(vec![expired("a.b.retry.5s", 2)]);
        assert_eq!(attempt_count(None, Some(&x), "a.b"), 2);
        assert_eq!(attempt_count(None, Some(&x), "a"), 0);
    }
}
