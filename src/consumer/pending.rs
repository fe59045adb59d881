//! A delivery the task holds until JavaScript settles it.

use lapin::message::Delivery;
use tokio::time::Instant;

/// A delivery taken and not yet settled.
pub(super) struct Pending {
    /// The delivery as the broker sent it.
    pub(super) delivery: Delivery,
    /// Earlier failed attempts.
    pub(super) attempt: u32,
    /// Whether a retryable failure of this attempt goes to the retry table.
    pub(super) table_bound: bool,
    /// Whether a retryable failure of this attempt parks (no retry is left).
    pub(super) parks: bool,
    /// When it was taken in.
    pub(super) since: Instant,
}
