//! Conversions between lapin's AMQP field values and the core's broker-neutral
//! values, and to and from JSON for the JavaScript side.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use serde_json::{Map, Number, Value};

use super::error::{Error, ErrorKind};
use crate::retry::{attempt_count, FieldValue};

/// Copies an AMQP value into the core's `FieldValue` (used for the few headers
/// the core reads: `retry-attempt` and `x-death`).
pub fn to_field_value(v: &AMQPValue) -> FieldValue {
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
pub fn header<'a>(table: Option<&'a FieldTable>, name: &str) -> Option<&'a AMQPValue> {
    table.and_then(|t| t.inner().get(name))
}

/// Earlier failed attempts of a message of `work_queue`, from its
/// `retry-attempt` and `x-death` headers.
pub fn attempt_of(headers: Option<&FieldTable>, work_queue: &str) -> u32 {
    attempt_count(
        header(headers, "retry-attempt")
            .map(to_field_value)
            .as_ref(),
        header(headers, "x-death").map(to_field_value).as_ref(),
        work_queue,
    )
}

/// Milliseconds since the Unix epoch, for the `retry-*` time headers.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The header `name` as a string, when it is one.
pub fn header_str(table: Option<&FieldTable>, name: &str) -> Option<String> {
    match header(table, name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

/// The size of `v` as encoded on the wire, for keeping header tables inside a frame.
pub fn encoded_size(v: &AMQPValue) -> usize {
    1 + match v {
        AMQPValue::Boolean(_) | AMQPValue::ShortShortInt(_) | AMQPValue::ShortShortUInt(_) => 1,
        AMQPValue::ShortInt(_) | AMQPValue::ShortUInt(_) => 2,
        AMQPValue::LongInt(_) | AMQPValue::LongUInt(_) | AMQPValue::Float(_) => 4,
        AMQPValue::LongLongInt(_) | AMQPValue::Double(_) | AMQPValue::Timestamp(_) => 8,
        AMQPValue::DecimalValue(_) => 5,
        AMQPValue::ShortString(s) => 1 + s.as_str().len(),
        AMQPValue::LongString(s) => 4 + s.as_bytes().len(),
        AMQPValue::FieldArray(a) => 4 + a.as_slice().iter().map(encoded_size).sum::<usize>(),
        AMQPValue::FieldTable(t) => table_size(t),
        AMQPValue::ByteArray(b) => 4 + b.as_slice().len(),
        AMQPValue::Void => 0,
    }
}

/// The encoded size of a whole field table.
pub fn table_size(t: &FieldTable) -> usize {
    4 + t
        .inner()
        .iter()
        .map(|(k, v)| 1 + k.as_str().len() + encoded_size(v))
        .sum::<usize>()
}

/// Converts an AMQP value to JSON for JavaScript. Strings that are not UTF-8
/// and byte arrays become arrays of byte values; decimals become numbers;
/// timestamps stay numbers of seconds, as the broker sends them.
pub fn to_json(v: &AMQPValue) -> Value {
    match v {
        AMQPValue::Boolean(b) => Value::Bool(*b),
        AMQPValue::ShortShortInt(i) => Value::from(*i),
        AMQPValue::ShortShortUInt(i) => Value::from(*i),
        AMQPValue::ShortInt(i) => Value::from(*i),
        AMQPValue::ShortUInt(i) => Value::from(*i),
        AMQPValue::LongInt(i) => Value::from(*i),
        AMQPValue::LongUInt(i) => Value::from(*i),
        AMQPValue::LongLongInt(i) => Value::from(*i),
        AMQPValue::Float(f) => Number::from_f64(f64::from(*f)).map_or(Value::Null, Value::Number),
        AMQPValue::Double(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        AMQPValue::DecimalValue(d) => {
            Number::from_f64(f64::from(d.value) / 10f64.powi(i32::from(d.scale)))
                .map_or(Value::Null, Value::Number)
        }
        AMQPValue::ShortString(s) => Value::String(s.as_str().to_owned()),
        AMQPValue::LongString(s) => match std::str::from_utf8(s.as_bytes()) {
            Ok(text) => Value::String(text.to_owned()),
            Err(_) => bytes_json(s.as_bytes()),
        },
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(to_json).collect()),
        AMQPValue::Timestamp(t) => Value::from(*t),
        AMQPValue::FieldTable(t) => table_to_json(t),
        AMQPValue::ByteArray(b) => bytes_json(b.as_slice()),
        AMQPValue::Void => Value::Null,
    }
}

fn bytes_json(b: &[u8]) -> Value {
    Value::Array(b.iter().map(|x| Value::from(*x)).collect())
}

/// Converts a header table to a JSON object.
pub fn table_to_json(t: &FieldTable) -> Value {
    Value::Object(
        t.inner()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), to_json(v)))
            .collect::<Map<String, Value>>(),
    )
}

/// Converts a JSON value from JavaScript to an AMQP value: whole numbers become
/// signed 64-bit integers, other numbers doubles, strings long strings,
/// objects tables and `null` void.
pub fn from_json(v: &Value) -> Result<AMQPValue, String> {
    Ok(match v {
        Value::Null => AMQPValue::Void,
        Value::Bool(b) => AMQPValue::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => AMQPValue::LongLongInt(i),
            None => AMQPValue::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
        Value::Array(a) => AMQPValue::FieldArray(FieldArray::from(
            a.iter().map(from_json).collect::<Result<Vec<_>, _>>()?,
        )),
        Value::Object(_) => AMQPValue::FieldTable(table_from_json(v)?),
    })
}

/// Converts a JSON object to a header table; header names must be short strings.
pub fn table_from_json(v: &Value) -> Result<FieldTable, String> {
    let Value::Object(map) = v else {
        return Err("headers must be an object".into());
    };
    let mut table = FieldTable::default();
    for (k, v) in map {
        let key = ShortString::try_new(k.as_str())
            .map_err(|_| format!("header name '{}…' is longer than 255 bytes", cut(k, 40)))?;
        table.insert(key, from_json(v)?);
    }
    Ok(table)
}

fn cut(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `value` as an AMQP short string (queue, exchange and routing-key names),
/// or an `INVALID_OPTIONS` error naming `what` when it is over 255 bytes.
pub fn short_name(what: &str, value: &str) -> super::error::Result<ShortString> {
    ShortString::try_new(value).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOptions,
            format!(
                "{what} '{}…' is {} bytes long; AMQP names are at most 255 bytes",
                cut(value, 40),
                value.len()
            ),
        )
    })
}
