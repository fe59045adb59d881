/**
 * The options of `RabbitRetry.connect` and `consume` as the native layer
 * takes them: flattened, delays as labels, queue arguments as JSON, TLS files
 * read. Left-out options go as undefined: the native layer checks every value
 * and applies the defaults.
 */
import { readFileSync } from 'node:fs';

import { delayStrings } from './check';
import { reasonOf } from '../support/error-text';
import { InvalidOptionsError } from '../errors';
import type { ConnectOptions, ConsumeOptions, QueueArguments, TlsOptions } from '.';
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
 * delays as strings; `watchMoves` when the caller waits on where failures go. @internal
 */
export function nativeConsumeOptions(options: ConsumeOptions, delays: string[], watchMoves = false): Native.ConsumeOptions {
  const brokerDelay = options.onFailure?.brokerDelay;
  return {
    queue: options.queue,
    exchange: options.exchange,
    exchangeType: options.exchangeType,
    routingKey: typeof options.routingKey === 'string' ? options.routingKey : options.routingKey?.[0],
    moreRoutingKeys: typeof options.routingKey === 'string' ? undefined : options.routingKey?.slice(1),
    prefetch: options.prefetch,
    queueType: options.queueType,
    deliveryLimit: options.deliveryLimit,
    consumerTimeoutMs: options.consumerTimeoutMs,
    assertQueue: options.assertQueue,
    queueArguments: argumentsJson(options.queueArguments),
    retryQueueArguments: argumentsJson(options.retryQueueArguments),
    parkedQueueArguments: argumentsJson(options.parkedQueueArguments),
    consumerTag: options.consumerTag,
    fullRetryHeaders: options.onFailure?.retryHeaders === 'full',
    watchMoves,
    table: options.onFailure?.table !== undefined,
    tableMaxAttempts: options.onFailure?.table?.maxAttempts,
    delays,
    brokerDelayMin: brokerDelay && delayStrings([brokerDelay.min], 'onFailure.brokerDelay.min')[0],
    brokerDelayMax: brokerDelay && delayStrings([brokerDelay.max], 'onFailure.brokerDelay.max')[0],
    brokerDelayAttempts: brokerDelay?.attempts,
    recoveryInitialDelayMs: options.recovery?.initialDelayMs,
    recoveryMaxDelayMs: options.recovery?.maxDelayMs,
    recoveryStepTimeoutMs: options.recovery?.stepTimeoutMs,
    recoveryMaxAttempts:
      options.recovery?.maxAttempts === undefined || options.recovery.maxAttempts === Infinity
        ? undefined
        : Math.min(options.recovery.maxAttempts, 0xffffffff),
  };
}

/** Queue arguments in the JSON form the native layer takes. */
function argumentsJson(args: QueueArguments | undefined): string | undefined {
  return args === undefined ? undefined : JSON.stringify(args);
}
