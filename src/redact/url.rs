//! URLs, and lists of them separated by commas: where their passwords are,
//! in the user info or in the query, read the way that hides more.

use std::ops::Range;

use super::{is_password_key, Password};

/// The length of the `scheme://` that `s` starts with, if it does.
fn scheme_len(s: &str) -> Option<usize> {
    let end = s.find("://")?;
    let mut chars = s[..end].chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(end + 3)
}

/// The passwords of a URL or a list of URLs.
pub(super) fn url_passwords(s: &str) -> Vec<Password> {
    let mut found = Vec::new();
    for piece in pieces(s) {
        piece_passwords(s, piece, &mut found);
    }
    found
}

/// The URLs of a list, each from after its scheme (when it has one) to the
/// comma that ends it. A comma ends a URL only when what follows cannot be
/// the rest of a password: the list is split at every comma, then a part is
/// joined back to the one before when that one's password is still open
/// (`user:pa` then `ss@host`), when it is a `word@host` after a URL that may
/// hold a password (`user:p@ss` then `word@host`), or when the one before
/// ends in a query password (`?password=a` then `b`). A part that starts with
/// a scheme always starts a URL.
fn pieces(s: &str) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    let ends = s
        .match_indices(',')
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()));
    for end in ends {
        let part = &s[start..end];
        let text = part.trim_start();
        let lead = start + (part.len() - text.len());
        start = end + 1;
        match scheme_len(text) {
            Some(n) => out.push(lead + n..end),
            None => match out.last_mut() {
                Some(prev) if continues(&s[prev.clone()], text) => prev.end = end,
                _ => out.push(lead..end),
            },
        }
    }
    out
}

/// Whether `next` (the text after a comma) is the rest of a password of
/// `prev` (the URL before it, from after its scheme).
fn continues(prev: &str, next: &str) -> bool {
    if !prev.contains('@') && open_password(prev).is_some() {
        return true;
    }
    let next_is_user_at_host = next.rfind('@').is_some_and(|at| !next[..at].contains(':'));
    if next_is_user_at_host && prev.contains(':') {
        return true;
    }
    [query_start(prev), 0].into_iter().any(|from| {
        query_pairs(prev, from).last().is_some_and(|pair| {
            let pair = &prev[pair.clone()];
            pair.split_once('=')
                .is_some_and(|(key, _)| is_password_key(key))
        })
    })
}

/// In a URL without `@` (from after its scheme), where a password starts
/// that no `@` ends: after a `:` that is not followed by a port.
fn open_password(text: &str) -> Option<usize> {
    // An IPv6 address in brackets holds colons of its own.
    let from = if text.starts_with('[') {
        text.find(']').map_or(text.len(), |i| i + 1)
    } else {
        0
    };
    let colon = from + text[from..].find(':')?;
    let rest = &text[colon + 1..];
    let port = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let is_port = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    (!is_port).then_some(colon + 1)
}

/// Where the password of a URL's user info (from after its scheme) is: from
/// the first `:` to the last `@`, which may hold `@`, `/`, `?` and `#` of
/// its own. `None` without an `@` or without a `:` before it.
fn user_info_password(text: &str) -> Option<Range<usize>> {
    let at = text.rfind('@')?;
    let colon = text[..at].find(':')?;
    Some(colon + 1..at)
}

/// Where the query of a URL (from after its scheme) may start: after the
/// password of its user info, or at its start.
fn query_start(text: &str) -> usize {
    user_info_password(text).map_or(0, |p| p.end + 1)
}

/// The `key=value` pairs of the query of `text` searched for from `from`
/// (after its first `?`), each up to the next `&`; a password's value runs on
/// to the next `&` that a `key=` follows, in case it holds an `&` of its own.
fn query_pairs(text: &str, from: usize) -> Vec<Range<usize>> {
    let Some(q) = text[from..].find('?') else {
        return Vec::new();
    };
    let mut pairs = Vec::new();
    let mut start = from + q + 1;
    while start <= text.len() {
        let mut end = text[start..].find('&').map_or(text.len(), |i| start + i);
        let is_password = text[start..end]
            .split_once('=')
            .is_some_and(|(key, _)| is_password_key(key));
        if is_password {
            while end < text.len() {
                let after = &text[end + 1..];
                let key = &after[..after.find(['&', '=']).unwrap_or(after.len())];
                if after[key.len()..].starts_with('=') && !key.is_empty() {
                    break;
                }
                end = text[end + 1..]
                    .find('&')
                    .map_or(text.len(), |i| end + 1 + i);
            }
        }
        pairs.push(start..end);
        start = end + 1;
    }
    pairs
}

/// The passwords of one URL of a list (`range`: from after its scheme). Its
/// query is read both from after the user info and from its first `?`, in
/// case the last `@` is one of a password in the query: what either reading
/// finds is a password (the spans may overlap).
fn piece_passwords(s: &str, range: Range<usize>, found: &mut Vec<Password>) {
    let text = &s[range.clone()];
    let mut spans = Vec::new();
    if let Some(p) = user_info_password(text) {
        spans.push(p);
    } else if let Some(start) = open_password(text).filter(|_| !text.contains('@')) {
        // `user:password` whose `@` a comma cut off, or a port that is not one.
        spans.push(start..text.len());
    }
    for from in [query_start(text), 0] {
        spans.extend(query_passwords(text, from));
    }
    spans.sort_by_key(|p| (p.start, p.end));
    spans.dedup();
    found.extend(spans.into_iter().map(|p| Password {
        span: range.start + p.start..range.start + p.end,
        quoted: false,
    }));
}

/// The values of the password keys of the query of `text` searched for from `from`.
fn query_passwords(text: &str, from: usize) -> Vec<Range<usize>> {
    query_pairs(text, from)
        .into_iter()
        .filter_map(|pair| {
            let eq = pair.start + text[pair.clone()].find('=')?;
            is_password_key(&text[pair.start..eq]).then_some(eq + 1..pair.end)
        })
        .collect()
}
