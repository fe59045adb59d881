//! The nodes a client may connect to: one URL, or several (the nodes of one
//! cluster), parsed once, and the order they are tried in.

use lapin::uri::AMQPUri;

use crate::error::{Error, ErrorKind, Result};
use crate::redact::{redact_in, redact_url};

/// One node: its URL parsed, and the URL without its password.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    /// The URL, parsed; the vhost `/` when it names none.
    pub uri: AMQPUri,
    /// The URL with its password replaced, for logs, errors and events.
    pub safe_url: String,
}

impl Host {
    /// Parses `url`; `heartbeat_secs` overrides the URL's heartbeat.
    pub(crate) fn parse(url: &str, heartbeat_secs: Option<u16>) -> Result<Host> {
        let safe_url = redact_url(url);
        let mut uri: AMQPUri = url.parse().map_err(|e: String| {
            let reason = redact_in(&e, url);
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
        Ok(Host { uri, safe_url })
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
    let mut hosts = urls
        .iter()
        .map(|u| Host::parse(u, heartbeat_secs))
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
        let bare = Host::parse("amqp://127.0.0.1:5672", None).unwrap();
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
