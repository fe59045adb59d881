/**
 * The options of `RabbitRetry.connect` and `consume` as the native layer
 * takes them: flattened, delays as labels, queue arguments as JSON, TLS files
 * read. Left-out options go as undefined: the native layer checks every value
 * and applies the defaults.
 */
import { readFileSync } from 'node:fs';

import { nativeConsumeFields } from './consume-check.generated';
import { reasonOf } from '../support/error-text';
import { InvalidOptionsError } from '../errors';
import type { ConnectOptions, ConsumeOptions, TlsOptions } from '.';
import type * as Native from '../../binding.js';

function readPem(option: string, file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidOptionsError(`${option}: cannot read '${file}' (${reasonOf(err)})`);
  }
}

function readTls(tls: TlsOptions | undefined): { ca?: string; cert?: string; key?: string } {
  if (!tls) return {};
  const ca = tls.ca !== undefined ? tls.ca.toString() : readPem('tls.caFile', tls.caFile);
  const cert = readPem('tls.certFile', tls.certFile);
  const key = readPem('tls.keyFile', tls.keyFile);
  if ((cert === undefined) !== (key === undefined)) {
    throw new InvalidOptionsError('tls.certFile and tls.keyFile go together: give both or neither');
  }
  return { ca, cert, key };
}

/** `RabbitRetry.connect`'s options for `binding.connect`, with the broker URLs already chosen. @internal */
export function nativeConnectOptions(options: ConnectOptions, urls: string[]): Native.ConnectOptions {
  const tls = readTls(options.tls);
  return {
    urls,
    hostOrder: options.hostOrder,
    retryTableUrl: options.retryTable?.url,
    retryTableRatePerSec: options.retryTable?.ratePerSec,
    retryTableRatePerSecPerProcess: options.retryTable?.ratePerSecPerProcess,
    retryTableDependencyRates: options.retryTable?.dependencyRates ? { ...options.retryTable.dependencyRates } : undefined,
    retryTableScheduler: options.retryTable?.scheduler,
    outbox: options.outbox && { ...options.outbox },
    tlsCa: tls.ca,
    tlsCert: tls.cert,
    tlsKey: tls.key,
    connectionName: options.connectionName,
    heartbeat: options.heartbeat,
    connectTimeoutMs: options.connectTimeoutMs,
    confirmTimeoutMs: options.confirmTimeoutMs,
  };
}

/**
 * `consume`'s options for the native consumer, `delays` being the retry
 * delays as strings; `watchMoves` when the caller waits on where failures go.
 * The declared options cross as lib/options/consume.ts says; the rest here. @internal
 */
export function nativeConsumeOptions(options: ConsumeOptions, delays: string[], watchMoves = false): Native.ConsumeOptions {
  const { routingKey } = options;
  return {
    ...nativeConsumeFields(options),
    routingKey: typeof routingKey === 'string' ? routingKey : routingKey?.[0],
    moreRoutingKeys: typeof routingKey === 'string' ? undefined : routingKey?.slice(1),
    table: options.onFailure?.table !== undefined,
    delays,
    recoveryMaxAttempts:
      options.recovery?.maxAttempts === undefined || options.recovery.maxAttempts === Infinity
        ? undefined
        : Math.min(options.recovery.maxAttempts, 0xffffffff),
    watchMoves,
  };
}
