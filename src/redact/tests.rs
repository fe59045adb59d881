use super::{percent_decode, redact_each, redact_in, redact_url};

/// A connection string, as redacted, and the passwords it holds (as the
/// server sees them, decoded).
type Case = (&'static str, &'static str, &'static [&'static str]);

const CASES: &[Case] = &[
    // URLs with user info.
    // The user is shown, even when it is the password too.
    (
        "amqp://guest:guest@127.0.0.1:5672",
        "amqp://guest:***@127.0.0.1:5672",
        &[],
    ),
    (
        "amqps://app:s3cret@rabbit/orders",
        "amqps://app:***@rabbit/orders",
        &["s3cret"],
    ),
    (
        "guest:s3cret@127.0.0.1:5672",
        "guest:***@127.0.0.1:5672",
        &["s3cret"],
    ),
    ("amqp://u:@host", "amqp://u:***@host", &[]),
    // Without user info, or without a password.
    ("amqp://u@host", "amqp://u@host", &[]),
    ("amqp://host:5672", "amqp://host:5672", &[]),
    ("amqp://h:5672/vh?heartbeat=10", "amqp://h:5672/vh?heartbeat=10", &[]),
    ("amqp://[::1]:5672", "amqp://[::1]:5672", &[]),
    ("not a url", "not a url", &[]),
    ("", "", &[]),
    (
        "amqp://u:p4ssword@[::1]:5672",
        "amqp://u:***@[::1]:5672",
        &["p4ssword"],
    ),
    // Percent-encoded special characters.
    (
        "amqps://u:p%40ss%2Cw%2Fo%25rd@host/vh",
        "amqps://u:***@host/vh",
        &["p@ss,w/o%rd"],
    ),
    // Special characters the user did not encode.
    (
        "amqp://u:p@ss@host/vh",
        "amqp://u:***@host/vh",
        &["p@ss"],
    ),
    (
        "amqp://guest:s3cret/x+y@127.0.0.1:5672",
        "amqp://guest:***@127.0.0.1:5672",
        &["s3cret/x+y"],
    ),
    (
        "amqp://u:pass,word@host",
        "amqp://u:***@host",
        &["pass,word"],
    ),
    ("amqp://u:50%off!@host", "amqp://u:***@host", &["50%off!"]),
    (
        "amqp://u:hash#tag@host/vh",
        "amqp://u:***@host/vh",
        &["hash#tag"],
    ),
    ("amqp://u:why?not@host", "amqp://u:***@host", &["why?not"]),
    (
        "amqp://u:w@t,w%r/d#x@127.0.0.1:5672",
        "amqp://u:***@127.0.0.1:5672",
        &["w@t,w%r/d#x"],
    ),
    // A password whose `@` is missing, or a port that is not one.
    ("amqp://u:s3cret", "amqp://u:***", &["s3cret"]),
    // Lists of URLs (the nodes of a cluster).
    (
        "amqp://u:p1zz9y@h1,amqp://u:p2yy8x@h2",
        "amqp://u:***@h1,amqp://u:***@h2",
        &["p1zz9y", "p2yy8x"],
    ),
    (
        "amqp://u:p1zz9y@h1, amqps://v:p2yy8x@h2:5671/vh",
        "amqp://u:***@h1, amqps://v:***@h2:5671/vh",
        &["p1zz9y", "p2yy8x"],
    ),
    (
        "amqp://u:a%2Cb1@h1,amqp://v:c%2Cd2@h2",
        "amqp://u:***@h1,amqp://v:***@h2",
        &["a,b1", "c,d2"],
    ),
    (
        "amqp://u:p1zz9y@h1,u:p2yy8x@h2:5672",
        "amqp://u:***@h1,u:***@h2:5672",
        &["p1zz9y", "p2yy8x"],
    ),
    (
        "amqp://u:p1zz9y@h1:5672,h2:5672,h3/vh",
        "amqp://u:***@h1:5672,h2:5672,h3/vh",
        &["p1zz9y"],
    ),
    (
        "amqp://u:pass,word@h1,amqp://u:x@h2",
        "amqp://u:***@h1,amqp://u:***@h2",
        &["pass,word", "x"],
    ),
    (
        "amqp://u:pa@ss,wo@rd@h1,h2",
        "amqp://u:***@h1,h2",
        &["pa@ss,wo@rd"],
    ),
    (
        "postgresql://u:s3cret@h1:5432,h2:5433/db",
        "postgresql://u:***@h1:5432,h2:5433/db",
        &["s3cret"],
    ),
    // Passwords in the query.
    (
        "postgres://db/app?password=s3cret",
        "postgres://db/app?password=***",
        &["s3cret"],
    ),
    ("amqp://h/?password=x", "amqp://h/?password=***", &["x"]),
    (
        "postgres://u@db/app?sslmode=require&PassWord=a1b2&pass=c3d4&SSLPASSWORD=e5f6&application_name=x",
        "postgres://u@db/app?sslmode=require&PassWord=***&pass=***&SSLPASSWORD=***&application_name=x",
        &["a1b2", "c3d4", "e5f6"],
    ),
    (
        "postgres://db/app?pass%77ord=s3cret",
        "postgres://db/app?pass%77ord=***",
        &["s3cret"],
    ),
    (
        "postgres://u:p1zz9y@db:5432/app?password=p2yy8x",
        "postgres://u:***@db:5432/app?password=***",
        &["p1zz9y", "p2yy8x"],
    ),
    (
        "postgres://db/app?password=a&b@c#d,e%f&user=x",
        "postgres://db/app?password=***&user=x",
        &["a&b@c#d,e%f"],
    ),
    // A raw `@` in a query password, after user info without one.
    (
        "postgres://app@db:5432/app?password=Qz7@x,K9%q/Vt",
        "postgres://app@db:***",
        &["Qz7@x,K9%q/Vt"],
    ),
    (
        "postgres://db/app?password=s3cret&sslmode=require,amqp://u:p2yy8x@h",
        "postgres://db/app?password=***&sslmode=require,amqp://u:***@h",
        &["s3cret", "p2yy8x"],
    ),
    // libpq key=value strings.
    (
        "host=db password=s3cret user=app",
        "host=db password=*** user=app",
        &["s3cret"],
    ),
    (
        "host=db password='s3 cr\\'et' user=app",
        "host=db password=*** user=app",
        &["s3 cr'et"],
    ),
    (
        "host = db  password = s3cret",
        "host = db  password = ***",
        &["s3cret"],
    ),
    (
        "host=db password=s3 cr@t, x user=app",
        "host=db password=*** user=app",
        &["s3 cr@t, x"],
    ),
    (
        "host=db password='never closed user=app",
        "host=db password=***",
        &["never closed user=app"],
    ),
    (
        "PASSWORD=p1zz9y sslpassword=p2yy8x Pass=p3xx7w dbname=app",
        "PASSWORD=*** sslpassword=*** Pass=*** dbname=app",
        &["p1zz9y", "p2yy8x", "p3xx7w"],
    ),
    (
        "host=db user=app dbname=app",
        "host=db user=app dbname=app",
        &[],
    ),
];

/// The parts of `s` of four characters.
fn fragments(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.windows(4).map(|w| w.iter().collect()).collect()
}

fn assert_hidden(text: &str, password: &str, what: &str) {
    if password.chars().count() < 4 {
        return;
    }
    for f in fragments(password) {
        assert!(
            !text.contains(&f),
            "{what}: '{f}' of '{password}' in {text}"
        );
    }
}

#[test]
fn every_form_of_connection_string_is_shown_without_its_passwords() {
    for &(source, want, passwords) in CASES {
        let shown = redact_url(source);
        assert_eq!(shown, want, "{source}");
        for p in passwords {
            assert_hidden(&shown, p, source);
        }
    }
}

#[test]
fn a_text_keeps_no_part_of_any_form_of_a_password() {
    for &(source, _, passwords) in CASES {
        for p in passwords {
            let encoded: String = p
                .bytes()
                .map(|b| format!("%{b:02X}"))
                .collect::<Vec<_>>()
                .concat();
            let texts = [
                format!("could not connect to {source}"),
                format!("password authentication failed: '{p}'"),
                format!("{p:?} is not valid"),
                serde_json::to_string(&format!("bad {p} here")).unwrap(),
                format!("encoded as {encoded}"),
                // What a parser that stopped at one of the characters quotes.
                p.split(['@', '/', ',', '#', '?', '%', ' ', '&'])
                    .collect::<Vec<_>>()
                    .join(" | "),
            ];
            for text in &texts {
                let out = redact_in(text, source);
                assert_hidden(&out, p, &format!("{source} in {text}"));
                if p.chars().count() >= 4 {
                    assert!(!out.contains(p), "{source}: {out}");
                }
            }
        }
    }
}

#[test]
fn a_text_keeps_what_is_not_a_password() {
    assert_eq!(
        redact_in("Invalid URL: 'guest:s3cret@h'", "guest:s3cret@h"),
        "Invalid URL: 'guest:***@h'"
    );
    assert_eq!(
        redact_in(
            "invalid port number 'ss,w' in host 127.0.0.1",
            "amqp://u:p@ss,w%rd@127.0.0.1"
        ),
        "invalid port number '***' in host 127.0.0.1"
    );
    // A short password is hidden where it stands alone, not inside words.
    assert_eq!(
        redact_in("user 'u', password 'p', apple", "amqp://u:p@h"),
        "user 'u', password '***', apple"
    );
    // Two passwords next to each other make one mask.
    assert_eq!(
        redact_in("p1zz9yp2yy8x!", "amqp://u:p1zz9y@h1,amqp://u:p2yy8x@h2"),
        "***!"
    );
    assert_eq!(redact_in("nothing to hide", "amqp://h1"), "nothing to hide");
    assert_eq!(redact_in("", "amqp://u:s3cret@h"), "");
}

#[test]
fn each_url_of_a_list_is_shown_as_part_of_the_list() {
    let urls = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // A password with a comma, split at it as a list is.
    assert_eq!(
        redact_each(&urls(&["amqp://u:pass", "word@h1", "amqp://v:s3cret@h2"])),
        ["amqp://u:***", "***@h1", "amqp://v:***@h2"]
    );
    assert_eq!(
        redact_each(&urls(&["amqp://u:p1zz9y@h1", "amqp://u:p2yy8x@h2"])),
        ["amqp://u:***@h1", "amqp://u:***@h2"]
    );
    assert_eq!(redact_each(&urls(&["amqp://u:@h"])), ["amqp://u:***@h"]);
    assert!(redact_each(&[]).is_empty());
}

#[test]
fn percent_decoding_leaves_a_lone_percent() {
    assert_eq!(percent_decode("a%2Cb%zz%4").as_deref(), Some("a,b%zz%4"));
    assert_eq!(percent_decode("%ff"), None);
}
