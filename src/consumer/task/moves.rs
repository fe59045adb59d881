//! The failed deliveries a consumer's task moves out (republishes, stores
//! or returns), each with the channel and tag of its delivery.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::FutureExt;

use super::super::event::Event;

/// The failed deliveries being moved out, polled by the consumer's task
/// itself: a confirm wakes that one task, where a task spawned per failure
/// cost a spawn, its own wake-up and then the consumer's.
pub(super) type Moves = FuturesUnordered<BoxFuture<'static, Moved>>;

/// A move that ended: the delivery it was for and the event it ends with.
pub(super) struct Moved {
    /// The channel the delivery came on ([`ConsumerTask::channel_number`]):
    /// a tag of a channel since lost names nothing on the current one.
    pub(super) channel: u64,
    pub(super) tag: u64,
    /// Whether the move carries a trace, whose span JavaScript ends on its event.
    pub(super) traced: bool,
    /// `None` when the move panicked: whether a copy was made is unknown, so
    /// the delivery is held (never acked) and the broker redelivers it.
    pub(super) event: Option<Event>,
}

/// `mv`, the move of delivery `tag` of channel `channel` (`traced` when it
/// carries a trace), as one of the [`Moves`].
pub(super) fn move_of(
    channel: u64,
    tag: u64,
    traced: bool,
    mv: impl Future<Output = Event> + Send + 'static,
) -> BoxFuture<'static, Moved> {
    Box::pin(AssertUnwindSafe(mv).catch_unwind().map(move |moved| Moved {
        channel,
        tag,
        traced,
        event: moved.ok(),
    }))
}
