//! Passwords taken out, for everything that shows a connection string or
//! another library's error: errors, log lines, events, the console's pages and
//! the CLI. The TypeScript layer calls the same functions through the binding.
//!
//! A connection string is read in every form the crate takes one:
//! - a URL, with or without its scheme and user info: the password of
//!   `user:password@`, and the value of `password=`, `pass=`, `passwd=`,
//!   `pwd=` or `sslpassword=` in its query (any case, the key percent-encoded
//!   or not);
//! - URLs separated by commas (the nodes of a cluster, as `AMQP_URL` holds
//!   them), the later ones with or without their scheme;
//! - a libpq `key=value` string (`host=db password='s3 cret' user=app`).
//!
//! A character the user did not percent-encode (`@`, `/`, `,`, `%`, `#`, `?`,
//! a space) stays in the password it belongs to: where a string reads two
//! ways, it is read the way that hides more.

mod key_value;
mod percent;
mod text;
mod url;

use std::ops::Range;

use self::key_value::{is_key_value, key_value_passwords};
use self::text::{forms, hide};
use self::url::url_passwords;

pub(crate) use self::percent::percent_decode;

/// What a password is replaced with.
const MASK: &str = "***";

/// The keys whose value is a password, in a query or a `key=value` string
/// (compared without case).
const PASSWORD_KEYS: [&str; 5] = ["password", "pass", "passwd", "pwd", "sslpassword"];

/// `source` (a URL, URLs separated by commas, or a libpq `key=value` string)
/// with each password replaced by `***`.
pub(crate) fn redact_url(source: &str) -> String {
    let spans = merged(passwords(source).into_iter().map(|p| p.span).collect());
    masked(source, &spans)
}

/// Each of `urls` with its password replaced by `***`, read as the one list
/// they form (joined by commas): a password that a comma of its own cut in
/// two is hidden in both halves.
pub(crate) fn redact_each(urls: &[String]) -> Vec<String> {
    let joined = urls.join(",");
    let spans = merged(passwords(&joined).into_iter().map(|p| p.span).collect());
    let mut start = 0;
    urls.iter()
        .map(|url| {
            let end = start + url.len();
            // A span in this URL, or the part of one that runs over a comma into it.
            let own: Vec<Range<usize>> = spans
                .iter()
                .filter(|s| {
                    (s.start < end && s.end > start)
                        || (s.is_empty() && (start..end).contains(&s.start))
                })
                .map(|s| s.start.max(start) - start..s.end.min(end) - start)
                .collect();
            start = end + 1;
            masked(url, &own)
        })
        .collect()
}

/// `text` (another library's error, which may quote `source` or part of it)
/// without the passwords `source` holds: each in every form it may take
/// there (as written, percent-decoded, percent-encoded, unquoted, escaped),
/// and every part of it of at least four characters.
pub(crate) fn redact_in(text: &str, source: &str) -> String {
    let secrets: Vec<String> = passwords(source)
        .into_iter()
        .flat_map(|p| forms(&source[p.span], p.quoted))
        .collect();
    hide(text, &secrets)
}

/// A password in a connection string.
struct Password {
    /// Where it is, as written.
    span: Range<usize>,
    /// A libpq value: it may be in single quotes, with `\` escapes.
    quoted: bool,
}

/// Every password of `source`, in order; those of one URL may overlap
/// (see [`url::piece_passwords`]).
fn passwords(source: &str) -> Vec<Password> {
    if is_key_value(source) {
        key_value_passwords(source)
    } else {
        url_passwords(source)
    }
}

/// `s` with the byte ranges `spans` (in order, not overlapping) replaced by `***`.
fn masked(s: &str, spans: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for span in spans {
        out.push_str(&s[at..span.start]);
        out.push_str(MASK);
        at = span.end;
    }
    out.push_str(&s[at..]);
    out
}

/// Whether `key` (percent-encoded or not) names a password.
fn is_password_key(key: &str) -> bool {
    let decoded = percent_decode(key);
    let key = decoded.as_deref().unwrap_or(key).trim();
    PASSWORD_KEYS.iter().any(|k| key.eq_ignore_ascii_case(k))
}

/// `spans` in order, those that overlap or touch made one.
fn merged(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.sort_by_key(|p| (p.start, p.end));
    let mut out: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match out.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => out.push(span),
        }
    }
    out
}

#[cfg(test)]
mod tests;
