//! Header tables to and from JSON, for the JavaScript side.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use serde_json::{Map, Number, Value};

use super::names::cut;

/// Converts an AMQP value to JSON for JavaScript. Strings that are not UTF-8
/// and byte arrays become arrays of byte values; decimals become numbers;
/// timestamps stay numbers of seconds, as the broker sends them.
fn to_json(v: &AMQPValue) -> Value {
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
        AMQPValue::ShortString(s) => {
            Value::String(String::from_utf8_lossy(&s.wire_bytes()).into_owned())
        }
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
pub(crate) fn table_to_json(t: &FieldTable) -> Value {
    Value::Object(
        t.inner()
            .iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(&k.wire_bytes()).into_owned(),
                    to_json(v),
                )
            })
            .collect::<Map<String, Value>>(),
    )
}

/// Converts a JSON value from JavaScript to an AMQP value: whole numbers become
/// signed 64-bit integers, other numbers doubles, strings long strings,
/// objects tables and `null` void.
fn from_json(v: &Value) -> Result<AMQPValue, String> {
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
pub(crate) fn table_from_json(v: &Value) -> Result<FieldTable, String> {
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
