//! The outbox as JavaScript sees it: its options, counts and parked rows,
//! and the relay's start and stop.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use napi_derive::napi;

use super::convert::{invalid, js_error, MessageProperties};
use super::table::epoch_ms;
use crate::amqp::connection::Broker;
use crate::amqp::fields::short_name;
use crate::amqp::publisher::OpenChannel;
use crate::error::{Error, ErrorKind};
use crate::outbox::{Outbox, RelayConfig, RelayCounters, RelayHandle, RelayStop};
use crate::table::store::{RetryStore, StoreFor};

/// Rows in one relay batch unless `outbox.batchSize` says otherwise.
const DEFAULT_BATCH: u32 = 200;
/// The longest idle wait unless `outbox.pollIntervalMs` says otherwise.
const DEFAULT_POLL_MS: u32 = 100;

/// The outbox's options.
#[napi(object)]
pub(crate) struct NativeOutboxOptions {
    /// The outbox's PostgreSQL URL.
    pub url: String,
    /// Rows in one relay batch. @default 200
    pub batch_size: Option<u32>,
    /// Whether the rows of one ordering key are published in id order.
    pub ordered: Option<bool>,
    /// Whether this process runs a relay. @default true
    pub relay: Option<bool>,
    /// The longest wait between two looks at an empty outbox, ms. @default 100
    pub poll_interval_ms: Option<u32>,
}

/// The outbox of a client: its database, and its relay when this process runs one.
pub(crate) struct ClientOutbox {
    outbox: Arc<Outbox>,
    relay: Option<RelayHandle>,
    /// The broker the rows go to, whose limits a row is held to when written.
    broker: Arc<Broker>,
}

/// The outbox's options, checked.
pub(crate) struct OutboxSettings {
    url: String,
    /// Whether the retry table is in the same database (its pool is shared).
    shared: bool,
    relay: Option<RelayConfig>,
}

impl OutboxSettings {
    /// Reads and checks the outbox's options; `retry_table_url` says where
    /// the retry table is, whose pool the outbox shares when it is the same.
    pub(crate) fn of(
        options: &NativeOutboxOptions,
        retry_table_url: Option<&String>,
    ) -> napi::Result<OutboxSettings> {
        let url = &options.url;
        let batch = options.batch_size.unwrap_or(DEFAULT_BATCH);
        if !(1..=10_000).contains(&batch) {
            return Err(invalid(format!(
                "outbox.batchSize must be a whole number from 1 to 10000, got {batch}"
            )));
        }
        let poll = options.poll_interval_ms.unwrap_or(DEFAULT_POLL_MS);
        if poll < 1 {
            return Err(invalid("outbox.pollIntervalMs must be at least 1"));
        }
        Ok(OutboxSettings {
            url: url.clone(),
            shared: retry_table_url == Some(url),
            relay: options.relay.unwrap_or(true).then(|| RelayConfig {
                batch_size: i64::from(batch),
                ordered: options.ordered.unwrap_or(false),
                poll_interval: Duration::from_millis(u64::from(poll)),
            }),
        })
    }
}

impl ClientOutbox {
    /// Connects to the outbox's database (sharing `retry_table`'s store when
    /// the URL is the same) and starts the relay unless `outbox.relay` is false.
    pub(crate) async fn open(
        settings: OutboxSettings,
        broker: &Arc<Broker>,
        retry_table: Option<&Arc<RetryStore>>,
    ) -> napi::Result<ClientOutbox> {
        let store = match retry_table.filter(|_| settings.shared) {
            Some(store) => store.clone(),
            None => RetryStore::connect(&settings.url, StoreFor::Outbox)
                .await
                .map_err(js_error)?,
        };
        let relay = settings
            .relay
            .map(|config| RelayHandle::start(store.clone(), broker.clone(), config));
        Ok(ClientOutbox {
            outbox: Arc::new(Outbox::new(store)),
            relay,
            broker: broker.clone(),
        })
    }

    /// The outbox as JavaScript holds it.
    pub(crate) fn native(&self) -> NativeOutbox {
        NativeOutbox {
            outbox: self.outbox.clone(),
            counters: self.relay.as_ref().map(|r| r.counters.clone()),
            broker: self.broker.clone(),
        }
    }

    /// Stops the relay, when this process runs one.
    pub(crate) async fn stop(&self) -> Option<RelayStop> {
        match &self.relay {
            Some(relay) => Some(relay.stop().await),
            None => None,
        }
    }
}

/// Counts of the outbox and of this process's relay.
#[napi(object)]
pub struct NativeOutboxStats {
    /// Rows waiting to be published.
    pub pending: f64,
    /// Rows parked.
    pub parked: f64,
    /// Age in ms of the oldest pending row; 0 when none.
    pub oldest_pending_age_ms: f64,
    /// Rows this process's relay published.
    pub published: f64,
    /// Rows this process's relay parked.
    pub parked_by_relay: f64,
}

/// A parked outbox row (without its body).
#[napi(object)]
pub struct NativeParkedOutboxRow {
    /// Row id.
    pub id: f64,
    /// The exchange it was to be published to.
    pub exchange: String,
    /// Its routing key.
    pub routing_key: String,
    /// Its ordering key.
    pub ordering_key: Option<String>,
    /// Its `messageId` property.
    pub message_id: Option<String>,
    /// Refusals by the broker so far.
    pub attempts: i32,
    /// When it was written, ms since the epoch.
    pub created_at_ms: f64,
    /// When it was parked, ms since the epoch.
    pub parked_at_ms: f64,
    /// Why: `unroutable`, `exchange-not-found`, `invalid-properties`,
    /// `too-large`, `refused` or `nacked`.
    pub park_reason: String,
    /// The error that parked it.
    pub last_error: Option<String>,
}

/// A consumer's count of deliveries its inbox skipped as already handled.
#[napi(object)]
pub struct NativeInboxDuplicates {
    /// The consumer's name.
    pub consumer: String,
    /// Deliveries skipped.
    pub duplicates: f64,
    /// The last one, ms since the epoch.
    pub last_at_ms: f64,
}

/// What the relay had done when it stopped.
#[napi(object)]
pub struct NativeRelayStop {
    /// Rows it published and deleted.
    pub published: f64,
    /// Rows it parked.
    pub parked: f64,
    /// Rows it sent that stay in the outbox, to be published again.
    pub unconfirmed: f64,
}

impl From<RelayStop> for NativeRelayStop {
    fn from(s: RelayStop) -> Self {
        NativeRelayStop {
            published: s.published as f64,
            parked: s.parked as f64,
            unconfirmed: s.unconfirmed as f64,
        }
    }
}

fn ids_of(ids: Vec<f64>) -> napi::Result<Vec<i64>> {
    ids.into_iter()
        .map(|id| {
            if id.fract() == 0.0 && (1.0..9_007_199_254_740_992.0).contains(&id) {
                Ok(id as i64)
            } else {
                Err(invalid(format!("ids must be row ids, got {id}")))
            }
        })
        .collect()
}

/// The outbox of a client's database, and the counts of this process's relay.
#[napi]
pub struct NativeOutbox {
    outbox: Arc<Outbox>,
    counters: Option<Arc<RelayCounters>>,
    broker: Arc<Broker>,
}

/// The most bytes of an ordering key: its index (with the row id) must stay
/// well under PostgreSQL's 2,704 bytes of a btree row.
const MAX_ORDERING_KEY_BYTES: usize = 1_000;

#[napi]
impl NativeOutbox {
    /// Checks a row before it is written, so that a row the database or the
    /// broker would refuse fails the write, not the relay, and leaves the
    /// caller's transaction usable: `INVALID_OPTIONS` for what PostgreSQL
    /// cannot store (a NUL, an ordering key over 1,000 bytes) or AMQP cannot
    /// carry (a name over 255 bytes), `PRECONDITION_FAILED` for what the
    /// broker refuses (another user's `userId`, an `expiration` it does not
    /// take, a routing header that is not an array, a body over its
    /// `max_message_size`).
    #[napi]
    pub fn check(
        &self,
        exchange: String,
        routing_key: String,
        body_length: f64,
        ordering_key: Option<String>,
        properties: Option<MessageProperties>,
    ) -> napi::Result<()> {
        let refuse = |kind, message: String| Err(js_error(Error::new(kind, message)));
        short_name("exchange", &exchange).map_err(js_error)?;
        short_name("routing key", &routing_key).map_err(js_error)?;
        for (what, text) in [
            ("exchange", Some(&exchange)),
            ("routingKey", Some(&routing_key)),
            ("orderingKey", ordering_key.as_ref()),
        ] {
            if text.is_some_and(|t| t.contains('\0')) {
                return refuse(
                    ErrorKind::InvalidOptions,
                    format!("{what} holds a NUL character, which PostgreSQL's text cannot store"),
                );
            }
        }
        if let Some(key) = &ordering_key {
            if key.len() > MAX_ORDERING_KEY_BYTES {
                return refuse(
                    ErrorKind::InvalidOptions,
                    format!(
                        "orderingKey is {} bytes, more than the {MAX_ORDERING_KEY_BYTES} the outbox's index takes",
                        key.len()
                    ),
                );
            }
        }
        let props = properties.unwrap_or_default().into_amqp()?;
        match self.broker.limits().check(&props, body_length as usize) {
            Ok(()) => Ok(()),
            Err(refused) => refuse(
                ErrorKind::PreconditionFailed,
                format!(
                    "the broker would refuse this message, so it was not written: {}",
                    refused.reason()
                ),
            ),
        }
    }

    /// Counts of the outbox and of this process's relay.
    #[napi]
    pub async fn stats(&self) -> napi::Result<NativeOutboxStats> {
        let s = self.outbox.stats().await.map_err(js_error)?;
        let (published, parked) = self.counters.as_ref().map_or((0, 0), |c| {
            (
                c.published.load(Ordering::Relaxed),
                c.parked.load(Ordering::Relaxed),
            )
        });
        Ok(NativeOutboxStats {
            pending: s.pending as f64,
            parked: s.parked as f64,
            oldest_pending_age_ms: s.oldest_pending_age_ms as f64,
            published: published as f64,
            parked_by_relay: parked as f64,
        })
    }

    /// Parked rows, oldest first.
    #[napi]
    pub async fn list_parked(&self, limit: u32) -> napi::Result<Vec<NativeParkedOutboxRow>> {
        let rows = self
            .outbox
            .list_parked(i64::from(limit))
            .await
            .map_err(js_error)?;
        Ok(rows
            .into_iter()
            .map(|r| NativeParkedOutboxRow {
                id: r.id as f64,
                exchange: r.exchange,
                routing_key: r.routing_key,
                ordering_key: r.ordering_key,
                message_id: r.message_id,
                attempts: r.attempts,
                created_at_ms: epoch_ms(r.created_at),
                parked_at_ms: epoch_ms(r.parked_at),
                park_reason: r.park_reason.unwrap_or_default(),
                last_error: r.last_error,
            })
            .collect())
    }

    /// Puts parked rows back to be published; resolves to how many.
    #[napi]
    pub async fn retry_parked(&self, ids: Vec<f64>) -> napi::Result<f64> {
        let ids = ids_of(ids)?;
        let n = self.outbox.retry_parked(&ids).await.map_err(js_error)?;
        Ok(n as f64)
    }

    /// Deletes parked rows; resolves to how many.
    #[napi]
    pub async fn delete_parked(&self, ids: Vec<f64>) -> napi::Result<f64> {
        let ids = ids_of(ids)?;
        let n = self.outbox.delete_parked(&ids).await.map_err(js_error)?;
        Ok(n as f64)
    }

    /// Each consumer's count of deliveries its inbox skipped as duplicates.
    #[napi]
    pub async fn inbox_duplicates(&self) -> napi::Result<Vec<NativeInboxDuplicates>> {
        let rows = self.outbox.inbox_duplicates().await.map_err(js_error)?;
        Ok(rows
            .into_iter()
            .map(|r| NativeInboxDuplicates {
                consumer: r.consumer,
                duplicates: r.duplicates as f64,
                last_at_ms: epoch_ms(r.last_at),
            })
            .collect())
    }
}
