//! Which values PostgreSQL refuses in a row, checked before the row is sent.

use std::time::SystemTime;

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};
use lapin::BasicProperties;

use super::{check_row, pg_text, text_problem, NewRow, MAX_INDEXED_TEXT_BYTES};

fn row() -> NewRow {
    NewRow {
        queue: "shipment.requested".into(),
        body: b"{\"orderId\":48213}\0binary bodies are bytea".to_vec(),
        properties: serde_json::Value::Null,
        attempt: 2,
        next_attempt_at: None,
        dependency: Some("carrier".into()),
        tenant: Some("acme".into()),
        last_error: "carrier 503".into(),
        error_name: "CarrierError".into(),
        message_id: Some("m-1".into()),
        correlation_id: Some("c-1".into()),
        first_failed_at: SystemTime::now(),
    }
}

/// `props` as the consumer stores them: lapin's properties as JSON.
fn stored(props: BasicProperties) -> serde_json::Value {
    serde_json::to_value(&props).unwrap()
}

fn headers(entries: &[(&str, AMQPValue)]) -> BasicProperties {
    let mut t = FieldTable::default();
    for (k, v) in entries {
        t.insert((*k).into(), v.clone());
    }
    BasicProperties::default()
        .with_message_id("m-1".into())
        .with_headers(t)
}

#[test]
fn a_row_postgresql_would_refuse_is_told_with_its_column_and_limit() {
    let long = "d".repeat(MAX_INDEXED_TEXT_BYTES + 1);
    let at_limit = "d".repeat(MAX_INDEXED_TEXT_BYTES);
    let nested = {
        let mut inner = FieldTable::default();
        inner.insert("note".into(), AMQPValue::ShortString("a\0b".into()));
        AMQPValue::FieldTable(inner)
    };
    let cases: Vec<(&str, NewRow, Option<&str>)> = vec![
        ("a plain row", row(), None),
        (
            "NUL in error texts (the library's own, written as U+FFFD)",
            NewRow {
                last_error: "bad\0byte".into(),
                error_name: "Nul\0Error".into(),
                ..row()
            },
            None,
        ),
        (
            "a dependency at the limit",
            NewRow {
                dependency: Some(at_limit.clone()),
                tenant: Some(at_limit),
                ..row()
            },
            None,
        ),
        (
            "a long message id (not indexed)",
            NewRow {
                message_id: Some("m".repeat(255)),
                ..row()
            },
            None,
        ),
        (
            "NUL in a long-string header (stored as bytes)",
            NewRow {
                properties: stored(headers(&[(
                    "x-blob",
                    AMQPValue::LongString(LongString::from(b"a\0b".to_vec())),
                )])),
                ..row()
            },
            None,
        ),
        (
            "NUL in the dependency",
            NewRow {
                dependency: Some("carrier\0eu".into()),
                ..row()
            },
            Some("column dependency holds a NUL character"),
        ),
        (
            "a dependency over the limit",
            NewRow {
                dependency: Some(long.clone()),
                ..row()
            },
            Some("column dependency is 2601 bytes, over the 2600 bytes of an indexed value"),
        ),
        (
            "a tenant over the limit",
            NewRow {
                tenant: Some(long),
                ..row()
            },
            Some("column tenant is 2601 bytes"),
        ),
        (
            "NUL in the queue",
            NewRow {
                queue: "q\0".into(),
                ..row()
            },
            Some("column queue holds a NUL character"),
        ),
        (
            "NUL in the message id",
            NewRow {
                message_id: Some("m\0".into()),
                ..row()
            },
            Some("column message_id holds a NUL character"),
        ),
        (
            "NUL in the correlation id",
            NewRow {
                correlation_id: Some("\0".into()),
                ..row()
            },
            Some("column correlation_id holds a NUL character"),
        ),
        (
            "NUL in a property",
            NewRow {
                properties: stored(BasicProperties::default().with_app_id("app\0".into())),
                ..row()
            },
            Some("column properties (jsonb): the property app_id holds a NUL character"),
        ),
        (
            "NUL in a short-string header",
            NewRow {
                properties: stored(headers(&[(
                    "x-note",
                    AMQPValue::ShortString("a\0b".into()),
                )])),
                ..row()
            },
            Some("column properties (jsonb): the header 'x-note' holds a NUL character"),
        ),
        (
            "NUL in a header name",
            NewRow {
                properties: stored(headers(&[("x-\0", AMQPValue::Boolean(true))])),
                ..row()
            },
            Some("a name in the header 'x-\\u0000' holds a NUL character"),
        ),
        (
            "NUL in a nested table",
            NewRow {
                properties: stored(headers(&[("x-meta", nested.clone())])),
                ..row()
            },
            Some("the header 'x-meta.note' holds a NUL character"),
        ),
        (
            "NUL in an array",
            NewRow {
                properties: stored(headers(&[(
                    "x-list",
                    AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::Boolean(true), nested])),
                )])),
                ..row()
            },
            Some("the header 'x-list[1].note' holds a NUL character"),
        ),
    ];
    for (case, row, refused) in cases {
        let got = check_row(&row);
        match refused {
            None => assert_eq!(got, Ok(()), "{case}"),
            Some(why) => {
                let e = got.expect_err(case);
                assert!(e.contains(why), "{case}: {e}");
            }
        }
    }
}

#[test]
fn a_value_is_refused_for_a_nul_or_its_size_when_indexed() {
    let cases = [
        ("carrier", None, None),
        ("", Some(0), None),
        ("carrier", Some(7), None),
        (
            "carrier",
            Some(6),
            Some("dependency is 7 bytes, over the 6 bytes"),
        ),
        (
            "\0",
            None,
            Some("dependency holds a NUL character (\\u0000)"),
        ),
        ("é\0", Some(100), Some("NUL")),
        // Bytes, not characters: 3 characters of 2 bytes each.
        ("ééé", Some(5), Some("6 bytes")),
    ];
    for (value, max, refused) in cases {
        let got = text_problem("dependency", value, max);
        match refused {
            None => assert_eq!(got, None, "{value:?}"),
            Some(why) => {
                let e = got.unwrap_or_else(|| panic!("{value:?} is refused"));
                assert!(e.contains(why), "{value:?}: {e}");
            }
        }
    }
}

#[test]
fn the_librarys_own_texts_are_made_storable() {
    assert_eq!(pg_text("carrier 503"), "carrier 503");
    assert!(matches!(
        pg_text("carrier 503"),
        std::borrow::Cow::Borrowed(_)
    ));
    assert_eq!(pg_text("bad\0byte\0"), "bad\u{FFFD}byte\u{FFFD}");
    assert_eq!(text_problem("error", &pg_text("a\0b"), None), None);
}
