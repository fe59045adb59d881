//! Reconnect backoff: exponential with jitter, so consumers that lost the same
//! broker do not all come back at the same instant.

use std::time::Duration;

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The wait before try `attempt` (1-based): `initial * 2^(attempt-1)`, capped
    /// at `max`, then scaled by a jitter factor between 0.5 and 1.0 taken from
    /// `random` (a number in [0, 1)).
    pub(crate) fn delay(&self, attempt: u32, random: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let base = self
            .initial
            .saturating_mul(1u32 << exp)
            .min(self.max)
            .max(Duration::from_millis(1));
        let r = if random.is_finite() {
            random.clamp(0.0, 1.0)
        } else {
            0.0
        };
        base.mul_f64(0.5 + r / 2.0)
    }
}

/// A number in [0, 1) for jitter, from the clock's nanoseconds; quality does
/// not matter here.
pub(crate) fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000_003) / 1_000_003.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_and_jitters() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(2),
        };
        let cases = [
            (1, 0.0, 50),
            (1, 0.999_999, 100),
            (2, 0.0, 100),
            (3, 0.5, 300),
            (5, 0.0, 800),
            (6, 0.0, 1000),
            (40, 0.0, 1000),
            (u32::MAX, 1.0, 2000),
            (0, 0.0, 50),
            (2, f64::NAN, 100),
            (2, -3.0, 100),
        ];
        for (attempt, random, want_ms) in cases {
            let got = b.delay(attempt, random).as_millis();
            assert!(
                got.abs_diff(want_ms) <= 1,
                "attempt {attempt} random {random}: got {got} ms, want {want_ms}"
            );
        }
    }
}
