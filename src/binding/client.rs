//! `NativeClient`: one connection, its publisher, and the consumers made from it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lapin::types::FieldTable;
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

use super::consumer::{ConsumeOptions, NativeConsumer};
use super::convert::{invalid, js_error, MessageProperties};
use super::parked::{NativeParkedSession, NativeQueueInfo};
use super::table::{NativeListFilter, NativeRow, NativeSelector, NativeTableStats};
use crate::amqp::connection::{Broker, ConnectOptions as AmqpConnectOptions, TlsOptions};
use crate::amqp::fields::table_from_json;
use crate::amqp::parked::{delete_exchange, delete_queue, purge, queue_info, ParkedSession};
use crate::amqp::topology::{ExtraArguments, QueueType, Topology};
use crate::consumer::{
    ConsumerConfig, ConsumerHandle, Recovery, TableConfig, DEFAULT_STEP_TIMEOUT,
};
use crate::retry::{parse_delays, validate_name, validate_topology_names, Backoff};
use crate::table::scheduler::SchedulerHandle;
use crate::table::store::RetryStore;

/// Deliveries of one message after which a quorum consumer parks it without
/// calling the handler.
pub(crate) const DEFAULT_DELIVERY_LIMIT: u32 = 5;

/// How to connect.
#[napi(object)]
pub(crate) struct ConnectOptions {
    /// `amqp://user:password@host:5672/vhost`.
    pub url: String,
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
    /// The scheduler's rate, rows a second. @default 50
    pub retry_table_rate_per_sec: Option<f64>,
    /// Whether this process runs a scheduler. @default true
    pub retry_table_scheduler: Option<bool>,
}

/// A connection to the broker, and the retry table when one is configured.
#[napi]
pub struct NativeClient {
    broker: Arc<Broker>,
    store: Option<Arc<RetryStore>>,
    scheduler: Option<SchedulerHandle>,
}

/// Connects to the broker; rejects with `CONNECTION` or `INVALID_OPTIONS`.
#[napi]
pub(crate) async fn connect(options: ConnectOptions) -> napi::Result<NativeClient> {
    let heartbeat =
        match options.heartbeat {
            Some(h) => Some(u16::try_from(h).map_err(|_| {
                invalid(format!("heartbeat must be at most 65535 seconds, got {h}"))
            })?),
            None => None,
        };
    let opts = AmqpConnectOptions {
        url: options.url,
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
    let rate = options.retry_table_rate_per_sec.unwrap_or(50.0);
    if !(rate.is_finite() && rate > 0.0) {
        return Err(invalid(format!(
            "retryTable.ratePerSec must be a positive number, got {rate}"
        )));
    }
    let broker = Broker::connect(opts).await.map_err(js_error)?;
    let store = match &options.retry_table_url {
        Some(url) => match RetryStore::connect(url).await {
            Ok(store) => Some(store),
            Err(e) => {
                let _ = broker.close().await;
                return Err(js_error(e));
            }
        },
        None => None,
    };
    let scheduler = match (&store, options.retry_table_scheduler.unwrap_or(true)) {
        (Some(store), true) => Some(SchedulerHandle::start(store.clone(), broker.clone(), rate)),
        _ => None,
    };
    Ok(NativeClient {
        broker,
        store,
        scheduler,
    })
}

#[napi]
impl NativeClient {
    /// The broker URL without its password.
    #[napi(getter)]
    pub fn safe_url(&self) -> String {
        self.broker.safe_url().to_owned()
    }

    /// Declares the topology and starts a consumer.
    #[napi]
    pub async fn consume(&self, options: ConsumeOptions) -> napi::Result<NativeConsumer> {
        let delays =
            parse_delays(&options.delays).map_err(|e| invalid(format!("onFailure.delays: {e}")))?;
        validate_name("queue name", &options.queue, false)
            .map_err(|e| invalid(format!("queue: {e}")))?;
        validate_topology_names(&options.queue, &delays)
            .map_err(|e| invalid(format!("queue: {e}")))?;
        if let Some(x) = &options.exchange {
            validate_name("exchange name", x, false)
                .map_err(|e| invalid(format!("exchange: {e}")))?;
        }
        let routing_key = options
            .routing_key
            .clone()
            .unwrap_or_else(|| options.queue.clone());
        validate_name("routing key", &routing_key, true)
            .map_err(|e| invalid(format!("routingKey: {e}")))?;
        let prefetch = options.prefetch.unwrap_or(10);
        if prefetch == 0 || prefetch > 65_535 {
            return Err(invalid(format!(
                "prefetch must be between 1 and 65535, got {prefetch}"
            )));
        }
        let queue_type = QueueType::parse(options.queue_type.as_deref().unwrap_or("classic"))
            .map_err(js_error)?;
        let delivery_limit = match (queue_type, options.delivery_limit) {
            (QueueType::Quorum, None) => Some(DEFAULT_DELIVERY_LIMIT),
            (QueueType::Quorum, Some(0)) => {
                return Err(invalid("deliveryLimit must be at least 1"));
            }
            (QueueType::Quorum, Some(n)) => Some(n),
            (QueueType::Classic, None) => None,
            (QueueType::Classic, Some(_)) => {
                return Err(invalid(
                    "deliveryLimit needs queueType 'quorum': classic queues do not count deliveries",
                ));
            }
        };
        let exchange_type = options
            .exchange_type
            .clone()
            .unwrap_or_else(|| "topic".into());
        let config = ConsumerConfig {
            topology: Topology {
                queue: options.queue,
                exchange: options.exchange,
                exchange_type,
                routing_key,
                queue_type,
                delays,
                delivery_limit,
                assert_queue: options.assert_queue.unwrap_or(true),
                extra: ExtraArguments {
                    work: arguments("queueArguments", options.queue_arguments.as_deref())?,
                    retry: arguments("retryQueueArguments", options.retry_queue_arguments.as_deref())?,
                    parked: arguments("parkedQueueArguments", options.parked_queue_arguments.as_deref())?,
                },
            },
            prefetch: prefetch as u16,
            table: match (options.table_max_attempts, &self.store) {
                (None, _) => None,
                (Some(0), _) => return Err(invalid("onFailure.table.maxAttempts must be at least 1")),
                (Some(n), Some(store)) => Some(TableConfig {
                    store: store.clone(),
                    max_attempts: n,
                }),
                (Some(_), None) => {
                    return Err(invalid(
                        "onFailure.table needs a retry table: connect with { retryTable: { url: 'postgres://…' } }",
                    ))
                }
            },
            recovery: Recovery {
                backoff: Backoff {
                    initial: Duration::from_millis(u64::from(
                        options.recovery_initial_delay_ms.unwrap_or(500).max(1),
                    )),
                    max: Duration::from_millis(u64::from(
                        options.recovery_max_delay_ms.unwrap_or(30_000).max(1),
                    )),
                },
                max_attempts: options.recovery_max_attempts.filter(|n| *n > 0),
                step_timeout: options
                    .recovery_step_timeout_ms
                    .map_or(DEFAULT_STEP_TIMEOUT, |ms| {
                        Duration::from_millis(u64::from(ms.max(1)))
                    }),
            },
        };
        config.topology.check().map_err(js_error)?;
        let handle = ConsumerHandle::start(self.broker.clone(), config)
            .await
            .map_err(js_error)?;
        Ok(NativeConsumer::new(handle))
    }

    /// Publishes with `mandatory` on the confirm channel and waits for the
    /// broker; rejects with `UNROUTABLE`, `PUBLISH_NACKED` or `PUBLISH_FAILED`.
    #[napi]
    pub async fn publish(
        &self,
        exchange: String,
        routing_key: String,
        body: Buffer,
        properties: Option<MessageProperties>,
    ) -> napi::Result<()> {
        let props = properties.unwrap_or_default().to_amqp()?;
        self.broker
            .publish(&exchange, &routing_key, &body, props)
            .await
            .map_err(js_error)
    }

    /// Stops the scheduler and closes the connection.
    #[napi]
    pub async fn close(&self) -> napi::Result<()> {
        if let Some(s) = &self.scheduler {
            s.stop().await;
        }
        self.broker.close().await.map_err(js_error)
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

    /// Deletes `queue` and its messages; resolves to how many it held, `null`
    /// when it did not exist.
    #[napi]
    pub async fn delete_queue(&self, queue: String) -> napi::Result<Option<u32>> {
        delete_queue(&self.broker, &queue).await.map_err(js_error)
    }

    /// Deletes `exchange`.
    #[napi]
    pub async fn delete_exchange(&self, exchange: String) -> napi::Result<()> {
        delete_exchange(&self.broker, &exchange)
            .await
            .map_err(js_error)
    }
}

/// Queue arguments from their JSON form: an object of names to strings,
/// numbers and booleans.
fn arguments(option: &str, json: Option<&str>) -> napi::Result<FieldTable> {
    let Some(json) = json else {
        return Ok(FieldTable::default());
    };
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| invalid(format!("{option} must be an object: {e}")))?;
    let Some(map) = value.as_object() else {
        return Err(invalid(format!(
            "{option} must be an object of argument names to values"
        )));
    };
    {
        if let Some((key, _)) = map
            .iter()
            .find(|(_, v)| !(v.is_string() || v.is_number() || v.is_boolean()))
        {
            return Err(invalid(format!(
                "{option}['{key}'] must be a string, a number or a boolean"
            )));
        }
    }
    table_from_json(&value).map_err(|e| invalid(format!("{option}: {e}")))
}
