//! What the binding's handle asks of the consumer's task, and what a probe
//! replies.

use tokio::sync::oneshot;

use super::event::Event;
use super::settlement::Failure;
use super::sink::Sink;

/// What a probe found in the work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeOutcome {
    /// No message was ready.
    Empty,
    /// A message was taken and handed to the probe's sink.
    Taken,
    /// The message taken was refused before any handler (too large, too
    /// many deliveries) and parked: take another.
    Refused,
}

/// A request to the consumer's task, sent by its handle.
pub(super) enum Command {
    /// Where deliveries and events go from now on.
    Attach(Box<dyn Sink>),
    /// Deliveries JavaScript handled, and the ones that failed with their errors.
    SettleMany(Vec<u64>, Vec<(u64, Failure)>),
    /// Stops the consumer; replies once it has.
    Stop(oneshot::Sender<()>),
    /// Stops taking deliveries and keeps the channel for what is in flight.
    Pause(oneshot::Sender<()>),
    /// Consumes again after a pause.
    Resume(oneshot::Sender<crate::error::Result<()>>),
    /// While paused: takes the next message of the work queue and hands it
    /// to the sink given; replies whether there was one.
    Probe(
        Box<dyn Sink>,
        oneshot::Sender<crate::error::Result<ProbeOutcome>>,
    ),
    /// Gives back deliveries JavaScript never started, in their place.
    Release(Vec<u64>),
    /// Replies with the events not handed to the sink.
    Finish(oneshot::Sender<Vec<Event>>),
    /// Whether JavaScript listens to each retry (`retry`) and each park
    /// (`parked`): the moves it does not hear of one by one are counted.
    Heard {
        retry: bool,
        parked: bool,
        moves: bool,
    },
}
