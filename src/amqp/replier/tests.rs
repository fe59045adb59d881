//! Which replies the broker refuses, checked before they are sent.

use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::BasicProperties;

use super::{check_direct_reply_to, check_reply, decode_base64};

/// Base64 of an Erlang pid on `node` (NEW_PID_EXT, as RabbitMQ writes it),
/// with a creation of `creation` bytes.
fn pid(node: &str, creation: usize) -> String {
    let mut b = vec![131, 88, 118, 0, node.len() as u8];
    b.extend_from_slice(node.as_bytes());
    b.extend(std::iter::repeat_n(0u8, 8 + creation));
    encode(&b)
}

fn encode(b: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, c)| n | u32::from(*c) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn base64_is_read_only_in_the_form_erlang_writes_it() {
    for (text, bytes) in [
        ("AAAA", Some(vec![0, 0, 0])),
        ("YQ==", Some(b"a".to_vec())),
        ("YWI=", Some(b"ab".to_vec())),
        ("YWJj", Some(b"abc".to_vec())),
        ("+/+/", Some(vec![0xfb, 0xff, 0xbf])),
        ("", None),
        ("YQ", None),
        ("YQ=", None),
        ("Y===", None),
        ("YQ==YQ==", None),
        ("Y=Q=", None),
        ("YW-j", None),
        ("YW_j", None),
    ] {
        assert_eq!(decode_base64(text), bytes, "{text}");
    }
    let b: Vec<u8> = (0..=255).collect();
    assert_eq!(decode_base64(&encode(&b)), Some(b));
}

#[test]
fn a_direct_reply_to_address_is_taken_only_in_the_form_rabbitmq_gives() {
    let key = "ax6nVSZPVefYWVj05BlfNg==";
    let ok = [
        // Names of queues: left to routing.
        "a-reply-queue".to_owned(),
        "amq.gen-JzTY20BRgKO-HjmUJj0wLg".to_owned(),
        "amq.rabbitmq.reply-toX".to_owned(),
        // What RabbitMQ 3.10 gave a requester.
        "amq.rabbitmq.reply-to.g1h2AA1yZXBseUA5MjQ4ODg0AAA1ewAAAAFrDuDc.ax6nVSZPVefYWVj05BlfNg=="
            .to_owned(),
        format!("amq.rabbitmq.reply-to.{}.{key}", pid("reply@12345", 4)),
        format!("amq.rabbitmq.reply-to.{}.{key}", pid("reply@0", 1)),
    ];
    for r in &ok {
        assert_eq!(check_direct_reply_to(r), Ok(()), "{r}");
    }
    let small_atom = {
        let mut b = vec![131, 88, 119, 7];
        b.extend_from_slice(b"reply@7");
        b.extend([0u8; 12]);
        encode(&b)
    };
    assert_eq!(
        check_direct_reply_to(&format!("amq.rabbitmq.reply-to.{small_atom}.k")),
        Ok(())
    );
    let refused = [
        ("amq.rabbitmq.reply-to".to_owned(), "pseudo-queue itself"),
        ("amq.rabbitmq.reply-to.".to_owned(), "two parts"),
        ("amq.rabbitmq.reply-to.garbage".to_owned(), "two parts"),
        ("amq.rabbitmq.reply-to.a.b.c".to_owned(), "two parts"),
        ("amq.rabbitmq.reply-to..a.b".to_owned(), "two parts"),
        ("amq.rabbitmq.reply-to.a.".to_owned(), "a part is empty"),
        ("amq.rabbitmq.reply-to.abc.def".to_owned(), "not base64"),
        (
            "amq.rabbitmq.reply-to.g1h2AA==.abc".to_owned(),
            "not an Erlang pid",
        ),
        (
            format!("amq.rabbitmq.reply-to.{}.{key}", encode(b"hello world!")),
            "not an Erlang pid",
        ),
        (
            format!("amq.rabbitmq.reply-to.{}.{key}", pid("rabbit", 4)),
            "not reply@<digits>",
        ),
        (
            format!("amq.rabbitmq.reply-to.{}.{key}", pid("reply@abc", 4)),
            "not reply@<digits>",
        ),
        (
            format!("amq.rabbitmq.reply-to.{}.{key}", pid("reply@-1", 4)),
            "not reply@<digits>",
        ),
        (
            format!("amq.rabbitmq.reply-to.{}.{key}", pid("reply@", 4)),
            "not reply@<digits>",
        ),
        (
            format!("amq.rabbitmq.reply-to.{}.{key}", pid("reply@1", 2)),
            "not an Erlang pid",
        ),
        (
            format!("amq.rabbitmq.reply-to.{}.a\u{301}", pid("reply@1", 4)),
            "not printable ASCII",
        ),
    ];
    for (r, why) in &refused {
        let e = check_direct_reply_to(r).expect_err(r);
        assert!(e.contains(why), "{r}: {e}");
        assert!(e.contains(&format!("reply-to '{r}'")), "{r}: {e}");
    }
}

#[test]
fn a_reply_the_broker_would_refuse_is_told_before_it_is_sent() {
    let frame_max = 131_072;
    let plain = BasicProperties::default().with_correlation_id("req-1".into());
    assert_eq!(
        check_reply("a-reply-queue", &plain, "guest", frame_max),
        Ok(())
    );
    let big_headers = {
        let mut t = FieldTable::default();
        t.insert(
            "x-big".into(),
            AMQPValue::LongString(LongString::from(vec![b'x'; 140_000])),
        );
        BasicProperties::default().with_headers(t)
    };
    let cases: [(&str, BasicProperties, Option<&str>); 9] = [
        ("", plain.clone(), Some("reply-to is empty")),
        (
            "amq.rabbitmq.reply-to.abc.def",
            plain.clone(),
            Some("not a direct reply-to address"),
        ),
        ("q", plain.clone().with_user_id("guest".into()), None),
        (
            "q",
            plain.clone().with_user_id("mallory".into()),
            Some("user-id 'mallory'"),
        ),
        ("q", plain.clone().with_expiration("60000".into()), None),
        (
            "q",
            plain.clone().with_expiration("-1".into()),
            Some("expiration '-1'"),
        ),
        (
            "q",
            plain.clone().with_expiration("4294967296".into()),
            Some("expiration"),
        ),
        (
            "q",
            plain.clone().with_expiration("1e3".into()),
            Some("expiration"),
        ),
        ("q", big_headers, Some("more than the 131072 of a frame")),
    ];
    for (reply_to, props, refused) in cases {
        let got = check_reply(reply_to, &props, "guest", frame_max);
        match refused {
            None => assert_eq!(got, Ok(()), "{reply_to} {props:?}"),
            Some(why) => {
                let e = got.expect_err(reply_to);
                assert!(e.contains(why), "{reply_to}: {e}");
            }
        }
    }
    assert!(check_reply(&"q".repeat(256), &plain, "guest", frame_max)
        .is_err_and(|e| e.contains("256 bytes")));
}
