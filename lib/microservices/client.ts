import { randomUUID } from 'node:crypto';

import { Logger } from '@nestjs/common';
import { ClientProxy, type ReadPacket, RmqRecord, type WritePacket } from '@nestjs/microservices';

import { RabbitRetry } from '../client';
import type { PublishOptions } from '../options';
import { ConnectionError, InvalidOptionsError } from '../errors';
import type { Message } from '../message';
import type { Replies } from '../messaging/replies';
import { type Expectation, type FenceResult, OBJECT, fence } from '../support/fence';
import { checkBoolean, checkConnectOptions, checkFunction, checkKeys, checkObject, checkString, refuseForeign } from '../options/check';
import { RmqConnectionError } from './errors';
import { CLIENT_OPTION_KEYS, RMQ_CLIENT_OPTIONS, type RabbitRetryClientOptions, connectOptionsOf, publishOptionsOf } from './options';

/** The statuses a client reports through `status` (NestJS 11 and later). */
export type RabbitRetryClientStatus = 'connected' | 'closed';

/** A reply's body as Nest's RMQ client reads it: JSON, else its text. */
function parsedReply(msg: Message): unknown {
  const text = msg.text();
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * What a fenced serializer or deserializer failed with, for the caller: what
 * it threw or rejected with, or an Error that says what happened (also for a
 * falsy value, which Nest would take for no error at all).
 */
function failureOf(r: FenceResult<unknown> & { ok: false }): unknown {
  return (r.failure === 'threw' || r.failure === 'rejected') && r.error ? r.error : new Error(r.problem);
}

/**
 * The `ClientProxy` of {@link RabbitRetryServer}, on the same wire format as
 * Nest's RMQ client: `emit(pattern, data)` publishes an event and completes
 * once the broker confirmed it (an event no queue takes fails with
 * `UNROUTABLE` instead of vanishing); `send(pattern, data)` publishes a
 * request over direct reply-to and emits the replies. It talks to a
 * `Transport.RMQ` server as well.
 *
 * ```ts
 * @Module({ providers: [{ provide: 'ORDERS', useFactory: () => new RabbitRetryClient({ queue: 'orders' }) }] })
 * // constructor(@Inject('ORDERS') private readonly orders: ClientProxy) {}
 * await lastValueFrom(this.orders.send({ cmd: 'sum' }, [1, 2, 3])); // 6
 * ```
 */
export class RabbitRetryClient extends ClientProxy {
  readonly #options: RabbitRetryClientOptions;
  readonly #logger = new Logger('RabbitRetryClient');
  #rr?: RabbitRetry;
  #connecting?: Promise<RabbitRetry>;
  #replies?: Replies;

  /**
   * Checks the options at once: an unknown key, or a `Transport.RMQ` option
   * that has no meaning here (`replyQueue`, `urls`, …), throws with its name.
   */
  constructor(options: RabbitRetryClientOptions) {
    super();
    checkObject('RabbitRetryClient options', options, 'an object such as { queue }');
    refuseForeign('RabbitRetryClient', options, RMQ_CLIENT_OPTIONS);
    checkKeys('RabbitRetryClient', options, CLIENT_OPTION_KEYS);
    if (options.client !== undefined) {
      if (!(options.client instanceof RabbitRetry)) throw new InvalidOptionsError('client must be a connected RabbitRetry client');
      const given = Object.keys(connectOptionsOf(options));
      if (given.length > 0) {
        throw new InvalidOptionsError(`give either client or connect options, not both: ${given.map((k) => `\`${k}\``).join(', ')} would be ignored`);
      }
    } else {
      checkConnectOptions(connectOptionsOf(options));
    }
    checkString('queue', options.queue, { nonEmpty: true });
    checkString('exchange', options.exchange);
    checkString('routingKey', options.routingKey);
    if (options.queue === undefined && options.exchange === undefined) {
      throw new InvalidOptionsError('RabbitRetryClient needs `queue` (sent through the default exchange) or `exchange`');
    }
    checkBoolean('wildcards', options.wildcards);
    if (options.queue !== undefined && options.exchange !== undefined && options.wildcards !== true) {
      throw new InvalidOptionsError('give `queue` or `exchange` (with `routingKey`), not both');
    }
    checkBoolean('persistent', options.persistent);
    if (options.headers !== undefined) checkObject('headers', options.headers, 'an object of header names to strings');
    for (const [name, hook, method] of [
      ['serializer', options.serializer, 'serialize'],
      ['deserializer', options.deserializer, 'deserialize'],
    ] as const) {
      if (hook === undefined) continue;
      checkObject(name, hook, `an object with ${method}()`);
      checkFunction(`${name}.${method}`, (hook as unknown as Record<string, unknown>)[method], 'a function');
    }
    this.#options = options;
    if (options.serializer !== undefined) this.serializer = options.serializer;
    this.initializeDeserializer(options);
  }

  /**
   * Connects (unless given a client); `send` and `emit` call it themselves. A
   * connection that fails fails with an {@link RmqConnectionError}, whose `code`
   * is the OS's (`ECONNREFUSED`, …) as with Nest's RMQ client.
   */
  async connect(): Promise<RabbitRetry> {
    if (this.#rr) return this.#rr;
    this.#connecting ??= (async () => {
      const rr =
        this.#options.client ??
        (await RabbitRetry.connect({
          logger: { warn: (m) => this.#logger.warn(m), error: (m) => this.#logger.error(m) },
          ...connectOptionsOf(this.#options),
        }).catch((err: unknown) => {
          // As Nest's RMQ client fails: err.code is the OS's (ECONNREFUSED, …).
          throw err instanceof ConnectionError ? new RmqConnectionError(err) : err;
        }));
      this.#rr = rr;
      this.setStatus('connected');
      return rr;
    })();
    this.#connecting.catch(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  /** Fails the requests still waiting for a reply, then closes the connection it opened. */
  async close(): Promise<void> {
    const replies = this.#replies;
    this.#replies = undefined;
    await replies?.close();
    const rr = this.#rr;
    this.#rr = undefined;
    this.#connecting = undefined;
    if (rr && this.#options.client === undefined) await rr.close();
    this.setStatus('closed');
  }

  /** The rabbit-retry client it publishes with. */
  unwrap<T = RabbitRetry>(): T {
    if (!this.#rr) throw new Error('RabbitRetryClient is not connected: call connect() (or send or emit) first');
    return this.#rr as unknown as T;
  }

  /** Publishes a request over direct reply-to; each reply goes to `callback`. */
  protected publish(packet: ReadPacket, callback: (packet: WritePacket) => void): () => void {
    const correlationId = randomUUID();
    // Nothing to stop until the reply is waited for.
    let stop: (() => void) | undefined;
    let done = false;
    const finish = (p: WritePacket) => {
      if (done) return;
      if (p.isDisposed || p.err) {
        done = true;
        stop?.();
      }
      callback(p);
    };
    void (async () => {
      try {
        const rr = await this.connect();
        this.#replies ??= rr.replies();
        const replies = this.#replies;
        stop = replies.wait(correlationId, {
          reply: (msg) => void this.received(msg, finish),
          lost: (err) => finish({ err, isDisposed: true }),
        });
        // Unsubscribed while connecting: nobody waits for the reply any more.
        if (done) {
          stop?.();
          return;
        }
        const { body, options } = await this.serialized({ ...packet, id: correlationId });
        await replies.request(this.exchangeOf(), this.routingKeyOf(packet), body, {
          ...this.publishOptions(options),
          correlationId,
        });
      } catch (err) {
        finish({ err, isDisposed: true });
      }
    })();
    return () => {
      done = true;
      stop?.();
    };
  }

  /** Publishes an event and resolves once the broker confirmed it. */
  protected async dispatchEvent<T = unknown>(packet: ReadPacket): Promise<T> {
    const rr = await this.connect();
    const { body, options } = await this.serialized(packet);
    await rr.publish(this.exchangeOf(), this.routingKeyOf(packet), body, this.publishOptions(options));
    return undefined as T;
  }

  /**
   * Hands a reply to `callback` through the deserializer, fenced: what it
   * throws or rejects with ends the request with that error; no answer
   * within the bound, or no packet, ends it with an Error that says so.
   */
  private async received(msg: Message, callback: (packet: WritePacket) => void): Promise<void> {
    const r = await fence<WritePacket>('the deserializer of RabbitRetryClient', () => this.deserializer.deserialize(parsedReply(msg)), {
      expect: OBJECT as Expectation<WritePacket>,
    });
    if (!r.ok) {
      callback({ err: failureOf(r), isDisposed: true });
      return;
    }
    try {
      const reply: { err?: unknown; response?: unknown; isDisposed?: boolean } = r.value;
      const { err, response, isDisposed } = reply;
      callback(isDisposed || err ? { err, response, isDisposed: true } : { err, response });
    } catch (err) {
      callback({ err, isDisposed: true });
    }
  }

  /** The packet as it is sent: its JSON body, and an RmqRecord's options. */
  private async serialized(packet: ReadPacket & { id?: string }): Promise<{ body: Buffer; options?: Record<string, unknown> }> {
    let out: unknown;
    if (this.#options.serializer !== undefined) {
      // Fenced: what it throws or rejects with reaches the caller; no answer within the bound, an Error that says so.
      const r = await fence('the serializer of RabbitRetryClient', () => this.serializer.serialize(packet));
      if (!r.ok) throw failureOf(r);
      out = r.value;
    } else if (packet.data instanceof RmqRecord) {
      const record = packet.data as RmqRecord<unknown>;
      out = { ...packet, data: record.data, options: record.options };
    } else {
      out = packet;
    }
    let options: Record<string, unknown> | undefined;
    if (out !== null && typeof out === 'object' && 'options' in out) {
      const { options: o, ...rest } = out as { options?: Record<string, unknown> };
      options = o;
      out = rest;
    }
    const json = JSON.stringify(out);
    if (json === undefined) throw new InvalidOptionsError('the packet cannot be sent as JSON');
    return { body: Buffer.from(json, 'utf8'), options };
  }

  private publishOptions(recordOptions: Record<string, unknown> | undefined): PublishOptions {
    const fromRecord = publishOptionsOf(recordOptions);
    const headers = { ...this.#options.headers, ...fromRecord.headers };
    return {
      contentType: 'application/json',
      persistent: this.#options.persistent ?? true,
      ...fromRecord,
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
    };
  }

  /** The exchange it publishes to: `exchange`; with `wildcards`, the one named after `queue` by default; else the default exchange. */
  private exchangeOf(): string {
    if (this.#options.wildcards === true) return this.#options.exchange ?? this.#options.queue ?? '';
    return this.#options.exchange ?? '';
  }

  private routingKeyOf(packet: ReadPacket): string {
    if (this.#options.queue !== undefined && this.#options.wildcards !== true) return this.#options.queue;
    if (this.#options.routingKey !== undefined) return this.#options.routingKey;
    return typeof packet.pattern === 'string' ? packet.pattern : JSON.stringify(packet.pattern);
  }

  private setStatus(status: RabbitRetryClientStatus): void {
    (this as unknown as { _status$?: { next(s: string): void } })._status$?.next(status);
  }
}
