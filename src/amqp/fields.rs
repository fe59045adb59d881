//! Conversions between lapin's AMQP field values and the core's broker-neutral
//! values, and to and from JSON for the JavaScript side.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use lapin::BasicProperties;
use serde_json::{Map, Number, Value};

use crate::error::{Error, ErrorKind};
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
        header(headers, "retry-attempt")
            .map(to_field_value)
            .as_ref(),
        header(headers, "x-death").map(to_field_value).as_ref(),
        work_queue,
    )
}

/// Milliseconds since the Unix epoch, for the `retry-*` time headers.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The header `name` as a string, when it is one.
pub(crate) fn header_str(table: Option<&FieldTable>, name: &str) -> Option<String> {
    match header(table, name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

/// The size of `v` as encoded on the wire, for keeping header tables inside a frame.
pub(crate) fn encoded_size(v: &AMQPValue) -> usize {
    1 + match v {
        AMQPValue::Boolean(_) | AMQPValue::ShortShortInt(_) | AMQPValue::ShortShortUInt(_) => 1,
        AMQPValue::ShortInt(_) | AMQPValue::ShortUInt(_) => 2,
        AMQPValue::LongInt(_) | AMQPValue::LongUInt(_) | AMQPValue::Float(_) => 4,
        AMQPValue::LongLongInt(_) | AMQPValue::Double(_) | AMQPValue::Timestamp(_) => 8,
        AMQPValue::DecimalValue(_) => 5,
        AMQPValue::ShortString(s) => 1 + s.wire_bytes().len(),
        AMQPValue::LongString(s) => 4 + s.as_bytes().len(),
        AMQPValue::FieldArray(a) => 4 + a.as_slice().iter().map(encoded_size).sum::<usize>(),
        AMQPValue::FieldTable(t) => table_size(t),
        AMQPValue::ByteArray(b) => 4 + b.as_slice().len(),
        AMQPValue::Void => 0,
    }
}

/// The encoded size of a whole field table.
pub(crate) fn table_size(t: &FieldTable) -> usize {
    4 + t
        .inner()
        .iter()
        .map(|(k, v)| 1 + k.wire_bytes().len() + encoded_size(v))
        .sum::<usize>()
}

/// The encoded size of a content header's properties (property flags and
/// every property present, the header table included).
pub(crate) fn properties_size(p: &BasicProperties) -> usize {
    let short = |s: &Option<ShortString>| s.as_ref().map_or(0, |s| 1 + s.wire_bytes().len());
    2 + short(p.content_type())
        + short(p.content_encoding())
        + p.headers().as_ref().map_or(0, table_size)
        + p.delivery_mode().map_or(0, |_| 1)
        + p.priority().map_or(0, |_| 1)
        + short(p.correlation_id())
        + short(p.reply_to())
        + short(p.expiration())
        + short(p.message_id())
        + p.timestamp().map_or(0, |_| 8)
        + short(p.kind())
        + short(p.user_id())
        + short(p.app_id())
        + short(p.cluster_id())
}

/// A content header frame's bytes besides its properties: frame type,
/// channel, size and end marker (8), class, weight and body size (12).
pub(crate) const CONTENT_HEADER_OVERHEAD: usize = 20;

/// The first short string of a delivery that is not UTF-8, described for
/// `retry-last-error` (which field, its bytes), if there is one.
pub(crate) fn undecodable_field(
    exchange: &ShortString,
    routing_key: &ShortString,
    p: &BasicProperties,
) -> Option<String> {
    let describe = |what: String, s: &ShortString| {
        let bytes = s.wire_bytes();
        let hex: Vec<String> = bytes.iter().take(64).map(|b| format!("{b:02x}")).collect();
        format!(
            "{what} is not valid UTF-8 (as Latin-1: '{}', bytes {}{}); the message was parked as it came, without calling the handler",
            bytes.iter().map(|b| char::from(*b)).collect::<String>(),
            hex.join(" "),
            if bytes.len() > 64 { " …" } else { "" }
        )
    };
    let props = [
        ("content-type", p.content_type()),
        ("content-encoding", p.content_encoding()),
        ("correlation-id", p.correlation_id()),
        ("reply-to", p.reply_to()),
        ("expiration", p.expiration()),
        ("message-id", p.message_id()),
        ("type", p.kind()),
        ("user-id", p.user_id()),
        ("app-id", p.app_id()),
        ("cluster-id", p.cluster_id()),
    ];
    if exchange.is_undecodable() {
        return Some(describe("the exchange name".into(), exchange));
    }
    if routing_key.is_undecodable() {
        return Some(describe("the routing key".into(), routing_key));
    }
    for (name, value) in props {
        if let Some(s) = value.as_ref().filter(|s| s.is_undecodable()) {
            return Some(describe(format!("the {name} property"), s));
        }
    }
    let found = undecodable_in_table(p.headers().as_ref()?)?;
    let what = if found.name {
        format!("a header name in headers{}", found.path)
    } else {
        format!("the value of headers{}", found.path)
    };
    Some(describe(what, &found.string))
}

/// Where an undecodable short string was found: a header name, or a value;
/// `path` runs from the outer table inwards (`.key`, `[index]`).
struct Found {
    name: bool,
    path: String,
    string: ShortString,
}

/// The first undecodable key or short-string value in `t`. Its path is
/// written only once one is found: the search runs on every delivery.
fn undecodable_in_table(t: &FieldTable) -> Option<Found> {
    for (k, v) in t.inner() {
        if k.is_undecodable() {
            return Some(Found {
                name: true,
                path: String::new(),
                string: k.clone(),
            });
        }
        if let Some(mut found) = undecodable_in_value(v) {
            found.path = format!(
                ".{}{}",
                String::from_utf8_lossy(&k.wire_bytes()),
                found.path
            );
            return Some(found);
        }
    }
    None
}

fn undecodable_in_value(v: &AMQPValue) -> Option<Found> {
    match v {
        AMQPValue::ShortString(s) if s.is_undecodable() => Some(Found {
            name: false,
            path: String::new(),
            string: s.clone(),
        }),
        AMQPValue::FieldTable(t) => undecodable_in_table(t),
        AMQPValue::FieldArray(a) => a.as_slice().iter().enumerate().find_map(|(i, v)| {
            undecodable_in_value(v).map(|mut found| {
                found.path = format!("[{i}]{}", found.path);
                found
            })
        }),
        _ => None,
    }
}

/// Converts an AMQP value to JSON for JavaScript. Strings that are not UTF-8
/// and byte arrays become arrays of byte values; decimals become numbers;
/// timestamps stay numbers of seconds, as the broker sends them.
pub(crate) fn to_json(v: &AMQPValue) -> Value {
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
pub(crate) fn from_json(v: &Value) -> Result<AMQPValue, String> {
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

fn cut(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `value` as an AMQP short string (queue, exchange and routing-key names),
/// or an `INVALID_OPTIONS` error naming `what` when it is over 255 bytes.
pub(crate) fn short_name(what: &str, value: &str) -> crate::error::Result<ShortString> {
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

/// `headers` with the W3C trace context `trace` (`traceparent`, and
/// `tracestate` when there is one) in place of theirs.
pub(crate) fn with_trace(headers: FieldTable, trace: &(String, Option<String>)) -> FieldTable {
    let mut rest = headers.inner().clone();
    rest.remove(&ShortString::from("tracestate"));
    let mut headers = FieldTable::from(rest);
    let text = |s: &str| AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()));
    headers.insert("traceparent".into(), text(&trace.0));
    if let Some(state) = &trace.1 {
        headers.insert("tracestate".into(), text(state));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::basic::{gen_properties, parse_properties};
    use lapin::types::generation::gen_short_string;
    use lapin::types::parsing::parse_short_string;

    fn written<'a>(f: impl cookie_factory::SerializeFn<Vec<u8>> + 'a) -> Vec<u8> {
        cookie_factory::gen(f, Vec::new()).expect("written").0
    }

    fn wire(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn short_strings_that_are_not_utf8_keep_their_bytes() {
        let cases: [&[u8]; 4] = [b"ord\xe9r-1", b"\xff", &[0xe9; 255], b"caf\xc3"];
        for bytes in cases {
            let frame = wire(bytes);
            let (rest, s) = parse_short_string(&frame[..]).expect("parses");
            assert!(rest.is_empty());
            assert!(s.is_undecodable(), "{bytes:?}");
            assert_eq!(s.wire_bytes().as_ref(), bytes);
            assert_eq!(written(gen_short_string(s.as_str())), wire(bytes));
        }
    }

    #[test]
    fn utf8_short_strings_are_unchanged() {
        for text in ["", "order-48213", "ordér", "\u{FDD0}abc", "\u{FDD0}😀"] {
            let frame = wire(text.as_bytes());
            let (_, s) = parse_short_string(&frame[..]).expect("parses");
            assert!(!s.is_undecodable(), "{text}");
            assert_eq!(s.as_str(), text);
            assert_eq!(written(gen_short_string(s.as_str())), wire(text.as_bytes()));
        }
    }

    /// Basic properties with message-id `ord\xe9r-1` and one header named
    /// `k\xe9y` (a long string), as another client writes them.
    fn latin1_properties() -> Vec<u8> {
        // Flags: message-id (bit 7) and headers (bit 13).
        let mut p = vec![0x20, 0x80];
        let entry = [wire(b"k\xe9y"), vec![b'S', 0, 0, 0, 1, b'v']].concat();
        p.extend_from_slice(&(entry.len() as u32).to_be_bytes());
        p.extend_from_slice(&entry);
        p.extend_from_slice(&wire(b"ord\xe9r-1"));
        p
    }

    #[test]
    fn properties_round_trip_byte_for_byte() {
        let bytes = latin1_properties();
        let (rest, props) = parse_properties(&bytes[..]).expect("parses");
        assert!(rest.is_empty());
        assert_eq!(written(gen_properties(&props)), bytes);
        assert_eq!(properties_size(&props), bytes.len());
        let why = undecodable_field(&"".into(), &"q".into(), &props).expect("found");
        assert!(why.contains("message-id"), "{why}");
        assert!(why.contains("6f 72 64 e9 72 2d 31"), "{why}");
    }

    #[test]
    fn undecodable_header_names_and_values_are_found() {
        let frame = wire(b"k\xe9y");
        let (_, key) = parse_short_string(&frame[..]).unwrap();
        let mut nested = FieldTable::default();
        nested.insert(key.clone(), AMQPValue::Boolean(true));
        let mut headers = FieldTable::default();
        headers.insert("outer".into(), AMQPValue::FieldTable(nested));
        let props = BasicProperties::default().with_headers(headers);
        let why = undecodable_field(&"".into(), &"q".into(), &props).expect("found");
        assert!(why.contains("headers.outer"), "{why}");

        let mut headers = FieldTable::default();
        headers.insert(
            "list".into(),
            AMQPValue::FieldArray(vec![AMQPValue::ShortString(key)].into()),
        );
        let props = BasicProperties::default().with_headers(headers);
        let why = undecodable_field(&"".into(), &"q".into(), &props).expect("found");
        assert!(why.contains("headers.list[0]"), "{why}");

        let fine = BasicProperties::default()
            .with_message_id("m-1".into())
            .with_headers(FieldTable::default());
        assert_eq!(undecodable_field(&"".into(), &"q".into(), &fine), None);
    }

    #[test]
    fn properties_size_matches_the_codec() {
        let mut headers = FieldTable::default();
        headers.insert("a".into(), AMQPValue::LongString("x".repeat(1000).into()));
        headers.insert("n".into(), AMQPValue::LongLongInt(7));
        let props = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_priority(3)
            .with_timestamp(1)
            .with_message_id("m".into())
            .with_user_id("guest".into())
            .with_headers(headers);
        assert_eq!(
            properties_size(&props),
            written(gen_properties(&props)).len()
        );
    }
}
