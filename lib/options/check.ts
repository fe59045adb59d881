/**
 * The checks of options objects: each refuses a bad option with an
 * {@link InvalidOptionsError} that names it, before anything reaches the
 * native layer. Of the consume options, these check what only JavaScript can
 * see (types, unknown keys, functions, `Infinity`, the options handled in
 * TypeScript); the rules of their values and their defaults are the native
 * layer's (`ConsumeSpec` in src/binding/consumer.rs), which refuses a bad
 * value with an {@link InvalidOptionsError} before anything is declared.
 */
import { InvalidOptionsError, nativeSync } from '../errors';
import { checkConsumeFields } from './consume-check.generated';
import { delayStrings } from './delay-text';
import { checkBoolean, checkFunction, checkObject, checkString, checkWhole, isRecord, kindOf } from './rules';
import { checkKeys } from './keys';
import { binding } from '../native';
import { redactUrl } from '../support/redact';
import { OUTBOX_OPTION_KEYS } from '../outbox/options';
import {
  BROKER_DELAY_OPTION_KEYS,
  CIRCUIT_OPTION_KEYS,
  CLOSE_OPTION_KEYS,
  CONNECT_OPTION_KEYS,
  CONSUME_OPTION_KEYS,
  DEFAULT_CLOSE_TIMEOUT_MS,
  ON_FAILURE_OPTION_KEYS,
  RETRY_TABLE_OPTION_KEYS,
  TABLE_ROUTE_OPTION_KEYS,
  TLS_OPTION_KEYS,
  type CircuitOptions,
  type CloseOptions,
  type ConnectOptions,
  type ConsumeOptions,
  type Delay,
  type OnFailureOptions,
} from '.';

export { checkKeys, refuseForeign, foreignOptions, refuseAll, type ForeignOption } from './keys';
export { checkBoolean, checkFunction, checkObject, checkOneOf, checkString, checkWhole, kindOf } from './rules';
export { delayStrings } from './delay-text';

const U32 = 0xffffffff;

/**
 * A whole number the native layer takes as it is (optional): from 0 to
 * 4294967295, since Node-API would wrap a negative or larger one, and round a
 * fraction. Whether its value is allowed is the native layer's rule; `what`
 * is the text both sides refuse it with.
 */
function checkNativeWhole(name: string, v: unknown, what: string): void {
  checkWhole(name, v, 0, U32, what);
}

const URL_WHAT = "a non-empty string such as 'amqp://user:password@host:5672/vhost', or a non-empty list of them";

/** Checks a broker URL or list of URLs (optional). @internal */
export function checkUrls(name: string, v: unknown): void {
  if (!Array.isArray(v)) {
    checkString(name, v, { nonEmpty: true, what: URL_WHAT });
    return;
  }
  if (v.length === 0) throw new InvalidOptionsError(`${name} must be ${URL_WHAT}, got an empty list`);
  v.forEach((u: unknown, i) => checkString(`${name}[${i}]`, u, { optional: false, nonEmpty: true, what: URL_WHAT }));
}

/**
 * The broker URLs to connect to: `url` as given, else `AMQP_URL` (several
 * separated by commas), else the local default. @internal
 */
export function brokerUrls(url: string | readonly string[] | undefined, env: string | undefined, fallback: string): string[] {
  if (url !== undefined) return typeof url === 'string' ? [url] : [...url];
  if (env === undefined) return [fallback];
  const urls = splitUrls(env);
  if (urls.length === 0) throw new InvalidOptionsError(`AMQP_URL must be ${URL_WHAT}, got '${redactUrl(env)}'`);
  return urls;
}

/** `a,b , c` as `['a', 'b', 'c']`: URLs separated by commas (a comma in a password is written %2C). @internal */
export function splitUrls(list: string): string[] {
  return list
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
}

/** Checks every option of `RabbitRetry.connect` before anything reaches the native layer. @internal */
export function checkConnectOptions(o: ConnectOptions): void {
  checkObject('connect options', o, 'an object such as { url }');
  checkKeys('RabbitRetry.connect', o, CONNECT_OPTION_KEYS);
  checkUrls('url', o.url);
  if (o.hostOrder !== undefined && o.hostOrder !== 'shuffle' && o.hostOrder !== 'ordered') {
    throw new InvalidOptionsError(`hostOrder must be 'shuffle' or 'ordered', got ${kindOf(o.hostOrder)}`);
  }
  checkString('connectionName', o.connectionName);
  checkWhole('heartbeat', o.heartbeat, 0, U32, 'a whole number of seconds');
  checkWhole('connectTimeoutMs', o.connectTimeoutMs, 0, U32, 'a whole number of milliseconds');
  checkWhole('confirmTimeoutMs', o.confirmTimeoutMs, 0, U32, 'a whole number of milliseconds');
  if (o.tls !== undefined) {
    checkObject('tls', o.tls);
    checkKeys('tls', o.tls, TLS_OPTION_KEYS);
    const t = o.tls;
    if (t.ca !== undefined && typeof t.ca !== 'string' && !Buffer.isBuffer(t.ca)) {
      throw new InvalidOptionsError(`tls.ca must be a string or a Buffer of PEM certificates, got ${kindOf(t.ca)}`);
    }
    for (const key of ['caFile', 'certFile', 'keyFile'] as const) checkString(`tls.${key}`, t[key], { what: 'a file path (a string)' });
  }
  if (o.retryTable !== undefined) {
    const what = "a PostgreSQL URL such as 'postgres://user@127.0.0.1:5432/app'";
    if (!isRecord(o.retryTable)) throw new InvalidOptionsError(`retryTable must be an object such as { url }, got ${kindOf(o.retryTable)}`);
    checkKeys('retryTable', o.retryTable, RETRY_TABLE_OPTION_KEYS);
    const t = o.retryTable;
    checkString('retryTable.url', t.url, { optional: false, nonEmpty: true, what });
    checkRate('retryTable.ratePerSec', t.ratePerSec);
    checkRate('retryTable.ratePerSecPerProcess', t.ratePerSecPerProcess);
    if (t.dependencyRates !== undefined) {
      if (!isRecord(t.dependencyRates)) {
        throw new InvalidOptionsError(`retryTable.dependencyRates must be an object such as { carrier: 20 }, got ${kindOf(t.dependencyRates)}`);
      }
      for (const [dependency, rate] of Object.entries(t.dependencyRates)) {
        if (dependency === '') throw new InvalidOptionsError("retryTable.dependencyRates: a dependency's name cannot be empty");
        checkRate(`retryTable.dependencyRates['${dependency}']`, rate);
      }
    }
    checkBoolean('retryTable.scheduler', t.scheduler);
  }
  if (o.outbox !== undefined) {
    if (!isRecord(o.outbox)) throw new InvalidOptionsError(`outbox must be an object such as { url }, got ${kindOf(o.outbox)}`);
    checkKeys('outbox', o.outbox, OUTBOX_OPTION_KEYS);
    const b = o.outbox;
    checkString('outbox.url', b.url, { optional: false, nonEmpty: true, what: "a PostgreSQL URL such as 'postgres://user@127.0.0.1:5432/app'" });
    checkWhole('outbox.batchSize', b.batchSize, 1, 10_000, 'a whole number of rows from 1 to 10000');
    checkWhole('outbox.pollIntervalMs', b.pollIntervalMs, 1, U32, 'a whole number of milliseconds of at least 1');
    checkBoolean('outbox.ordered', b.ordered);
    checkBoolean('outbox.relay', b.relay);
  }
  if (o.logger !== undefined) {
    const l = o.logger as unknown;
    if (l === null || (typeof l !== 'object' && typeof l !== 'function')) {
      throw new InvalidOptionsError(`logger must be an object with warn(message) and error(message), got ${kindOf(l)}`);
    }
    const { warn, error } = l as Record<string, unknown>;
    checkFunction('logger.warn', warn, 'a function (message) => void');
    checkFunction('logger.error', error, 'a function (message) => void');
    if (warn === undefined || error === undefined) throw new InvalidOptionsError('logger must have both warn(message) and error(message)');
  }
  if (o.meterProvider !== undefined) {
    const m = o.meterProvider as unknown;
    if (m === null || typeof m !== 'object' || typeof (m as { getMeter?: unknown }).getMeter !== 'function') {
      throw new InvalidOptionsError(`meterProvider must be an OpenTelemetry MeterProvider (an object with getMeter()), got ${kindOf(m)}`);
    }
  }
}

/** @internal */
export function checkCloseOptions(o: CloseOptions | undefined): number {
  if (o === undefined) return DEFAULT_CLOSE_TIMEOUT_MS;
  checkObject('close options', o, 'an object such as { timeoutMs }');
  checkKeys('close', o, CLOSE_OPTION_KEYS);
  const t = o.timeoutMs;
  if (t === undefined) return DEFAULT_CLOSE_TIMEOUT_MS;
  if (t === Infinity) return t;
  checkWhole('timeoutMs', t, 0, Number.MAX_SAFE_INTEGER, 'a whole number of milliseconds (0 or more), or Infinity');
  return t;
}

/** Checks that `v`, given as the option `name`, is {@link QueueArguments}. @internal */
export function checkQueueArguments(name: string, v: unknown): void {
  if (v === undefined) return;
  checkObject(name, v, "an object of argument names to values, such as { 'x-max-length': 1000 }");
  for (const [key, value] of Object.entries(v as object)) {
    const ok = typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
    if (!ok) throw new InvalidOptionsError(`${name}['${key}'] must be a string, a finite number or a boolean, got ${kindOf(value)}`);
  }
}

/**
 * Checks `consume`'s options before anything reaches the native layer: the
 * declared rules of each (lib/options/consume.ts), then what one rule does not
 * say (a list or a string, queue arguments, what goes together). @internal
 */
export function checkConsumeOptions(o: ConsumeOptions): void {
  if (!isRecord(o)) throw new InvalidOptionsError(`consume options must be an object with at least { queue }, got ${kindOf(o)}`);
  checkKeys('consume', o, CONSUME_OPTION_KEYS);
  checkConsumeFields(o);
  if (Array.isArray(o.routingKey)) {
    if (o.routingKey.length === 0) throw new InvalidOptionsError('routingKey must be a string or a non-empty list of strings');
    for (const key of o.routingKey as unknown[]) checkString('routingKey', key);
  } else checkString('routingKey', o.routingKey);
  for (const key of ['queueArguments', 'retryQueueArguments', 'parkedQueueArguments'] as const) {
    checkQueueArguments(key, o[key]);
  }
  if (o.alert !== undefined) {
    const a = o.alert as unknown as Record<string, unknown>;
    if (a.parkedAbove === undefined && a.oldestDueAboveMs === undefined) {
      throw new InvalidOptionsError('alert needs parkedAbove (messages) or oldestDueAboveMs (milliseconds)');
    }
    checkWhole('alert.parkedAbove', a.parkedAbove, 0, Number.MAX_SAFE_INTEGER, 'a whole number (0 or more)');
    checkWhole('alert.oldestDueAboveMs', a.oldestDueAboveMs, 0, Number.MAX_SAFE_INTEGER, 'a whole number (0 or more)');
    if (a.every !== undefined && typeof a.every !== 'string' && typeof a.every !== 'number') {
      throw new InvalidOptionsError(`alert.every must be a delay such as '1m' or a number of milliseconds, got ${kindOf(a.every)}`);
    }
  }
  // Infinity, and a count above what the native layer takes, are JavaScript's:
  // the consume call passes them as no limit and as the largest count.
  const m = o.recovery?.maxAttempts;
  if (m !== undefined && m !== Infinity) {
    checkWhole('recovery.maxAttempts', m, 0, Number.MAX_SAFE_INTEGER, 'a whole number of at least 1, or Infinity');
  }
  if (o.onFailure !== undefined) {
    const f = o.onFailure;
    if (f.delays !== undefined && !Array.isArray(f.delays)) {
      throw new InvalidOptionsError(`onFailure.delays must be an array such as ['5s', '1m'], got ${kindOf(f.delays)}`);
    }
    if (f.circuit !== undefined) checkCircuit('onFailure.circuit', f.circuit);
    if (f.brokerDelay !== undefined) {
      if (f.delays !== undefined) {
        throw new InvalidOptionsError(
          'onFailure.delays and onFailure.brokerDelay are two ways to retry: use one, brokerDelay (the broker holds the message, RabbitMQ 4.3 quorum queues) or delays (retry queues)',
        );
      }
      checkDelay('onFailure.brokerDelay.min', f.brokerDelay.min);
      checkDelay('onFailure.brokerDelay.max', f.brokerDelay.max);
      if (f.brokerDelay.attempts === undefined) throw new InvalidOptionsError('onFailure.brokerDelay.attempts is required: a whole number of at least 1');
      checkNativeWhole('onFailure.brokerDelay.attempts', f.brokerDelay.attempts, 'a whole number of at least 1');
    }
  }
}

/** Checks a rate: left out, or a positive finite number of rows a second. @internal */
export function checkRate(name: string, rate: unknown): void {
  if (rate !== undefined && (typeof rate !== 'number' || !Number.isFinite(rate) || rate <= 0)) {
    throw new InvalidOptionsError(`${name} must be a positive number of rows a second, got ${kindOf(rate)}`);
  }
}

/** Checks the values of a {@link CircuitOptions} (its keys are checked with onFailure's). @internal */
export function checkCircuit(path: string, c: CircuitOptions): void {
  checkString(`${path}.dependency`, c.dependency, { optional: true, nonEmpty: true });
  if (c.openAfter !== undefined) {
    checkObject(`${path}.openAfter`, c.openAfter, "an object such as { failures: 5, within: '10s' }");
    checkKeys(`${path}.openAfter`, c.openAfter, { failures: true, within: true });
    checkWhole(`${path}.openAfter.failures`, c.openAfter.failures, 1, 1_000_000, 'a whole number of at least 1');
    checkDelay(`${path}.openAfter.within`, c.openAfter.within);
  }
  if (c.probeEvery !== undefined) checkDelay(`${path}.probeEvery`, c.probeEvery);
  if (c.closeAfter !== undefined) checkWhole(`${path}.closeAfter`, c.closeAfter, 1, 1_000_000, 'a whole number of at least 1');
  if (c.returnRate !== undefined && !(typeof c.returnRate === 'number' && Number.isFinite(c.returnRate) && c.returnRate > 0)) {
    throw new InvalidOptionsError(`${path}.returnRate must be a positive number of messages a second, got ${kindOf(c.returnRate)}`);
  }
}

/**
 * One delay as the native layer reads it: its milliseconds and its label in
 * queue names. Refuses what is not a delay with an error naming `option`.
 * @internal
 */
export function parseDelay(delay: Delay, option: string): { ms: number; label: string } {
  return nativeSync(() => binding.parseDelays(delayStrings([delay], option), option))[0];
}

/** Checks that `d` is a delay the library takes, of at least 1 ms. */
function checkDelay(path: string, d: unknown): void {
  if (d === undefined) throw new InvalidOptionsError(`${path} is required: a delay such as '5s'`);
  const delay = d as Delay;
  const parsed = parseDelay(delay, path);
  if (parsed.ms < 1) throw new InvalidOptionsError(`${path} must be at least 1ms, got ${String(delay)}`);
}

/**
 * Checks that `f`, the {@link OnFailureOptions} at `path` (`onFailure`,
 * `@OnFailure`, `defaultOnFailure`), is an object of known keys, and so is its
 * `table`.
 * @internal
 */
export function checkOnFailureKeys(path: string, f: unknown): void {
  checkObject(path, f, 'an object such as { delays, retryable }');
  checkKeys(path, f as object, ON_FAILURE_OPTION_KEYS);
  const t = (f as OnFailureOptions).table;
  if (t !== undefined) {
    checkObject(`${path}.table`, t);
    checkKeys(`${path}.table`, t, TABLE_ROUTE_OPTION_KEYS);
  }
  const b = (f as OnFailureOptions).brokerDelay;
  if (b !== undefined) {
    checkObject(`${path}.brokerDelay`, b, "an object such as { min: '5s', max: '5m', attempts: 5 }");
    checkKeys(`${path}.brokerDelay`, b, BROKER_DELAY_OPTION_KEYS);
  }
  const c = (f as OnFailureOptions).circuit;
  if (c !== undefined) {
    checkObject(`${path}.circuit`, c, "an object such as { openAfter: { failures: 5, within: '10s' }, probeEvery: '5s' }");
    checkKeys(`${path}.circuit`, c, CIRCUIT_OPTION_KEYS);
  }
}
