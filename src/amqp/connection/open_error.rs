//! Why a connection could not be opened (refused, unresolved, a TLS
//! handshake that failed, a port that speaks no AMQP), and what to do about it.

use super::super::hosts::Host;
use crate::error::{Error, ErrorKind};

/// Why a connection could not be opened, and what to do about it.
pub(super) fn open_error(node: &Host, e: &lapin::Error) -> Error {
    let uri = &node.uri;
    let safe_url = &node.safe_url;
    // lapin ends the user info at the first `@`: with an `@` the user did not
    // encode, the rest of the password reads as the host or the vhost.
    let host_name = node.redact(&uri.authority.host);
    let vhost = node.redact(&uri.vhost);
    let host = format!("{host_name}:{}", uri.authority.port);
    let text = e.to_string();
    let io_kind = match e.kind() {
        lapin::ErrorKind::IOError(io) => Some(io.kind()),
        _ => None,
    };
    let hint = if let Some(tls) = tls_failure(e) {
        format!(
            "the TLS handshake with {host} failed: {}",
            tls_advice(tls, uri.authority.port)
        )
    } else {
        match e.kind() {
            lapin::ErrorKind::ParsingError(_) | lapin::ErrorKind::InvalidProtocolVersion(_) => format!(
                "the server at {host} did not answer as an AMQP 0-9-1 broker: is this an HTTP or management port? RabbitMQ takes AMQP on 5672 (5671 with TLS)"
            ),
            _ if io_kind == Some(std::io::ErrorKind::ConnectionRefused) => format!(
                "connection refused: is RabbitMQ running at {host}? (`npm run broker` starts one locally)"
            ),
            _ if text.contains("ACCESS_REFUSED") => format!(
                "the broker refused user '{}': check the user and password in the URL (and that the user may use vhost '{vhost}')",
                uri.authority.userinfo.username
            ),
            _ if text.contains("vhost") && text.contains("not found") => format!(
                "vhost '{vhost}' does not exist on the broker: fix the URL's path (`amqp://host:5672` is vhost '/') or create it with `rabbitmqctl add_vhost`"
            ),
            _ if text.contains("lookup") || text.contains("resolve") || text.contains("Name or service not known") => format!(
                "the host name '{host_name}' could not be resolved: check the URL's host"
            ),
            _ if text.to_ascii_lowercase().contains("certificate")
                || text.to_ascii_lowercase().contains("tls")
                || text.contains("HandshakeFailure") => format!(
                "the TLS handshake with {host} failed: check tls.caFile (the broker's certificate authority), the host name in the URL, and that the port speaks TLS (5671)"
            ),
            _ => String::new(),
        }
    };
    let detail = node.redact(&text);
    let message = if hint.is_empty() {
        format!("connection to {safe_url} failed: {detail}")
    } else {
        format!("connection to {safe_url} failed: {hint} ({detail})")
    };
    // lapin's own error keeps the password it may quote: it is kept only without one.
    if detail == text {
        Error::with_source(ErrorKind::Connection, message, e.clone())
    } else {
        Error::new(ErrorKind::Connection, message)
    }
}

/// The TLS library's error under a failed connect: the TLS handshake is what failed.
fn tls_failure(e: &lapin::Error) -> Option<&rustls::Error> {
    let lapin::ErrorKind::IOError(io) = e.kind() else {
        return None;
    };
    let mut cause = io
        .get_ref()
        .map(|c| c as &(dyn std::error::Error + 'static));
    while let Some(c) = cause {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        cause = c.source();
    }
    None
}

/// What to do about a TLS handshake that failed with `e`, on `port`.
fn tls_advice(e: &rustls::Error, port: u16) -> String {
    use rustls::{CertificateError as Cert, Error as Tls};
    match e {
        Tls::InvalidMessage(_)
        | Tls::InappropriateMessage { .. }
        | Tls::InappropriateHandshakeMessage { .. } => format!(
            "the server on port {port} does not speak TLS: amqps:// needs the broker's TLS listener (RabbitMQ's is 5671; 5672 takes plain amqp://)"
        ),
        Tls::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            "the broker's certificate is not for the host name in the URL: connect with a name the certificate lists".into()
        }
        Tls::InvalidCertificate(
            Cert::Expired | Cert::ExpiredContext { .. } | Cert::NotValidYet | Cert::NotValidYetContext { .. },
        ) => "the broker's certificate has expired or is not valid yet: renew it, or check the clocks".into(),
        Tls::InvalidCertificate(_) | Tls::NoCertificatesPresented => {
            "the broker's certificate is not signed by an authority this client trusts: give tls.caFile (or tls.ca) the certificate authority that signed it".into()
        }
        Tls::AlertReceived(_) => {
            "the broker refused the handshake: does it ask for a client certificate (tls.certFile and tls.keyFile)?".into()
        }
        _ => "check tls.caFile (the broker's certificate authority), the host name in the URL, and that the port speaks TLS (5671)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{tls_advice, tls_failure};

    fn wrapped(e: rustls::Error) -> lapin::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e).into()
    }

    #[test]
    fn a_failed_tls_handshake_is_told_from_other_failures_with_what_to_do() {
        let plain = wrapped(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType,
        ));
        let tls = tls_failure(&plain).expect("a TLS failure");
        assert!(tls_advice(tls, 5672).contains("the server on port 5672 does not speak TLS"));
        let untrusted = wrapped(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        let tls = tls_failure(&untrusted).expect("a TLS failure");
        assert!(tls_advice(tls, 5671).contains("tls.caFile"));
        let refused: lapin::Error =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into();
        assert!(tls_failure(&refused).is_none());
    }
}
