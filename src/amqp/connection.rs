//! The connection to the broker (to one node of several, moving to the next
//! when it is lost), and the confirmed publisher every republish goes through.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::{Connection, ConnectionProperties};
use tokio::sync::{Mutex, RwLock};

use super::exchanges::KnownExchanges;
use super::hosts::{self, Host};
use super::order::Turn;
use super::publisher::{OpenChannel, Publisher};
use super::refusal::Limits;

mod open_error;
use crate::error::{Error, ErrorKind, Result};
use open_error::open_error;

/// How to reach the broker.
#[derive(Debug, Clone)]
pub(crate) struct ConnectOptions {
    /// `amqp://` or `amqps://` URLs with credentials and vhost: one broker,
    /// or the nodes of one cluster.
    pub urls: Vec<String>,
    /// Whether the nodes are tried in a shuffled order (a fleet spreads over
    /// them) rather than as listed.
    pub shuffle: bool,
    /// The name the broker shows for this connection.
    pub connection_name: Option<String>,
    /// Heartbeat interval in seconds; `None` takes the broker's.
    pub heartbeat_secs: Option<u16>,
    /// How long to wait for the connection before giving up.
    pub connect_timeout: Duration,
    /// How long to wait for a publisher confirm before calling the publish failed.
    pub confirm_timeout: Duration,
    /// TLS settings for `amqps://`.
    pub tls: TlsOptions,
}

/// TLS settings for `amqps://` URLs.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsOptions {
    /// Certificate authorities to trust, PEM; the system's roots when absent.
    pub ca_pem: Option<String>,
    /// A client certificate and its PKCS#8 key, both PEM, for brokers that
    /// authenticate clients by certificate.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsOptions {
    fn to_lapin(&self) -> OwnedTLSConfig {
        OwnedTLSConfig {
            identity: self
                .client_cert
                .as_ref()
                .map(|(pem, key)| OwnedIdentity::PKCS8 {
                    pem: pem.clone(),
                    key: key.clone(),
                }),
            cert_chain: self.ca_pem.clone(),
        }
    }
}

/// The connection to the broker, replaced by a new one when it is lost, and
/// the two confirmed publishers.
pub(crate) struct Broker {
    /// The nodes, in the order they are tried.
    hosts: Vec<Host>,
    /// The node of the current connection.
    node: AtomicUsize,
    props: ConnectionProperties,
    tls: TlsOptions,
    connect_timeout: Duration,
    current: RwLock<(u64, Arc<Connection>)>,
    reconnecting: Mutex<()>,
    closed: AtomicBool,
    publisher: Arc<Publisher>,
    republisher: Arc<Publisher>,
    /// What the broker takes of a publish (its user, sizes, version's rules).
    limits: Arc<Limits>,
    /// The exchanges seen to exist.
    exchanges: KnownExchanges,
}

impl Broker {
    /// Connects to the first node that answers and opens the confirm channels.
    pub(crate) async fn connect(opts: ConnectOptions) -> Result<Arc<Broker>> {
        let hosts = hosts::hosts(&opts.urls, opts.heartbeat_secs, opts.shuffle, hosts::seed())?;
        let mut props = ConnectionProperties::default();
        if let Some(name) = &opts.connection_name {
            props = props.with_connection_name(name.as_str().into());
        }
        let (node, conn) = open_any(&hosts, 0, &props, &opts.tls, opts.connect_timeout).await?;
        let limits = Arc::new(Limits::new(
            &hosts[node].uri.authority.userinfo.username,
            server_version(&conn).as_deref(),
            frame_max(&conn),
        ));
        let broker = Arc::new(Broker {
            hosts,
            node: AtomicUsize::new(node),
            props,
            tls: opts.tls,
            connect_timeout: opts.connect_timeout,
            current: RwLock::new((1, Arc::new(conn))),
            reconnecting: Mutex::new(()),
            closed: AtomicBool::new(false),
            publisher: Arc::new(Publisher::new(opts.confirm_timeout)),
            republisher: Arc::new(Publisher::new(opts.confirm_timeout)),
            limits,
            exchanges: KnownExchanges::default(),
        });
        // Open the confirm channels now, so a broker that refuses confirms fails connect().
        broker.publisher.channel(broker.as_ref()).await?;
        broker.republisher.channel(broker.as_ref()).await?;
        Ok(broker)
    }

    /// The current connection and its generation (which grows by one with
    /// each reconnect).
    pub(crate) async fn connection(&self) -> (u64, Arc<Connection>) {
        let cur = self.current.read().await;
        (cur.0, cur.1.clone())
    }

    /// A connection that is up: the current one, or a new one when the
    /// current one is gone. One caller reconnects; the others wait for it.
    pub(crate) async fn live_connection(&self) -> Result<(u64, Arc<Connection>)> {
        let (generation, conn) = self.connection().await;
        if conn.status().connected() {
            return Ok((generation, conn));
        }
        self.reconnect(generation).await
    }

    /// Replaces the connection of `generation` with a new one, to the next
    /// node that answers (the same one when there is one), unless another
    /// caller already did.
    pub(crate) async fn reconnect(&self, generation: u64) -> Result<(u64, Arc<Connection>)> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::Closed, "the client is closed"));
        }
        let _one = self.reconnecting.lock().await;
        {
            let cur = self.current.read().await;
            if cur.0 != generation || cur.1.status().connected() {
                return Ok((cur.0, cur.1.clone()));
            }
        }
        let next = (self.node.load(Ordering::SeqCst) + 1) % self.hosts.len();
        let (node, conn) = open_any(
            &self.hosts,
            next,
            &self.props,
            &self.tls,
            self.connect_timeout,
        )
        .await?;
        self.limits.set_frame_max(frame_max(&conn));
        let conn = Arc::new(conn);
        let mut cur = self.current.write().await;
        self.node.store(node, Ordering::SeqCst);
        cur.0 += 1;
        cur.1 = conn.clone();
        Ok((cur.0, conn))
    }

    /// The node of the current connection.
    fn host(&self) -> &Host {
        let node = self.node.load(Ordering::SeqCst);
        &self.hosts[node.min(self.hosts.len() - 1)]
    }

    /// The user this client authenticates as on the current node.
    pub(crate) fn user(&self) -> &str {
        &self.host().uri.authority.userinfo.username
    }

    /// The largest frame the current connection allows, in bytes.
    pub(crate) async fn frame_max(&self) -> usize {
        let (_, conn) = self.connection().await;
        frame_max(&conn)
    }

    /// The broker's `version`, as the current node reported it on
    /// connecting (`4.3.6`); `None` when it sent none.
    pub(crate) async fn server_version(&self) -> Option<String> {
        let (_, conn) = self.connection().await;
        server_version(&conn)
    }

    /// Succeeds when `exchange` exists (asking the broker on a channel of its
    /// own the first time); fails with `UNROUTABLE` when it does not.
    pub(crate) async fn check_exchange(&self, exchange: &str) -> Result<()> {
        self.exchanges.check(|| self.channel(), exchange).await
    }

    /// A connection of its own to the current node, for a question whose
    /// refusal would close the connection it is asked on (its caller closes it).
    pub(crate) async fn scratch_connection(&self) -> Result<Connection> {
        open(self.host(), &self.props, &self.tls, self.connect_timeout).await
    }

    /// Whether `close` was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Publishes an application message on the confirm channel of the
    /// application's own publishes (see [`Publisher::publish`]), after the
    /// publishes that started before it started.
    pub(crate) async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: lapin::BasicProperties,
    ) -> Result<()> {
        let turn = self.publish_turn();
        self.publish_in_turn(turn, exchange, routing_key, body, properties)
            .await
    }

    /// The place among the application's publishes of one made now: the
    /// publish sent with it ([`Broker::publish_in_turn`]) reaches the broker
    /// after those whose turns were taken before.
    pub(crate) fn publish_turn(&self) -> Turn {
        self.publisher.turn()
    }

    /// [`Broker::publish`] in `turn`.
    pub(crate) async fn publish_in_turn(
        &self,
        turn: Turn,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: lapin::BasicProperties,
    ) -> Result<()> {
        self.publisher
            .publish(turn, self, exchange, routing_key, body, properties)
            .await
    }

    /// How long a publish waits for the broker's confirm.
    pub(crate) fn confirm_timeout(&self) -> Duration {
        self.publisher.confirm_timeout()
    }

    /// Publishes a failed or replayed message on the confirm channel that
    /// every consumer of this connection shares for them. It is kept apart
    /// from the application's because a publish to a missing exchange closes
    /// its channel, and with it every confirm in flight. Republishes are
    /// independent of each other (each failed message goes on its own), so
    /// they take no turn: none waits for another to be sent.
    pub(crate) fn republish<'a>(
        &'a self,
        exchange: &'a str,
        routing_key: &'a str,
        body: &'a [u8],
        properties: lapin::BasicProperties,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        // The publish's own future, not one around it: the failure path
        // would hold the properties once more.
        self.republisher
            .publish(Turn::alone(), self, exchange, routing_key, body, properties)
    }

    /// The current node's URL with its password replaced, safe for logs,
    /// errors and events.
    pub(crate) fn safe_url(&self) -> &str {
        &self.host().safe_url
    }

    /// Every node's URL without its password, in the order they are tried.
    pub(crate) fn safe_urls(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.safe_url.clone()).collect()
    }

    /// Opens a new channel on a live connection.
    pub(crate) async fn channel(&self) -> Result<lapin::Channel> {
        let (_, conn) = self.live_connection().await?;
        conn.create_channel()
            .await
            .map_err(|e| connection_error(self.safe_url(), &e))
    }

    /// Closes the connection and stops reconnecting; consumers should be closed first.
    pub(crate) async fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        let (_, conn) = self.connection().await;
        if conn.status().connected() {
            // A broker that no longer answers gets as long as a connect would.
            match tokio::time::timeout(
                self.connect_timeout,
                conn.close(200, "closed by client".into()),
            )
            .await
            {
                Ok(closed) => closed.map_err(|e| connection_error(self.safe_url(), &e))?,
                Err(_) => return Ok(()),
            }
        }
        Ok(())
    }
}

/// The largest frame `conn` allows, in bytes.
fn frame_max(conn: &Connection) -> usize {
    match conn.configuration().frame_max() {
        0 => crate::retry::FRAME_MAX,
        n => n as usize,
    }
}

/// The `version` the broker of `conn` reported on connecting.
fn server_version(conn: &Connection) -> Option<String> {
    let props = conn.configuration().server_properties();
    match props
        .inner()
        .get(&lapin::types::ShortString::from("version"))
    {
        Some(lapin::types::AMQPValue::LongString(s)) => {
            Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
        }
        _ => None,
    }
}

/// Connects to the first of `hosts` that answers, trying each once from
/// `start`; the error names every node tried.
async fn open_any(
    hosts: &[Host],
    start: usize,
    props: &ConnectionProperties,
    tls: &TlsOptions,
    timeout: Duration,
) -> Result<(usize, Connection)> {
    let mut errors = Vec::new();
    for i in hosts::from(start, hosts.len()) {
        let host = &hosts[i];
        match open(host, props, tls, timeout).await {
            Ok(conn) => return Ok((i, conn)),
            Err(e) => errors.push(e),
        }
    }
    Err(hosts::none_answered(errors))
}

async fn open(
    host: &Host,
    props: &ConnectionProperties,
    tls: &TlsOptions,
    timeout: Duration,
) -> Result<Connection> {
    let safe_url = &host.safe_url;
    let runtime = lapin::runtime::default_runtime().map_err(|e| connection_error(safe_url, &e))?;
    let connect = Connection::connect_uri_with_config(
        host.uri.clone(),
        props.clone(),
        tls.to_lapin(),
        runtime,
    );
    tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| {
            Error::new(
                ErrorKind::Connection,
                format!(
                    "no answer from {safe_url} within {} ms: is the broker running? (`npm run broker` starts a local one)",
                    timeout.as_millis()
                ),
            )
        })?
        .map_err(|e| open_error(host, &e))
}

/// A connection error naming the broker without its password.
pub(crate) fn connection_error(safe_url: &str, e: &lapin::Error) -> Error {
    Error::with_source(
        ErrorKind::Connection,
        format!("connection to {safe_url} failed: {e}"),
        e.clone(),
    )
}

impl OpenChannel for Broker {
    async fn open_channel(&self) -> Result<lapin::Channel> {
        self.channel().await
    }

    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn exchanges(&self) -> &KnownExchanges {
        &self.exchanges
    }
}
