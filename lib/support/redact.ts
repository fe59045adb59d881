/**
 * Passwords taken out of what rabbit-retry shows: the native layer's
 * redaction (src/redact.rs), the one its own errors, events and URLs go
 * through, for the TypeScript layer's output.
 * @internal
 */
import { binding } from '../native';

/**
 * `source` with each password replaced by `***`. `source` is a URL (with or
 * without its scheme or user info; a password in its user info or in its
 * query as `password=`, `pass=`, `sslpassword=`…), URLs separated by commas,
 * or a libpq `key=value` string (`host=db password='s3 cret'`); characters
 * the user did not percent-encode stay in the password they belong to.
 * @internal
 */
export function redactUrl(source: string): string {
  return binding.redactUrl(source);
}

/**
 * `text` (another library's error, a line about to be written) without any
 * part of the passwords that `sources` hold, in every form they may take in
 * it: as written, percent-decoded or encoded, unquoted, escaped, and every
 * part of four characters or more. Sources that are `undefined` or empty are
 * skipped.
 * @internal
 */
export function redactIn(text: string, sources: readonly (string | undefined)[]): string {
  const given = sources.filter((s): s is string => typeof s === 'string' && s !== '');
  return given.length === 0 ? text : binding.redactIn(text, given);
}
