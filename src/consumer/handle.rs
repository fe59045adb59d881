//! The consumer as the binding sees it: start, attach a sink, settle, stop, finish.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use super::command::{Command, ProbeOutcome};
use super::config::ConsumerConfig;
use super::event::Event;
use super::link::{BrokerLink, Link};
use super::settlement::Failure;
use super::sink::Sink;
use super::state::{lock, ConsumerState};
use super::task::ConsumerTask;
use crate::amqp::connection::Broker;
use crate::error::{Error, ErrorKind, Result};

/// A running consumer; cheap to share.
pub(crate) struct ConsumerHandle {
    ctl: mpsc::UnboundedSender<Command>,
    queue: String,
    state: Arc<Mutex<ConsumerState>>,
}

impl ConsumerHandle {
    /// Declares the topology, sets the prefetch and starts consuming.
    /// Deliveries wait in the consumer until a sink is attached.
    pub(crate) async fn start(
        broker: Arc<Broker>,
        config: ConsumerConfig,
    ) -> Result<ConsumerHandle> {
        Self::start_on(BrokerLink(broker), config).await
    }

    /// [`start`](Self::start) on any [`Link`].
    pub(super) async fn start_on<L: Link>(link: L, config: ConsumerConfig) -> Result<Self> {
        let sub = link.subscribe(&config).await?;
        let queue = config.topology.queue.clone();
        let state = Arc::new(Mutex::new(ConsumerState::Connected));
        let (tx, rx) = mpsc::unbounded_channel();
        let task = ConsumerTask::new(link, config, state.clone());
        tokio::spawn(task.run(sub, rx));
        Ok(ConsumerHandle {
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

    /// Hands every delivery and event to `sink` from now on, starting with
    /// those that arrived before. The last call of `sink` has `closed` set.
    pub(crate) fn attach(&self, sink: Box<dyn Sink>) -> Result<()> {
        self.send(Command::Attach(sink))
    }

    /// Settles many deliveries with one message to the task: `acked` are
    /// acked, `failed` retried or parked.
    pub(crate) fn settle_many(&self, acked: Vec<u64>, failed: Vec<(u64, Failure)>) -> Result<()> {
        self.send(Command::SettleMany(acked, failed))
    }

    /// Stops deliveries: cancels the consumer and puts every delivery not
    /// handed to the sink back in the queue; the sink gets its last call.
    pub(crate) async fn stop(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.send(Command::Stop(tx)).is_err() {
            return Ok(());
        }
        let _ = rx.await;
        Ok(())
    }

    /// Stops taking deliveries (cancels the consumer; what arrives after the
    /// cancel goes back to the queue) and keeps the channel, so deliveries in
    /// flight are settled as usual. Recovery after a pause does not consume.
    pub(crate) async fn pause(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Pause(tx))?;
        let _ = rx.await;
        Ok(())
    }

    /// Consumes again after [`pause`](Self::pause).
    pub(crate) async fn resume(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Resume(tx))?;
        rx.await
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Closed, "the consumer is closed")))
    }

    /// While paused, takes the next message of the work queue (`basic.get`)
    /// and hands it to `sink`, to be settled as any delivery.
    pub(crate) async fn probe(&self, sink: Box<dyn Sink>) -> Result<ProbeOutcome> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Probe(sink, tx))?;
        rx.await
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Closed, "the consumer is closed")))
    }

    /// Says whether JavaScript listens to each retry and each park (the
    /// moves it does not hear of one by one reach it as counts), and whether
    /// it waits on where each failed message goes (`moves`: the deliveries
    /// refused before their handler are handed over too, marked `refused`).
    pub(crate) fn heard(&self, retry: bool, parked: bool, moves: bool) -> Result<()> {
        self.send(Command::Heard {
            retry,
            parked,
            moves,
        })
    }

    /// Puts deliveries handed over but never started back in the queue.
    pub(crate) fn release(&self, ids: Vec<u64>) -> Result<()> {
        self.send(Command::Release(ids))
    }

    /// Waits for every republish in flight, then closes the consumer's
    /// channel (the broker takes back any delivery still unacked). Returns
    /// the events that came after the sink's last call.
    pub(crate) async fn finish(&self) -> Result<Vec<Event>> {
        let (tx, rx) = oneshot::channel();
        if self.send(Command::Finish(tx)).is_err() {
            return Ok(Vec::new());
        }
        Ok(rx.await.unwrap_or_default())
    }

    fn send(&self, cmd: Command) -> Result<()> {
        self.ctl
            .send(cmd)
            .map_err(|_| Error::new(ErrorKind::Closed, "the consumer is closed"))
    }
}
