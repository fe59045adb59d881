//! The hand-off of deliveries and events to JavaScript's pull loop.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;

use super::*;

#[derive(Default)]
pub(super) struct InboxState {
    pub(super) items: VecDeque<Item>,
    pub(super) closed: bool,
}

/// Hands items to JavaScript's pull loop.
#[derive(Default)]
pub(super) struct Inbox {
    pub(super) state: Mutex<InboxState>,
    pub(super) notify: Notify,
}

impl Inbox {
    pub(super) fn push(&self, item: Item) {
        lock(&self.state).items.push_back(item);
        self.notify.notify_one();
    }

    /// Hands over several items with a single wake-up of the pull loop.
    pub(super) fn push_all(&self, items: &mut Vec<Item>) {
        if items.is_empty() {
            return;
        }
        lock(&self.state).items.extend(items.drain(..));
        self.notify.notify_one();
    }

    pub(super) fn close(&self) {
        lock(&self.state).closed = true;
        self.notify.notify_one();
    }
}
