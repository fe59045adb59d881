//! The nodes a client may connect to: one URL, or several (the nodes of one
//! cluster), parsed once, and the order they are tried in.

use lapin::uri::AMQPUri;

use crate::error::{Error, ErrorKind, Result};
use crate::redact::{redact_each, redact_in};

/// One node: its URL parsed, and the URL without its password.
#[derive(Clone)]
pub(crate) struct Host {
    /// The URL, parsed; the vhost `/` when it names none.
    pub uri: AMQPUri,
    /// The URL with its password replaced, for logs, errors and events.
    pub safe_url: String,
    /// The URL as given: what the passwords to take out of another library's
    /// error are read from.
    url: String,
}

impl std::fmt::Debug for Host {
    /// The URL without its password: the parsed URI holds it in clear.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("safe_url", &self.safe_url)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Parses `url`, shown as `safe_url`; `heartbeat_secs` overrides the
    /// URL's heartbeat. An error is without the passwords of `list` (every
    /// URL given, joined by commas): a password a comma cut in two may have
    /// its other half in another URL.
    fn parse(url: &str, safe_url: String, list: &str, heartbeat_secs: Option<u16>) -> Result<Host> {
        let mut uri: AMQPUri = url.parse().map_err(|e: String| {
            let reason = redact_in(&e, list);
            Error::new(
                ErrorKind::InvalidOptions,
                format!("url {safe_url} is not an AMQP URL ({reason}): use amqp://user:password@host:5672/vhost"),
            )
        })?;
        // `amqp://host:5672/` names no vhost: read it as `/`, as amqplib does
        // (no vhost on a broker is named with the empty string).
        if uri.vhost.is_empty() {
            uri.vhost = "/".into();
        }
        if let Some(h) = heartbeat_secs {
            uri.query.heartbeat = Some(h);
        }
        Ok(Host {
            uri,
            safe_url,
            url: url.to_owned(),
        })
    }

    /// `text` (lapin's error) without any part of this node's password.
    pub(crate) fn redact(&self, text: &str) -> String {
        redact_in(text, &self.url)
    }
}

/// Parses every URL, in the order to try them: as given, or shuffled by
/// `seed` so that the clients of a fleet spread over the nodes.
pub(crate) fn hosts(
    urls: &[String],
    heartbeat_secs: Option<u16>,
    shuffle: bool,
    seed: u64,
) -> Result<Vec<Host>> {
    if urls.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidOptions,
            "url must name at least one broker, e.g. amqp://user:password@host:5672/vhost",
        ));
    }
    let list = urls.join(",");
    let mut hosts = urls
        .iter()
        .zip(redact_each(urls))
        .map(|(u, safe_url)| Host::parse(u, safe_url, &list, heartbeat_secs))
        .collect::<Result<Vec<_>>>()?;
    if shuffle {
        shuffled(&mut hosts, seed);
    }
    Ok(hosts)
}

/// Fisher-Yates with xorshift64*: no cryptographic need, only a spread.
fn shuffled<T>(items: &mut [T], seed: u64) {
    let mut state = seed | 1;
    for i in (1..items.len()).rev() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let j = (r % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// A seed that differs between processes and between calls.
pub(crate) fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// The indexes of `n` hosts in the order to try them, starting at `from`.
pub(crate) fn from(from: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (from + i) % n)
}

/// The error of a connect that tried every host: the one host's own error,
/// or each host's, in the order tried.
pub(crate) fn none_answered(mut errors: Vec<Error>) -> Error {
    if errors.len() == 1 {
        if let Some(e) = errors.pop() {
            return e;
        }
    }
    let n = errors.len();
    let each: Vec<String> = errors.into_iter().map(|e| e.message).collect();
    Error::new(
        ErrorKind::Connection,
        format!(
            "none of the {n} brokers could be reached: {}",
            each.join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts_of(list: &[&str]) -> Vec<Host> {
        let list: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
        hosts(&list, None, false, 0).unwrap()
    }

    fn urls(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("amqp://app:s3cret@node{i}:5672/orders"))
            .collect()
    }

    #[test]
    fn every_url_is_parsed_and_named_without_its_password() {
        let hosts = hosts(&urls(3), Some(30), false, 0).unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h.safe_url.as_str()).collect();
        assert_eq!(
            names,
            [
                "amqp://app:***@node0:5672/orders",
                "amqp://app:***@node1:5672/orders",
                "amqp://app:***@node2:5672/orders"
            ]
        );
        assert!(hosts.iter().all(|h| h.uri.query.heartbeat == Some(30)));
        let bare = &hosts_of(&["amqp://127.0.0.1:5672"])[0];
        assert_eq!(bare.uri.vhost, "/");
    }

    #[test]
    fn a_bad_url_in_the_list_is_refused_by_name() {
        let mut list = urls(2);
        list.push("http://app:s3cret@node9".into());
        let e = hosts(&list, None, true, 7).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidOptions);
        assert!(e.message.contains("app:***@node9"), "{}", e.message);
        assert!(!e.message.contains("s3cret"), "{}", e.message);
        assert_eq!(
            hosts(&[], None, true, 7).unwrap_err().kind,
            ErrorKind::InvalidOptions
        );
    }

    #[test]
    fn a_password_a_comma_cut_in_two_is_hidden_in_both_halves() {
        // `AMQP_URL=amqp://app:s3cr,3t99@node1` split at its commas.
        let list: Vec<String> = ["amqp://app:s3cr", "3t99@node1"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let e = hosts(&list, None, false, 0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidOptions);
        for part in ["s3cr", "3t99"] {
            assert!(!e.message.contains(part), "{}", e.message);
        }
        let node = &hosts_of(&["amqp://app:p%40ss@node1"])[0];
        assert_eq!(
            node.redact("refused p@ss and p%40ss"),
            "refused *** and ***"
        );
        assert!(!format!("{node:?}").contains("p%40ss"));
    }

    #[test]
    fn shuffling_keeps_every_host_and_spreads_the_first() {
        let list = urls(3);
        let mut firsts = std::collections::HashSet::new();
        for seed in 0..64u64 {
            let hosts = hosts(&list, None, true, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).unwrap();
            let mut names: Vec<String> = hosts.iter().map(|h| h.safe_url.clone()).collect();
            firsts.insert(names[0].clone());
            names.sort();
            assert_eq!(names.len(), 3);
            names.dedup();
            assert_eq!(names.len(), 3, "a host lost or doubled");
        }
        assert_eq!(firsts.len(), 3, "every node comes first for some client");
        let ordered = hosts(&list, None, false, 5).unwrap();
        assert!(ordered[0].safe_url.contains("node0"));
    }

    #[test]
    fn recovery_tries_each_host_once_from_the_next() {
        assert_eq!(from(2, 3).collect::<Vec<_>>(), [2, 0, 1]);
        assert_eq!(from(0, 1).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn a_connect_that_tried_every_host_names_each() {
        let one = Error::new(ErrorKind::Connection, "connection to a failed: refused");
        assert_eq!(none_answered(vec![one.clone()]), one);
        let e = none_answered(vec![
            one,
            Error::new(ErrorKind::Connection, "connection to b failed: timeout"),
        ]);
        assert_eq!(e.kind, ErrorKind::Connection);
        assert_eq!(
            e.message,
            "none of the 2 brokers could be reached: connection to a failed: refused; connection to b failed: timeout"
        );
    }
}
