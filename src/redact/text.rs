//! Hiding a password in a text: every form it may take there, and every
//! part of it long enough to give it away.

use std::ops::Range;

use super::key_value::unquoted;
use super::percent::{percent_decode, percent_encode};
use super::MASK;

/// The shortest part of a password that [`redact_in`](super::redact_in)
/// hides wherever it appears. A whole password shorter than this is hidden
/// where it stands alone, not inside a word.
const FRAGMENT: usize = 4;

/// Every form a password written as `raw` may take in another library's
/// message: as written, without its quotes and escapes (a libpq value),
/// percent-decoded (`+` as a space too) and encoded again, and escaped as
/// Rust's `{:?}` and JSON write strings.
pub(super) fn forms(raw: &str, quoted: bool) -> Vec<String> {
    let mut out = vec![raw.to_owned()];
    if quoted {
        out.push(unquoted(raw));
    }
    for f in out.clone() {
        if let Some(decoded) = percent_decode(&f) {
            out.push(decoded.replace('+', " "));
            out.push(percent_encode(&decoded));
            out.push(decoded);
        }
    }
    for f in out.clone() {
        out.push(f.escape_debug().to_string());
        let json = serde_json::to_string(&f).unwrap_or_default();
        out.push(json.trim_matches('"').to_owned());
    }
    out.retain(|f| !f.trim().is_empty());
    out.sort();
    out.dedup();
    out
}

/// `text` with every appearance of `secrets` replaced by `***`: each run of
/// at least [`FRAGMENT`] characters of a secret, or a shorter secret where it
/// stands alone. Overlapping and adjacent appearances make one `***`.
pub(super) fn hide(text: &str, secrets: &[String]) -> String {
    let mut hidden = vec![false; text.len()];
    let mut mark = |r: Range<usize>| hidden[r].iter_mut().for_each(|h| *h = true);
    for secret in secrets {
        let starts: Vec<usize> = secret.char_indices().map(|(i, _)| i).collect();
        if starts.len() < FRAGMENT {
            for at in occurrences(text, secret) {
                let end = at + secret.len();
                let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
                if !word(text[..at].chars().next_back()) && !word(text[end..].chars().next()) {
                    mark(at..end);
                }
            }
            continue;
        }
        for (n, &from) in starts.iter().enumerate().take(starts.len() - FRAGMENT + 1) {
            let to = starts.get(n + FRAGMENT).copied().unwrap_or(secret.len());
            let part = &secret[from..to];
            for at in occurrences(text, part) {
                mark(at..at + part.len());
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut in_mask = false;
    for (i, c) in text.char_indices() {
        if hidden[i] {
            if !in_mask {
                out.push_str(MASK);
            }
            in_mask = true;
        } else {
            out.push(c);
            in_mask = false;
        }
    }
    out
}

/// Where `part` appears in `text`, overlapping appearances included.
fn occurrences(text: &str, part: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(part) {
        found.push(from + i);
        from += i + part.chars().next().map_or(1, char::len_utf8);
    }
    found
}
