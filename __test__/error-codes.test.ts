/**
 * The error codes are defined once, in the native layer's ErrorKind; the
 * TypeScript classes must cover every one of them, and raise no other code
 * except the ones only JavaScript raises.
 */
import { type ErrorCode, RabbitRetryError, fromNative } from '../lib/errors';
import { binding } from '../lib/native';

/** Codes that only the TypeScript layer raises (a handler throws them, or a start-up check). */
const JS_ONLY: readonly ErrorCode[] = ['NON_RETRYABLE', 'NO_HANDLER', 'UNSUPPORTED_OPTION', 'INBOX', 'INBOX_REFUSED', 'REQUEST_TIMEOUT', 'REMOTE_ERROR'];

/** Every member of ErrorCode; the `satisfies` keeps it complete at compile time. */
const TS_CODES = Object.keys({
  NON_RETRYABLE: true,
  NO_HANDLER: true,
  UNSUPPORTED_OPTION: true,
  TOPOLOGY_MISMATCH: true,
  UNROUTABLE: true,
  PUBLISH_NACKED: true,
  PUBLISH_FAILED: true,
  CONNECTION: true,
  INVALID_OPTIONS: true,
  CLOSED: true,
  RETRY_TABLE: true,
  REPLY_REFUSED: true,
  BROKER_UNSUPPORTED: true,
  INBOX: true,
  INBOX_REFUSED: true,
  ACCESS_REFUSED: true,
  NOT_FOUND: true,
  PRECONDITION_FAILED: true,
  REQUEST_TIMEOUT: true,
  REMOTE_ERROR: true,
} satisfies Record<ErrorCode, true>) as ErrorCode[];

describe('error codes', () => {
  const native = binding.errorCodes();

  it('the native layer lists its codes, each once', () => {
    expect(native.length).toBeGreaterThan(0);
    expect(new Set(native).size).toBe(native.length);
  });

  it.each(native)('native %s becomes an error class of its own with that code', (code) => {
    const err = fromNative(`[${code}] something failed`);
    expect(err).toBeInstanceOf(RabbitRetryError);
    expect((err as RabbitRetryError).code).toBe(code);
    expect((err as Error).name).not.toBe('RabbitRetryError');
    expect((err as Error).message).toBe('something failed');
  });

  it('ErrorCode holds exactly the native codes and the ones only JavaScript raises', () => {
    expect([...TS_CODES].sort()).toEqual([...native, ...JS_ONLY].sort());
  });
});
