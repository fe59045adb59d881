use crate::{
    Error, Promise, PromiseResolver,
    id_sequence::IdSequence,
    message::BasicReturnMessage,
    protocol::{AMQPError, AMQPSoftError},
    publisher_confirm::{Confirmation, PublisherConfirm},
    returned_messages::ReturnedMessages,
    shared::SharedMutex,
    types::{DeliveryTag, ShortString},
};
use std::{collections::HashMap, fmt, sync::MutexGuard};
use tracing::trace;

#[derive(Clone)]
pub(crate) struct Acknowledgements(SharedMutex<Inner>);

type AMQPResult = Result<(), AMQPError>;
type Resolvers = (PromiseResolver<Confirmation>, PromiseResolver<()>);

impl Acknowledgements {
    pub(crate) fn new(channel_id: u16, returned_messages: ReturnedMessages) -> Self {
        Self(SharedMutex::new(Inner::new(channel_id, returned_messages)))
    }

    pub(crate) fn register_pending(&self, target: PublishTarget) -> PublisherConfirm {
        self.lock_inner().register_pending(target)
    }

    pub(crate) fn get_last_pending(&self) -> Option<Promise<()>> {
        self.lock_inner().last.take()
    }

    pub(crate) fn ack(&self, delivery_tag: DeliveryTag) -> AMQPResult {
        self.lock_inner().drop_pending(delivery_tag, true)
    }

    pub(crate) fn nack(&self, delivery_tag: DeliveryTag) -> AMQPResult {
        self.lock_inner().drop_pending(delivery_tag, false)
    }

    pub(crate) fn ack_all_pending(&self) {
        self.lock_inner().drop_all(true);
    }

    pub(crate) fn nack_all_pending(&self) {
        self.lock_inner().drop_all(false);
    }

    pub(crate) fn ack_all_before(&self, delivery_tag: DeliveryTag) -> AMQPResult {
        self.lock_inner()
            .complete_pending_before(delivery_tag, true)
    }

    pub(crate) fn nack_all_before(&self, delivery_tag: DeliveryTag) -> AMQPResult {
        self.lock_inner()
            .complete_pending_before(delivery_tag, false)
    }

    pub(crate) fn on_channel_error(&self, error: Error) {
        self.lock_inner().on_channel_error(error);
    }

    pub(crate) fn reset(&self, error: Error) {
        self.lock_inner().reset(error);
    }

    fn lock_inner(&self) -> MutexGuard<'_, Inner> {
        self.0.lock()
    }
}

impl fmt::Debug for Acknowledgements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Acknowledgements");
        if let Some(inner) = self.0.try_lock() {
            debug
                .field("delivery_tag", &inner.delivery_tag)
                .field("returned_messages", &inner.returned_messages)
                .field("pending", &inner.pending.keys());
        }
        debug.finish()
    }
}

struct Inner {
    channel_id: u16,
    delivery_tag: IdSequence<DeliveryTag>,
    last: Option<Promise<()>>,
    /// Each pending publish, with where it went (to tell which one a returned message is).
    pending: HashMap<DeliveryTag, (Resolvers, PublishTarget)>,
    returned_messages: ReturnedMessages,
}

/// Where a publish went, as a `basic.return` of it says it: its exchange, its
/// routing key and its body's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublishTarget {
    exchange: ShortString,
    routing_key: ShortString,
    size: usize,
}

impl PublishTarget {
    pub(crate) fn new(exchange: &ShortString, routing_key: &ShortString, size: usize) -> Self {
        Self {
            exchange: exchange.clone(),
            routing_key: routing_key.clone(),
            size,
        }
    }

    fn is_of(&self, message: &BasicReturnMessage) -> bool {
        self.size == message.delivery.data.len()
            && self.routing_key == message.delivery.routing_key
            && self.exchange == message.delivery.exchange
    }
}

impl Inner {
    fn new(channel_id: u16, returned_messages: ReturnedMessages) -> Self {
        Self {
            channel_id,
            delivery_tag: IdSequence::new(false),
            last: None,
            pending: HashMap::default(),
            returned_messages,
        }
    }

    fn register_pending(&mut self, target: PublishTarget) -> PublisherConfirm {
        let delivery_tag = self.delivery_tag.next();
        trace!("Publishing with delivery_tag {}", delivery_tag);
        let (promise, resolver) = Promise::new("acknowledgement");
        let (err_promise, err_resolver) = Promise::new("acknowledgement-error");
        let promise = PublisherConfirm::new(promise, self.returned_messages.clone());
        self.last = Some(err_promise);
        self.pending
            .insert(delivery_tag, ((resolver, err_resolver), target));
        promise
    }

    fn complete_pending(
        &mut self,
        success: bool,
        delivery_tag: DeliveryTag,
        resolvers: Resolvers,
        returned_message: Option<BasicReturnMessage>,
    ) {
        resolvers.0.resolve(if success {
            Confirmation::Ack(returned_message)
        } else {
            Confirmation::Nack(returned_message)
        });
        if Some(delivery_tag) == self.delivery_tag.current() {
            resolvers.1.resolve(());
        }
    }

    /// Completes the pending publishes of `tags`, each with the returned
    /// message that is its own: a `basic.return` comes before the confirm of
    /// its publish, and one confirm (`multiple`) may cover many publishes, so
    /// each returned message goes to the first of them, in publish order,
    /// whose exchange, routing key and body size it carries. A returned
    /// message that no pending publish could be the publish of goes to the
    /// first of `tags` left without one, so that no returned publish is
    /// confirmed as routed.
    fn complete_tags(&mut self, mut tags: Vec<DeliveryTag>, success: bool) {
        tags.sort_unstable();
        let mut completed: Vec<_> = tags
            .into_iter()
            .filter_map(|tag| {
                let (resolvers, target) = self.pending.remove(&tag)?;
                Some((tag, resolvers, target, None))
            })
            .collect();
        if self.returned_messages.has_waiting_messages() {
            for (_, _, target, returned) in &mut completed {
                *returned = self
                    .returned_messages
                    .take_waiting_message(|m| target.is_of(m));
            }
            let pending = &self.pending;
            for (_, _, _, returned) in completed.iter_mut().filter(|c| c.3.is_none()) {
                *returned = self
                    .returned_messages
                    .take_waiting_message(|m| !pending.values().any(|(_, target)| target.is_of(m)));
                if returned.is_none() {
                    break;
                }
            }
        }
        for (tag, resolvers, _, returned) in completed {
            self.complete_pending(success, tag, resolvers, returned);
        }
    }

    fn drop_all(&mut self, success: bool) {
        let tags = self.pending.keys().cloned().collect();
        self.complete_tags(tags, success);
    }

    fn drop_pending(&mut self, delivery_tag: DeliveryTag, success: bool) -> AMQPResult {
        if self.pending.contains_key(&delivery_tag) {
            self.complete_tags(vec![delivery_tag], success);
            Ok(())
        } else {
            Err(AMQPError::new(
                AMQPSoftError::PRECONDITIONFAILED.into(),
                format!(
                    "invalid {} received for inexistant delivery_tag {} on channel {}, current is {:?}, was expecting one of {:?}",
                    if success { "ack" } else { "nack" },
                    delivery_tag,
                    self.channel_id,
                    self.delivery_tag.current(),
                    self.pending.keys()
                )
                .into(),
            ))
        }
    }

    fn complete_pending_before(&mut self, delivery_tag: DeliveryTag, success: bool) -> AMQPResult {
        let tags = self
            .pending
            .keys()
            .filter(|tag| **tag <= delivery_tag)
            .cloned()
            .collect();
        self.complete_tags(tags, success);
        Ok(())
    }

    fn on_channel_error(&mut self, error: Error) {
        for (delivery_tag, (resolvers, _)) in self.pending.drain() {
            resolvers.0.reject(error.clone());
            if Some(delivery_tag) == self.delivery_tag.current() {
                resolvers.1.reject(error.clone());
            }
        }
        self.returned_messages.clear_dropped_confirms();
    }

    fn reset(&mut self, error: Error) {
        self.delivery_tag = IdSequence::new(false);
        self.on_channel_error(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BasicProperties, error_holder::ErrorHolder};
    use std::{future::Future, pin::pin, task};

    fn target(routing_key: &str, size: usize) -> PublishTarget {
        PublishTarget::new(&"".into(), &routing_key.into(), size)
    }

    /// The broker returns a publish to `routing_key` with a body of `size` bytes.
    fn returned(messages: &ReturnedMessages, routing_key: &str, size: usize) {
        messages.start_new_delivery(BasicReturnMessage::new(
            "".into(),
            routing_key.into(),
            312,
            "NO_ROUTE".into(),
            ErrorHolder::default(),
        ));
        messages.handle_content_header_frame(size as u64, BasicProperties::default(), true);
        if size > 0 {
            messages.handle_body_frame(0, vec![0; size], true);
        }
    }

    /// The routing key each confirm carries a returned message of, or `None` for a plain ack.
    fn outcome(confirm: PublisherConfirm) -> Option<String> {
        let mut confirm = pin!(confirm);
        let mut cx = task::Context::from_waker(task::Waker::noop());
        match confirm.as_mut().poll(&mut cx) {
            task::Poll::Ready(Ok(Confirmation::Ack(m))) => {
                m.map(|m| m.delivery.routing_key.to_string())
            }
            other => panic!("not acked: {other:?}"),
        }
    }

    #[test]
    fn a_multiple_ack_gives_the_returned_message_to_its_own_publish() {
        for returned_at in [0usize, 3, 5, 9] {
            let messages = ReturnedMessages::default();
            let acks = Acknowledgements::new(1, messages.clone());
            let confirms: Vec<_> = (0..10)
                .map(|i| {
                    let key = if i == returned_at { "nowhere" } else { "work" };
                    acks.register_pending(target(key, 16))
                })
                .collect();
            returned(&messages, "nowhere", 16);
            acks.ack_all_before(10).expect("ack");
            let got: Vec<_> = confirms.into_iter().map(outcome).collect();
            for (i, o) in got.iter().enumerate() {
                assert_eq!(
                    o.as_deref(),
                    (i == returned_at).then_some("nowhere"),
                    "publish {i}"
                );
            }
        }
    }

    #[test]
    fn a_single_ack_of_another_publish_leaves_the_returned_message_waiting() {
        let messages = ReturnedMessages::default();
        let acks = Acknowledgements::new(1, messages.clone());
        let first = acks.register_pending(target("work", 16));
        let second = acks.register_pending(target("nowhere", 16));
        returned(&messages, "nowhere", 16);
        acks.ack(1).expect("ack 1");
        acks.ack(2).expect("ack 2");
        assert_eq!(outcome(first), None);
        assert_eq!(outcome(second).as_deref(), Some("nowhere"));
    }

    #[test]
    fn the_body_size_tells_publishes_to_the_same_target_apart() {
        let messages = ReturnedMessages::default();
        let acks = Acknowledgements::new(1, messages.clone());
        let small = acks.register_pending(target("gone", 4));
        let large = acks.register_pending(target("gone", 64));
        returned(&messages, "gone", 64);
        acks.ack_all_before(2).expect("ack");
        assert_eq!(outcome(small), None);
        assert_eq!(outcome(large).as_deref(), Some("gone"));
    }

    #[test]
    fn a_returned_message_no_pending_publish_matches_still_fails_a_publish() {
        let messages = ReturnedMessages::default();
        let acks = Acknowledgements::new(1, messages.clone());
        let first = acks.register_pending(target("work", 16));
        let second = acks.register_pending(target("work", 16));
        returned(&messages, "renamed", 16);
        acks.ack_all_before(2).expect("ack");
        assert_eq!(outcome(first).as_deref(), Some("renamed"));
        assert_eq!(outcome(second), None);
    }
}
