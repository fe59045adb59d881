//! Reading `sslmode` and `sslrootcert` out of URLs, and the connector each mode makes.

use super::{handshake_advice, PgTls, RootCert, SslMode};
use crate::error::ErrorKind;
use tokio_postgres::config::SslMode as Driver;

/// A self-signed CA certificate (P-256), only parsed here.
const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBnzCCAUWgAwIBAgIUMcRHrQMpbqY3nSCjO8OuSyL5JpMwCgYIKoZIzj0EAwIw
JDEiMCAGA1UEAwwZcmFiYml0LXJldHJ5IHVuaXQgdGVzdCBDQTAgFw0yNjEyMDEw
MzE4MDNaGA8yMTI2MTEwNzAzMTgwM1owJDEiMCAGA1UEAwwZcmFiYml0LXJldHJ5
IHVuaXQgdGVzdCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABFtqSH+i6HOu
uAysh1+XtieBBmdomJD62Iwd4WyTH/j2HtxNWIIoYwlj25ScraR3qB31C3AQ1ReC
J1V+aLlQU16jUzBRMB0GA1UdDgQWBBS3w4nN/xntqTGlG1DT4ey60zMBwDAfBgNV
HSMEGDAWgBS3w4nN/xntqTGlG1DT4ey60zMBwDAPBgNVHRMBAf8EBTADAQH/MAoG
CCqGSM49BAMCA0gAMEUCIAydNEWspWqL4ZPmWVsrb8m9o1amTFLV/jabW852IRwp
AiEAqQ5rZIoPCluPoJqfW31u9hYvuUzEGgaoBB0odt0+3rk=
-----END CERTIFICATE-----
";

fn take(url: &str) -> (String, PgTls) {
    PgTls::take_from_url(url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn tls(mode: SslMode, root_cert: Option<RootCert>) -> PgTls {
    PgTls { mode, root_cert }
}

/// A file under the temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, contents: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("rr-pgtls-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn reads_every_mode_and_takes_it_out_of_the_url() {
    for (value, mode) in [
        ("disable", SslMode::Disable),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ] {
        let (rest, got) = take(&format!("postgres://app:pw@db:5432/app?sslmode={value}"));
        assert_eq!(rest, "postgres://app:pw@db:5432/app", "{value}");
        assert_eq!(got, tls(mode, None), "{value}");
        assert_eq!(mode.as_str(), value);
    }
}

#[test]
fn without_sslmode_the_mode_is_prefer_and_the_url_is_unchanged() {
    for url in [
        "postgres://app@db/app",
        "postgresql://app:p%40ss@db:5432/app?application_name=x&connect_timeout=5",
        "postgres://app@db/app?sslmodes=require",
        "host=db user=app",
    ] {
        assert_eq!(
            take(url),
            (url.to_owned(), tls(SslMode::Prefer, None)),
            "{url}"
        );
    }
}

#[test]
fn keeps_the_other_parameters_in_order() {
    let (rest, got) = take(
        "postgres://app@db/app?application_name=rr&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20x.pem&connect_timeout=5",
    );
    assert_eq!(
        rest,
        "postgres://app@db/app?application_name=rr&connect_timeout=5"
    );
    assert_eq!(
        got,
        tls(
            SslMode::VerifyFull,
            Some(RootCert::File("/etc/ca x.pem".into()))
        )
    );
    let (rest, _) = take("postgres://app@db/app?sslrootcert=ca.pem&sslmode=verify-ca&x=1");
    assert_eq!(rest, "postgres://app@db/app?x=1");
    // tokio-postgres reads what is left.
    let pg: tokio_postgres::Config = "postgres://app@db/app?application_name=rr&connect_timeout=5"
        .parse()
        .unwrap();
    assert_eq!(pg.get_application_name(), Some("rr"));
}

#[test]
fn the_last_of_a_repeated_parameter_counts() {
    let (rest, got) = take(
        "postgres://db/app?sslmode=disable&sslrootcert=a.pem&sslmode=verify-ca&sslrootcert=b.pem",
    );
    assert_eq!(rest, "postgres://db/app");
    assert_eq!(
        got,
        tls(SslMode::VerifyCa, Some(RootCert::File("b.pem".into())))
    );
}

#[test]
fn finds_the_query_after_the_credentials_as_tokio_postgres_does() {
    let (rest, got) = take("postgres://app:p?ss&sslmode=x@db/app?sslmode=require");
    assert_eq!(rest, "postgres://app:p?ss&sslmode=x@db/app");
    assert_eq!(got.mode, SslMode::Require);
    // A key that is percent-encoded is still the key.
    let (rest, got) = take("postgres://db/app?ssl%6Dode=disable");
    assert_eq!(rest, "postgres://db/app");
    assert_eq!(got.mode, SslMode::Disable);
}

#[test]
fn leaves_a_malformed_rest_to_tokio_postgres() {
    let (rest, got) = take("postgres://db/app?sslmode=require&oops");
    assert_eq!(rest, "postgres://db/app?oops");
    assert_eq!(got.mode, SslMode::Require);
    assert!(rest.parse::<tokio_postgres::Config>().is_err());
}

#[test]
fn reads_key_value_strings() {
    let (rest, got) = take(r"host=db sslmode = 'verify-full' sslrootcert=/etc/my\ ca.pem user=app");
    assert_eq!(rest, "host=db   user=app");
    assert_eq!(
        got,
        tls(
            SslMode::VerifyFull,
            Some(RootCert::File("/etc/my ca.pem".into()))
        )
    );
    let pg: tokio_postgres::Config = rest.parse().unwrap();
    assert_eq!(pg.get_user(), Some("app"));
    let (rest, got) = take("sslmode=require");
    assert_eq!((rest.as_str(), got.mode), ("", SslMode::Require));
}

#[test]
fn sslrootcert_system_means_the_platforms_authorities_and_verify_full() {
    let (_, got) = take("postgres://db/app?sslrootcert=system");
    assert_eq!(got, tls(SslMode::VerifyFull, Some(RootCert::System)));
    let (_, got) = take("postgres://db/app?sslrootcert=system&sslmode=verify-full");
    assert_eq!(got, tls(SslMode::VerifyFull, Some(RootCert::System)));
    let err =
        PgTls::take_from_url("postgres://db/app?sslmode=require&sslrootcert=system").unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidOptions);
    assert!(
        err.message
            .contains("sslmode 'require' may not be used with sslrootcert=system"),
        "{}",
        err.message
    );
    // An empty sslrootcert is none.
    assert_eq!(
        take("postgres://db/app?sslrootcert=").1,
        tls(SslMode::Prefer, None)
    );
}

#[test]
fn refuses_an_unknown_mode_naming_the_valid_ones() {
    for (url, said) in [
        (
            "postgres://u:s3cret@db/app?sslmode=verify_full",
            "sslmode 'verify_full' is not one of disable, prefer, require, verify-ca, verify-full",
        ),
        ("postgres://db/app?sslmode=", "sslmode '' is not one of"),
        (
            "postgres://db/app?sslmode=allow",
            "sslmode 'allow' (plain first, TLS only when the server insists) is not supported",
        ),
        ("host=db sslmode=on", "sslmode 'on' is not one of"),
        (
            "postgres://db/app?sslmode=%FF",
            "sslmode is not valid UTF-8",
        ),
    ] {
        let err = PgTls::take_from_url(url).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidOptions, "{url}");
        assert!(err.message.contains(said), "{url}: {}", err.message);
        assert!(!err.message.contains("s3cret"), "{}", err.message);
    }
}

#[test]
fn gives_tokio_postgres_its_own_mode() {
    let tcp: tokio_postgres::Config = "postgres://db/app".parse().unwrap();
    for (mode, want) in [
        (SslMode::Disable, Driver::Disable),
        (SslMode::Prefer, Driver::Prefer),
        (SslMode::Require, Driver::Require),
        (SslMode::VerifyCa, Driver::Require),
        (SslMode::VerifyFull, Driver::Require),
    ] {
        assert_eq!(tls(mode, None).driver_mode(&tcp), want, "{mode:?}");
    }
    // Unix sockets: no TLS whatever the mode, as in libpq.
    let socket: tokio_postgres::Config = "host=/var/run/postgresql user=app".parse().unwrap();
    assert_eq!(
        tls(SslMode::VerifyFull, None).driver_mode(&socket),
        Driver::Disable
    );
    // Only an address, no host name: prefer goes plain, require still asks.
    let addr: tokio_postgres::Config = "hostaddr=127.0.0.1 user=app".parse().unwrap();
    assert_eq!(
        tls(SslMode::Prefer, None).driver_mode(&addr),
        Driver::Disable
    );
    assert_eq!(
        tls(SslMode::Require, None).driver_mode(&addr),
        Driver::Require
    );
}

#[test]
fn builds_a_connector_for_each_mode_from_a_root_file() {
    let ca = TempFile::new("ca.pem", CA_PEM);
    for mode in [
        SslMode::Disable,
        SslMode::Prefer,
        SslMode::Require,
        SslMode::VerifyCa,
        SslMode::VerifyFull,
    ] {
        let t = tls(mode, Some(RootCert::File(ca.path().to_owned())));
        assert!(t.connector().is_ok(), "{mode:?}");
    }
    // Nothing to read where nothing is verified.
    for mode in [SslMode::Disable, SslMode::Prefer, SslMode::Require] {
        assert!(tls(mode, None).connector().is_ok(), "{mode:?}");
    }
}

#[test]
fn refuses_a_root_file_that_cannot_be_used() {
    let missing = std::env::temp_dir().join("rr-pgtls-missing/ca.pem");
    let empty = TempFile::new("empty.pem", "not a certificate\n");
    let broken = TempFile::new("broken.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n");
    let missing = missing.to_str().unwrap();
    for (path, said) in [
        (missing, "cannot be read"),
        (empty.path(), "holds no PEM certificate"),
        (broken.path(), "is not a PEM file"),
    ] {
        let err = tls(SslMode::VerifyCa, Some(RootCert::File(path.to_owned())))
            .connector()
            .err()
            .unwrap_or_else(|| panic!("{path} was accepted"));
        assert_eq!(err.kind, ErrorKind::InvalidOptions, "{path}");
        assert!(
            err.message
                .starts_with(&format!("sslrootcert '{path}' {said}")),
            "{}",
            err.message
        );
    }
    // Not read at all where nothing is verified.
    assert!(
        tls(SslMode::Disable, Some(RootCert::File(missing.to_owned())))
            .connector()
            .is_ok()
    );
}

#[test]
fn a_handshake_rustls_refused_says_what_to_do() {
    let io = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let unknown = io(rustls::Error::InvalidCertificate(
        rustls::CertificateError::UnknownIssuer,
    ));
    assert!(handshake_advice(&unknown)
        .expect("a handshake")
        .contains("give sslrootcert="));
    let misnamed = io(rustls::Error::InvalidCertificate(
        rustls::CertificateError::NotValidForName,
    ));
    assert!(handshake_advice(&misnamed)
        .expect("a handshake")
        .contains("sslmode=verify-ca"));
    let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    assert_eq!(handshake_advice(&refused), None);
}
