//! What the consumer task needs from the broker, as two small traits, so the
//! task's ordering (settle, ack, recover, hold, stop, finish) runs the same
//! against lapin and against the scripted broker of its tests.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::{BoxStream, StreamExt};
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions,
    BasicRejectOptions,
};
use lapin::types::FieldTable;
use lapin::Channel;

use super::config::ConsumerConfig;
use super::event::Event;
use super::failure::handle_failure;
use super::pending::Pending;
use super::settlement::Failure;
use super::steps::{close_channel, subscribe};
use crate::amqp::connection::Broker;
use crate::error::{Error, ErrorKind, Result};
use crate::retry::Route;

/// Deliveries of one subscription; the stream ends when the broker cancels
/// the consumer, and yields an error when the channel is lost.
pub(super) type Deliveries = BoxStream<'static, Result<Delivery>>;

/// A subscription: the channel that acks, the consumer's tag and its deliveries.
pub(super) struct Subscription<C> {
    pub(super) channel: C,
    pub(super) consumer_tag: String,
    pub(super) deliveries: Deliveries,
    /// The node the channel is on, without the URL's password.
    pub(super) node: String,
}

/// The broker as the consumer task sees it.
pub(super) trait Link: Send + Sync + 'static {
    /// The channel a subscription consumes on.
    type Channel: LinkChannel;

    /// Declares the topology, opens a channel with the prefetch and consumes.
    fn subscribe(
        &self,
        config: &ConsumerConfig,
    ) -> impl Future<Output = Result<Subscription<Self::Channel>>> + Send;

    /// Whether the client was closed (then recovery stops).
    fn is_closed(&self) -> bool;

    /// Routes a failed delivery (confirmed republish or a row of the retry
    /// table) and says what happened; runs on a task of its own.
    fn route_failure(
        &self,
        config: Arc<ConsumerConfig>,
        id: u64,
        pending: Pending,
        failure: Failure,
        route: Route,
    ) -> BoxFuture<'static, Event>;
}

/// A consumer's channel: acks, requeues, cancel and close.
pub(super) trait LinkChannel: Clone + Send + Sync + 'static {
    /// Whether the channel is still open.
    fn connected(&self) -> bool;

    /// `basic.ack` of `tag`, and of every tag below it when `multiple`.
    fn ack(&self, tag: u64, multiple: bool) -> impl Future<Output = Result<()>> + Send;

    /// `basic.nack` of `tag` with requeue: the broker delivers it again.
    fn requeue(&self, tag: u64) -> impl Future<Output = Result<()>> + Send;

    /// `basic.reject` of `tag` with requeue: a failed delivery, which a
    /// RabbitMQ 4.3 quorum queue with delayed retry counts and holds back.
    fn reject(&self, tag: u64) -> impl Future<Output = Result<()>> + Send;

    /// `basic.cancel` of the consumer `consumer_tag`.
    fn cancel(&self, consumer_tag: &str) -> impl Future<Output = Result<()>> + Send;

    /// Closes the channel, waiting at most `limit`; the broker takes back
    /// every delivery still unacked.
    fn close(&self, reason: &str, limit: Duration) -> impl Future<Output = ()> + Send;

    /// `basic.consume` of `queue` again (after a cancel), with the tag `tag`
    /// (`""`: the broker makes one): the new consumer's tag and deliveries.
    fn consume(
        &self,
        queue: &str,
        tag: &str,
    ) -> impl Future<Output = Result<(String, Deliveries)>> + Send;

    /// `basic.get` of `queue`, unacked: the next ready message, if any.
    fn get(&self, queue: &str) -> impl Future<Output = Result<Option<Delivery>>> + Send;
}

/// The real broker.
#[derive(Clone)]
pub(super) struct BrokerLink(pub(super) Arc<Broker>);

impl Link for BrokerLink {
    type Channel = Channel;

    async fn subscribe(&self, config: &ConsumerConfig) -> Result<Subscription<Channel>> {
        let (channel, consumer) = subscribe(&self.0, config).await?;
        let node = self.0.safe_url().to_owned();
        let consumer_tag = consumer.tag().as_str().to_owned();
        let deliveries = deliveries_of(consumer, &config.topology.queue);
        Ok(Subscription {
            channel,
            consumer_tag,
            deliveries,
            node,
        })
    }

    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    fn route_failure(
        &self,
        config: Arc<ConsumerConfig>,
        id: u64,
        pending: Pending,
        failure: Failure,
        route: Route,
    ) -> BoxFuture<'static, Event> {
        Box::pin(handle_failure(
            self.0.clone(),
            config,
            id,
            pending,
            failure,
            route,
        ))
    }
}

/// A lapin consumer's deliveries, its errors saying which queue stopped.
fn deliveries_of(consumer: lapin::Consumer, queue: &str) -> Deliveries {
    let queue = queue.to_owned();
    consumer
        .map(move |d| {
            d.map_err(|e| {
                Error::with_source(
                    ErrorKind::Connection,
                    format!("consuming from '{queue}' stopped: {e}"),
                    e,
                )
            })
        })
        .boxed()
}

/// A failed channel operation, with lapin's error as its source.
fn channel_error(e: lapin::Error) -> Error {
    Error::with_source(ErrorKind::Connection, e.to_string(), e)
}

impl LinkChannel for Channel {
    fn connected(&self) -> bool {
        self.status().connected()
    }

    async fn ack(&self, tag: u64, multiple: bool) -> Result<()> {
        self.basic_ack(tag, BasicAckOptions { multiple })
            .await
            .map_err(channel_error)
    }

    async fn requeue(&self, tag: u64) -> Result<()> {
        let requeue = BasicNackOptions {
            multiple: false,
            requeue: true,
        };
        self.basic_nack(tag, requeue).await.map_err(channel_error)
    }

    async fn reject(&self, tag: u64) -> Result<()> {
        self.basic_reject(tag, BasicRejectOptions { requeue: true })
            .await
            .map_err(channel_error)
    }

    async fn cancel(&self, consumer_tag: &str) -> Result<()> {
        self.basic_cancel(consumer_tag.into(), BasicCancelOptions::default())
            .await
            .map_err(channel_error)
    }

    async fn close(&self, reason: &str, limit: Duration) {
        close_channel(self, reason, limit).await;
    }

    async fn consume(&self, queue: &str, tag: &str) -> Result<(String, Deliveries)> {
        let consumer = self
            .basic_consume(
                queue.into(),
                tag.into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(channel_error)?;
        let tag = consumer.tag().as_str().to_owned();
        Ok((tag, deliveries_of(consumer, queue)))
    }

    async fn get(&self, queue: &str) -> Result<Option<Delivery>> {
        let got = self
            .basic_get(queue.into(), BasicGetOptions { no_ack: false })
            .await
            .map_err(channel_error)?;
        Ok(got.map(|m| m.delivery))
    }
}
