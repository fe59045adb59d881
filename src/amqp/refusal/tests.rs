use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};
use lapin::BasicProperties;

use super::*;

fn with_header(name: &str, v: AMQPValue) -> BasicProperties {
    let mut h = FieldTable::default();
    h.insert(name.into(), v);
    BasicProperties::default().with_headers(h)
}

fn array() -> AMQPValue {
    AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::LongString(
        LongString::from("audit"),
    )]))
}

#[test]
fn what_the_broker_refuses_is_told_before_sending() {
    let three = Limits::new("guest", Some("3.10.8"), 131_072);
    let four = Limits::new("guest", Some("4.3.6"), 131_072);
    let ok = BasicProperties::default()
        .with_user_id("guest".into())
        .with_expiration("60000".into())
        .with_delivery_mode(2);
    assert_eq!(three.check(&ok, 10), Ok(()));
    assert_eq!(four.check(&ok, 10), Ok(()));

    let cases = [
        (
            BasicProperties::default().with_user_id("bob".into()),
            "user-id 'bob'",
        ),
        (
            BasicProperties::default().with_expiration("-1".into()),
            "expiration '-1'",
        ),
        (
            BasicProperties::default().with_expiration("abc".into()),
            "expiration 'abc'",
        ),
        (
            BasicProperties::default().with_expiration("4294967296".into()),
            "expiration",
        ),
        (with_header("CC", AMQPValue::LongLongInt(5)), "'CC' header"),
        (
            with_header("BCC", AMQPValue::LongString(LongString::from("q"))),
            "'BCC' header",
        ),
    ];
    for (props, says) in cases {
        for limits in [&three, &four] {
            match limits.check(&props, 10) {
                Err(Refused::Properties(why)) => assert!(why.contains(says), "{why}"),
                other => panic!("{props:?}: {other:?}"),
            }
        }
    }
    // An array routes; its elements are the broker's to filter.
    assert_eq!(four.check(&with_header("CC", array()), 10), Ok(()));

    // RabbitMQ 3.x refuses a delivery mode other than 1 or 2; 4.x takes it.
    let seven = BasicProperties::default().with_delivery_mode(7);
    assert!(
        matches!(three.check(&seven, 1), Err(Refused::Properties(w)) if w.contains("delivery mode is 7"))
    );
    assert_eq!(four.check(&seven, 1), Ok(()));
}

#[test]
fn the_body_is_held_to_the_versions_default_until_the_broker_names_its_own() {
    let three = Limits::new("guest", Some("3.10.8"), 131_072);
    let four = Limits::new("guest", Some("4.3.6"), 131_072);
    let unknown = Limits::new("guest", None, 131_072);
    let p = BasicProperties::default();
    assert_eq!(three.check(&p, MAX_MESSAGE_SIZE_3), Ok(()));
    assert!(matches!(
        three.check(&p, MAX_MESSAGE_SIZE_3 + 1),
        Err(Refused::TooLarge(_))
    ));
    assert_eq!(four.check(&p, MAX_MESSAGE_SIZE_4), Ok(()));
    assert!(
        matches!(four.check(&p, 17 << 20), Err(Refused::TooLarge(w)) if w.contains("17825792"))
    );
    assert_eq!(unknown.max_message_size(), MAX_MESSAGE_SIZE_4);

    three.learn(
        "PRECONDITION_FAILED - message size 2000000 is larger than configured max size 1048576",
    );
    assert_eq!(three.max_message_size(), 1_048_576);
    assert!(matches!(
        three.check(&p, 2_000_000),
        Err(Refused::TooLarge(_))
    ));
    three.learn("NOT_FOUND - no exchange 'x' in vhost '/'");
    assert_eq!(three.max_message_size(), 1_048_576);
}

#[test]
fn properties_larger_than_a_frame_are_refused() {
    let limits = Limits::new("guest", Some("4.3.6"), 4096);
    let big = with_header(
        "note",
        AMQPValue::LongString(LongString::from("x".repeat(5000))),
    );
    assert!(
        matches!(limits.check(&big, 1), Err(Refused::Properties(w)) if w.contains("more than the 4096 of a frame"))
    );
}

#[test]
fn a_close_is_charged_to_the_publishes_it_names() {
    let missing = "NOT_FOUND - no exchange 'orders' in vhost '/'";
    assert!(charged_to(404, missing, "orders", 1));
    assert!(!charged_to(404, missing, "other", 1));
    assert!(!charged_to(404, missing, "order", 1));
    let internal = "ACCESS_REFUSED - cannot publish to internal exchange 'hidden' in vhost '/'";
    assert!(charged_to(403, internal, "hidden", 1));
    assert!(!charged_to(403, internal, "orders", 1));
    let size =
        "PRECONDITION_FAILED - message size 17825792 is larger than configured max size 16777216";
    assert!(charged_to(406, size, "", 17_825_792));
    assert!(!charged_to(406, size, "", 100));
    // A property's refusal names no publish: each is checked before it is sent.
    let user =
        "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was 'guest'";
    assert!(!charged_to(406, user, "", 1));
    // Codes that say nothing about one publish are charged to none.
    assert!(!charged_to(
        320,
        "CONNECTION_FORCED - broker forced connection closure",
        "orders",
        1
    ));
    assert!(!charged_to(541, "INTERNAL_ERROR", "orders", 1));
}
