// Written by `npm run options` (scripts/options.ts) from lib/options/consume.ts: do not edit.

//! The defaults of `rr.consume`'s options that the native layer applies, declared with the options
//! (lib/options/consume.ts).

/// `prefetch` when it is left out: 10.
pub(crate) const DEFAULT_PREFETCH: u16 = 10;

/// `deliveryLimit` when it is left out: 5.
pub(crate) const DEFAULT_DELIVERY_LIMIT: u32 = 5;

/// `consumerTimeoutMs` when it is left out: 2147483647 (about 24.8 days).
pub(crate) const DEFAULT_CONSUMER_TIMEOUT_MS: u32 = 2_147_483_647;

/// `onFailure.table.maxAttempts` when it is left out: 10.
pub(crate) const DEFAULT_TABLE_MAX_ATTEMPTS: u32 = 10;

/// `recovery.initialDelayMs` when it is left out: 500.
pub(crate) const DEFAULT_RECOVERY_INITIAL_DELAY_MS: u64 = 500;

/// `recovery.maxDelayMs` when it is left out: 30000.
pub(crate) const DEFAULT_RECOVERY_MAX_DELAY_MS: u64 = 30_000;

/// `recovery.stepTimeoutMs` when it is left out: 15000.
pub(crate) const DEFAULT_STEP_TIMEOUT_MS: u64 = 15_000;
