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

use std::ops::Range;

/// What a password is replaced with.
const MASK: &str = "***";

/// The shortest part of a password that [`redact_in`] hides wherever it
/// appears. A whole password shorter than this is hidden where it stands
/// alone, not inside a word.
const FRAGMENT: usize = 4;

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

/// `%XX` decoded as the URL parsers of lapin and tokio-postgres do (a `%`
/// without two hex digits stays as it is); `None` when the bytes are not UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    fn hex(b: u8) -> Option<u8> {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = match (b, bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)).map(|(h, l)| h * 16 + l),
            _ => None,
        };
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A password in a connection string.
struct Password {
    /// Where it is, as written.
    span: Range<usize>,
    /// A libpq value: it may be in single quotes, with `\` escapes.
    quoted: bool,
}

/// Every password of `source`, in order; those of one URL may overlap
/// (see [`piece_passwords`]).
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

// ---------------------------------------------------------------------------
// libpq `key=value` strings.

/// The length of the `key=` (spaces around `=` allowed) that `s` starts with, if it does.
fn key_value_start(s: &str) -> Option<usize> {
    let key = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    let rest = s[key..].trim_start();
    (key > 0 && rest.starts_with('=')).then(|| s.len() - rest.len() + 1)
}

/// Whether `s` is a libpq `key=value` string rather than a URL.
fn is_key_value(s: &str) -> bool {
    key_value_start(s.trim_start()).is_some()
}

/// The passwords of a `key=value` string, read as libpq reads it: a value
/// plain up to white space, or in single quotes, `\` escaping the next
/// character. A quote never closed runs to the end; a plain password is
/// followed up to the next `key=`, in case its spaces were not quoted.
fn key_value_passwords(s: &str) -> Vec<Password> {
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
fn unquoted(raw: &str) -> String {
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

// ---------------------------------------------------------------------------
// URLs, and lists of them.

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
fn url_passwords(s: &str) -> Vec<Password> {
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

// ---------------------------------------------------------------------------
// Hiding a password in a text.

/// Every form a password written as `raw` may take in another library's
/// message: as written, without its quotes and escapes (a libpq value),
/// percent-decoded (`+` as a space too) and encoded again, and escaped as
/// Rust's `{:?}` and JSON write strings.
fn forms(raw: &str, quoted: bool) -> Vec<String> {
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

/// `s` with every byte but the unreserved ones (RFC 3986) as `%XX`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `text` with every appearance of `secrets` replaced by `***`: each run of
/// at least [`FRAGMENT`] characters of a secret, or a shorter secret where it
/// stands alone. Overlapping and adjacent appearances make one `***`.
fn hide(text: &str, secrets: &[String]) -> String {
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

#[cfg(test)]
mod tests;
