//! Message properties as the JavaScript API names them (`messageId`,
//! `deliveryMode`, `headers` as JSON), and the one conversion to AMQP's:
//! for a publish from JavaScript and for an outbox row's stored JSON alike.

use lapin::types::ShortString;
use lapin::BasicProperties;
use serde::Deserialize;

use super::fields::table_from_json;

/// Message properties with the API's names; every one may be left out.
/// Read from JSON with the same camelCase keys (an unknown key is refused).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Properties {
    /// Application message id.
    pub message_id: Option<String>,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// MIME content type.
    pub content_type: Option<String>,
    /// MIME content encoding.
    pub content_encoding: Option<String>,
    /// Message type name.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Creating application id.
    pub app_id: Option<String>,
    /// Seconds since the epoch.
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
    /// Application headers, a JSON object.
    pub headers: Option<serde_json::Value>,
}

fn short(field: &str, v: &str) -> Result<ShortString, String> {
    ShortString::try_new(v)
        .map_err(|_| format!("{field} is {} bytes long; AMQP allows at most 255", v.len()))
}

fn octet(field: &str, v: u32) -> Result<u8, String> {
    u8::try_from(v).map_err(|_| format!("{field} must be between 0 and 255, got {v}"))
}

impl Properties {
    /// Reads properties stored as JSON (an outbox row's `properties`).
    pub(crate) fn from_json(v: &serde_json::Value) -> Result<Properties, String> {
        Properties::deserialize(v).map_err(|e| format!("the properties cannot be read: {e}"))
    }

    /// Builds AMQP properties; messages are persistent unless told otherwise.
    /// The error says which property is wrong and why.
    pub(crate) fn to_amqp(&self) -> Result<BasicProperties, String> {
        let mut p = BasicProperties::default()
            .with_delivery_mode(octet("deliveryMode", self.delivery_mode.unwrap_or(2))?);
        let strings = [
            ("messageId", &self.message_id),
            ("correlationId", &self.correlation_id),
            ("contentType", &self.content_type),
            ("contentEncoding", &self.content_encoding),
            ("type", &self.kind),
            ("appId", &self.app_id),
            ("replyTo", &self.reply_to),
            ("expiration", &self.expiration),
            ("userId", &self.user_id),
        ];
        for (field, value) in strings {
            let Some(v) = value else { continue };
            let v = short(field, v)?;
            p = match field {
                "messageId" => p.with_message_id(v),
                "correlationId" => p.with_correlation_id(v),
                "contentType" => p.with_content_type(v),
                "contentEncoding" => p.with_content_encoding(v),
                "type" => p.with_type(v),
                "appId" => p.with_app_id(v),
                "replyTo" => p.with_reply_to(v),
                "expiration" => p.with_expiration(v),
                _ => p.with_user_id(v),
            };
        }
        if let Some(v) = self.timestamp {
            let t =
                u64::try_from(v).map_err(|_| format!("timestamp must not be negative, got {v}"))?;
            p = p.with_timestamp(t);
        }
        if let Some(v) = self.priority {
            p = p.with_priority(octet("priority", v)?);
        }
        if let Some(h) = self.headers.as_ref().filter(|h| !h.is_null()) {
            p = p.with_headers(table_from_json(h)?);
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use lapin::types::{AMQPValue, ShortString};
    use serde_json::json;

    use super::Properties;

    #[test]
    fn stored_json_with_the_api_names_becomes_amqp_properties() {
        let p = Properties::from_json(&json!({
            "messageId": "m-1", "correlationId": "c-1", "contentType": "application/json",
            "type": "order.placed", "appId": "shop", "timestamp": 1_700_000_000, "priority": 5,
            "deliveryMode": 1, "replyTo": "answers", "expiration": "60000",
            "headers": { "tenant": "acme", "n": 3 }
        }))
        .and_then(|p| p.to_amqp())
        .unwrap();
        assert_eq!(p.message_id().as_ref().map(|s| s.as_str()), Some("m-1"));
        assert_eq!(p.kind().as_ref().map(|s| s.as_str()), Some("order.placed"));
        assert_eq!(p.expiration().as_ref().map(|s| s.as_str()), Some("60000"));
        assert_eq!(*p.delivery_mode(), Some(1));
        assert_eq!(*p.priority(), Some(5));
        assert_eq!(*p.timestamp(), Some(1_700_000_000));
        let headers = p.headers().clone().unwrap();
        assert!(matches!(
            headers.inner().get(&ShortString::from("tenant")),
            Some(AMQPValue::LongString(_))
        ));
    }

    #[test]
    fn persistent_unless_told_and_null_headers_are_none() {
        let p = Properties::from_json(&json!({ "headers": null }))
            .and_then(|p| p.to_amqp())
            .unwrap();
        assert_eq!(*p.delivery_mode(), Some(2));
        assert!(p.headers().is_none());
    }

    #[test]
    fn what_cannot_be_published_is_refused_with_the_reason() {
        let refused = |v| {
            Properties::from_json(&v)
                .and_then(|p| p.to_amqp())
                .unwrap_err()
        };
        assert!(refused(json!({ "priority": 300 })).contains("priority"));
        assert!(refused(json!({ "messageId": "x".repeat(256) })).contains("messageId"));
        assert!(refused(json!({ "timestamp": -1 })).contains("timestamp"));
        assert!(refused(json!({ "headers": [1] })).contains("headers"));
        assert!(refused(json!({ "message_id": "m" })).contains("unknown field"));
        assert!(refused(json!("text")).contains("cannot be read"));
    }
}
