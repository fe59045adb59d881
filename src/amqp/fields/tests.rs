//! Short strings that are not UTF-8 keep their bytes through lapin's codec,
//! are found and described, and are counted at their size on the wire.

use lapin::protocol::basic::{gen_properties, parse_properties};
use lapin::types::generation::gen_short_string;
use lapin::types::parsing::parse_short_string;
use lapin::types::{AMQPValue, FieldTable};
use lapin::BasicProperties;

use super::{properties_size, undecodable_field};

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
