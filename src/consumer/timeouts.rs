//! The consumer timeouts a consumer counts itself. When a handler outlives
//! `consumerTimeoutMs`, RabbitMQ 4.3 takes its message back and cancels the
//! consumer, and it does not count that in `x-delivery-count`: a handler
//! that always outlives the timeout would be called for ever. So the task
//! keeps, for each message taken back that way, how often it was, and the
//! verdict adds that to the broker's count against `deliveryLimit`.
//!
//! A message is known again by a fingerprint of what a redelivery keeps of
//! it (its ids, timestamp, routing and body). The counts are only kept while
//! such a message is away; the table is small and bounded, and costs a
//! delivery nothing while it is empty.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use lapin::message::Delivery;
use tokio::time::{Duration, Instant};

/// The most messages whose timeouts are kept; past it, the oldest entries
/// are dropped (their messages then count from the broker's count alone).
const MAX_KEPT: usize = 10_000;

/// Consumer timeouts by message fingerprint.
#[derive(Debug, Default)]
pub(super) struct Timeouts {
    counts: HashMap<u64, (u32, u64)>,
    /// Grows with each record, to drop the oldest when full.
    order: u64,
}

impl Timeouts {
    /// How often the broker took `d` back from a handler that outlived the
    /// consumer timeout.
    pub(super) fn of(&self, d: &Delivery) -> u32 {
        if self.counts.is_empty() {
            return 0;
        }
        self.counts.get(&fingerprint(d)).map_or(0, |(n, _)| *n)
    }

    /// The broker took `d` back once more.
    pub(super) fn record(&mut self, d: &Delivery) {
        if self.counts.len() >= MAX_KEPT {
            let oldest = self
                .counts
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.counts.remove(&k);
            }
        }
        self.order += 1;
        let entry = self.counts.entry(fingerprint(d)).or_insert((0, 0));
        entry.0 += 1;
        entry.1 = self.order;
    }

    /// Why the broker cancelled the consumer of `queue`, whose deliveries
    /// `held` were taken in when each says. Deliveries held about as long as
    /// `timeout_ms` say it was the consumer timeout (RabbitMQ 4.3 takes them
    /// back and cancels the consumer): each is counted. Otherwise the queue
    /// was deleted or its node went down.
    pub(super) fn cancelled<'a>(
        &mut self,
        queue: &str,
        timeout_ms: Option<u32>,
        held: impl Iterator<Item = (&'a Delivery, Instant)>,
    ) -> String {
        let mut taken = 0;
        if let Some(ms) = timeout_ms {
            // The broker's clock starts when it sends the delivery, a little
            // before the consumer takes it in.
            let limit = Duration::from_millis(u64::from(ms));
            let long = limit.saturating_sub((limit / 5).min(Duration::from_secs(1)));
            for (d, since) in held {
                if since.elapsed() >= long {
                    self.record(d);
                    taken += 1;
                }
            }
        }
        if taken == 0 {
            return format!("the broker cancelled the consumer of '{queue}' (was the queue deleted, or is the node that holds it down?)");
        }
        format!(
            "consumer timeout: the broker took back {taken} message(s) of '{queue}' whose handler ran longer than consumerTimeoutMs ({} ms), and cancelled the consumer; they are delivered again, and each such return counts toward deliveryLimit",
            timeout_ms.unwrap_or_default()
        )
    }

    /// `d` was settled (acked or moved out): its count is done with.
    pub(super) fn settled(&mut self, d: &Delivery) {
        if !self.counts.is_empty() {
            self.counts.remove(&fingerprint(d));
        }
    }
}

/// What a redelivery of `d` keeps of it, hashed.
fn fingerprint(d: &Delivery) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let p = &d.properties;
    p.message_id().as_ref().map(|s| s.as_str()).hash(&mut h);
    p.correlation_id().as_ref().map(|s| s.as_str()).hash(&mut h);
    p.timestamp().hash(&mut h);
    d.exchange.as_str().hash(&mut h);
    d.routing_key.as_str().hash(&mut h);
    d.data.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(tag: u64, body: &str) -> Delivery {
        Delivery::mock(tag, "".into(), "q".into(), false, body.into())
    }

    #[test]
    fn a_message_is_known_again_on_another_delivery() {
        let mut t = Timeouts::default();
        assert_eq!(t.of(&delivery(1, "a")), 0);
        t.record(&delivery(1, "a"));
        t.record(&delivery(2, "a"));
        assert_eq!(t.of(&delivery(3, "a")), 2, "the tag is not part of it");
        assert_eq!(t.of(&delivery(3, "b")), 0);
        t.settled(&delivery(4, "a"));
        assert_eq!(t.of(&delivery(5, "a")), 0);
    }

    #[test]
    fn the_table_stays_bounded() {
        let mut t = Timeouts::default();
        for i in 0..(MAX_KEPT + 5) {
            t.record(&delivery(1, &i.to_string()));
        }
        assert_eq!(t.counts.len(), MAX_KEPT);
        assert_eq!(t.of(&delivery(1, "0")), 0, "the oldest went first");
        assert_eq!(t.of(&delivery(1, &(MAX_KEPT + 4).to_string())), 1);
    }
}
