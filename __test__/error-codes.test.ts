/**
 * The error codes are defined once, in the native layer's ErrorKind (written
 * to lib/contract.ts by cargo test), and the ones only JavaScript raises in
 * lib/errors.ts: the TypeScript classes cover every one of them.
 */
import { NATIVE_ERROR_CODES } from '../lib/contract';
import { JS_ERROR_CODES, RabbitRetryError, fromNative } from '../lib/errors';
import { binding } from '../lib/native';

describe('error codes', () => {
  const native = binding.errorCodes();

  it('the native layer lists its codes, each once, as the contract says', () => {
    expect(native.length).toBeGreaterThan(0);
    expect(new Set(native).size).toBe(native.length);
    expect(native).toEqual([...NATIVE_ERROR_CODES]);
  });

  it.each(native)('native %s becomes an error class of its own with that code', (code) => {
    const err = fromNative(`[${code}] something failed`);
    expect(err).toBeInstanceOf(RabbitRetryError);
    expect((err as RabbitRetryError).code).toBe(code);
    expect((err as Error).name).not.toBe('RabbitRetryError');
    expect((err as Error).message).toBe('something failed');
  });

  it("no code is both the native layer's and only JavaScript's", () => {
    expect(JS_ERROR_CODES.filter((c) => (NATIVE_ERROR_CODES as readonly string[]).includes(c))).toEqual([]);
  });
});
