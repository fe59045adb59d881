// Written by `cargo test` (src/binding/contract.rs) from the native side's own lists: do not edit.
// After a change to one of them, `RABBIT_RETRY_WRITE_FIXTURES=1 cargo test` writes it again.

/** Why a copy is parked: its `retry-reason` (src/retry/route.rs, `ParkReason`). */
export const PARK_REASONS = ['exhausted', 'non-retryable', 'no-handler', 'delivery-limit', 'consumer-timeout', 'undecodable', 'headers-too-large', 'reply-refused', 'table-refused', 'inbox-refused'] as const;

/** The `retry-reason` of a parked copy. */
export type ParkReason = (typeof PARK_REASONS)[number];

/** What a handler's failure is reported as to the native verdict (src/retry/verdict.rs, `Thrown`). */
export const FAILURE_KINDS = ['no-handler', 'reply-refused', 'inbox-refused', 'non-retryable', 'retryable'] as const;

/** What a handler threw, as its failure's report names it. */
export type FailureKind = (typeof FAILURE_KINDS)[number];

/** The codes of the native layer's errors (src/error.rs, `ErrorKind`). */
export const NATIVE_ERROR_CODES = ['TOPOLOGY_MISMATCH', 'UNROUTABLE', 'PUBLISH_NACKED', 'PUBLISH_FAILED', 'CONNECTION', 'INVALID_OPTIONS', 'CLOSED', 'RETRY_TABLE', 'REPLY_REFUSED', 'BROKER_UNSUPPORTED', 'ACCESS_REFUSED', 'NOT_FOUND', 'PRECONDITION_FAILED'] as const;

/** A code the native layer gives an error. */
export type NativeErrorCode = (typeof NATIVE_ERROR_CODES)[number];

/** Why the outbox's relay parks a row: its `park_reason` (src/outbox/outcome.rs). */
export const OUTBOX_PARK_REASONS = ['unroutable', 'exchange-not-found', 'invalid-properties', 'too-large', 'refused', 'nacked'] as const;

/** Why the relay parked a row. */
export type OutboxParkReason = (typeof OUTBOX_PARK_REASONS)[number];
