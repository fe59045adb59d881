//! Where deliveries and events go: JavaScript, through the binding's
//! [`Sink`]. The task hands them over itself, as they arrive.

use std::collections::{BTreeMap, HashMap};

use lapin::message::Delivery;

use super::event::Event;
use super::pending::Pending;

/// A delivery as JavaScript receives it, borrowed from the task: the body is
/// copied once, into what crosses to JavaScript.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeliveryView<'a> {
    /// The consumer's own id for the delivery, used to settle it.
    pub id: u64,
    /// Earlier failed attempts.
    pub attempt: u32,
    /// Whether a retryable failure of this attempt goes to the retry table,
    /// so JavaScript knows to ask `onFailure.table` where the row waits.
    pub table_bound: bool,
    /// Whether a retryable failure of this attempt parks (no retry is left),
    /// so JavaScript knows to read the error's stack for the parked copy.
    pub parks: bool,
    /// Refused before its handler (the verdict parks it): handed over only
    /// to a consumer that waits on where its messages go, never to its handler.
    pub refused: bool,
    /// The delivery: body, exchange, routing key, redelivered, properties.
    pub delivery: &'a Delivery,
}

/// Receives a consumer's deliveries and events, on the consumer's task.
pub(crate) trait Sink: Send + 'static {
    /// Hands over `deliveries` to handle and `events` to report; `closed`
    /// says that no delivery comes after these. Must not block.
    fn deliver(&mut self, deliveries: &[DeliveryView<'_>], events: &[Event], closed: bool);
}

/// What the task has for JavaScript, and the sink it goes to.
#[derive(Default)]
pub(super) struct Outbox {
    /// `None` until JavaScript attaches, and again after the last deliveries.
    sink: Option<Box<dyn Sink>>,
    /// Whether the sink was told that no delivery follows.
    closed: bool,
    /// Deliveries accepted and not handed over yet (ids of the task's pending).
    pub(super) arrived: Vec<u64>,
    /// Events not handed over yet.
    pub(super) events: Vec<Event>,
    /// Whether JavaScript listens to each retry, and to each park (until it
    /// says otherwise, it does).
    quiet_retry: bool,
    quiet_parked: bool,
    /// The retries and parks not reported one by one, since the last batch.
    retried: BTreeMap<String, u32>,
    parked: BTreeMap<String, u32>,
    /// Whether JavaScript waits on where each failed message goes; then the
    /// deliveries the verdict refuses before their handler are handed over
    /// too (`refused`), so that it knows the message that parks.
    watch_moves: bool,
    /// Deliveries refused before their handler, not handed over yet.
    pub(super) refused: Vec<(u64, Delivery)>,
}

impl Outbox {
    /// An outbox that hands over the deliveries refused before their handler
    /// from the first, when `watch_moves` says JavaScript waits on them.
    pub(super) fn watching_moves(watch_moves: bool) -> Outbox {
        Outbox {
            watch_moves,
            ..Outbox::default()
        }
    }

    /// JavaScript listens to each retry (`retry`), and to each park
    /// (`parked`), or not, and waits on where each failed message goes
    /// (`moves`), or not.
    pub(super) fn heard(&mut self, retry: bool, parked: bool, moves: bool) {
        self.quiet_retry = !retry;
        self.quiet_parked = !parked;
        self.watch_moves = moves;
    }

    /// Whether JavaScript waits on where each failed message goes.
    pub(super) fn watches_moves(&self) -> bool {
        self.watch_moves
    }

    /// Reports the event a move ended with: one by one, or, a retry or a
    /// park nobody listens to and with no trace to end, as a count.
    ///
    /// Speed: an event per failure (the plain way) is an object JavaScript
    /// parses for nobody. Bought: the failure path's client CPU from 1.32x
    /// to 1.22x the seeds' pattern's (0.92x) on `../shared/bench/pinned.sh`'s
    /// workload, 5 alternating rounds (docs/performance.md, "Counts instead
    /// of events").
    pub(super) fn report(&mut self, event: Event, traced: bool) {
        match event {
            Event::Retried { delay, .. } if self.quiet_retry && !traced => {
                *self.retried.entry(delay).or_default() += 1;
            }
            Event::Parked {
                reason,
                fault_error: None,
                ..
            } if self.quiet_parked && !traced => {
                *self.parked.entry(reason).or_default() += 1;
            }
            other => self.events.push(other),
        }
    }

    /// The counts so far, as one event after the others.
    fn tally(&mut self) {
        if self.retried.is_empty() && self.parked.is_empty() {
            return;
        }
        self.events.push(Event::Tally {
            retried: std::mem::take(&mut self.retried),
            parked: std::mem::take(&mut self.parked),
        });
    }

    /// Hands everything to `sink` from the next turn on; a sink attached
    /// after the last deliveries gets nothing.
    pub(super) fn attach(&mut self, sink: Box<dyn Sink>) {
        if !self.closed {
            self.sink = Some(sink);
        }
    }

    /// Hands what arrived to the sink, if one is attached. While finishing,
    /// events stay here: [`finish`](Self::finish) returns them.
    pub(super) fn hand_over(&mut self, pending: &HashMap<u64, Pending>, finishing: bool) {
        if !finishing {
            self.tally();
        }
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        if self.arrived.is_empty()
            && self.refused.is_empty()
            && (self.events.is_empty() || finishing)
        {
            return;
        }
        let refused = self.refused.iter().map(|(id, d)| DeliveryView {
            id: *id,
            attempt: 0,
            table_bound: false,
            parks: true,
            refused: true,
            delivery: d,
        });
        let views: Vec<DeliveryView<'_>> = self
            .arrived
            .iter()
            .filter_map(|id| {
                pending.get(id).map(|p| DeliveryView {
                    id: *id,
                    attempt: p.attempt,
                    table_bound: p.table_bound,
                    parks: p.parks,
                    refused: false,
                    delivery: &p.delivery,
                })
            })
            .chain(refused)
            .collect();
        let events: &[Event] = if finishing { &[] } else { &self.events };
        sink.deliver(&views, events, false);
        self.arrived.clear();
        self.refused.clear();
        if !finishing {
            self.events.clear();
        }
    }

    /// Tells the sink that no delivery follows, with the events so far, and
    /// lets it go: later events are returned by [`finish`](Self::finish).
    pub(super) fn close(&mut self) {
        self.tally();
        if let Some(mut sink) = self.sink.take() {
            sink.deliver(&[], &self.events, true);
            self.events.clear();
        }
        self.closed = true;
    }

    /// Lets the sink go and returns the events it did not get.
    pub(super) fn finish(&mut self) -> Vec<Event> {
        self.tally();
        self.sink = None;
        std::mem::take(&mut self.events)
    }
}
