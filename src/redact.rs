//! URLs and messages with their passwords taken out, for logs and errors.

/// The password of a URL (`scheme://user:password@host/...`), if it has one.
/// The userinfo ends at the last `@`, so a password holding `/` or `@` is
/// still found; the scheme may be missing.
fn password_span(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let at = start + url[start..].rfind('@')?;
    let colon = start + url[start..at].find(':')?;
    Some((colon + 1, at))
}

/// Replaces the password of a URL with `***`.
pub(crate) fn redact_url(url: &str) -> String {
    match password_span(url) {
        Some((from, to)) => format!("{}***{}", &url[..from], &url[to..]),
        None => url.to_owned(),
    }
}

/// Removes the password of `url` from `text` (an error message that may quote the URL).
pub(crate) fn redact_in(text: &str, url: &str) -> String {
    match password_span(url) {
        Some((from, to)) if to > from => text.replace(&url[from..to], "***"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{redact_in, redact_url};

    #[test]
    fn redacts_passwords() {
        let cases = [
            (
                "amqp://guest:guest@127.0.0.1:5672",
                "amqp://guest:***@127.0.0.1:5672",
            ),
            ("amqps://u:p%40ss@host/vh", "amqps://u:***@host/vh"),
            ("amqp://u@host", "amqp://u@host"),
            ("amqp://host:5672", "amqp://host:5672"),
            ("not a url", "not a url"),
            (
                "amqp://guest:s3cret/x+y@127.0.0.1:5672",
                "amqp://guest:***@127.0.0.1:5672",
            ),
            ("guest:s3cret@127.0.0.1:5672", "guest:***@127.0.0.1:5672"),
            ("amqp://u:p@ss@host/vh", "amqp://u:***@host/vh"),
        ];
        for (input, want) in cases {
            assert_eq!(redact_url(input), want, "{input}");
        }
        assert_eq!(
            redact_in("Invalid URL: 'guest:s3cret@h'", "guest:s3cret@h"),
            "Invalid URL: 'guest:***@h'"
        );
    }
}
