//! What a tracer sees of the rows the scheduler drains, and the trace
//! context a stored row carries.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use lapin::BasicProperties;

use crate::amqp::fields::{header_str, TRACEPARENT, TRACESTATE};

/// How long the scheduler waits for a tracer's headers before it publishes without them.
pub(super) const TRACER_WAIT: Duration = Duration::from_secs(1);

/// A W3C trace context: `traceparent`, and `tracestate` when there is one.
pub(crate) type Trace = (String, Option<String>);

/// A due row the scheduler is about to publish, as a tracer sees it.
#[derive(Debug, Clone)]
pub(crate) struct DrainRow {
    /// Row id.
    pub id: i64,
    /// The work queue it goes back to.
    pub queue: String,
    /// Attempts that failed before it was stored.
    pub attempt: i32,
    /// Its dependency, if any.
    pub dependency: Option<String>,
    /// Its message id, if any.
    pub message_id: Option<String>,
    /// Its body's size in bytes.
    pub body_size: usize,
    /// Milliseconds since it was stored or last changed.
    pub waited_ms: f64,
    /// The error it was stored with.
    pub error: Option<String>,
    /// The trace context its stored copy carries.
    pub trace: Option<Trace>,
}

/// Sees each row the scheduler drains: `start` before the publish gives the
/// trace context the published copy carries instead of the row's own (`None`
/// keeps the row's), `end` after it, with the error when the publish failed.
pub(crate) trait DrainTracer: Send + Sync {
    /// A drain begins.
    fn start(&self, row: DrainRow) -> Pin<Box<dyn Future<Output = Option<Trace>> + Send>>;
    /// The drain of row `id` ended.
    fn end(&self, id: i64, error: Option<String>);
}

/// The tracer a running scheduler consults, set at any time.
pub(super) type TracerSlot = Arc<RwLock<Option<Arc<dyn DrainTracer>>>>;

/// The trace context a stored copy carries.
pub(super) fn stored_trace(props: &BasicProperties) -> Option<Trace> {
    let headers = props.headers().as_ref();
    header_str(headers, TRACEPARENT).map(|parent| (parent, header_str(headers, TRACESTATE)))
}
