//! Conversions between native values and the objects JavaScript sees.

use std::future::Future;

use lapin::types::ShortString;
use lapin::BasicProperties;
use napi::bindgen_prelude::{AsyncBlock, AsyncBlockBuilder};
use napi::Env;
use napi_derive::napi;

use crate::amqp::fields::table_to_json;
use crate::amqp::properties::Properties;
use crate::error::{Error as AmqpError, ErrorKind};
use crate::redact;
use crate::retry::{parse_delays as parse_delay_list, DelayError};

/// Turns an AMQP-layer error into a JavaScript error carrying its code.
pub(crate) fn js_error(e: AmqpError) -> napi::Error {
    napi::Error::from_reason(e.coded_message())
}

/// An `INVALID_OPTIONS` error for JavaScript.
pub(crate) fn invalid(message: impl Into<String>) -> napi::Error {
    js_error(AmqpError::new(ErrorKind::InvalidOptions, message))
}

/// Message properties as JavaScript reads and writes them.
#[napi(object)]
#[derive(Default)]
pub struct MessageProperties {
    /// Application message id.
    pub message_id: Option<String>,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// MIME content type.
    pub content_type: Option<String>,
    /// MIME content encoding.
    pub content_encoding: Option<String>,
    /// Message type name.
    #[napi(js_name = "type")]
    pub kind: Option<String>,
    /// Creating application id.
    pub app_id: Option<String>,
    /// Seconds since the epoch, as AMQP carries it.
    pub timestamp: Option<i64>,
    /// Priority, 0 to 255.
    pub priority: Option<u32>,
    /// 1 transient, 2 persistent.
    pub delivery_mode: Option<u32>,
    /// Reply-to address.
    pub reply_to: Option<String>,
    /// Per-message TTL in milliseconds, as a string.
    pub expiration: Option<String>,
    /// Creating user id (checked by the broker).
    pub user_id: Option<String>,
    /// Application headers.
    pub headers: Option<serde_json::Value>,
}

impl MessageProperties {
    /// Builds AMQP properties (see [`Properties::to_amqp`]); publishes are
    /// persistent unless told otherwise.
    pub fn into_amqp(self) -> napi::Result<BasicProperties> {
        Properties {
            message_id: self.message_id,
            correlation_id: self.correlation_id,
            content_type: self.content_type,
            content_encoding: self.content_encoding,
            kind: self.kind,
            app_id: self.app_id,
            timestamp: self.timestamp,
            priority: self.priority,
            delivery_mode: self.delivery_mode,
            reply_to: self.reply_to,
            expiration: self.expiration,
            user_id: self.user_id,
            headers: self.headers,
        }
        .to_amqp()
        .map_err(invalid)
    }
}

/// Whether V8's `JSON.parse` would intern `s`: it interns string values of
/// up to 10 characters, in the old generation, where they stay until a full
/// collection; unique short values (message ids such as `"48213"`) would grow
/// the heap with every message.
pub(crate) fn interned_by_json_parse(s: &str) -> bool {
    s.len() > 1 && s.len() <= 40 && s.encode_utf16().count() <= 10
}

/// Appends `s` to `out` as a JSON string.
pub(crate) fn json_str(out: &mut Vec<u8>, s: &str) {
    // Writing a string to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Appends AMQP properties to `out` as one JSON object with
/// [`MessageProperties`]' names (absent ones left out; `headers` always
/// there). A `messageId` or `correlationId` that `JSON.parse` would intern is
/// moved to `strings` and written as its index there.
pub(crate) fn write_properties_json(
    out: &mut Vec<u8>,
    p: &BasicProperties,
    strings: &mut Vec<String>,
) {
    use std::io::Write;
    out.push(b'{');
    let fields: [(&str, &Option<ShortString>); 9] = [
        ("messageId", p.message_id()),
        ("correlationId", p.correlation_id()),
        ("contentType", p.content_type()),
        ("contentEncoding", p.content_encoding()),
        ("type", p.kind()),
        ("appId", p.app_id()),
        ("replyTo", p.reply_to()),
        ("expiration", p.expiration()),
        ("userId", p.user_id()),
    ];
    for (key, value) in fields {
        if let Some(v) = value {
            let _ = write!(out, "\"{key}\":");
            let v = v.as_str();
            if matches!(key, "messageId" | "correlationId") && interned_by_json_parse(v) {
                let _ = write!(out, "{}", strings.len());
                strings.push(v.to_owned());
            } else {
                json_str(out, v);
            }
            out.push(b',');
        }
    }
    if let Some(t) = p.timestamp() {
        let _ = write!(out, "\"timestamp\":{t},");
    }
    if let Some(v) = p.priority() {
        let _ = write!(out, "\"priority\":{v},");
    }
    if let Some(v) = p.delivery_mode() {
        let _ = write!(out, "\"deliveryMode\":{v},");
    }
    out.extend_from_slice(b"\"headers\":");
    match p.headers() {
        Some(h) if !h.inner().is_empty() => {
            let _ = serde_json::to_writer(&mut *out, &table_to_json(h));
        }
        _ => out.extend_from_slice(b"{}"),
    }
    out.push(b'}');
}

/// A parsed delay: milliseconds and the label used in queue names.
#[napi(object)]
pub(crate) struct DelayInfo {
    /// Milliseconds.
    pub ms: f64,
    /// The largest exact unit: `500ms`, `5s`, `1m`, `2h`.
    pub label: String,
}

/// Parses and checks a list of delays (`"5s"`, `"1m"`, `"500"` milliseconds);
/// rejects with `INVALID_OPTIONS`, naming `option` (default `onFailure.delays`),
/// when one is malformed, zero, repeated or out of order.
#[napi]
pub(crate) fn parse_delays(
    delays: Vec<String>,
    option: Option<String>,
) -> napi::Result<Vec<DelayInfo>> {
    let option = option.as_deref().unwrap_or("onFailure.delays");
    let parsed =
        parse_delay_list(&delays).map_err(|e: DelayError| invalid(format!("{option}: {e}")))?;
    Ok(parsed
        .into_iter()
        .map(|d| DelayInfo {
            ms: d.millis() as f64,
            label: d.label(),
        })
        .collect())
}

/// The codes of the errors the native layer raises (`[CODE] message`), each
/// of which the TypeScript layer maps to its error class.
#[napi]
pub(crate) fn error_codes() -> Vec<&'static str> {
    ErrorKind::ALL.iter().map(|k| k.code()).collect()
}

/// `source` (a URL, URLs separated by commas, or a libpq `key=value`
/// string) with each password replaced by `***`: the form every error, log
/// line, event, page and CLI output shows.
#[napi]
pub(crate) fn redact_url(source: String) -> String {
    redact::redact_url(&source)
}

/// `text` without any part of the passwords that `sources` hold (each a URL,
/// URLs separated by commas, or a libpq `key=value` string), in every form
/// the password may take there.
#[napi]
pub(crate) fn redact_in(text: String, sources: Vec<String>) -> String {
    sources
        .iter()
        .fold(text, |text, source| redact::redact_in(&text, source))
}

/// The promise of a publish whose turn was taken: `send`, given the
/// properties as AMQP's, run on the runtime.
pub(super) fn sent_in_turn<F, S>(
    env: &Env,
    properties: Option<MessageProperties>,
    send: F,
) -> napi::Result<AsyncBlock<()>>
where
    F: FnOnce(BasicProperties) -> S + Send + 'static,
    S: Future<Output = crate::error::Result<()>> + Send,
{
    AsyncBlockBuilder::new(async move {
        let props = properties.unwrap_or_default().into_amqp()?;
        send(props).await.map_err(js_error)
    })
    .build(env)
}

#[cfg(test)]
mod tests {
    use super::interned_by_json_parse;

    #[test]
    fn strings_json_parse_would_intern() {
        assert!(interned_by_json_parse("48213"));
        assert!(interned_by_json_parse("ten chars!"));
        assert!(interned_by_json_parse("\u{1F600}abcdefgh"));
        assert!(!interned_by_json_parse(""));
        assert!(!interned_by_json_parse("a"));
        assert!(!interned_by_json_parse("eleven char"));
        assert!(!interned_by_json_parse("\u{1F600}abcdefghi"));
    }
}
