/**
 * The amqplib channel of {@link AmqpConnection.channel}: golevelup's
 * `amqpConnection.channel` is an amqplib `ConfirmChannel`, which code uses to
 * declare, check and delete queues and exchanges. When `amqplib` is installed
 * (as it is beside `@golevelup/nestjs-rabbitmq`), the connection opens one, on
 * its own amqplib connection, with golevelup's URL (`?heartbeat=5`). Handlers
 * are never consumed on it: rabbit-retry's core consumes, acks and retries.
 */
import { createRequire } from 'node:module';

import { UnsupportedOptionError } from '../errors';

/** The part of amqplib's `ConfirmChannel` rabbit-retry uses; the value is amqplib's own channel, all of it. */
export interface AmqplibChannel {
  /** Closes the channel. */
  close(): Promise<void>;
}

/** The part of amqplib's `ChannelModel` (its connection) rabbit-retry uses. */
export interface AmqplibConnection {
  /** Opens a confirm channel. */
  createConfirmChannel(): Promise<AmqplibChannel>;
  /** Closes the connection. */
  close(): Promise<void>;
  /** Listens for the connection's errors (logged, never thrown). */
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** The part of the `amqplib` package rabbit-retry calls. */
interface AmqplibModule {
  connect(url: string, socketOptions?: unknown): Promise<AmqplibConnection>;
}

/** `amqplib`, when the application has it; else `undefined`. */
function loadAmqplib(): AmqplibModule | undefined {
  try {
    return createRequire(__filename)('amqplib') as AmqplibModule;
  } catch {
    return undefined;
  }
}

/**
 * golevelup's connection URL: the node's URL with `heartbeat` in its query
 * (amqp-connection-manager's `?heartbeat=`), unless the URL sets one.
 * @internal
 */
export function amqplibUrl(url: string, heartbeat: number): string {
  if (/[?&]heartbeat=/.test(url)) return url;
  return `${url}${url.includes('?') ? '&' : '?'}heartbeat=${heartbeat}`;
}

/** An open amqplib connection and its confirm channel. @internal */
export interface AmqplibLink {
  connection: AmqplibConnection;
  channel: AmqplibChannel;
}

/**
 * Opens the amqplib connection and channel of {@link AmqpConnection.channel}
 * on the first of `urls` (a cluster's nodes, in order) that answers, or
 * resolves `undefined` when amqplib is not installed. Rejects with the last
 * node's error when none answers.
 * @internal
 */
export async function openAmqplib(urls: readonly string[], heartbeat: number, warn: (m: string) => void): Promise<AmqplibLink | undefined> {
  const amqplib = loadAmqplib();
  if (!amqplib) return undefined;
  let lastErr: unknown = new Error('no broker URL');
  for (const url of urls) {
    let connection: AmqplibConnection;
    try {
      connection = await amqplib.connect(amqplibUrl(url, heartbeat), undefined);
    } catch (err) {
      lastErr = err;
      continue;
    }
    connection.on('error', (err) => warn(`the amqplib connection of AmqpConnection.channel failed: ${err.message}`));
    try {
      return { connection, channel: await connection.createConfirmChannel() };
    } catch (err) {
      await connection.close().catch(() => undefined);
      throw err;
    }
  }
  throw lastErr;
}

/** Closes what {@link openAmqplib} opened. @internal */
export async function closeAmqplib(link: AmqplibLink | undefined): Promise<void> {
  if (!link) return;
  await link.connection.close().catch(() => undefined);
}

/** The error of `channel` (or `managedChannel`) when there is no amqplib channel. @internal */
export function noChannelError(property: string, why: string): UnsupportedOptionError {
  return new UnsupportedOptionError(
    property,
    `AmqpConnection.${property} is not available: ${why}. ` +
      'Declare and check with the client (`amqpConnection.client.declareQueue`, `declareExchange`, `bindQueue`, `checkQueue`) ' +
      'or install amqplib for an amqplib channel',
  );
}
