/**
 * A minimal AMQP 0-9-1 client over `node:net`, for tests that must put on the
 * wire what other clients may send but amqplib cannot: short strings that are
 * not UTF-8 (`Buffer.from('ordér-1', 'latin1')` as a message id, a property,
 * a header key), headers tables over amqplib's 64 KiB encoding buffer, any
 * field type, a hand-made properties payload.
 *
 * One channel (1), publisher confirms, basic.publish, basic.get and basic.ack;
 * operations run one at a time (await each). Frame layout (spec 4.2.3):
 * type(1) channel(2) size(4) payload 0xCE; a method payload is class(2)
 * method(2) arguments; a content header is class(2) weight(2) bodySize(8)
 * propertyFlags(2) properties.
 */
import net from 'node:net';

import { BROKER } from './broker';

/** A short string (at most 255 bytes): text is sent as UTF-8, a Buffer as its bytes. */
export type ShortStr = string | Buffer;

/** A long string field value (`S`) of exactly these bytes (a plain `Buffer` value is a byte array, `x`). */
export class LongStr {
  constructor(readonly bytes: Buffer) {}
}

/** A field table whose keys may be raw bytes, in the order given. */
export class Table {
  constructor(readonly entries: readonly (readonly [ShortStr, FieldValue])[]) {}
}

/**
 * A field value: text `S`, an integer `I` (or `l` outside 32 bits; a bigint is
 * always `l`), a fractional number `d`, a boolean `t`, null `V`, a Buffer `x`,
 * an array `A`, a {@link Table} or a plain object `F`.
 */
export type FieldValue = string | number | bigint | boolean | null | Buffer | LongStr | Table | FieldValue[] | { [key: string]: FieldValue };

/** Basic properties; short strings may be raw bytes. */
export interface Properties {
  contentType?: ShortStr;
  contentEncoding?: ShortStr;
  headers?: Table | Record<string, FieldValue>;
  deliveryMode?: number;
  priority?: number;
  correlationId?: ShortStr;
  replyTo?: ShortStr;
  expiration?: ShortStr;
  messageId?: ShortStr;
  timestamp?: number | bigint;
  type?: ShortStr;
  userId?: ShortStr;
  appId?: ShortStr;
  clusterId?: ShortStr;
}

/** A broker's Connection.Close or Channel.Close. */
export class AmqpError extends Error {
  constructor(
    readonly scope: 'connection' | 'channel',
    readonly code: number,
    readonly text: string,
  ) {
    super(`${scope} closed by the broker: ${code} ${text}`);
  }
}

export interface GetResult {
  deliveryTag: bigint;
  redelivered: boolean;
  exchange: string;
  routingKey: string;
  /** The content header payload as it came: class, weight, body size, flags, properties. */
  header: Buffer;
  /** Flags and properties: `header` from byte 12 (what amqplib's `defs.decode(60, …)` reads). */
  properties: Buffer;
  body: Buffer;
}

// ---------------------------------------------------------------------------
// Encoding

function u8(n: number): Buffer {
  return Buffer.from([n]);
}
function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}
function u64(n: number | bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

export function shortStr(s: ShortStr): Buffer {
  const b = typeof s === 'string' ? Buffer.from(s, 'utf8') : s;
  if (b.length > 255) throw new Error(`a short string is at most 255 bytes, not ${b.length}`);
  return Buffer.concat([u8(b.length), b]);
}

export function longStr(b: Buffer): Buffer {
  return Buffer.concat([u32(b.length), b]);
}

/** A table's bytes on the wire: its size (4), then key (short string), type tag, value for each entry. */
export function encodeTable(t: Table | Record<string, FieldValue>): Buffer {
  const entries = t instanceof Table ? t.entries : Object.entries(t);
  return longStr(Buffer.concat(entries.map(([k, v]) => Buffer.concat([shortStr(k), encodeValue(v)]))));
}

/** A field value's bytes: type tag, then the value. */
export function encodeValue(v: FieldValue): Buffer {
  const tag = (c: string, ...rest: Buffer[]) => Buffer.concat([Buffer.from(c, 'latin1'), ...rest]);
  if (v === null) return tag('V');
  if (Buffer.isBuffer(v)) return tag('x', longStr(v));
  if (v instanceof LongStr) return tag('S', longStr(v.bytes));
  if (v instanceof Table) return tag('F', encodeTable(v));
  if (Array.isArray(v)) return tag('A', longStr(Buffer.concat(v.map(encodeValue))));
  switch (typeof v) {
    case 'string':
      return tag('S', longStr(Buffer.from(v, 'utf8')));
    case 'boolean':
      return tag('t', u8(v ? 1 : 0));
    case 'bigint': {
      const b = Buffer.alloc(8);
      b.writeBigInt64BE(v);
      return tag('l', b);
    }
    case 'number': {
      const b = Buffer.alloc(8);
      if (!Number.isInteger(v)) {
        b.writeDoubleBE(v);
        return tag('d', b);
      }
      if (v >= -0x8000_0000 && v <= 0x7fff_ffff) {
        b.writeInt32BE(v);
        return tag('I', b.subarray(0, 4));
      }
      b.writeBigInt64BE(BigInt(v));
      return tag('l', b);
    }
    default:
      return tag('F', encodeTable(v));
  }
}

/** Property flags (bit 15 down, spec order) and the property list. */
export function encodeProperties(p: Properties): Buffer {
  const fields: [unknown, (v: never) => Buffer][] = [
    [p.contentType, shortStr],
    [p.contentEncoding, shortStr],
    [p.headers, encodeTable],
    [p.deliveryMode, u8],
    [p.priority, u8],
    [p.correlationId, shortStr],
    [p.replyTo, shortStr],
    [p.expiration, shortStr],
    [p.messageId, shortStr],
    [p.timestamp, u64],
    [p.type, shortStr],
    [p.userId, shortStr],
    [p.appId, shortStr],
    [p.clusterId, shortStr],
  ];
  let flags = 0;
  const parts: Buffer[] = [];
  fields.forEach(([value, encode], i) => {
    if (value === undefined) return;
    flags |= 1 << (15 - i);
    parts.push(encode(value as never));
  });
  return Buffer.concat([u16(flags), ...parts]);
}

/** Reads method arguments in order. */
class Reader {
  private off = 0;
  constructor(private readonly buf: Buffer) {}
  u8(): number {
    return this.buf.readUInt8(this.skip(1));
  }
  u16(): number {
    return this.buf.readUInt16BE(this.skip(2));
  }
  u32(): number {
    return this.buf.readUInt32BE(this.skip(4));
  }
  u64(): bigint {
    return this.buf.readBigUInt64BE(this.skip(8));
  }
  short(): string {
    const n = this.u8();
    const at = this.skip(n);
    return this.buf.toString('utf8', at, at + n);
  }
  /** Moves past `n` bytes; returns where they start. */
  private skip(n: number): number {
    this.off += n;
    return this.off - n;
  }
}

// ---------------------------------------------------------------------------
// The connection

interface Frame {
  type: number;
  channel: number;
  payload: Buffer;
}

const METHOD = 1;
const HEADER = 2;
const BODY = 3;
const method = (c: number, m: number) => (c << 16) | m;

export interface RawConnectOptions {
  host?: string;
  port?: number;
  user?: string;
  password?: string;
  vhost?: string;
  connectionName?: string;
}

export class RawAmqp {
  /** The frame_max both sides agreed on (the server's, echoed). */
  frameMax = 0;
  private inbox: Frame[] = [];
  private waiter?: { resolve: (f: Frame) => void; reject: (e: Error) => void };
  private failure?: Error;
  private buffered = Buffer.alloc(0);
  private published = 0n;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', (e) => this.fail(e));
    socket.on('close', () => this.fail(new Error('the socket closed')));
  }

  /** Connects, opens channel 1 and puts it in confirm mode. */
  static async connect(o: RawConnectOptions = {}): Promise<RawAmqp> {
    const socket = net.connect(o.port ?? BROKER.port, o.host ?? BROKER.host);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const c = new RawAmqp(socket);
    socket.write(Buffer.from('AMQP\x00\x00\x09\x01', 'latin1'));
    await c.expect(0, method(10, 10)); // Connection.Start
    const clientProperties = encodeTable({
      product: 'rabbit-retry raw test client',
      connection_name: o.connectionName ?? 'raw-amqp',
      capabilities: { publisher_confirms: true, 'basic.nack': true },
    });
    const response = Buffer.from(`\0${o.user ?? 'guest'}\0${o.password ?? 'guest'}`, 'utf8');
    c.send(0, 10, 11, clientProperties, shortStr('PLAIN'), longStr(response), shortStr('en_US'));
    const tune = new Reader(await c.expect(0, method(10, 30)));
    const channelMax = tune.u16();
    c.frameMax = tune.u32();
    c.send(0, 10, 31, u16(channelMax), u32(c.frameMax), u16(0)); // Tune-Ok, no heartbeats
    c.send(0, 10, 40, shortStr(o.vhost ?? '/'), shortStr(''), u8(0)); // Connection.Open
    await c.expect(0, method(10, 41));
    c.send(1, 20, 10, shortStr('')); // Channel.Open
    await c.expect(1, method(20, 11));
    c.send(1, 85, 10, u8(0)); // Confirm.Select
    await c.expect(1, method(85, 11));
    return c;
  }

  /**
   * Publishes and waits for the broker's confirm. `properties` is a
   * {@link Properties} object or a raw flags-and-properties payload. Resolves
   * to the Basic.Return's reply text when a mandatory publish came back;
   * rejects on a nack or a closed channel/connection.
   */
  async publish(
    exchange: ShortStr,
    routingKey: ShortStr,
    properties: Properties | Buffer,
    body: Buffer,
    opts: { mandatory?: boolean } = {},
  ): Promise<{ returned?: string }> {
    const props = Buffer.isBuffer(properties) ? properties : encodeProperties(properties);
    this.send(1, 60, 40, u16(0), shortStr(exchange), shortStr(routingKey), u8(opts.mandatory ? 1 : 0));
    this.frame(HEADER, 1, Buffer.concat([u16(60), u16(0), u64(body.length), props]));
    const max = this.frameMax - 8;
    for (let at = 0; at < body.length; at += max) this.frame(BODY, 1, body.subarray(at, at + max));
    const tag = ++this.published;
    let returned: string | undefined;
    for (;;) {
      const f = await this.next(1);
      const id = f.payload.readUInt32BE(0);
      const r = new Reader(f.payload.subarray(4));
      if (id === method(60, 50)) {
        r.u16();
        returned = r.short();
        await this.readContent(); // the returned message itself
      } else if (id === method(60, 80) || id === method(60, 120)) {
        const acked = r.u64();
        const multiple = (r.u8() & 1) === 1;
        if (acked === tag || (multiple && acked >= tag)) {
          if (id === method(60, 120)) throw new Error(`the broker nacked publish ${tag}`);
          return { returned };
        }
      } else throw new Error(`unexpected method ${f.payload.readUInt16BE(0)}.${f.payload.readUInt16BE(2)} while waiting for a confirm`);
    }
  }

  /** basic.get; acks the message unless `ack: false`. Null when the queue is empty. */
  async basicGet(queue: string, opts: { ack?: boolean } = {}): Promise<GetResult | null> {
    this.send(1, 60, 70, u16(0), shortStr(queue), u8(0));
    const f = await this.next(1);
    const id = f.payload.readUInt32BE(0);
    if (id === method(60, 72)) return null;
    if (id !== method(60, 71)) throw new Error(`expected Get-Ok, got method ${id >> 16}.${id & 0xffff}`);
    const r = new Reader(f.payload.subarray(4));
    const deliveryTag = r.u64();
    const redelivered = (r.u8() & 1) === 1;
    const exchange = r.short();
    const routingKey = r.short();
    const { header, body } = await this.readContent();
    if (opts.ack !== false) this.ack(deliveryTag);
    return { deliveryTag, redelivered, exchange, routingKey, header, properties: header.subarray(12), body };
  }

  ack(deliveryTag: bigint): void {
    this.send(1, 60, 80, u64(deliveryTag), u8(0));
  }

  /** Closes channel 1 and the connection (politely when they are still open). */
  async close(): Promise<void> {
    if (this.failure === undefined) {
      try {
        this.send(1, 20, 40, u16(200), shortStr('bye'), u16(0), u16(0));
        await this.expect(1, method(20, 41));
        this.send(0, 10, 50, u16(200), shortStr('bye'), u16(0), u16(0));
        await this.expect(0, method(10, 51));
      } catch {
        // already closed by the broker
      }
    }
    this.socket.destroy();
  }

  private async readContent(): Promise<{ header: Buffer; body: Buffer }> {
    const h = await this.next(1, HEADER);
    const size = Number(h.payload.readBigUInt64BE(4));
    const parts: Buffer[] = [];
    for (let got = 0; got < size;) {
      const b = await this.next(1, BODY);
      parts.push(b.payload);
      got += b.payload.length;
    }
    return { header: h.payload, body: Buffer.concat(parts) };
  }

  private async expect(channel: number, id: number): Promise<Buffer> {
    const f = await this.next(channel);
    const got = f.payload.readUInt32BE(0);
    if (got !== id) throw new Error(`expected method ${id >> 16}.${id & 0xffff}, got ${got >> 16}.${got & 0xffff}`);
    return f.payload.subarray(4);
  }

  /** The next frame of `channel` (of `type`); a broker's Close becomes an {@link AmqpError}. */
  private async next(channel: number, type = METHOD): Promise<Frame> {
    const f =
      this.inbox.shift() ??
      (await new Promise<Frame>((resolve, reject) => {
        if (this.failure) {
          reject(this.failure);
          return;
        }
        this.waiter = { resolve, reject };
      }));
    if (f.type === METHOD) {
      const id = f.payload.readUInt32BE(0);
      if (id === method(10, 50) || id === method(20, 40)) {
        const r = new Reader(f.payload.subarray(4));
        const err = new AmqpError(id === method(10, 50) ? 'connection' : 'channel', r.u16(), r.short());
        if (err.scope === 'connection') this.send(0, 10, 51);
        else this.send(f.channel, 20, 41);
        this.failure = err;
        throw err;
      }
    }
    if (f.channel !== channel || f.type !== type) throw new Error(`unexpected frame type ${f.type} on channel ${f.channel}`);
    return f;
  }

  private onData(d: Buffer): void {
    this.buffered = Buffer.concat([this.buffered, d]);
    while (this.buffered.length >= 7) {
      const size = this.buffered.readUInt32BE(3);
      if (this.buffered.length < size + 8) return;
      if (this.buffered[size + 7] !== 0xce) {
        this.fail(new Error('a frame without its end octet'));
        return;
      }
      const f = { type: this.buffered[0], channel: this.buffered.readUInt16BE(1), payload: this.buffered.subarray(7, 7 + size) };
      this.buffered = this.buffered.subarray(size + 8);
      const w = this.waiter;
      this.waiter = undefined;
      if (w) w.resolve(f);
      else this.inbox.push(f);
    }
  }

  private fail(e: Error): void {
    this.failure ??= e;
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(this.failure);
  }

  private send(channel: number, classId: number, methodId: number, ...args: Buffer[]): void {
    this.frame(METHOD, channel, Buffer.concat([u16(classId), u16(methodId), ...args]));
  }

  private frame(type: number, channel: number, payload: Buffer): void {
    if (this.failure) throw this.failure;
    this.socket.write(Buffer.concat([u8(type), u16(channel), u32(payload.length), payload, u8(0xce)]));
  }
}
