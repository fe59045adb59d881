//! Finding the short strings of a delivery that are not UTF-8 (lapin keeps
//! their bytes), described for `retry-last-error`.

use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;

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
