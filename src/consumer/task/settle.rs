//! A delivery's way through the task: taken in, the verdict on it asked
//! (`retry::verdict`), handed to JavaScript or moved out (a retry queue, the
//! retry table, the parked queue), settled, acked, or given back.

use futures_util::FutureExt;
use lapin::message::Delivery;
use tokio::time::Instant;

use super::super::acks::AckOp;
use super::super::event::Event;
use super::super::facts::{attempt, facts, policy, refusal};
use super::super::failure::{return_failed, returned};
use super::super::link::{Link, LinkChannel};
use super::super::pending::Pending;
use super::super::settlement::{Failure, Settlement};
use super::{move_of, ConsumerTask, Moved};
use crate::error::{Error, ErrorKind};
use crate::retry::{verdict, Route, Verdict};

/// A copy of `d` for JavaScript to read; nothing acks through it: the task
/// settles the original (the delivery is not `Clone`).
fn copy_for_view(d: &Delivery) -> Delivery {
    Delivery {
        delivery_tag: d.delivery_tag,
        exchange: d.exchange.clone(),
        routing_key: d.routing_key.clone(),
        redelivered: d.redelivered,
        properties: d.properties.clone(),
        data: d.data.clone(),
        acker: d.acker.clone(),
    }
}

impl<L: Link> ConsumerTask<L> {
    /// Takes a delivery in: its id, or `None` when the verdict refused it
    /// before its handler (it parks).
    pub(super) fn accept(&mut self, d: Delivery) -> Option<u64> {
        self.last_activity = Instant::now();
        self.acks.open(d.delivery_tag);
        self.next_id += 1;
        let id = self.next_id;
        let attempt = attempt(&self.config, &d);
        let timeouts = self.timeouts.of(&d);
        let verdict = verdict(None, &facts(&d, attempt, timeouts), &policy(&self.config));
        let limit = self.config.topology.delivery_limit;
        let timed = (timeouts, self.config.consumer_timeout_ms);
        if matches!(verdict, Verdict::Route(_)) {
            self.timeouts.settled(&d);
            if self.out.watches_moves() {
                self.out.refused.push((id, copy_for_view(&d)));
            }
        }
        self.follow(id, d, attempt, verdict, |d, route| {
            refusal(d, route, limit, timed)
        })
    }

    /// Settles delivery `id` as JavaScript says: acked, or failed (then
    /// moved out as the verdict says).
    pub(super) fn settle(&mut self, id: u64, s: Settlement) {
        self.last_activity = Instant::now();
        let Some(p) = self.pending.remove(&id) else {
            // Its channel is gone, or the broker took it back (a consumer
            // timeout): nothing can be acked or moved; it is delivered again.
            self.out.events.push(Event::TakenBack {
                id,
                acked: matches!(s, Settlement::Ack),
            });
            return;
        };
        self.timeouts.settled(&p.delivery);
        match s {
            Settlement::Ack => self.acks.done(p.delivery.delivery_tag),
            Settlement::Fail(f) => {
                let verdict = verdict(
                    f.thrown,
                    &facts(&p.delivery, p.attempt, 0),
                    &policy(&self.config),
                );
                // Handed over again only if the verdict says so (never after a failure).
                if let Some(id) = self.follow(id, p.delivery, p.attempt, verdict, |_, _| f) {
                    self.out.arrived.push(id);
                }
            }
        }
    }

    /// Does what the verdict on delivery `id` says: keeps it for JavaScript
    /// (its id), or moves it out with the failure `failure` describes.
    fn follow(
        &mut self,
        id: u64,
        delivery: Delivery,
        attempt: u32,
        verdict: Verdict,
        failure: impl FnOnce(&Delivery, &Route) -> Failure,
    ) -> Option<u64> {
        match verdict {
            Verdict::Handle { table_bound, parks } => {
                let p = Pending {
                    delivery,
                    attempt,
                    table_bound,
                    parks,
                    since: Instant::now(),
                };
                self.pending.insert(id, p);
                Some(id)
            }
            Verdict::Route(route) => {
                let f = failure(&delivery, &route);
                let p = Pending {
                    delivery,
                    attempt,
                    table_bound: false,
                    parks: false,
                    since: Instant::now(),
                };
                self.move_out(id, p, f, route);
                None
            }
        }
    }

    /// Republishes a failed delivery to where `route` says (or stores it in
    /// the retry table), beside the other moves the consumer's task polls;
    /// acked once that is done. A return is a `basic.reject` with requeue on
    /// the consumer's channel instead, never acked.
    fn move_out(&mut self, id: u64, p: Pending, f: Failure, route: Route) {
        let tag = p.delivery.delivery_tag;
        let traced = f.trace.is_some();
        if let Route::Return {
            delay,
            next_attempt,
        } = route
        {
            let Some(ch) = self.channel.clone() else {
                // The channel is gone, and the broker has the message back.
                self.acks.forget(tag);
                return;
            };
            self.acks.returning(tag);
            let event = returned(&self.config.topology.queue, id, &p, f, delay, next_attempt);
            // The reject's frame is queued for lapin's I/O thread on the first
            // poll, ahead of any ack sent after it, and its being written is
            // not waited for, as an ack's is not: a reject that never leaves
            // (the connection went down) gives the broker its message back
            // with the channel, and it is delivered again.
            let event = match ch.reject(tag).now_or_never() {
                Some(Err(e)) => return_failed(event, e),
                Some(Ok(())) | None => event,
            };
            self.failure_done(Moved {
                channel: self.channel_number,
                tag,
                traced,
                event: Some(event),
            });
            return;
        }
        self.acks.publishing(tag);
        let routed = self
            .link
            .route_failure(self.config.clone(), id, p, f, route);
        self.failures
            .push(move_of(self.channel_number, tag, traced, routed));
    }

    /// Puts deliveries JavaScript never started back in the queue.
    pub(super) async fn release(&mut self, ids: Vec<u64>) {
        self.out.arrived.retain(|id| !ids.contains(id));
        let Some(ch) = self.channel.clone() else {
            return;
        };
        for id in ids {
            if let Some(p) = self.pending.remove(&id) {
                self.acks.forget(p.delivery.delivery_tag);
                let _ =
                    tokio::time::timeout(self.step(), ch.requeue(p.delivery.delivery_tag)).await;
            }
        }
    }

    /// A move finished: ack the original if it went where it should, hold
    /// it if not (or if the move panicked), and tell JavaScript. The
    /// original of a move that began on a channel since lost is the broker's
    /// again (it redelivers it): its tag names another delivery, or none, on
    /// the current channel, and is left alone.
    pub(super) fn failure_done(&mut self, moved: Moved) {
        let Moved {
            channel,
            tag,
            traced,
            event,
        } = moved;
        if channel == self.channel_number && self.channel.is_some() {
            if matches!(event, None | Some(Event::PublishFailed { .. })) {
                self.acks.hold(tag);
                self.stuck += 1;
            } else {
                self.acks.done(tag);
            }
        }
        if let Some(event) = event {
            self.out.report(event, traced);
        }
    }

    /// Sends the acks the ledger says are due. Each frame is queued for
    /// lapin's I/O thread on the first poll of its ack, and its being
    /// written is not waited for: the task goes on at once, instead of being
    /// woken again when the write is done. An ack that never leaves (the
    /// connection went down) costs a redelivery, as any lost ack does, and
    /// the lost connection ends the deliveries, which starts recovery.
    pub(super) fn flush_acks(&mut self, force: bool) {
        let ops = self.acks.plan(force);
        if ops.is_empty() {
            return;
        }
        let Some(ch) = self.channel.clone() else {
            return;
        };
        let mut failed = None;
        for op in ops {
            let (tag, multiple) = match op {
                AckOp::Upto(t) => (t, true),
                AckOp::One(t) => (t, false),
            };
            if let Some(Err(e)) = ch.ack(tag, multiple).now_or_never() {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            self.out.events.push(Event::ConsumerError {
                error: Error::new(
                    ErrorKind::Connection,
                    format!("ack failed; the broker will redeliver the message(s), so they may be handled twice: {e}"),
                ),
            });
        }
    }

    /// Puts every delivery not handed to JavaScript back in the queue.
    pub(super) async fn drop_arrived(&mut self) {
        let Some(ch) = self.channel.clone() else {
            self.out.arrived.clear();
            return;
        };
        for id in std::mem::take(&mut self.out.arrived) {
            if let Some(p) = self.pending.remove(&id) {
                self.acks.forget(p.delivery.delivery_tag);
                let _ =
                    tokio::time::timeout(self.step(), ch.requeue(p.delivery.delivery_tag)).await;
            }
        }
    }
}
