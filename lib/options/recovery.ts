/**
 * How a consumer reconnects after losing its channel or connection
 * (`consume({ recovery })`).
 */

/** Reconnecting after a lost channel or connection: exponential backoff with jitter. */
export interface RecoveryOptions {
  /** The first wait, in milliseconds. @default 500 */
  initialDelayMs?: number;
  /** The longest wait, in milliseconds. @default 30000 */
  maxDelayMs?: number;
  /**
   * Give up after this many tries: the consumer closes and emits `error`.
   * @default Infinity (never give up)
   */
  maxAttempts?: number;
  /**
   * How long one broker round trip of starting, recovering or stopping the
   * consumer (declare, channel open, qos, consume, cancel, ack, channel close)
   * may take before it counts as failed: a broker that stops answering cannot
   * hold recovery or `close()` for good.
   * @default 15000
   */
  stepTimeoutMs?: number;
}

/** The keys of {@link RecoveryOptions}. @internal */
export const RECOVERY_OPTION_KEYS = {
  initialDelayMs: true,
  maxDelayMs: true,
  maxAttempts: true,
  stepTimeoutMs: true,
} satisfies Record<keyof RecoveryOptions, true>;
