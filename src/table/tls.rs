//! TLS for the retry table's connection, as libpq reads it from the URL:
//! `sslmode` (disable, prefer, require, verify-ca, verify-full) and
//! `sslrootcert` (a PEM file of certificate authorities, or `system`).
//!
//! tokio-postgres parses `sslmode` but knows only disable, prefer and
//! require, and refuses `sslrootcert` as an unknown option; so both are taken
//! out of the URL here (the rest goes to tokio-postgres unchanged), and what
//! they ask for is given to tokio-postgres as its own mode (whether TLS is
//! asked for) and to a rustls connector (what the certificate must prove).

use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use tokio_postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, ErrorKind, Result};
use crate::redact::percent_decode;
use verify::{ChainOnly, NoCertificateCheck};

mod verify;

/// The modes `sslmode` may name, for error messages.
const MODES: &str = "disable, prefer, require, verify-ca, verify-full";

/// libpq's `sslmode`: whether the connection uses TLS, and what the server's
/// certificate must prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP, never TLS.
    Disable,
    /// TLS when the server offers it, else plain (the default). The
    /// certificate is checked only when `sslrootcert` is given.
    Prefer,
    /// TLS or no connection. The certificate is checked only when
    /// `sslrootcert` is given (then as `VerifyCa`).
    Require,
    /// TLS, with a certificate that chains to a trusted authority, whatever
    /// host name it is for.
    VerifyCa,
    /// TLS, with a certificate that chains to a trusted authority and is for
    /// the host name of the URL.
    VerifyFull,
}

impl SslMode {
    /// The mode of an `sslmode` value, or an `INVALID_OPTIONS` error that lists the valid ones.
    fn parse(value: &str) -> Result<SslMode> {
        match value {
            "disable" => Ok(SslMode::Disable),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-ca" => Ok(SslMode::VerifyCa),
            "verify-full" => Ok(SslMode::VerifyFull),
            "allow" => Err(invalid(format!(
                "sslmode 'allow' (plain first, TLS only when the server insists) is not supported: use prefer or disable (one of {MODES})"
            ))),
            other => Err(invalid(format!(
                "sslmode '{other}' is not one of {MODES}"
            ))),
        }
    }

    /// The value as libpq spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where the certificate authorities come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCert {
    /// A PEM file of one or more certificates.
    File(String),
    /// `sslrootcert=system`: the platform's trusted authorities.
    System,
}

/// The TLS settings of a retry table URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgTls {
    /// `sslmode`; `Prefer` when the URL has none (`VerifyFull` with `sslrootcert=system`).
    pub mode: SslMode,
    /// `sslrootcert`; `None` when the URL has none or it is empty.
    pub root_cert: Option<RootCert>,
}

/// An `INVALID_OPTIONS` error about a TLS parameter.
fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidOptions, message)
}

/// One `key=value` of a URL's query or of a key/value connection string.
struct Param {
    /// The key, decoded; `None` for a rest tokio-postgres will refuse.
    key: Option<String>,
    /// The value, decoded; `None` when it does not decode (left to tokio-postgres).
    value: Option<String>,
    /// Where the whole `key=value` is in the string.
    span: std::ops::Range<usize>,
}

/// The query of a `postgres://` or `postgresql://` URL, read where
/// tokio-postgres reads it: after the first `?` that follows the
/// credentials, `key=value` pairs each up to the next `&`. Returns where the
/// query starts (after the `?`, or the end of the URL) and its pairs, which
/// cover it all; a rest without `=` is one last pair without a key. `None`
/// when `url` is not such a URL.
fn url_params(url: &str) -> Option<(usize, Vec<Param>)> {
    let prefix = ["postgres://", "postgresql://"]
        .into_iter()
        .find(|p| url.starts_with(p))?;
    let after_prefix = prefix.len();
    let after_creds = url[after_prefix..]
        .find('@')
        .map_or(after_prefix, |at| after_prefix + at + 1);
    let Some(q) = url[after_creds..].find('?') else {
        return Some((url.len(), Vec::new()));
    };
    let query = after_creds + q + 1;
    let mut params = Vec::new();
    let mut start = query;
    while start < url.len() {
        let Some(eq) = url[start..].find('=').map(|i| start + i) else {
            params.push(Param {
                key: None,
                value: None,
                span: start..url.len(),
            });
            break;
        };
        let end = url[eq..].find('&').map_or(url.len(), |i| eq + i);
        params.push(Param {
            key: percent_decode(&url[start..eq]),
            value: percent_decode(&url[eq + 1..end]),
            span: start..end,
        });
        start = end + 1;
    }
    Some((query, params))
}

/// The parameters of a key/value connection string (`host=h sslmode=require`),
/// read as tokio-postgres reads them: values plain up to white space, or in
/// single quotes, with `\` escaping the next character. A malformed rest ends
/// the list (tokio-postgres refuses it).
fn key_value_params(s: &str) -> Vec<Param> {
    let mut params = Vec::new();
    let mut it = s.char_indices().peekable();
    loop {
        while it.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = it.peek() else {
            break;
        };
        while it
            .next_if(|&(_, c)| !c.is_whitespace() && c != '=')
            .is_some()
        {}
        let key_end = it.peek().map_or(s.len(), |&(i, _)| i);
        while it.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
        if key_end == start || it.next_if(|&(_, c)| c == '=').is_none() {
            break;
        }
        while it.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
        let quoted = it.next_if(|&(_, c)| c == '\'').is_some();
        let mut value = String::new();
        let mut closed = !quoted;
        while let Some(&(_, c)) = it.peek() {
            if (quoted && c == '\'') || (!quoted && c.is_whitespace()) {
                break;
            }
            it.next();
            if c == '\\' {
                if let Some((_, escaped)) = it.next() {
                    value.push(escaped);
                }
            } else {
                value.push(c);
            }
        }
        if quoted {
            closed = it.next_if(|&(_, c)| c == '\'').is_some();
        }
        if !closed || (!quoted && value.is_empty()) {
            break;
        }
        let end = it.peek().map_or(s.len(), |&(i, _)| i);
        params.push(Param {
            key: Some(s[start..key_end].to_owned()),
            value: Some(value),
            span: start..end,
        });
    }
    params
}

impl PgTls {
    /// Takes `sslmode` and `sslrootcert` out of a retry table URL (a
    /// `postgres://` URL or a key/value string): returns the URL without them,
    /// for tokio-postgres, and the settings they gave. When a parameter is
    /// given twice the last one counts, as in tokio-postgres. A bad value is
    /// an `INVALID_OPTIONS` error that does not quote the URL.
    pub(crate) fn take_from_url(url: &str) -> Result<(String, PgTls)> {
        let (query, params) = match url_params(url) {
            Some((query, params)) => (Some(query), params),
            None => (None, key_value_params(url)),
        };
        let mut mode = None;
        let mut root_cert = None;
        let mut kept = Vec::new();
        let mut removed = Vec::new();
        for p in params {
            let key = match p.key.as_deref() {
                Some(key @ ("sslmode" | "sslrootcert")) => key,
                _ => {
                    kept.push(p.span);
                    continue;
                }
            };
            let Some(value) = p.value else {
                return Err(invalid(format!("{key} is not valid UTF-8")));
            };
            if key == "sslmode" {
                mode = Some(SslMode::parse(&value)?);
            } else {
                root_cert = match value.as_str() {
                    "" => None,
                    "system" => Some(RootCert::System),
                    _ => Some(RootCert::File(value)),
                };
            }
            removed.push(p.span);
        }
        let mode = match (mode, &root_cert) {
            (None, Some(RootCert::System)) => SslMode::VerifyFull,
            (Some(weak), Some(RootCert::System)) if weak != SslMode::VerifyFull => {
                return Err(invalid(format!(
                    "sslmode '{}' may not be used with sslrootcert=system: use sslmode=verify-full (the default with sslrootcert=system)",
                    weak.as_str()
                )))
            }
            (mode, _) => mode.unwrap_or(SslMode::Prefer),
        };
        let rest = match query {
            // The other pairs as they were, joined again; no `?` without a pair.
            Some(query) if !removed.is_empty() => {
                let pairs: Vec<&str> = kept.into_iter().map(|span| &url[span]).collect();
                if pairs.is_empty() {
                    url[..query - 1].to_owned()
                } else {
                    format!("{}{}", &url[..query], pairs.join("&"))
                }
            }
            _ => cut(url, &removed),
        };
        Ok((rest, PgTls { mode, root_cert }))
    }

    /// The mode tokio-postgres is given: whether it asks the server for TLS
    /// and whether it goes on without. As in libpq, the mode does not apply
    /// to Unix sockets; and `prefer` connects plain when the URL names no TCP
    /// host (only `hostaddr`), since TLS needs a host name here.
    pub(crate) fn driver_mode(
        &self,
        pg: &tokio_postgres::Config,
    ) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Driver;
        let tcp_name = pg.get_hosts().iter().any(|h| matches!(h, Host::Tcp(_)));
        let only_sockets = !pg.get_hosts().is_empty() && !tcp_name && pg.get_hostaddrs().is_empty();
        match self.mode {
            SslMode::Disable => Driver::Disable,
            SslMode::Prefer if tcp_name => Driver::Prefer,
            SslMode::Prefer => Driver::Disable,
            _ if only_sockets => Driver::Disable,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Driver::Require,
        }
    }

    /// The rustls connector (ring) that checks the server's certificate as the
    /// mode asks: not at all for `prefer` and `require` without `sslrootcert`;
    /// its chain to `sslrootcert`'s authorities (else the platform's) for
    /// `verify-ca`, and `prefer` or `require` with `sslrootcert`; its chain and
    /// its host name for `verify-full`. An `sslrootcert` that cannot be read or
    /// holds no certificate is an `INVALID_OPTIONS` error; a platform without
    /// authorities is a `RETRY_TABLE` error.
    pub(crate) fn connector(&self) -> Result<MakeRustlsConnect> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match (self.mode, &self.root_cert) {
            (SslMode::Disable, _) | (SslMode::Prefer | SslMode::Require, None) => {
                Arc::new(NoCertificateCheck(provider.clone()))
            }
            (mode, roots) => {
                let roots = Arc::new(root_store(roots.as_ref())?);
                let chain = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| {
                        Error::new(
                            ErrorKind::RetryTable,
                            format!("could not set up certificate verification: {e}"),
                        )
                    })?;
                if mode == SslMode::VerifyFull {
                    chain
                } else {
                    Arc::new(ChainOnly(chain))
                }
            }
        };
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::new(ErrorKind::RetryTable, format!("could not set up TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        // What libpq 17 sends: servers that check ALPN (direct TLS) want it,
        // others ignore it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(MakeRustlsConnect::new(config))
    }
}

/// What to do about a connection whose TLS handshake failed, when `e` (the
/// pool's error, with tokio-postgres's and rustls's under it) is one; `None`
/// for any other failure.
pub(crate) fn handshake_advice(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut handshake = false;
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(tls) = rustls_error(c) {
            return Some(certificate_advice(tls).into());
        }
        if let Some(pg) = c.downcast_ref::<tokio_postgres::Error>() {
            handshake |= pg.to_string() == "error performing TLS handshake";
        }
        if handshake && c.to_string() == "server does not support TLS" {
            return Some(
                "the server does not take TLS: turn ssl on in the server, or use sslmode=prefer or disable (and check that the port is PostgreSQL's)"
                    .into(),
            );
        }
        cause = c.source();
    }
    handshake.then(|| "check sslmode, sslrootcert and the host and port of the URL".into())
}

/// rustls's error, when `e` is one or an I/O error that holds one.
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    e.downcast_ref::<rustls::Error>().or_else(|| {
        e.downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    })
}

/// What to do about a handshake that rustls refused with `e`.
fn certificate_advice(e: &rustls::Error) -> &'static str {
    use rustls::{CertificateError as Cert, Error as Tls};
    match e {
        Tls::InvalidMessage(_)
        | Tls::InappropriateMessage { .. }
        | Tls::InappropriateHandshakeMessage { .. } => {
            "the server did not answer in TLS: check the host and port of the URL"
        }
        Tls::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            "the server's certificate is not for the host name in the URL (sslmode=verify-full): connect with a name it lists, or use sslmode=verify-ca"
        }
        Tls::InvalidCertificate(
            Cert::Expired | Cert::ExpiredContext { .. } | Cert::NotValidYet | Cert::NotValidYetContext { .. },
        ) => "the server's certificate has expired or is not valid yet: renew it, or check the clocks",
        Tls::InvalidCertificate(_) | Tls::NoCertificatesPresented => {
            "the server's certificate is not signed by an authority this client trusts: give sslrootcert=/path/to/ca.pem (the authority that signed it)"
        }
        _ => "check sslmode, sslrootcert and the host and port of the URL",
    }
}

/// `s` without the byte ranges `spans` (in order, not overlapping).
fn cut(s: &str, spans: &[std::ops::Range<usize>]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut start = 0;
    for span in spans {
        out.push_str(&s[start..span.start]);
        start = span.end;
    }
    out.push_str(&s[start..]);
    out
}

/// The authorities of `sslrootcert` (PEM), or the platform's.
fn root_store(root_cert: Option<&RootCert>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match root_cert {
        Some(RootCert::File(path)) => {
            let pem = std::fs::read(path)
                .map_err(|e| invalid(format!("sslrootcert '{path}' cannot be read: {e}")))?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| invalid(format!("sslrootcert '{path}' is not a PEM file: {e}")))?;
            if certs.is_empty() {
                return Err(invalid(format!(
                    "sslrootcert '{path}' holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
                )));
            }
            for cert in certs {
                store.add(cert).map_err(|e| {
                    invalid(format!(
                        "sslrootcert '{path}' holds a certificate that cannot be used: {e}"
                    ))
                })?;
            }
        }
        None | Some(RootCert::System) => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(Error::new(
                    ErrorKind::RetryTable,
                    format!(
                        "no trusted certificate authority found on this system to verify the server's certificate{}: give sslrootcert=/path/to/ca.pem",
                        if why.is_empty() { String::new() } else { format!(" ({why})") }
                    ),
                ));
            }
        }
    }
    Ok(store)
}

#[cfg(test)]
mod tests;
