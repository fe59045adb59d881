//! libpq `key=value` connection strings: where their passwords are, and a
//! value as libpq reads it.

use super::{is_password_key, Password};

/// The length of the `key=` (spaces around `=` allowed) that `s` starts with, if it does.
fn key_value_start(s: &str) -> Option<usize> {
    let key = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let rest = s[key..].trim_start();
    (key > 0 && rest.starts_with('=')).then(|| s.len() - rest.len() + 1)
}

/// Whether `s` is a libpq `key=value` string rather than a URL.
pub(super) fn is_key_value(s: &str) -> bool {
    key_value_start(s.trim_start()).is_some()
}

/// The passwords of a `key=value` string, read as libpq reads it: a value
/// plain up to white space, or in single quotes, `\` escaping the next
/// character. A quote never closed runs to the end; a plain password is
/// followed up to the next `key=`, in case its spaces were not quoted.
pub(super) fn key_value_passwords(s: &str) -> Vec<Password> {
    let b = s.as_bytes();
    let space = |i: usize| b.get(i).is_some_and(u8::is_ascii_whitespace);
    let mut found = Vec::new();
    let mut i = 0;
    loop {
        while space(i) {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let key_start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' {
            i += 1;
        }
        let key = &s[key_start..i];
        while space(i) {
            i += 1;
        }
        if b.get(i) != Some(&b'=') {
            // libpq refuses the rest.
            break;
        }
        i += 1;
        while space(i) {
            i += 1;
        }
        let value_start = i;
        if b.get(i) == Some(&b'\'') {
            i += 1;
            while let Some(&c) = b.get(i) {
                i += if c == b'\\' { 2 } else { 1 };
                if c == b'\'' {
                    break;
                }
            }
        } else {
            i = plain_word_end(b, i);
            if is_password_key(key) {
                loop {
                    let mut next = i;
                    while space(next) {
                        next += 1;
                    }
                    if next >= b.len() || key_value_start(&s[next..]).is_some() {
                        break;
                    }
                    i = plain_word_end(b, next);
                }
            }
        }
        i = i.min(b.len());
        if is_password_key(key) {
            found.push(Password {
                span: value_start..i,
                quoted: true,
            });
        }
    }
    found
}

/// Where the plain (unquoted) word starting at `i` ends: at white space, `\`
/// escaping the next character.
fn plain_word_end(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if c.is_ascii_whitespace() {
            break;
        }
        i += if c == b'\\' { 2 } else { 1 };
    }
    i.min(b.len())
}

/// A libpq value as libpq reads it: without its quotes, escapes undone.
pub(super) fn unquoted(raw: &str) -> String {
    let inner = raw
        .strip_prefix('\'')
        .map_or(raw, |r| r.strip_suffix('\'').unwrap_or(r));
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}
