//! The consumer's fixed bounds: waits and sizes no option sets.

use std::time::Duration;

/// How long `stop` waits for the broker to finish a cancel before it goes on.
pub(super) const CANCEL_DRAIN: Duration = Duration::from_secs(5);

/// How long settled deliveries wait behind an unsettled one before they are
/// acked one by one: a republish waiting for its confirm (which usually comes
/// within milliseconds, and then one `multiple` ack covers them all), or a
/// handler still running while fewer than half the prefetch wait behind it.
pub(super) const ACK_MAX_HOLD: Duration = Duration::from_millis(100);

/// How long a consumer with nothing in flight keeps deliveries whose
/// republish failed before it reopens its channel so the broker redelivers them.
pub(super) const HELD_RELEASE_IDLE: Duration = Duration::from_secs(5);

/// Room kept free in a republished message's header frame for what the broker
/// adds when a retry queue dead-letters it back (`x-death`, `x-first-death-*`,
/// `x-last-death-*`), so the copy still fits one frame when it comes back.
pub(super) const BROKER_HEADROOM: usize = 2048;

/// Deliveries taken from lapin's queue at most before JavaScript is woken.
pub(super) const MAX_DRAIN: usize = 256;
