//! Which acks to send: one `multiple` ack for the longest settled prefix of
//! delivery tags (never past an unsettled one), and single acks for settled
//! deliveries stuck behind a handler still running once there are enough of
//! them, so a slow handler cannot hold every prefetch slot. Deliveries stuck
//! behind a republish waiting for its confirm wait for it (up to a time
//! bound): the confirm comes within milliseconds, and one `multiple` ack then
//! covers them all where single acks would cost a frame each. The broker is
//! the bottleneck of a consumer: one ack frame per batch instead of per
//! message is the lever.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TagState {
    /// Delivered, its handler still running.
    Open,
    /// Its handler failed and its republish waits for the broker's confirm.
    Publishing,
    /// Settled: may be acked.
    Done,
    /// Its republish failed: never acked, so the broker redelivers it.
    Held,
    /// Its handler failed and it is being returned to the broker
    /// (`basic.reject` with requeue, `onFailure.brokerDelay`): never acked,
    /// gone once the reject is sent.
    Returning,
}

/// An ack to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AckOp {
    /// `basic.ack` with `multiple`: every delivery up to and including this tag.
    Upto(u64),
    /// `basic.ack` of this tag alone.
    One(u64),
}

/// The delivery tags of one channel and what has become of them.
#[derive(Debug)]
pub(super) struct AckLedger {
    tags: BTreeMap<u64, TagState>,
    done_behind: usize,
    spill: usize,
    max_hold: Duration,
    /// When the oldest settled delivery still waiting for an ack was settled.
    waiting_since: Option<Instant>,
}

impl AckLedger {
    /// A ledger that acks settled deliveries behind an unsettled one singly
    /// once `spill` of them wait, or once the oldest has waited `max_hold`.
    pub(super) fn new(spill: usize, max_hold: Duration) -> Self {
        Self {
            tags: BTreeMap::new(),
            done_behind: 0,
            spill: spill.max(1),
            max_hold,
            waiting_since: None,
        }
    }

    /// When the settled deliveries waiting behind an unsettled one must be
    /// acked even if nothing else happens; `None` when none waits.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.waiting_since.map(|t| t + self.max_hold)
    }

    /// A delivery arrived.
    pub(super) fn open(&mut self, tag: u64) {
        self.tags.insert(tag, TagState::Open);
    }

    /// A delivery's handler failed and its republish is under way: it will
    /// be settled (or held) once the broker answers.
    pub(super) fn publishing(&mut self, tag: u64) {
        if let Some(s) = self.tags.get_mut(&tag) {
            if *s == TagState::Open {
                *s = TagState::Publishing;
            }
        }
    }

    /// A delivery's handler failed and it is being returned to the broker:
    /// no ack covers it (a `multiple` ack stops before it) until the reject
    /// is sent, and none after.
    pub(super) fn returning(&mut self, tag: u64) {
        if let Some(s) = self.tags.get_mut(&tag) {
            if *s == TagState::Open {
                *s = TagState::Returning;
            }
        }
    }

    /// A delivery was settled and may be acked; a returned one is gone.
    pub(super) fn done(&mut self, tag: u64) {
        if self.tags.get(&tag) == Some(&TagState::Returning) {
            self.tags.remove(&tag);
            return;
        }
        if let Some(s) = self.tags.get_mut(&tag) {
            if matches!(*s, TagState::Open | TagState::Publishing) {
                *s = TagState::Done;
                self.done_behind += 1;
                self.waiting_since.get_or_insert_with(Instant::now);
            }
        }
    }

    /// A delivery must never be acked (its republish failed).
    pub(super) fn hold(&mut self, tag: u64) {
        if let Some(s) = self.tags.get_mut(&tag) {
            if *s == TagState::Done {
                self.done_behind -= 1;
            }
            *s = TagState::Held;
        }
    }

    /// A delivery was given back (nack) or is otherwise gone.
    pub(super) fn forget(&mut self, tag: u64) {
        if self.tags.remove(&tag) == Some(TagState::Done) {
            self.done_behind -= 1;
        }
    }

    /// Every tag of the channel is gone (the channel closed).
    pub(super) fn clear(&mut self) {
        self.tags.clear();
        self.done_behind = 0;
        self.waiting_since = None;
    }

    /// Deliveries not settled yet, or held.
    #[cfg(test)]
    pub(super) fn unacked(&self) -> usize {
        self.tags.len()
    }

    /// The acks to send now; `force` acks every settled delivery.
    pub(super) fn plan(&mut self, force: bool) -> Vec<AckOp> {
        let mut ops = Vec::new();
        if self.done_behind == 0 {
            self.waiting_since = None;
            return ops;
        }
        let overdue = self.deadline().is_some_and(|d| Instant::now() >= d);
        let mut prefix = 0usize;
        let mut last = 0u64;
        while let Some((&tag, &state)) = self.tags.first_key_value() {
            if state != TagState::Done {
                break;
            }
            self.tags.pop_first();
            prefix += 1;
            last = tag;
        }
        self.done_behind -= prefix;
        match prefix {
            0 => {}
            1 => ops.push(AckOp::One(last)),
            _ => ops.push(AckOp::Upto(last)),
        }
        let blocker = self.tags.first_key_value().map(|(_, s)| *s);
        let blocked_by_held = blocker == Some(TagState::Held);
        // Behind a republish the confirm is near: only the time bound spills.
        let blocked_by_handler = blocker == Some(TagState::Open);
        if self.done_behind > 0
            && (force
                || overdue
                || blocked_by_held
                || (blocked_by_handler && self.done_behind >= self.spill))
        {
            let singles: Vec<u64> = self
                .tags
                .iter()
                .filter(|(_, s)| **s == TagState::Done)
                .map(|(t, _)| *t)
                .collect();
            for t in singles {
                self.tags.remove(&t);
                ops.push(AckOp::One(t));
            }
            self.done_behind = 0;
        }
        if self.done_behind == 0 {
            self.waiting_since = None;
        } else if prefix > 0 {
            // What is left started waiting no earlier than now, near enough.
            self.waiting_since = Some(Instant::now());
        }
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(tags: std::ops::RangeInclusive<u64>, spill: usize) -> AckLedger {
        let mut l = AckLedger::new(spill, Duration::from_secs(60));
        for t in tags {
            l.open(t);
        }
        l
    }

    #[test]
    fn acks_the_settled_prefix_with_one_frame() {
        let mut l = ledger(1..=5, 10);
        for t in [1, 2, 3] {
            l.done(t);
        }
        assert_eq!(l.plan(false), vec![AckOp::Upto(3)]);
        assert_eq!(l.plan(false), vec![]);
        l.done(4);
        assert_eq!(l.plan(false), vec![AckOp::One(4)]);
        assert_eq!(l.unacked(), 1);
    }

    #[test]
    fn never_acks_past_an_unsettled_delivery() {
        let mut l = ledger(1..=6, 10);
        for t in [2, 3, 5] {
            l.done(t);
        }
        assert_eq!(l.plan(false), vec![]);
        l.done(1);
        assert_eq!(l.plan(false), vec![AckOp::Upto(3)]);
        assert_eq!(l.plan(true), vec![AckOp::One(5)]);
        assert_eq!(l.unacked(), 2);
    }

    #[test]
    fn spills_single_acks_behind_a_slow_handler() {
        let mut l = ledger(1..=5, 3);
        l.done(2);
        l.done(3);
        assert_eq!(l.plan(false), vec![]);
        l.done(5);
        assert_eq!(
            l.plan(false),
            vec![AckOp::One(2), AckOp::One(3), AckOp::One(5)]
        );
        l.done(1);
        assert_eq!(l.plan(false), vec![AckOp::One(1)]);
    }

    #[test]
    fn waits_for_a_republish_then_acks_everything_with_one_frame() {
        let mut l = ledger(1..=6, 3);
        l.publishing(1);
        for t in 2..=5 {
            l.done(t);
        }
        assert_eq!(l.plan(false), vec![], "behind a republish: no spill");
        assert!(l.deadline().is_some(), "but the time bound runs");
        l.done(1);
        assert_eq!(l.plan(false), vec![AckOp::Upto(5)]);
        // Behind a handler still running, the spill applies as before.
        for t in 7..=10 {
            l.open(t);
        }
        for t in 7..=9 {
            l.done(t);
        }
        assert_eq!(
            l.plan(false),
            vec![AckOp::One(7), AckOp::One(8), AckOp::One(9)]
        );
    }

    #[test]
    fn a_republish_that_takes_too_long_spills_single_acks() {
        let mut l = AckLedger::new(2, Duration::from_millis(0));
        for t in 1..=4 {
            l.open(t);
        }
        l.publishing(1);
        for t in 2..=4 {
            l.done(t);
        }
        assert_eq!(
            l.plan(false),
            vec![AckOp::One(2), AckOp::One(3), AckOp::One(4)]
        );
        l.hold(1);
        assert_eq!(l.plan(true), vec![]);
        assert_eq!(l.unacked(), 1);
    }

    #[test]
    fn a_held_delivery_is_never_acked_and_does_not_block_others() {
        let mut l = ledger(1..=4, 10);
        l.hold(1);
        l.done(2);
        l.done(3);
        assert_eq!(l.plan(false), vec![AckOp::One(2), AckOp::One(3)]);
        l.done(4);
        assert_eq!(l.plan(true), vec![AckOp::One(4)]);
        assert_eq!(l.unacked(), 1);
        l.done(1); // a late settle of a held delivery does not release it
        assert_eq!(l.plan(true), vec![]);
    }

    #[test]
    fn forgotten_and_cleared_tags_are_not_acked() {
        let mut l = ledger(1..=3, 10);
        l.done(1);
        l.forget(1);
        l.done(2);
        assert_eq!(l.plan(false), vec![AckOp::One(2)]);
        l.done(3);
        l.clear();
        assert_eq!(l.plan(true), vec![]);
        l.done(9); // unknown tag
        assert_eq!(l.plan(true), vec![]);
    }

    #[test]
    fn acks_what_waited_too_long() {
        let mut l = AckLedger::new(10, Duration::from_millis(0));
        l.open(1);
        l.open(2);
        l.done(2);
        assert!(l.deadline().is_some());
        assert_eq!(l.plan(false), vec![AckOp::One(2)]);
        assert_eq!(l.deadline(), None);
    }
}
