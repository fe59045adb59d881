//! What the store, the intake and the scheduler share about rows: a new
//! row, the values PostgreSQL refuses in one, how a column is read, how a
//! database error reads, and when a pause covers a row.

use std::borrow::Cow;
use std::time::SystemTime;

use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

use crate::error::{Error, ErrorKind, Result};

/// Whether a pause (`p`) covers a row (`m`): every field the pause gives matches.
pub(super) const PAUSE_MATCHES: &str = "(p.dependency IS NULL OR p.dependency = m.dependency)
     AND (p.tenant IS NULL OR p.tenant = m.tenant)
     AND (p.error_name IS NULL OR p.error_name = m.error_name)";

/// A failed message on its way into the table.
#[derive(Debug, Clone)]
pub(crate) struct NewRow {
    /// The work queue it goes back to.
    pub queue: String,
    /// The body.
    pub body: Vec<u8>,
    /// Its properties and headers (lapin's `BasicProperties` as JSON, every AMQP type kept).
    pub properties: serde_json::Value,
    /// `retry-attempt` when it is published again.
    pub attempt: u32,
    /// When it is due; `None` waits for a person (`resume`, `retryNow`).
    pub next_attempt_at: Option<SystemTime>,
    /// What it waits on (a carrier, a service), for pause and resume.
    pub dependency: Option<String>,
    /// Whose it is, for pause and resume.
    pub tenant: Option<String>,
    /// The handler's error message.
    pub last_error: String,
    /// The handler's error name.
    pub error_name: String,
    /// The message id.
    pub message_id: Option<String>,
    /// The correlation id.
    pub correlation_id: Option<String>,
    /// When it failed first.
    pub first_failed_at: SystemTime,
}

/// What became of a row on its way into the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Stored, with this id.
    Row(i64),
    /// Not stored: PostgreSQL refuses what the message holds (or would: the
    /// reason names the column and the limit). Another try would be refused
    /// alike, so the message parks.
    Refused(String),
}

/// The most bytes of a text value that goes into an index of the tables
/// (`dependency`, `tenant`, a pause's selector): a btree entry holds at
/// most 2704 bytes on PostgreSQL's 8 kB pages, less the entry's header and
/// the other columns of the index.
pub(crate) const MAX_INDEXED_TEXT_BYTES: usize = 2600;

/// Why PostgreSQL would refuse `value` as the text of `what`, if it would:
/// a NUL character (text cannot hold one), or more than `max` bytes for a
/// value that is indexed.
pub(crate) fn text_problem(what: &str, value: &str, max: Option<usize>) -> Option<String> {
    if value.contains('\0') {
        return Some(format!(
            "{what} holds a NUL character (\\u0000), which PostgreSQL's text cannot store"
        ));
    }
    match max {
        Some(max) if value.len() > max => Some(format!(
            "{what} is {} bytes, over the {max} bytes of an indexed value (PostgreSQL's index entries hold at most 2704)",
            value.len()
        )),
        _ => None,
    }
}

/// Why PostgreSQL would refuse `row`, naming the column and the limit, if
/// it would: checked before the row is sent. The error texts are the
/// library's own and are made storable instead (see [`pg_text`]).
pub(crate) fn check_row(row: &NewRow) -> std::result::Result<(), String> {
    let indexed = Some(MAX_INDEXED_TEXT_BYTES);
    let texts = [
        ("column queue", Some(row.queue.as_str()), None),
        ("column dependency", row.dependency.as_deref(), indexed),
        ("column tenant", row.tenant.as_deref(), indexed),
        ("column message_id", row.message_id.as_deref(), None),
        ("column correlation_id", row.correlation_id.as_deref(), None),
    ];
    if let Some(problem) = texts
        .into_iter()
        .find_map(|(what, value, max)| text_problem(what, value?, max))
    {
        return Err(problem);
    }
    if let Some(at) = nul_in_json(&row.properties) {
        return Err(format!(
            "column properties (jsonb): {at} holds a NUL character (\\u0000), which PostgreSQL's jsonb cannot store"
        ));
    }
    Ok(())
}

/// The names lapin gives the kinds of AMQP values when it writes a header as
/// JSON (`{"LongString": …}`): left out of the path of a value.
const VALUE_KINDS: [&str; 17] = [
    "Boolean",
    "ShortShortInt",
    "ShortShortUInt",
    "ShortInt",
    "ShortUInt",
    "LongInt",
    "LongUInt",
    "LongLongInt",
    "Float",
    "Double",
    "DecimalValue",
    "ShortString",
    "LongString",
    "FieldArray",
    "Timestamp",
    "FieldTable",
    "ByteArray",
];

/// Where in `v` (a message's properties as JSON) a string or a key holds a
/// NUL, if one does: `the header 'x-note'`, `the property message_id`.
fn nul_in_json(v: &serde_json::Value) -> Option<String> {
    fn walk(v: &serde_json::Value, path: &mut Vec<String>) -> Option<String> {
        match v {
            serde_json::Value::String(s) if s.contains('\0') => Some(describe(path)),
            serde_json::Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                path.push(format!("[{i}]"));
                let found = walk(item, path);
                path.pop();
                found
            }),
            serde_json::Value::Object(map) => {
                let kind_only = map.len() == 1;
                map.iter().find_map(|(k, item)| {
                    let tag = kind_only && VALUE_KINDS.contains(&k.as_str());
                    if !tag {
                        path.push(k.clone());
                    }
                    let found = if k.contains('\0') {
                        Some(format!("a name in {}", describe(path)))
                    } else {
                        walk(item, path)
                    };
                    if !tag {
                        path.pop();
                    }
                    found
                })
            }
            _ => None,
        }
    }
    fn describe(path: &[String]) -> String {
        let shown = |p: &[String]| p.join(".").replace(".[", "[").replace('\0', "\\u0000");
        match path {
            [] => "the properties".to_owned(),
            [headers, rest @ ..] if headers == "headers" && !rest.is_empty() => {
                format!("the header '{}'", shown(rest))
            }
            [property] if property == "headers" => "the headers".to_owned(),
            [property, ..] => format!("the property {property}"),
        }
    }
    walk(v, &mut Vec::new())
}

/// `s` as PostgreSQL's text takes it: a NUL (which it refuses) becomes U+FFFD.
/// For the library's own texts (error messages and names), which are
/// written whatever they hold.
pub(crate) fn pg_text(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(s)
    }
}

/// The refusal of a row for what it holds, when `e` is one: PostgreSQL's
/// data exceptions (SQLSTATE class 22: a NUL, a character the database's
/// encoding lacks) and exceeded limits (class 54: an index entry too large).
/// Anything else (the database is down, a table of another shape) is not.
pub(crate) fn content_refusal(e: &Error) -> Option<String> {
    let pg = std::error::Error::source(e)?.downcast_ref::<tokio_postgres::Error>()?;
    let db = pg.as_db_error()?;
    let code = db.code().code();
    if !(code.starts_with("22") || code.starts_with("54")) {
        return None;
    }
    let mut text = format!(
        "PostgreSQL refused the row (SQLSTATE {code}): {}",
        db.message()
    );
    if let Some(detail) = db.detail() {
        text.push_str(&format!(" ({detail})"));
    }
    Some(text)
}

/// Column `i` of `row` as a `T`; a column of another type (a table changed by
/// hand) is a `RETRY_TABLE` error naming it, not a panic.
pub(crate) fn column<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    row.try_get(i).map_err(|e| {
        let name = row.columns().get(i).map_or("?", |c| c.name());
        Error::with_source(
            ErrorKind::RetryTable,
            format!(
                "column '{name}' of the retry table does not read as {}: {e}",
                std::any::type_name::<T>()
            ),
            e,
        )
    })
}

/// `e`'s message followed by those of the errors under it, each once:
/// tokio-postgres and deadpool keep the cause out of their own messages.
pub(super) fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

pub(crate) fn table_error(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::with_source(
        ErrorKind::RetryTable,
        format!("{what}: {}", with_causes(&e)),
        e,
    )
}

#[cfg(test)]
mod tests;
