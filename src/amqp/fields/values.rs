//! Reading the headers the core looks at: lapin's AMQP values as the
//! core's broker-neutral `FieldValue`, and a header by name.

use lapin::types::{AMQPValue, FieldTable};

use crate::retry::headers::RETRY_ATTEMPT;
use crate::retry::{attempt_count, FieldValue};

/// Copies an AMQP value into the core's `FieldValue` (used for the few headers
/// the core reads: `retry-attempt` and `x-death`).
pub(crate) fn to_field_value(v: &AMQPValue) -> FieldValue {
    match v {
        AMQPValue::Boolean(b) => FieldValue::Bool(*b),
        AMQPValue::ShortShortInt(i) => FieldValue::Int(i64::from(*i)),
        AMQPValue::ShortShortUInt(i) => FieldValue::Int(i64::from(*i)),
        AMQPValue::ShortInt(i) => FieldValue::Int(i64::from(*i)),
        AMQPValue::ShortUInt(i) => FieldValue::Int(i64::from(*i)),
        AMQPValue::LongInt(i) => FieldValue::Int(i64::from(*i)),
        AMQPValue::LongUInt(i) => FieldValue::Int(i64::from(*i)),
        AMQPValue::LongLongInt(i) => FieldValue::Int(*i),
        AMQPValue::Float(f) => FieldValue::Float(f64::from(*f)),
        AMQPValue::Double(f) => FieldValue::Float(*f),
        AMQPValue::DecimalValue(d) => {
            FieldValue::Float(f64::from(d.value) / 10f64.powi(i32::from(d.scale)))
        }
        AMQPValue::ShortString(s) => FieldValue::Str(s.as_str().to_owned()),
        AMQPValue::LongString(s) => FieldValue::Str(String::from_utf8_lossy(s.as_bytes()).into()),
        AMQPValue::FieldArray(a) => {
            FieldValue::Array(a.as_slice().iter().map(to_field_value).collect())
        }
        AMQPValue::Timestamp(t) => FieldValue::UInt(*t),
        AMQPValue::FieldTable(t) => FieldValue::Table(
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), to_field_value(v)))
                .collect(),
        ),
        AMQPValue::ByteArray(b) => FieldValue::Bytes(b.as_slice().to_vec()),
        AMQPValue::Void => FieldValue::Void,
    }
}

/// The header `name` of `table`, if present.
pub(crate) fn header<'a>(table: Option<&'a FieldTable>, name: &str) -> Option<&'a AMQPValue> {
    table.and_then(|t| t.inner().get(name))
}

/// Earlier failed attempts of a message of `work_queue`, from its
/// `retry-attempt` and `x-death` headers.
pub(crate) fn attempt_of(headers: Option<&FieldTable>, work_queue: &str) -> u32 {
    attempt_count(
        header(headers, RETRY_ATTEMPT).map(to_field_value).as_ref(),
        header(headers, "x-death").map(to_field_value).as_ref(),
        work_queue,
    )
}

/// The header `name` as a string, when it is one.
pub(crate) fn header_str(table: Option<&FieldTable>, name: &str) -> Option<String> {
    match header(table, name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}
