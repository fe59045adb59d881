/**
 * How a RabbitRetryModule (or a standalone `AmqpConnection`) connects: its
 * client, with golevelup's heartbeat (5 s) unless the options give one, and the
 * topology of its options declared before any handler consumes.
 */
import { Logger } from '@nestjs/common';

import { DEFAULT_URL, RabbitRetry } from '../client';
import { brokerUrls, checkBoolean, checkString } from '../options/check';
import { UnsupportedOptionError } from '../errors';
import { declareTopology } from './topology';
import { GOLEVELUP_OPTION_KEYS, MODULE_OPTION_KEYS, checkModuleOptions, infoLogger, type RabbitRetryModuleOptions } from './options';

/** golevelup's heartbeat, in seconds (amqp-connection-manager's `?heartbeat=5`): the module's default. */
export const DEFAULT_HEARTBEAT = 5;

/** The module's nodes' URLs, as given (with their credentials), in order: amqplib connects to the first that answers. @internal */
export function moduleUrls(options: RabbitRetryModuleOptions): string[] {
  return brokerUrls(options.url, process.env.AMQP_URL, DEFAULT_URL);
}

/**
 * Connects the client of a module's options and declares their topology;
 * closes the client when a declaration fails.
 * @internal
 */
export async function connectModule(options: RabbitRetryModuleOptions): Promise<RabbitRetry> {
  checkModuleOptions('RabbitRetryModule options', options, MODULE_OPTION_KEYS);
  if (options.enableControllerDiscovery === false) {
    throw new UnsupportedOptionError(
      'enableControllerDiscovery',
      '`enableControllerDiscovery: false` is not supported: controllers are always scanned, as providers are; remove it',
    );
  }
  const { defaultOnFailure: _defaults, prefetch: _prefetch, serviceName, amqplibChannel, ...rest } = options;
  checkString('serviceName', serviceName, { nonEmpty: true });
  checkBoolean('amqplibChannel', amqplibChannel);
  const connectOptions = Object.fromEntries(Object.entries(rest).filter(([k]) => !(k in GOLEVELUP_OPTION_KEYS)));
  const logger = new Logger('RabbitRetry');
  const rr = await RabbitRetry.connect({
    logger: { warn: (m) => logger.warn(m), error: (m) => logger.error(m) },
    connectTimeoutMs: options.connectionInitOptions?.timeout,
    ...connectOptions,
    heartbeat: options.heartbeat ?? DEFAULT_HEARTBEAT,
  });
  try {
    await declareTopology(rr, options);
  } catch (err) {
    await rr.close().catch(() => undefined);
    throw err;
  }
  infoLogger(options, logger)(`connected to ${rr.url}`);
  return rr;
}
