//! The broker's own delayed retry (`onFailure.brokerDelay`): a RabbitMQ 4.3
//! quorum queue holds a message rejected with requeue for
//! `min(min × delivery_count, max)` before delivering it again, where
//! `delivery_count` is its failed deliveries, this one included
//! (`rabbit_fifo:calculate_ready_at`). The rules here mirror the broker's, so
//! the `retry` event can say the delay the broker will apply.

use super::delay::{parse_delay, Delay};

/// `onFailure.brokerDelay`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BrokerDelay {
    /// The delay after the first failure, and the step it grows by.
    pub min: Delay,
    /// The longest delay.
    pub max: Delay,
    /// Retries (rejects with requeue) before a retryable failure parks.
    pub attempts: u32,
}

impl BrokerDelay {
    /// Checks `min`, `max` (delays as `"5s"` or milliseconds) and `attempts`;
    /// the error names the field.
    pub(crate) fn parse(min: &str, max: &str, attempts: u32) -> Result<Self, String> {
        let min = parse_delay(min).map_err(|e| format!("min: {e}"))?;
        let max = parse_delay(max).map_err(|e| format!("max: {e}"))?;
        if min > max {
            return Err(format!(
                "min ({min}) must not be longer than max ({max}): the broker waits min × failures, up to max"
            ));
        }
        if attempts == 0 || attempts == u32::MAX {
            return Err(format!(
                "attempts must be a whole number of at least 1, got {attempts}"
            ));
        }
        Ok(Self { min, max, attempts })
    }

    /// The delay the broker applies to a message rejected for its
    /// `failures`-th time (its `x-delivery-count` once rejected; 0 counts as 1,
    /// as the broker counts it).
    pub(crate) fn delay_after(&self, failures: u32) -> Delay {
        let ms = self
            .min
            .millis()
            .saturating_mul(u64::from(failures.max(1)))
            .min(self.max.millis());
        // Between min and max, both valid delays.
        Delay::from_millis(ms).unwrap_or(self.max)
    }

    /// How long a message rejected `failures` times waited in the delayed
    /// state, at least: the sum of the broker's delays.
    pub(crate) fn waited_ms(&self, failures: u32) -> u64 {
        (1..=failures).fold(0u64, |sum, n| {
            sum.saturating_add(self.delay_after(n).millis())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bd(min: &str, max: &str, attempts: u32) -> BrokerDelay {
        BrokerDelay::parse(min, max, attempts).unwrap()
    }

    #[test]
    fn delays_grow_by_min_up_to_max() {
        let b = bd("200ms", "600ms", 5);
        let ms: Vec<u64> = (0..=5).map(|n| b.delay_after(n).millis()).collect();
        assert_eq!(ms, [200, 200, 400, 600, 600, 600]);
        assert_eq!(b.waited_ms(0), 0);
        assert_eq!(b.waited_ms(3), 200 + 400 + 600);
        let huge = bd("1h", "1193h", 3);
        assert_eq!(huge.delay_after(u32::MAX - 1).millis(), 1193 * 3_600_000);
    }

    #[test]
    fn refuses_what_the_broker_cannot_do() {
        assert!(BrokerDelay::parse("2s", "1s", 3)
            .unwrap_err()
            .contains("min (2s)"));
        assert!(BrokerDelay::parse("0ms", "1s", 3)
            .unwrap_err()
            .starts_with("min:"));
        assert!(BrokerDelay::parse("1s", "soon", 3)
            .unwrap_err()
            .starts_with("max:"));
        assert!(BrokerDelay::parse("1s", "2s", 0)
            .unwrap_err()
            .contains("attempts"));
        assert_eq!(bd("1s", "1s", 1).delay_after(9).millis(), 1_000);
    }
}
