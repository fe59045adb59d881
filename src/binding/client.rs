//! `NativeClient`: one connection, its publisher, and the consumers made from it
//! (its publishes are in `publish`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use napi_derive::napi;

use super::consumer::NativeConsumer;
use super::convert::{invalid, js_error};
use super::outbox::{
    ClientOutbox, NativeOutbox, NativeOutboxOptions, NativeRelayStop, OutboxSettings,
};
use super::parked::{NativeParkedSession, NativeQueueInfo};
use super::reply::NativeReplySession;
use super::spec::{ConsumeOptions, ConsumeSpec};
use super::table::{
    DrainEndFn, DrainStartFn, JsDrainTracer, NativeListFilter, NativeRow, NativeSchedulerStop,
    NativeSelector, NativeTableStats,
};
use crate::amqp::connection::{Broker, ConnectOptions as AmqpConnectOptions, TlsOptions};
use crate::amqp::parked::{
    bind_queue, declare_state_queue, delete_exchange, delete_queue, purge, queue_info,
    ParkedSession,
};
use crate::amqp::replier::Replier;
use crate::amqp::reply::ReplySession;
use crate::consumer::ConsumerHandle;
use crate::table::scheduler::{SchedulerHandle, SchedulerRates};
use crate::table::store::{check_param, RetryStore, StoreFor};

/// How to connect.
#[napi(object)]
pub(crate) struct ConnectOptions {
    /// `amqp://user:password@host:5672/vhost`: one broker, or the nodes of
    /// one cluster.
    pub urls: Vec<String>,
    /// `shuffle` (the default: a fleet spreads over the nodes) or `ordered`.
    pub host_order: Option<String>,
    /// The name the broker's management tools show for the connection.
    pub connection_name: Option<String>,
    /// Heartbeat in seconds. @default the broker's (60)
    pub heartbeat: Option<u32>,
    /// Milliseconds to wait for the broker. @default 10000
    pub connect_timeout_ms: Option<u32>,
    /// Milliseconds to wait for a publisher confirm. @default 30000
    pub confirm_timeout_ms: Option<u32>,
    /// PEM certificate authorities to trust for `amqps://`. @default the system's
    pub tls_ca: Option<String>,
    /// PEM client certificate for `amqps://` with client authentication.
    pub tls_cert: Option<String>,
    /// PEM PKCS#8 private key of `tlsCert`.
    pub tls_key: Option<String>,
    /// The retry table's PostgreSQL URL.
    pub retry_table_url: Option<String>,
    /// The retry table's drain rate, rows a second, shared by every
    /// scheduler on the database. @default 50 (when none is set)
    pub retry_table_rate_per_sec: Option<f64>,
    /// This process's scheduler's own limit, rows a second.
    pub retry_table_rate_per_sec_per_process: Option<f64>,
    /// Dependencies' own shared drain rates, rows a second.
    pub retry_table_dependency_rates: Option<HashMap<String, f64>>,
    /// Whether this process runs a scheduler. @default true
    pub retry_table_scheduler: Option<bool>,
    /// The transactional outbox.
    pub outbox: Option<NativeOutboxOptions>,
}

/// A shared drain rate.
#[napi(object)]
pub struct NativeRate {
    /// The dependency; `''` for the whole table.
    pub dependency: String,
    /// Rows a second.
    pub rate: f64,
}

/// A connection to the broker, and the retry table when one is configured.
#[napi]
pub struct NativeClient {
    pub(super) broker: Arc<Broker>,
    /// Replies to requests, on a connection of their own opened on the first.
    pub(super) replier: Replier,
    store: Option<Arc<RetryStore>>,
    scheduler: Option<SchedulerHandle>,
    outbox: Option<ClientOutbox>,
}

/// Connects to the broker; rejects with `CONNECTION` or `INVALID_OPTIONS`.
#[napi]
pub(crate) async fn connect(options: ConnectOptions) -> napi::Result<NativeClient> {
    let outbox_settings = match &options.outbox {
        Some(o) => Some(OutboxSettings::of(o, options.retry_table_url.as_ref())?),
        None => None,
    };
    let heartbeat =
        match options.heartbeat {
            Some(h) => Some(u16::try_from(h).map_err(|_| {
                invalid(format!("heartbeat must be at most 65535 seconds, got {h}"))
            })?),
            None => None,
        };
    let shuffle = match options.host_order.as_deref() {
        None | Some("shuffle") => true,
        Some("ordered") => false,
        Some(other) => {
            return Err(invalid(format!(
                "hostOrder must be 'shuffle' or 'ordered', got '{other}'"
            )))
        }
    };
    let opts = AmqpConnectOptions {
        urls: options.urls,
        shuffle,
        connection_name: options.connection_name,
        heartbeat_secs: heartbeat,
        connect_timeout: Duration::from_millis(u64::from(
            options.connect_timeout_ms.unwrap_or(10_000),
        )),
        tls: TlsOptions {
            ca_pem: options.tls_ca,
            client_cert: match (options.tls_cert, options.tls_key) {
                (Some(c), Some(k)) => Some((c.into_bytes(), k.into_bytes())),
                (None, None) => None,
                _ => {
                    return Err(invalid(
                        "tls.cert and tls.key go together: give both or neither",
                    ))
                }
            },
        },
        confirm_timeout: Duration::from_millis(u64::from(
            options.confirm_timeout_ms.unwrap_or(30_000),
        )),
    };
    let positive = |what: &str, r: f64| {
        if r.is_finite() && r > 0.0 {
            Ok(r)
        } else {
            Err(invalid(format!(
                "{what} must be a positive number of rows a second, got {r}"
            )))
        }
    };
    let mut rates = SchedulerRates {
        table: options
            .retry_table_rate_per_sec
            .map(|r| positive("retryTable.ratePerSec", r))
            .transpose()?,
        per_process: options
            .retry_table_rate_per_sec_per_process
            .map(|r| positive("retryTable.ratePerSecPerProcess", r))
            .transpose()?,
        dependencies: Vec::new(),
    };
    for (dependency, r) in options.retry_table_dependency_rates.unwrap_or_default() {
        if dependency.is_empty() {
            return Err(invalid(
                "retryTable.dependencyRates: a dependency's name cannot be empty",
            ));
        }
        check_param(
            "a dependency of retryTable.dependencyRates",
            Some(&dependency),
        )
        .map_err(js_error)?;
        let r = positive(&format!("retryTable.dependencyRates['{dependency}']"), r)?;
        rates.dependencies.push((dependency, r));
    }
    let replier = Replier::new(opts.clone());
    let broker = Broker::connect(opts).await.map_err(js_error)?;
    let store = match &options.retry_table_url {
        Some(url) => match RetryStore::connect(url, StoreFor::RetryTable).await {
            Ok(store) => Some(store),
            Err(e) => {
                let _ = broker.close().await;
                return Err(js_error(e));
            }
        },
        None => None,
    };
    let scheduler = match (&store, options.retry_table_scheduler.unwrap_or(true)) {
        (Some(store), true) => Some(SchedulerHandle::start(store.clone(), broker.clone(), rates)),
        _ => None,
    };
    let outbox = match outbox_settings {
        Some(settings) => ClientOutbox::open(settings, &broker, store.as_ref())
            .await
            .map(Some),
        None => Ok(None),
    };
    let outbox = match outbox {
        Ok(outbox) => outbox,
        Err(e) => {
            if let Some(s) = &scheduler {
                s.stop().await;
            }
            let _ = broker.close().await;
            return Err(e);
        }
    };
    Ok(NativeClient {
        broker,
        replier,
        store,
        scheduler,
        outbox,
    })
}

#[napi]
impl NativeClient {
    /// The broker URL without its password.
    #[napi(getter)]
    pub fn safe_url(&self) -> String {
        self.broker.safe_url().to_owned()
    }

    /// Every node's URL without its password, in the order they are tried.
    #[napi(getter)]
    pub fn safe_urls(&self) -> Vec<String> {
        self.broker.safe_urls()
    }

    /// Checks the options against every rule of `consume` (refusing with
    /// `INVALID_OPTIONS` before anything is declared), then declares the
    /// topology and starts a consumer.
    #[napi]
    pub async fn consume(&self, options: ConsumeOptions) -> napi::Result<NativeConsumer> {
        let config = ConsumeSpec::validate(options)?.into_config(self.store.as_ref())?;
        let handle = ConsumerHandle::start(self.broker.clone(), config)
            .await
            .map_err(js_error)?;
        Ok(NativeConsumer::new(handle))
    }

    /// Lets JavaScript trace the scheduler's drains: `start` is called before
    /// each row is published and may return the trace context the published
    /// copy carries; `end` after, with the error when the publish failed.
    /// Nothing happens when this process runs no scheduler.
    #[napi(
        ts_args_type = "start: (row: NativeDrainRow) => NativeDrainTrace | null | undefined, end: (drain: NativeDrainEnd) => void"
    )]
    pub fn trace_drains(&self, start: DrainStartFn, end: DrainEndFn) {
        if let Some(s) = &self.scheduler {
            s.trace_with(Arc::new(JsDrainTracer {
                start: Arc::new(start),
                end,
            }));
        }
    }

    /// Stops the scheduler, within about a second when it is mid-drain (see
    /// `table::scheduler`); resolves to what it had done, the same on every
    /// call, or `null` when this process runs none.
    #[napi]
    pub async fn stop_scheduler(&self) -> napi::Result<Option<NativeSchedulerStop>> {
        Ok(match &self.scheduler {
            Some(s) => Some(s.stop().await.into()),
            None => None,
        })
    }

    /// Stops the scheduler and the relay, and closes the connections.
    #[napi]
    pub async fn close(&self) -> napi::Result<()> {
        if let Some(s) = &self.scheduler {
            s.stop().await;
        }
        if let Some(o) = &self.outbox {
            o.stop().await;
        }
        let replies = self.replier.close().await;
        self.broker.close().await.map_err(js_error)?;
        replies.map_err(js_error)
    }

    /// The outbox, when the client was connected with one.
    #[napi]
    pub fn outbox(&self) -> Option<NativeOutbox> {
        self.outbox.as_ref().map(ClientOutbox::native)
    }

    /// Stops the outbox's relay: resolves to what it had done, the same on
    /// every call, or `null` when this process runs none.
    #[napi]
    pub async fn stop_relay(&self) -> napi::Result<Option<NativeRelayStop>> {
        Ok(match &self.outbox {
            Some(o) => o.stop().await.map(NativeRelayStop::from),
            None => None,
        })
    }

    fn store(&self) -> napi::Result<&Arc<RetryStore>> {
        self.store.as_ref().ok_or_else(|| {
            invalid("no retry table: connect with { retryTable: { url: 'postgres://…' } }")
        })
    }

    /// Pauses the selected rows; resolves to how many.
    #[napi]
    pub async fn table_pause(&self, selector: NativeSelector) -> napi::Result<f64> {
        let n = self
            .store()?
            .pause(&selector.into())
            .await
            .map_err(js_error)?;
        Ok(n as f64)
    }

    /// Resumes the selected rows and makes them due now; resolves to how many.
    #[napi]
    pub async fn table_resume(&self, selector: NativeSelector) -> napi::Result<f64> {
        let n = self
            .store()?
            .resume(&selector.into())
            .await
            .map_err(js_error)?;
        Ok(n as f64)
    }

    /// Whether a pause with exactly this selector is in force.
    #[napi]
    pub async fn table_is_paused(&self, selector: NativeSelector) -> napi::Result<bool> {
        self.store()?
            .is_paused(&selector.into())
            .await
            .map_err(js_error)
    }

    /// Makes row `id` due now; false when there is no such row.
    #[napi]
    pub async fn table_retry_now(&self, id: f64) -> napi::Result<bool> {
        self.store()?.retry_now(id as i64).await.map_err(js_error)
    }

    /// Rows, oldest first.
    #[napi]
    pub async fn table_list(&self, filter: NativeListFilter) -> napi::Result<Vec<NativeRow>> {
        let rows = self.store()?.list(&filter.into()).await.map_err(js_error)?;
        Ok(rows.into_iter().map(NativeRow::from).collect())
    }

    /// Sets the shared drain rate of `dependency`'s rows, rows a second; `null`
    /// removes it (they then share the table's only).
    #[napi]
    pub async fn table_set_rate(&self, dependency: String, rate: Option<f64>) -> napi::Result<()> {
        if dependency.is_empty() {
            return Err(invalid("setRate: give the dependency's name"));
        }
        if let Some(r) = rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(invalid(format!(
                    "setRate: the rate must be a positive number of rows a second, got {r}"
                )));
            }
        }
        self.store()?
            .set_rate(&dependency, rate)
            .await
            .map_err(js_error)
    }

    /// The shared drain rates: the table's (dependency `''`) and each dependency's.
    #[napi]
    pub async fn table_rates(&self) -> napi::Result<Vec<NativeRate>> {
        let rates = self.store()?.rates().await.map_err(js_error)?;
        Ok(rates
            .into_iter()
            .map(|(dependency, rate)| NativeRate { dependency, rate })
            .collect())
    }

    /// Counts of the table and of this process's scheduler.
    #[napi]
    pub async fn table_stats(&self) -> napi::Result<NativeTableStats> {
        let stats = self.store()?.stats().await.map_err(js_error)?;
        let (published, failed) = self.scheduler.as_ref().map_or((0, 0), |s| {
            (
                s.counters.published.load(Ordering::Relaxed),
                s.counters.publish_failed.load(Ordering::Relaxed),
            )
        });
        Ok(NativeTableStats::new(stats, published, failed))
    }

    /// Depth and consumers of `queue`; `null` when it does not exist.
    #[napi]
    pub async fn queue_info(&self, queue: String) -> napi::Result<Option<NativeQueueInfo>> {
        let info = queue_info(&self.broker, &queue).await.map_err(js_error)?;
        Ok(info.map(|i| NativeQueueInfo {
            messages: i.messages,
            consumers: i.consumers,
        }))
    }

    /// Declares `queue` as a state queue: durable, holding only its newest message.
    #[napi]
    pub async fn declare_state_queue(&self, queue: String) -> napi::Result<()> {
        declare_state_queue(&self.broker, &queue)
            .await
            .map_err(js_error)
    }

    /// Removes every ready message of `queue`; resolves to how many.
    #[napi]
    pub async fn purge(&self, queue: String) -> napi::Result<u32> {
        purge(&self.broker, &queue).await.map_err(js_error)
    }

    /// Opens a session on `parkedQueue`, whose messages belong to `workQueue`.
    #[napi]
    pub async fn open_parked(
        &self,
        parked_queue: String,
        work_queue: String,
    ) -> napi::Result<NativeParkedSession> {
        let session = ParkedSession::open(&self.broker, &parked_queue)
            .await
            .map_err(js_error)?;
        Ok(NativeParkedSession::new(
            self.broker.clone(),
            session,
            work_queue,
        ))
    }

    /// Opens a channel for requests that wait for a reply (direct reply-to).
    #[napi]
    pub async fn open_replies(&self) -> napi::Result<NativeReplySession> {
        let session = ReplySession::open(&self.broker).await.map_err(js_error)?;
        Ok(NativeReplySession::new(session))
    }

    /// Deletes `queue` and its messages; resolves to how many it held, `null`
    /// when it did not exist.
    #[napi]
    pub async fn delete_queue(&self, queue: String) -> napi::Result<Option<u32>> {
        delete_queue(&self.broker, &queue).await.map_err(js_error)
    }

    /// Binds `queue` to `exchange` with `routingKey`.
    #[napi]
    pub async fn bind_queue(
        &self,
        queue: String,
        exchange: String,
        routing_key: String,
    ) -> napi::Result<()> {
        bind_queue(&self.broker, &queue, &exchange, &routing_key)
            .await
            .map_err(js_error)
    }

    /// Deletes `exchange`.
    #[napi]
    pub async fn delete_exchange(&self, exchange: String) -> napi::Result<()> {
        delete_exchange(&self.broker, &exchange)
            .await
            .map_err(js_error)
    }
}
