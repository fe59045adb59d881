//! The task that owns a consumer's channel: takes deliveries, hands them to
//! JavaScript, acks what JavaScript settled, routes failures, recovers and stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::acks::AckLedger;
use super::command::{Command, ProbeOutcome};
use super::config::ConsumerConfig;
use super::event::Event;
use super::limits::{ACK_MAX_HOLD, CANCEL_DRAIN, HELD_RELEASE_IDLE, MAX_DRAIN};
use super::link::{Deliveries, Link, LinkChannel, Subscription};
use super::pending::Pending;
use super::settlement::Settlement;
use super::sink::Sink;
use super::sink::{DeliveryView, Outbox};
use super::state::{lock, ConsumerState};
use super::steps::bounded;
use super::timeouts::Timeouts;
use crate::error::{Error, ErrorKind, Result};
use crate::retry::jitter;

/// Where the task is: consuming, waiting to try recovery again, or done.
enum Phase {
    Consuming {
        deliveries: Deliveries,
        consumer_tag: String,
    },
    Recovering {
        attempt: u32,
        next_try: Instant,
        since: Instant,
    },
    /// Paused: no consumer on the queue; the channel stays for what is in flight.
    Paused,
    Stopped,
}

use moves::{move_of, Moved, Moves};

pub(super) struct ConsumerTask<L: Link> {
    link: L,
    config: Arc<ConsumerConfig>,
    channel: Option<L::Channel>,
    /// The node of the channel, without the URL's password.
    node: String,
    /// Which channel of the task's life `channel` is: one more each time it
    /// consumes on a new one. Delivery tags count from 1 on every channel.
    channel_number: u64,
    /// What goes to JavaScript.
    out: Outbox,
    pending: HashMap<u64, Pending>,
    next_id: u64,
    /// The failed deliveries being moved out (republished, stored or
    /// returned), each with its tag and the event it ends with.
    failures: Moves,
    acks: AckLedger,
    stuck: usize,
    last_activity: Instant,
    state: Arc<Mutex<ConsumerState>>,
    /// Paused by JavaScript: a recovered subscription is cancelled at once.
    paused: bool,
    /// The messages the broker took back from handlers that outlived the
    /// consumer timeout, and how often.
    timeouts: Timeouts,
}

impl<L: Link> ConsumerTask<L> {
    /// A task for a consumer of `config`, reporting its state in `state`.
    pub(super) fn new(link: L, config: ConsumerConfig, state: Arc<Mutex<ConsumerState>>) -> Self {
        let spill = usize::from(config.prefetch / 2).max(1);
        let out = Outbox::watching_moves(config.watch_moves);
        ConsumerTask {
            link,
            config: Arc::new(config),
            channel: None,
            node: String::new(),
            channel_number: 0,
            out,
            pending: HashMap::new(),
            next_id: 0,
            failures: Moves::new(),
            acks: AckLedger::new(spill, ACK_MAX_HOLD),
            stuck: 0,
            last_activity: Instant::now(),
            state,
            paused: false,
            timeouts: Timeouts::default(),
        }
    }

    /// Consumes `sub` and obeys `rx` until finished (or the handle is dropped).
    pub(super) async fn run(
        mut self,
        sub: Subscription<L::Channel>,
        mut rx: mpsc::UnboundedReceiver<Command>,
    ) {
        let mut phase = self.consuming(sub);
        let mut finish: Option<oneshot::Sender<Vec<Event>>> = None;
        // Republishes still running this long after `finish` are given up:
        // their deliveries stay unacked and go back to the queue with the channel.
        let mut finish_by: Option<Instant> = None;
        loop {
            if finish.is_some() && finish_by.is_none() {
                finish_by = Some(Instant::now() + self.step());
            }
            if let Some(reply) = finish.take() {
                if self.failures.is_empty() {
                    self.flush_acks(true);
                    if let Some(ch) = self.channel.take() {
                        ch.close("consumer closed", self.step()).await;
                    }
                    self.set_state(ConsumerState::Closed);
                    self.drop_arrived().await;
                    let _ = reply.send(self.out.finish());
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
                && matches!(phase, Phase::Consuming { .. } | Phase::Paused))
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
                                if let Some(id) = self.accept(d) {
                                    self.out.arrived.push(id);
                                }
                                if self.out.arrived.len() < MAX_DRAIN {
                                    next = next_delivery(&mut phase).now_or_never();
                                }
                            }
                            Some(Err(e)) => {
                                phase = self.lost(e.message);
                            }
                            None => {
                                // Only the broker ends the stream while we still consume:
                                // a consumer timeout, the queue deleted, or its node gone.
                                let why = self.cancelled();
                                phase = self.lost(why);
                            }
                        }
                    }
                },
                _ = sleep_until(retry_at) => {
                    if let Phase::Recovering { attempt, since, .. } = phase {
                        phase = self.recover(attempt, since).await;
                    }
                },
                Some(joined) = self.failures.next(), if !self.failures.is_empty() => {
                    self.last_activity = Instant::now();
                    // The broker confirms publishes in bursts: let the other
                    // republishes of the burst finish too, so that one ack
                    // frame and one batch of events cover them all.
                    tokio::task::yield_now().await;
                    self.failure_done(joined);
                    while let Some(Some(joined)) = self.failures.next().now_or_never() {
                        self.failure_done(joined);
                    }
                },
                _ = sleep_until(self.acks.deadline()) => {},
                _ = sleep_until(finish_by), if !self.failures.is_empty() => {
                    self.failures = Moves::new();
                },
                _ = sleep_until(release_at) => {
                    if let Some(ch) = self.channel.take() {
                        ch.close("redeliver messages whose republish failed", self.step()).await;
                    }
                    phase = self.lost(format!("{} delivery(ies) of '{}' held by a failed republish went back to the broker (channel reopened)", self.stuck, self.config.topology.queue));
                },
            }
            self.flush_acks(false);
            // Whatever happened in this turn reaches JavaScript in one batch.
            self.out.hand_over(&self.pending, finish.is_some());
        }
    }

    fn consuming(&mut self, sub: Subscription<L::Channel>) -> Phase {
        self.channel = Some(sub.channel);
        self.channel_number += 1;
        self.node = sub.node;
        Phase::Consuming {
            deliveries: sub.deliveries,
            consumer_tag: sub.consumer_tag,
        }
    }

    async fn command(
        &mut self,
        cmd: Command,
        phase: &mut Phase,
        finish: &mut Option<oneshot::Sender<Vec<Event>>>,
    ) {
        match cmd {
            Command::Attach(sink) => {
                self.out.attach(sink);
            }
            Command::SettleMany(acked, failed) => {
                for id in acked {
                    self.settle(id, Settlement::Ack);
                }
                for (id, f) in failed {
                    self.settle(id, Settlement::Fail(f));
                }
            }
            Command::Stop(reply) => {
                if let Phase::Consuming {
                    mut deliveries,
                    consumer_tag,
                } = std::mem::replace(phase, Phase::Stopped)
                {
                    self.stop(&mut deliveries, &consumer_tag).await;
                }
                self.drop_arrived().await;
                if *lock(&self.state) == ConsumerState::Recovering {
                    self.set_state(ConsumerState::Closed);
                }
                self.out.close();
                let _ = reply.send(());
            }
            Command::Finish(reply) => *finish = Some(reply),
            Command::Pause(reply) => {
                self.paused = true;
                if matches!(phase, Phase::Consuming { .. }) {
                    if let Phase::Consuming {
                        mut deliveries,
                        consumer_tag,
                    } = std::mem::replace(phase, Phase::Paused)
                    {
                        self.stop(&mut deliveries, &consumer_tag).await;
                    }
                    self.drop_arrived().await;
                }
                let _ = reply.send(());
            }
            Command::Resume(reply) => {
                self.paused = false;
                if matches!(phase, Phase::Paused) {
                    *phase = self.consume_again().await;
                }
                let _ = reply.send(Ok(()));
            }
            Command::Probe(sink, reply) => {
                let _ = reply.send(self.probe(phase, sink).await);
            }
            Command::Release(ids) => self.release(ids).await,
            Command::Heard {
                retry,
                parked,
                moves,
            } => self.out.heard(retry, parked, moves),
        }
    }

    /// Consumes again on the channel kept through a pause; a channel lost
    /// meanwhile starts recovery.
    async fn consume_again(&mut self) -> Phase {
        let Some(ch) = self.channel.clone().filter(|c| c.connected()) else {
            return self.lost(format!(
                "the channel of '{}' closed while the consumer was paused",
                self.config.topology.queue
            ));
        };
        let queue = self.config.topology.queue.clone();
        let tag = self.config.consumer_tag.as_deref().unwrap_or("");
        match bounded("basic.consume", self.step(), ch.consume(&queue, tag)).await {
            Ok((consumer_tag, deliveries)) => Phase::Consuming {
                deliveries,
                consumer_tag,
            },
            Err(e) => self.lost(format!(
                "consuming from '{queue}' again failed: {}",
                e.message
            )),
        }
    }

    /// Takes the next message of the paused work queue for `sink`.
    async fn probe(&mut self, phase: &mut Phase, mut sink: Box<dyn Sink>) -> Result<ProbeOutcome> {
        if !matches!(phase, Phase::Paused) {
            return Err(Error::new(
                ErrorKind::InvalidOptions,
                "a probe needs a paused consumer",
            ));
        }
        let Some(ch) = self.channel.clone() else {
            return Ok(ProbeOutcome::Empty);
        };
        let queue = self.config.topology.queue.clone();
        match bounded("basic.get", self.step(), ch.get(&queue)).await {
            Ok(None) => Ok(ProbeOutcome::Empty),
            Ok(Some(d)) => {
                let Some(id) = self.accept(d) else {
                    return Ok(ProbeOutcome::Refused);
                };
                if let Some(p) = self.pending.get(&id) {
                    let view = DeliveryView {
                        id,
                        attempt: p.attempt,
                        table_bound: p.table_bound,
                        parks: p.parks,
                        refused: false,
                        delivery: &p.delivery,
                    };
                    sink.deliver(&[view], &[], false);
                }
                Ok(ProbeOutcome::Taken)
            }
            Err(e) => {
                *phase = self.lost(format!(
                    "taking a probe from '{queue}' failed: {}",
                    e.message
                ));
                Err(e)
            }
        }
    }

    /// How long one broker round trip may take.
    fn step(&self) -> Duration {
        self.config.recovery.step_timeout
    }

    fn set_state(&self, s: ConsumerState) {
        *lock(&self.state) = s;
    }

    /// Why the broker cancelled the consumer: a consumer timeout (then
    /// each delivery it took back is counted), or its queue or node gone.
    fn cancelled(&mut self) -> String {
        let held = self.pending.values().map(|p| (&p.delivery, p.since));
        self.timeouts.cancelled(
            &self.config.topology.queue,
            self.config.consumer_timeout_ms,
            held,
        )
    }

    /// The channel or connection is gone: forget its deliveries (the broker
    /// redelivers them; acking them on a new channel would be an error) and
    /// start recovering.
    fn lost(&mut self, reason: String) -> Phase {
        self.pending.clear();
        self.acks.clear();
        self.out.arrived.clear();
        self.stuck = 0;
        self.channel = None;
        self.set_state(ConsumerState::Recovering);
        self.out.events.push(Event::Disconnected {
            error: Error::new(ErrorKind::Connection, reason),
            url: self.node.clone(),
        });
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
        if self.link.is_closed() {
            return self.give_up(Error::new(
                ErrorKind::Closed,
                "the client was closed while the consumer was recovering",
            ));
        }
        match self.link.subscribe(&self.config).await {
            Ok(sub) => {
                self.set_state(ConsumerState::Connected);
                self.out.events.push(Event::Recovered {
                    attempts: attempt,
                    after_ms: since.elapsed().as_millis() as u64,
                    url: sub.node.clone(),
                });
                match self.consuming(sub) {
                    // Paused: the new consumer goes at once, with what it was sent.
                    Phase::Consuming {
                        mut deliveries,
                        consumer_tag,
                    } if self.paused => {
                        self.stop(&mut deliveries, &consumer_tag).await;
                        Phase::Paused
                    }
                    phase => phase,
                }
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
        self.out.events.push(Event::ConsumerError { error });
        self.out.close();
        Phase::Stopped
    }

    /// Cancels the consumer and puts the deliveries still on their way back
    /// in the queue.
    async fn stop(&mut self, deliveries: &mut Deliveries, consumer_tag: &str) {
        let Some(ch) = self.channel.clone() else {
            return;
        };
        if ch.connected() {
            let _ = tokio::time::timeout(self.step(), ch.cancel(consumer_tag)).await;
            // Deliveries already on their way end the stream after the cancel.
            let _ = tokio::time::timeout(CANCEL_DRAIN.min(self.step()), async {
                while let Some(Ok(d)) = deliveries.next().await {
                    let _ = ch.requeue(d.delivery_tag).await;
                }
            })
            .await;
        }
    }
}

/// The next delivery while consuming; never resolves otherwise.
async fn next_delivery(phase: &mut Phase) -> Option<crate::error::Result<Delivery>> {
    match phase {
        Phase::Consuming { deliveries, .. } => deliveries.next().await,
        _ => std::future::pending().await,
    }
}

/// Sleeps until `at`; never resolves without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

mod moves;
mod settle;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
