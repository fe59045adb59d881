//! The task that owns a consumer's channel: takes deliveries, acks what
//! JavaScript settled, routes failures, recovers and stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicCancelOptions, BasicNackOptions};
use lapin::Channel;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::failure::handle_failure;
use super::inbox::Inbox;
use super::steps::{close_channel, subscribe};
use super::*;
use crate::amqp::connection::Broker;
use crate::amqp::fields::{attempt_of, header, to_field_value, undecodable_field};
use crate::error::{Error, ErrorKind};
use crate::retry::{exceeds_delivery_limit, jitter, route_failure_with_table, ParkReason, Route};

/// Where the task is: consuming, waiting to try recovery again, or done.
enum Phase {
    Consuming(lapin::Consumer),
    Recovering {
        attempt: u32,
        next_try: Instant,
        since: Instant,
    },
    Stopped,
}

pub(super) struct ConsumerTask {
    pub(super) broker: Arc<Broker>,
    pub(super) config: Arc<ConsumerConfig>,
    pub(super) channel: Option<Channel>,
    pub(super) inbox: Arc<Inbox>,
    pub(super) pending: HashMap<u64, Pending>,
    pub(super) next_id: u64,
    pub(super) failures: JoinSet<(u64, Event)>,
    pub(super) acks: AckLedger,
    /// Deliveries accepted since JavaScript was last woken.
    pub(super) arrived: Vec<Item>,
    pub(super) stuck: usize,
    pub(super) last_activity: Instant,
    pub(super) state: Arc<Mutex<ConsumerState>>,
}

impl ConsumerTask {
    pub(super) async fn run(
        mut self,
        consumer: lapin::Consumer,
        mut rx: mpsc::UnboundedReceiver<Command>,
    ) {
        let mut phase = Phase::Consuming(consumer);
        let mut finish: Option<oneshot::Sender<()>> = None;
        // Republishes still running this long after `finish` are given up:
        // their deliveries stay unacked and go back to the queue with the channel.
        let mut finish_by: Option<Instant> = None;
        loop {
            if finish.is_some() && finish_by.is_none() {
                finish_by = Some(Instant::now() + self.step());
            }
            if let Some(reply) = finish.take() {
                if self.failures.is_empty() {
                    self.flush_acks(true).await;
                    if let Some(ch) = self.channel.take() {
                        close_channel(&ch, "consumer closed", self.step()).await;
                    }
                    self.set_state(ConsumerState::Closed);
                    self.inbox.close();
                    let _ = reply.send(());
                    return;
                }
                finish = Some(reply);
            }
            let retry_at = match &phase {
                Phase::Recovering { next_try, .. } => Some(*next_try),
                _ => None,
            };
            // Deliveries held by a failed republish go back to the broker once
            // nothing else is in flight for a while (or when every slot holds one).
            let release_at = (self.stuck > 0
                && self.pending.is_empty()
                && self.failures.is_empty()
                && matches!(phase, Phase::Consuming(_)))
            .then(|| {
                if self.stuck >= usize::from(self.config.prefetch) {
                    Instant::now()
                } else {
                    self.last_activity + HELD_RELEASE_IDLE
                }
            });
            tokio::select! {
                cmd = rx.recv() => {
                    let Some(cmd) = cmd else { return };
                    self.command(cmd, &mut phase, &mut finish).await;
                    // Settle everything JavaScript sent meanwhile before acking: one frame for many.
                    while let Ok(cmd) = rx.try_recv() {
                        self.command(cmd, &mut phase, &mut finish).await;
                    }
                },
                next = next_delivery(&mut phase) => {
                    let mut next = Some(next);
                    // Take every delivery already received, then wake JavaScript once for all of them.
                    while let Some(item) = next.take() {
                        match item {
                            Some(Ok(d)) => {
                                self.accept(d);
                                if self.arrived.len() < MAX_DRAIN {
                                    next = next_delivery(&mut phase).now_or_never();
                                }
                            }
                            Some(Err(e)) => {
                                phase = self.lost(format!("consuming from '{}' stopped: {e}", self.config.topology.queue));
                            }
                            None => {
                                // Only the broker ends the stream while we still consume:
                                // the queue was deleted, or its node went away.
                                phase = self.lost(format!("the broker cancelled the consumer of '{}' (was the queue deleted?)", self.config.topology.queue));
                            }
                        }
                    }
                    self.inbox.push_all(&mut self.arrived);
                },
                _ = sleep_until(retry_at) => {
                    if let Phase::Recovering { attempt, since, .. } = phase {
                        phase = self.recover(attempt, since).await;
                    }
                },
                Some(joined) = self.failures.join_next(), if !self.failures.is_empty() => {
                    self.last_activity = Instant::now();
                    // The broker confirms publishes in bursts: let the other
                    // republishes of the burst finish too, so that one ack
                    // frame and one batch of events cover them all.
                    tokio::task::yield_now().await;
                    let mut finished = vec![joined];
                    while let Some(joined) = self.failures.try_join_next() {
                        finished.push(joined);
                    }
                    for (tag, event) in finished.into_iter().flatten() {
                        self.failure_done(tag, event);
                    }
                },
                _ = sleep_until(self.acks.deadline()) => {},
                _ = sleep_until(finish_by), if !self.failures.is_empty() => {
                    self.failures.abort_all();
                },
                _ = sleep_until(release_at) => {
                    if let Some(ch) = self.channel.take() {
                        close_channel(&ch, "redeliver messages whose republish failed", self.step()).await;
                    }
                    phase = self.lost(format!("{} delivery(ies) of '{}' held by a failed republish went back to the broker (channel reopened)", self.stuck, self.config.topology.queue));
                },
            }
            self.flush_acks(false).await;
        }
    }

    async fn command(
        &mut self,
        cmd: Command,
        phase: &mut Phase,
        finish: &mut Option<oneshot::Sender<()>>,
    ) {
        match cmd {
            Command::SettleMany(acked, failed) => {
                for id in acked {
                    self.settle(id, Settlement::Ack);
                }
                for (id, f) in failed {
                    self.settle(id, Settlement::Fail(f));
                }
            }
            Command::Stop(reply) => {
                if let Phase::Consuming(mut consumer) = std::mem::replace(phase, Phase::Stopped) {
                    self.stop(&mut consumer).await;
                }
                self.close_inbox_deliveries().await;
                let _ = reply.send(());
            }
            Command::Finish(reply) => *finish = Some(reply),
        }
    }

    /// A republish finished: ack the original if it went where it should,
    /// hold it if not, and tell JavaScript.
    fn failure_done(&mut self, tag: u64, event: Event) {
        if matches!(event, Event::PublishFailed { .. }) {
            self.acks.hold(tag);
            self.stuck += 1;
        } else {
            self.acks.done(tag);
        }
        self.inbox.push(Item::Event(event));
    }

    /// Sends the acks the ledger says are due.
    async fn flush_acks(&mut self, force: bool) {
        let ops = self.acks.plan(force);
        if ops.is_empty() {
            return;
        }
        let Some(ch) = self.channel.clone() else {
            return;
        };
        // Every frame is queued before the first is awaited: several acks
        // cost one wake-up of the I/O thread, not one each.
        let sends = ops.into_iter().map(|op| {
            let (tag, multiple) = match op {
                AckOp::Upto(t) => (t, true),
                AckOp::One(t) => (t, false),
            };
            ch.basic_ack(tag, BasicAckOptions { multiple })
        });
        let failed =
            match tokio::time::timeout(self.step(), futures_util::future::join_all(sends)).await {
                Ok(results) => results
                    .into_iter()
                    .find_map(|r| r.err().map(|e| e.to_string())),
                Err(_) => Some(format!("no answer within {} ms", self.step().as_millis())),
            };
        if let Some(e) = failed {
            self.inbox.push(Item::Event(Event::ConsumerError {
                error: Error::new(
                    ErrorKind::Connection,
                    format!("ack failed; the broker will redeliver the message(s), so they may be handled twice: {e}"),
                ),
            }));
        }
    }

    /// How long one broker round trip may take.
    fn step(&self) -> Duration {
        self.config.recovery.step_timeout
    }

    fn set_state(&self, s: ConsumerState) {
        *lock(&self.state) = s;
    }

    /// The channel or connection is gone: forget its deliveries (the broker
    /// redelivers them; acking them on a new channel would be an error) and
    /// start recovering.
    fn lost(&mut self, reason: String) -> Phase {
        self.pending.clear();
        self.acks.clear();
        self.arrived.clear();
        self.stuck = 0;
        self.channel = None;
        {
            let mut st = lock(&self.inbox.state);
            st.items.retain(|i| matches!(i, Item::Event(_)));
        }
        self.set_state(ConsumerState::Recovering);
        self.inbox.push(Item::Event(Event::Disconnected {
            error: Error::new(ErrorKind::Connection, reason),
        }));
        let now = Instant::now();
        Phase::Recovering {
            attempt: 1,
            next_try: now + self.config.recovery.backoff.delay(1, jitter()),
            since: now,
        }
    }

    /// One recovery try: a live connection, the topology declared again, a
    /// new channel and consumer.
    async fn recover(&mut self, attempt: u32, since: Instant) -> Phase {
        if self.broker.is_closed() {
            return self.give_up(Error::new(
                ErrorKind::Closed,
                "the client was closed while the consumer was recovering",
            ));
        }
        match subscribe(&self.broker, &self.config).await {
            Ok((ch, consumer)) => {
                self.channel = Some(ch);
                self.set_state(ConsumerState::Connected);
                self.inbox.push(Item::Event(Event::Recovered {
                    attempts: attempt,
                    after_ms: since.elapsed().as_millis() as u64,
                }));
                Phase::Consuming(consumer)
            }
            Err(e)
                if e.kind == ErrorKind::TopologyMismatch || e.kind == ErrorKind::InvalidOptions =>
            {
                self.give_up(e)
            }
            Err(e) => match self.config.recovery.max_attempts {
                Some(max) if attempt >= max => self.give_up(Error::new(
                    e.kind,
                    format!("recovery gave up after {attempt} attempts: {}", e.message),
                )),
                _ => Phase::Recovering {
                    attempt: attempt + 1,
                    next_try: Instant::now()
                        + self.config.recovery.backoff.delay(attempt + 1, jitter()),
                    since,
                },
            },
        }
    }

    fn give_up(&mut self, error: Error) -> Phase {
        self.set_state(ConsumerState::Closed);
        self.inbox.push(Item::Event(Event::ConsumerError { error }));
        self.inbox.close();
        Phase::Stopped
    }

    /// Puts every delivery JavaScript has not taken back in the queue and
    /// closes the inbox to new deliveries.
    async fn close_inbox_deliveries(&mut self) {
        let unstarted: Vec<u64> = {
            let mut st = lock(&self.inbox.state);
            let items = std::mem::take(&mut st.items);
            let mut ids = Vec::new();
            for item in items {
                match item {
                    Item::Delivery(d) => ids.push(d.id),
                    other => st.items.push_back(other),
                }
            }
            st.closed = true;
            ids
        };
        for id in unstarted {
            if let Some(p) = self.pending.remove(&id) {
                self.acks.forget(p.delivery.delivery_tag);
                let _ = tokio::time::timeout(self.step(), p.delivery.acker.nack(requeue())).await;
            }
        }
        if *lock(&self.state) == ConsumerState::Recovering {
            self.set_state(ConsumerState::Closed);
        }
        self.inbox.notify.notify_one();
    }

    fn accept(&mut self, d: Delivery) {
        self.last_activity = Instant::now();
        self.acks.open(d.delivery_tag);
        self.next_id += 1;
        let id = self.next_id;
        let headers = d.properties.headers().as_ref();
        let attempt = attempt_of(headers, &self.config.topology.queue);
        if let Some((failure, reason)) = self.refused(&d) {
            let route = Route::Park { reason, attempt };
            self.acks.publishing(d.delivery_tag);
            self.route(
                id,
                Pending {
                    delivery: d,
                    attempt,
                },
                failure,
                route,
            );
            return;
        }
        let table_bound = matches!(self.route_of(attempt, true), Route::Table { .. });
        let data = DeliveryData {
            id,
            body: d.data.clone(),
            exchange: d.exchange.as_str().to_owned(),
            routing_key: d.routing_key.as_str().to_owned(),
            redelivered: d.redelivered,
            attempt,
            table_bound,
            properties: d.properties.clone(),
        };
        self.pending.insert(
            id,
            Pending {
                delivery: d,
                attempt,
            },
        );
        self.arrived.push(Item::Delivery(Box::new(data)));
    }

    /// Why a delivery must be parked without reaching the handler, if it must:
    /// a short string that is not UTF-8, or (quorum queues) too many deliveries.
    fn refused(&self, d: &Delivery) -> Option<(Failure, ParkReason)> {
        let failure = |name: &str, message: String| Failure {
            name: name.into(),
            message,
            stack: String::new(),
            retryable: false,
            table: None,
        };
        if let Some(why) = undecodable_field(&d.exchange, &d.routing_key, &d.properties) {
            return Some((failure("UndecodableMessage", why), ParkReason::Undecodable));
        }
        let limit = self.config.topology.delivery_limit?;
        let count = header(d.properties.headers().as_ref(), "x-delivery-count")
            .map(to_field_value)
            .and_then(|v| v.as_count());
        exceeds_delivery_limit(count, limit).then(|| {
            let deliveries = count.unwrap_or(0) + 1;
            (
                failure(
                    "DeliveryLimitExceeded",
                    format!(
                        "delivered {deliveries} times without being acked or rejected (limit {limit}): the consumer most likely crashes on this message, so it was parked without calling the handler again"
                    ),
                ),
                ParkReason::DeliveryLimit,
            )
        })
    }

    fn settle(&mut self, id: u64, s: Settlement) {
        self.last_activity = Instant::now();
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        match s {
            Settlement::Ack => self.acks.done(p.delivery.delivery_tag),
            Settlement::Fail(f) => {
                self.acks.publishing(p.delivery.delivery_tag);
                let route = self.route_of(p.attempt, f.retryable);
                self.route(id, p, f, route);
            }
        }
    }

    /// Where a failure after `attempt` earlier failed attempts goes, with this
    /// consumer's delays and retry table.
    fn route_of(&self, attempt: u32, retryable: bool) -> Route {
        let table_attempts = self.config.table.as_ref().map(|t| t.max_attempts);
        route_failure_with_table(
            attempt,
            &self.config.topology.delays,
            retryable,
            table_attempts,
        )
    }

    /// Republishes a failed delivery to where `route` says, on its own task.
    fn route(&mut self, id: u64, p: Pending, f: Failure, route: Route) {
        let broker = self.broker.clone();
        let config = self.config.clone();
        let tag = p.delivery.delivery_tag;
        self.failures.spawn(async move {
            let event = handle_failure(&broker, &config, id, p, f, route).await;
            (tag, event)
        });
    }

    async fn stop(&mut self, consumer: &mut lapin::Consumer) {
        let tag = consumer.tag();
        let Some(ch) = self.channel.clone() else {
            return;
        };
        if ch.status().connected() {
            let _ = tokio::time::timeout(
                self.step(),
                ch.basic_cancel(tag, BasicCancelOptions::default()),
            )
            .await;
            // Deliveries already on their way end the stream after the cancel.
            let _ = tokio::time::timeout(CANCEL_DRAIN.min(self.step()), async {
                while let Some(Ok(d)) = consumer.next().await {
                    let _ = d.acker.nack(requeue()).await;
                }
            })
            .await;
        }
    }
}

/// The next delivery while consuming; never resolves otherwise.
async fn next_delivery(phase: &mut Phase) -> Option<lapin::Result<Delivery>> {
    match phase {
        Phase::Consuming(c) => c.next().await,
        _ => std::future::pending().await,
    }
}

/// Sleeps until `at`; never resolves without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

fn requeue() -> BasicNackOptions {
    BasicNackOptions {
        multiple: false,
        requeue: true,
    }
}
