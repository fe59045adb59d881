/** What the handler of the fault suite does with message `m-<i>`. */
export type Outcome = 'success' | 'flaky' | 'exhausted' | 'non-retryable';

/** The fixed plan: 1 in 20 always fails, 1 in 20 fails once, 1 in 20 fails for good. */
export function expectedOutcome(messageId: string): Outcome {
  const i = Number(messageId.replace(/^m-/, ''));
  switch (i % 20) {
    case 0:
      return 'exhausted';
    case 1:
      return 'flaky';
    case 2:
      return 'non-retryable';
    default:
      return 'success';
  }
}

/** Where a message must end: acked after a success, or parked with a reason. */
export function expectedEnd(messageId: string): 'acked' | 'exhausted' | 'non-retryable' {
  const o = expectedOutcome(messageId);
  return o === 'success' || o === 'flaky' ? 'acked' : o;
}

/**
 * With the inbox, whether the handler of `m-<i>` has a bug on its first
 * attempt: every 7th runs a failing statement in its transaction, catches the
 * error and resolves. The inbox must not ack that attempt (its transaction
 * was aborted, and its COMMIT rolls back): the message is retried, and its
 * effect committed by the next attempt.
 */
export function swallowsFirstAttempt(messageId: string): boolean {
  return Number(messageId.replace(/^m-/, '')) % 7 === 0;
}
