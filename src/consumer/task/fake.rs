//! A scripted broker and sink for the task's tests: every answer is the
//! test's, and every ack, requeue, cancel and close is recorded.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::stream::{self, StreamExt};
use lapin::message::Delivery;
use tokio::sync::{mpsc, Semaphore};

use super::super::config::ConsumerConfig;
use super::super::event::Event;
use super::super::link::{Deliveries, Link, LinkChannel, Subscription};
use super::super::pending::Pending;
use super::super::settlement::Failure;
use super::super::sink::{DeliveryView, Sink};
use crate::error::{Error, ErrorKind, Result};
use crate::retry::Route;

/// What the task did to a channel (numbered from 1 by subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    Ack { ch: usize, tag: u64, multiple: bool },
    Requeue { ch: usize, tag: u64 },
    Reject { ch: usize, tag: u64 },
    Cancel { ch: usize },
    Close { ch: usize },
    Consume { ch: usize },
    Get { ch: usize },
}

/// One call of the sink.
#[derive(Debug, Clone)]
pub(super) struct Batch {
    /// (id, delivery tag, attempt) of each delivery.
    pub(super) deliveries: Vec<(u64, u64, u32)>,
    /// The ids of the deliveries refused before their handler, handed over
    /// to be watched.
    pub(super) refused: Vec<u64>,
    /// Each event's kind.
    pub(super) events: Vec<&'static str>,
    pub(super) closed: bool,
}

pub(super) fn ack(ch: usize, tag: u64, multiple: bool) -> Op {
    Op::Ack { ch, tag, multiple }
}

pub(super) fn kind(e: &Event) -> &'static str {
    match e {
        Event::Retried { .. } => "retry",
        Event::Parked { .. } => "parked",
        Event::Stored { .. } => "stored",
        Event::PublishFailed { .. } => "publish-failed",
        Event::Disconnected { .. } => "disconnected",
        Event::Recovered { .. } => "recovered",
        Event::ConsumerError { .. } => "error",
        Event::Tally { .. } => "tally",
        Event::TakenBack { .. } => "taken-back",
    }
}

/// A broker whose every answer the test decides.
#[derive(Clone, Default)]
pub(super) struct Script {
    pub(super) ops: Arc<Mutex<Vec<Op>>>,
    /// Subscriptions made.
    pub(super) subscribed: Arc<AtomicUsize>,
    /// One sender per subscription so far: the test delivers through the last.
    pub(super) feeds: Feeds,
    /// What `basic.get` returns, oldest first.
    pub(super) ready: Arc<Mutex<VecDeque<Delivery>>>,
    /// Answers of the next subscribes after the first; `Ok` when none is left.
    pub(super) subscribe_errors: Arc<Mutex<VecDeque<Error>>>,
    /// Republishes fail while set.
    pub(super) refuse_republish: Arc<AtomicBool>,
    /// Republishes panic while set.
    pub(super) panic_on_republish: Arc<AtomicBool>,
    /// Rejects (`basic.reject` with requeue) fail while set.
    pub(super) refuse_rejects: Arc<AtomicBool>,
    /// Republishes wait for a permit.
    pub(super) confirms: Option<Arc<Semaphore>>,
    pub(super) closed: Arc<AtomicBool>,
    /// The route of every failed delivery moved, by delivery id, in order.
    pub(super) routes: Arc<Mutex<Vec<(u64, Route)>>>,
}

impl Script {
    /// A broker whose republishes wait until the test adds a permit each.
    pub(super) fn confirming_on_demand() -> (Script, Arc<Semaphore>) {
        let confirms = Arc::new(Semaphore::new(0));
        let script = Script {
            confirms: Some(confirms.clone()),
            ..Script::default()
        };
        (script, confirms)
    }

    /// A broker whose first resubscribe is refused ("broker down").
    pub(super) fn resubscribing_after_one_refusal() -> Script {
        let script = Script::default();
        script
            .subscribe_errors
            .lock()
            .unwrap()
            .push_back(Error::new(ErrorKind::Connection, "broker down"));
        script
    }

    pub(super) fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }

    pub(super) fn routes(&self) -> Vec<(u64, Route)> {
        self.routes.lock().unwrap().clone()
    }

    /// Delivers `tag` on the newest subscription, delivered `count` times
    /// before (its `x-delivery-count`), as a redelivery.
    pub(super) fn deliver_counted(&self, tag: u64, count: i64) {
        self.deliver_with_count(tag, count, true);
    }

    /// Delivers `tag` with an `x-delivery-count` of `count`, flagged
    /// `redelivered` or not (a producer's header on a first delivery).
    pub(super) fn deliver_with_count(&self, tag: u64, count: i64, redelivered: bool) {
        let mut d = Delivery::mock(
            tag,
            "".into(),
            "q".into(),
            redelivered,
            format!("m{tag}").into(),
        );
        let mut headers = lapin::types::FieldTable::default();
        headers.insert(
            "x-delivery-count".into(),
            lapin::types::AMQPValue::LongLongInt(count),
        );
        d.properties = lapin::BasicProperties::default().with_headers(headers);
        let feeds = self.feeds.lock().unwrap();
        feeds.last().unwrap().send(Ok(d)).unwrap();
    }

    pub(super) fn subscriptions(&self) -> usize {
        self.subscribed.load(Ordering::SeqCst)
    }

    /// Delivers `tag` on the newest subscription.
    pub(super) fn deliver(&self, tag: u64) {
        let d = Delivery::mock(tag, "".into(), "q".into(), false, format!("m{tag}").into());
        let feeds = self.feeds.lock().unwrap();
        feeds.last().unwrap().send(Ok(d)).unwrap();
    }

    /// Puts `tag` in the queue for `basic.get`.
    pub(super) fn ready(&self, tag: u64) {
        let d = Delivery::mock(tag, "".into(), "q".into(), false, format!("m{tag}").into());
        self.ready.lock().unwrap().push_back(d);
    }

    /// The newest subscription's channel fails.
    pub(super) fn lose_channel(&self) {
        let feeds = self.feeds.lock().unwrap();
        let _ = feeds.last().unwrap().send(Err(Error::new(
            ErrorKind::Connection,
            "channel closed by the broker",
        )));
    }

    /// The broker cancels the newest subscription (its queue was deleted).
    pub(super) fn cancel_from_broker(&self) {
        self.feeds.lock().unwrap().pop();
    }
}

#[derive(Clone)]
pub(super) struct FakeChannel {
    n: usize,
    pub(super) ops: Arc<Mutex<Vec<Op>>>,
    feeds: Feeds,
    ready: Arc<Mutex<VecDeque<Delivery>>>,
    refuse_rejects: Arc<AtomicBool>,
}

type Feeds = Arc<Mutex<Vec<mpsc::UnboundedSender<Result<Delivery>>>>>;

impl LinkChannel for FakeChannel {
    fn connected(&self) -> bool {
        true
    }

    async fn ack(&self, tag: u64, multiple: bool) -> Result<()> {
        let ch = self.n;
        self.ops.lock().unwrap().push(Op::Ack { ch, tag, multiple });
        Ok(())
    }

    async fn requeue(&self, tag: u64) -> Result<()> {
        let ch = self.n;
        self.ops.lock().unwrap().push(Op::Requeue { ch, tag });
        Ok(())
    }

    async fn reject(&self, tag: u64) -> Result<()> {
        let ch = self.n;
        self.ops.lock().unwrap().push(Op::Reject { ch, tag });
        if self.refuse_rejects.load(Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::Connection, "reject refused"));
        }
        Ok(())
    }

    async fn cancel(&self, _consumer_tag: &str) -> Result<()> {
        let ch = self.n;
        self.ops.lock().unwrap().push(Op::Cancel { ch });
        Ok(())
    }

    async fn close(&self, _reason: &str, _limit: Duration) {
        let ch = self.n;
        self.ops.lock().unwrap().push(Op::Close { ch });
    }

    async fn consume(&self, _queue: &str, _tag: &str) -> Result<(String, Deliveries)> {
        let ch = self.n;
        self.ops.lock().unwrap().push(Op::Consume { ch });
        let (tx, rx) = mpsc::unbounded_channel();
        self.feeds.lock().unwrap().push(tx);
        let deliveries =
            stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|d| (d, rx)) }).boxed();
        Ok((format!("ctag-{ch}-again"), deliveries))
    }

    async fn get(&self, _queue: &str) -> Result<Option<Delivery>> {
        let ch = self.n;
        self.ops.lock().unwrap().push(Op::Get { ch });
        Ok(self.ready.lock().unwrap().pop_front())
    }
}

impl Link for Script {
    type Channel = FakeChannel;

    async fn subscribe(&self, _config: &ConsumerConfig) -> Result<Subscription<FakeChannel>> {
        if self.subscriptions() > 0 {
            if let Some(e) = self.subscribe_errors.lock().unwrap().pop_front() {
                return Err(e);
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.feeds.lock().unwrap().push(tx);
        let n = self.subscribed.fetch_add(1, Ordering::SeqCst) + 1;
        let deliveries =
            stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|d| (d, rx)) }).boxed();
        Ok(Subscription {
            channel: FakeChannel {
                n,
                ops: self.ops.clone(),
                feeds: self.feeds.clone(),
                ready: self.ready.clone(),
                refuse_rejects: self.refuse_rejects.clone(),
            },
            consumer_tag: format!("ctag-{n}"),
            node: format!("amqp://node{n}"),
            deliveries,
        })
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn route_failure(
        &self,
        _config: Arc<ConsumerConfig>,
        id: u64,
        _pending: Pending,
        failure: Failure,
        route: Route,
    ) -> BoxFuture<'static, Event> {
        self.routes.lock().unwrap().push((id, route.clone()));
        let refuse = self.refuse_republish.load(Ordering::SeqCst);
        let panics = self.panic_on_republish.load(Ordering::SeqCst);
        let confirms = self.confirms.clone();
        Box::pin(async move {
            assert!(!panics, "a republish that panics");
            if let Some(c) = confirms {
                let _permit = c.acquire().await;
            }
            if refuse {
                return Event::PublishFailed {
                    id,
                    message_id: None,
                    target: "q.retry.5s".into(),
                    error: Error::new(ErrorKind::PublishNacked, "refused"),
                };
            }
            match route {
                Route::Park { reason, attempt } => Event::Parked {
                    id,
                    message_id: None,
                    target: "q.parked".into(),
                    reason: reason.as_str().into(),
                    attempt,
                    error: failure.message,
                    fault_error: None,
                },
                _ => Event::Retried {
                    id,
                    message_id: None,
                    target: "q.retry.5s".into(),
                    attempt: 1,
                    delay: "5s".into(),
                    error: failure.message,
                },
            }
        })
    }
}

#[derive(Clone, Default)]
pub(super) struct FakeSink {
    pub(super) batches: Arc<Mutex<Vec<Batch>>>,
}

impl FakeSink {
    pub(super) fn batches(&self) -> Vec<Batch> {
        self.batches.lock().unwrap().clone()
    }

    pub(super) fn ids(&self) -> Vec<u64> {
        self.batches()
            .iter()
            .flat_map(|b| b.deliveries.iter().map(|d| d.0))
            .collect()
    }

    pub(super) fn events(&self) -> Vec<&'static str> {
        self.batches()
            .iter()
            .flat_map(|b| b.events.clone())
            .collect()
    }
}

impl Sink for FakeSink {
    fn deliver(&mut self, deliveries: &[DeliveryView<'_>], events: &[Event], closed: bool) {
        self.batches.lock().unwrap().push(Batch {
            deliveries: deliveries
                .iter()
                .filter(|d| !d.refused)
                .map(|d| (d.id, d.delivery.delivery_tag, d.attempt))
                .collect(),
            refused: deliveries
                .iter()
                .filter(|d| d.refused)
                .map(|d| d.id)
                .collect(),
            events: events.iter().map(kind).collect(),
            closed,
        });
    }
}
