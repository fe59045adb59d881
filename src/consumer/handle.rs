//! The consumer as the binding sees it: start, pull, settle, stop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::inbox::Inbox;
use super::steps::subscribe;
use super::task::ConsumerTask;
use super::*;
use crate::amqp::connection::Broker;
use crate::error::{Error, ErrorKind, Result};

/// A running consumer; cheap to share.
pub(crate) struct ConsumerHandle {
    inbox: Arc<Inbox>,
    ctl: mpsc::UnboundedSender<Command>,
    queue: String,
    state: Arc<Mutex<ConsumerState>>,
}

impl ConsumerHandle {
    /// Declares the topology, sets the prefetch and starts consuming.
    pub(crate) async fn start(
        broker: Arc<Broker>,
        config: ConsumerConfig,
    ) -> Result<ConsumerHandle> {
        let (ch, consumer) = subscribe(&broker, &config).await?;
        let queue = config.topology.queue.clone();
        let config_prefetch = config.prefetch;
        let inbox = Arc::new(Inbox::default());
        let state = Arc::new(Mutex::new(ConsumerState::Connected));
        let (tx, rx) = mpsc::unbounded_channel();
        let task = ConsumerTask {
            broker,
            config: Arc::new(config),
            channel: Some(ch),
            inbox: inbox.clone(),
            pending: HashMap::new(),
            next_id: 0,
            failures: JoinSet::new(),
            acks: AckLedger::new(usize::from(config_prefetch / 2).max(1), ACK_MAX_HOLD),
            arrived: Vec::new(),
            stuck: 0,
            last_activity: Instant::now(),
            state: state.clone(),
        };
        tokio::spawn(task.run(consumer, rx));
        Ok(ConsumerHandle {
            inbox,
            ctl: tx,
            queue,
            state,
        })
    }

    /// The work queue.
    pub(crate) fn queue(&self) -> &str {
        &self.queue
    }

    /// What the consumer is doing now.
    pub(crate) fn state(&self) -> ConsumerState {
        *lock(&self.state)
    }

    /// Waits for at least one item and returns up to `max` of them; an empty
    /// list means the consumer is closed and nothing is left.
    pub(crate) async fn recv(&self, max: usize) -> Vec<Item> {
        loop {
            let notified = self.inbox.notify.notified();
            {
                let mut st = lock(&self.inbox.state);
                if !st.items.is_empty() {
                    let n = st.items.len().min(max.max(1));
                    return st.items.drain(..n).collect();
                }
                if st.closed {
                    return Vec::new();
                }
            }
            notified.await;
        }
    }

    /// Settles many deliveries with one message to the task: `acked` are
    /// acked, `failed` retried or parked.
    pub(crate) fn settle_many(&self, acked: Vec<u64>, failed: Vec<(u64, Failure)>) -> Result<()> {
        self.ctl
            .send(Command::SettleMany(acked, failed))
            .map_err(|_| Error::new(ErrorKind::Closed, "the consumer is closed"))
    }

    /// Stops deliveries: cancels the consumer and puts every delivery that
    /// JavaScript has not taken yet back in the queue.
    pub(crate) async fn stop(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.ctl.send(Command::Stop(tx)).is_err() {
            return Ok(());
        }
        let _ = rx.await;
        Ok(())
    }

    /// Waits for every republish in flight, then closes the consumer's
    /// channel (the broker takes back any delivery still unacked).
    pub(crate) async fn finish(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.ctl.send(Command::Finish(tx)).is_err() {
            return Ok(());
        }
        let _ = rx.await;
        Ok(())
    }

    /// Takes the events JavaScript has not pulled yet.
    pub(crate) fn take_events(&self) -> Vec<Event> {
        let mut st = lock(&self.inbox.state);
        let items = std::mem::take(&mut st.items);
        let mut events = Vec::new();
        for item in items {
            match item {
                Item::Event(e) => events.push(e),
                other => st.items.push_back(other),
            }
        }
        events
    }
}
