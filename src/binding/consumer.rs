//! `NativeConsumer`, the delivery boundary (the options of `consume` are in
//! `spec`). JavaScript pulls batches of deliveries and events with
//! one async call and settles each delivery with a synchronous one.

use std::sync::Arc;

use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

use super::convert::js_error;
use super::failures::{failure_of, FailureInfo};
use super::wire::{events_json, to_batch, NativeBatch};
use crate::consumer::{ConsumerHandle, DeliveryView, Event, ProbeOutcome, Sink};

/// A running consumer.
#[napi]
pub struct NativeConsumer {
    handle: Arc<ConsumerHandle>,
}

impl NativeConsumer {
    pub(crate) fn new(handle: ConsumerHandle) -> Self {
        Self {
            handle: Arc::new(handle),
        }
    }
}

#[napi]
impl NativeConsumer {
    /// The work queue.
    #[napi(getter)]
    pub fn queue(&self) -> String {
        self.handle.queue().to_owned()
    }

    /// `connected`, `recovering` or `closed`.
    #[napi(getter)]
    pub fn state(&self) -> String {
        self.handle.state().as_str().to_owned()
    }

    /// Hands every batch of deliveries and events to `on_batch`, on the
    /// JavaScript thread, as they arrive (at most `max` deliveries a batch);
    /// the last batch has `closed` set. Called once per consumer.
    #[napi(ts_args_type = "max: number, onBatch: (batch: NativeBatch) => void")]
    pub fn start(
        &self,
        max: u32,
        on_batch: ThreadsafeFunction<NativeBatch, (), NativeBatch, Status, false>,
    ) -> napi::Result<()> {
        let sink = JsSink {
            max: (max as usize).max(1),
            on_batch,
        };
        self.handle.attach(Box::new(sink)).map_err(js_error)
    }

    /// Settles the deliveries whose handlers finished: the ids in `acked`
    /// resolved (ack them), each of `failed` threw (retry or park it).
    /// One call for many.
    #[napi]
    pub fn settle(&self, acked: Vec<i64>, failed: Vec<FailureInfo>) -> napi::Result<()> {
        let fails = failed
            .into_iter()
            .map(failure_of)
            .collect::<napi::Result<Vec<_>>>()?;
        self.handle
            .settle_many(acked.into_iter().map(|id| id as u64).collect(), fails)
            .map_err(js_error)
    }

    /// Stops deliveries; unstarted ones go back to the queue.
    #[napi]
    pub async fn stop(&self) -> napi::Result<()> {
        self.handle.stop().await.map_err(js_error)
    }

    /// Stops taking deliveries and keeps the channel: handlers running now
    /// settle as usual, deliveries not handed over yet go back to the queue.
    #[napi]
    pub async fn pause(&self) -> napi::Result<()> {
        self.handle.pause().await.map_err(js_error)
    }

    /// Consumes again after `pause`.
    #[napi]
    pub async fn resume(&self) -> napi::Result<()> {
        self.handle.resume().await.map_err(js_error)
    }

    /// While paused, takes the next message of the work queue: `taken` with
    /// its batch (settled as any delivery), `empty` when none is ready, or
    /// `refused` when the one taken was parked before any handler.
    #[napi]
    pub async fn probe(&self) -> napi::Result<NativeProbe> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let outcome = self
            .handle
            .probe(Box::new(ProbeSink(Some(tx))))
            .await
            .map_err(js_error)?;
        let batch = match outcome {
            ProbeOutcome::Taken => rx.await.ok(),
            _ => None,
        };
        Ok(NativeProbe {
            outcome: match outcome {
                ProbeOutcome::Empty => "empty",
                ProbeOutcome::Taken => "taken",
                ProbeOutcome::Refused => "refused",
            }
            .to_owned(),
            batch,
        })
    }

    /// Whether the consumer has `retry` and `parked` listeners: the retries
    /// and parks it does not hear of one by one come as counts (a `tally`
    /// event per batch).
    #[napi]
    pub fn heard(&self, retry: bool, parked: bool, moves: Option<bool>) -> napi::Result<()> {
        self.handle
            .heard(retry, parked, moves.unwrap_or(false))
            .map_err(js_error)
    }

    /// Puts deliveries that were handed over but never started back in the
    /// queue, in their place.
    #[napi]
    pub fn release(&self, ids: Vec<i64>) -> napi::Result<()> {
        self.handle
            .release(ids.into_iter().map(|id| id as u64).collect())
            .map_err(js_error)
    }

    /// Waits for republishes in flight and closes the consumer's channel.
    /// Resolves with the events that came after the last batch, as a JSON
    /// array of wire events (see `NativeBatch.events`).
    #[napi]
    pub async fn finish(&self) -> napi::Result<String> {
        let events = self.handle.finish().await.map_err(js_error)?;
        Ok(events_json(&events))
    }
}

/// What a probe took.
#[napi(object)]
pub struct NativeProbe {
    /// `taken`, `empty` or `refused`.
    pub outcome: String,
    /// The message taken, when `taken`.
    pub batch: Option<NativeBatch>,
}

/// Takes the one delivery of a probe.
struct ProbeSink(Option<tokio::sync::oneshot::Sender<NativeBatch>>);

impl Sink for ProbeSink {
    fn deliver(&mut self, deliveries: &[DeliveryView<'_>], events: &[Event], _closed: bool) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(to_batch(deliveries, events, false));
        }
    }
}

/// The consumer's sink: each hand-over becomes one or more batches queued
/// for `onBatch` on the JavaScript thread. Dropping it (after the last batch)
/// lets the process exit once nothing else keeps it.
struct JsSink {
    max: usize,
    on_batch: ThreadsafeFunction<NativeBatch, (), NativeBatch, Status, false>,
}

impl Sink for JsSink {
    fn deliver(&mut self, deliveries: &[DeliveryView<'_>], events: &[Event], closed: bool) {
        let mut chunks = deliveries.chunks(self.max).peekable();
        let mut events = events;
        loop {
            let chunk = chunks.next().unwrap_or(&[]);
            let last = chunks.peek().is_none();
            let batch = to_batch(chunk, events, closed && last);
            self.on_batch
                .call(batch, ThreadsafeFunctionCallMode::NonBlocking);
            events = &[];
            if last {
                return;
            }
        }
    }
}
