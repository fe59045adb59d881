//! Publishes sent in the order they were made.
//!
//! Each publish from JavaScript runs as a task of its own on a
//! multi-threaded runtime, so tasks started one after another may reach
//! the channel in another order. A [`Turn`] is taken when the publish is
//! made (on the JavaScript thread, in call order); the publish waits for
//! the turns taken before it only while its frames are queued on the
//! channel, which lapin sends in the order they were queued. Confirms are
//! awaited after the turn has passed on, so publishes stay pipelined.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::Poll;

use tokio::sync::oneshot;

/// What a turn leaves the next one: nothing when it is done, or, when it
/// ended without waiting, the turn it was itself waiting for.
struct Handoff(Option<oneshot::Receiver<Handoff>>);

/// The order of one channel's publishes: turns are served in the order
/// [`SendOrder::turn`] gave them out.
#[derive(Default)]
pub(crate) struct SendOrder {
    last: Mutex<Option<oneshot::Receiver<Handoff>>>,
}

impl SendOrder {
    /// The next turn, after every turn given out before.
    pub(crate) fn turn(&self) -> Turn {
        let (done, next) = oneshot::channel();
        let before = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(next);
        Turn {
            before,
            done: Some(done),
        }
    }
}

/// One publish's place in a [`SendOrder`]. Dropping it lets the next turn
/// go; a turn dropped before it came passes its own wait on.
pub(crate) struct Turn {
    before: Option<oneshot::Receiver<Handoff>>,
    done: Option<oneshot::Sender<Handoff>>,
}

impl Turn {
    /// A turn that waits for nothing, for a publish no other follows.
    pub(crate) fn alone() -> Turn {
        Turn {
            before: None,
            done: None,
        }
    }

    /// Waits until every turn given out before this one has ended.
    pub(crate) async fn wait(&mut self) {
        while let Some(before) = self.before.take() {
            if let Ok(Handoff(earlier)) = before.await {
                self.before = earlier;
            }
        }
    }

    /// Waits for this turn, polls `send` once in it, then lets the next turn
    /// go and finishes `send`. For a `send` that queues its frames on its
    /// first poll (lapin's `basic_publish`), the frames go in turn order and
    /// the rest of the send does not hold the next one back.
    pub(crate) async fn send<F: Future>(mut self, mut send: Pin<&mut F>) -> F::Output {
        self.wait().await;
        let first = poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx))).await;
        drop(self);
        match first {
            Poll::Ready(out) => out,
            Poll::Pending => send.await,
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            // No one waits when no turn was given out after this one.
            let _ = done.send(Handoff(self.before.take()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;

    use futures_util::FutureExt;

    use super::*;

    /// Turns taken 0..n and run in reverse order record 0..n.
    #[tokio::test]
    async fn turns_are_served_in_the_order_they_were_taken() {
        let order = SendOrder::default();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let turns: Vec<Turn> = (0..50).map(|_| order.turn()).collect();
        for (i, turn) in turns.into_iter().enumerate().rev() {
            let seen = seen.clone();
            tasks.push(tokio::spawn(async move {
                turn.send(pin!(async move {
                    seen.lock().unwrap().push(i);
                }))
                .await
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), (0..50).collect::<Vec<_>>());
    }

    /// A turn dropped unused keeps the one after it waiting for the one before it.
    #[tokio::test]
    async fn a_turn_dropped_before_it_came_passes_its_wait_on() {
        let order = SendOrder::default();
        let first = order.turn();
        let skipped = order.turn();
        let mut third = order.turn();
        drop(skipped);
        let mut waiting = pin!(third.wait());
        assert!(waiting.as_mut().now_or_never().is_none());
        drop(first);
        waiting.await;
    }

    /// The next turn goes once the send was polled, while the send is still pending.
    #[tokio::test]
    async fn the_next_turn_does_not_wait_for_the_end_of_a_send() {
        let order = SendOrder::default();
        let (finish, finished) = oneshot::channel::<()>();
        let turn = order.turn();
        let first = tokio::spawn(async move {
            turn.send(pin!(async move {
                let _ = finished.await;
            }))
            .await
        });
        order.turn().send(pin!(async {})).await;
        let _ = finish.send(());
        first.await.unwrap();
    }
}
