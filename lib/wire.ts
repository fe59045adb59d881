/**
 * What crosses from the native consumer, read in one place: a batch's events,
 * each one object tagged by `kind` (`WireEvent` in src/binding/wire.rs), and
 * each delivery's metadata and body as a {@link Message}. The parked
 * sessions take their messages in the same form.
 * @internal
 */
import { type DeliveryParts, Message } from './message';
import type { NativeBatch, NativeMessageProperties } from './native';

/** An event of the native consumer; each kind has exactly its own fields. */
export type WireEvent =
  /** `reason` is the copy's `retry-reason` (`retry`). */
  | { kind: 'retry'; id: number; messageId: string | null; target: string; reason: string; attempt: number; delay: string; error: string }
  | { kind: 'parked'; id: number; messageId: string | null; target: string; reason: string; attempt: number; error: string }
  /** `reason` is the row's `retry-reason` (`retry-table`). */
  | { kind: 'stored'; id: number; messageId: string | null; reason: string; rowId: number; attempt: number; dependency: string | null; error: string }
  /** `error` is `[CODE] message`. */
  | { kind: 'publish-failed'; id: number; messageId: string | null; target: string; error: string }
  /** `error` is `[CODE] message`. */
  | { kind: 'disconnected'; error: string; url: string }
  | { kind: 'recovered'; attempts: number; afterMs: number; url: string }
  /** `error` is `[CODE] message`. */
  | { kind: 'error'; error: string };

/** Events as the native side writes them: a JSON array of {@link WireEvent}s. */
export function parseEvents(json: string): WireEvent[] {
  return json.length > 2 ? (JSON.parse(json) as WireEvent[]) : [];
}

/** One delivery's entry in a batch's `meta` (see `NativeBatch` in src/binding/wire.rs). */
export interface DeliveryMeta {
  /** Its id, to settle it with. */
  i: number;
  /** Exchange. */
  x: string;
  /** Routing key. */
  k: string;
  /** Redelivered. */
  r: boolean;
  /** Earlier failed attempts. */
  a: number;
  /** Properties and headers. */
  p: NativeMessageProperties;
  /** Offset and length of the body in the batch's shared buffer. */
  o?: number;
  n?: number;
  /** Or the index of its own buffer in `large`. */
  l?: number;
  /** 1 when a retryable failure of this attempt goes to the retry table. */
  t?: 1;
}

/** The events of a batch, in order. */
export function eventsOf(batch: NativeBatch): WireEvent[] {
  return parseEvents(batch.events);
}

/** The deliveries of a batch, in order. */
export function deliveriesOf(batch: NativeBatch): DeliveryMeta[] {
  return batch.meta.length > 2 ? (JSON.parse(batch.meta) as DeliveryMeta[]) : [];
}

/** Where one delivery of `batch` finds its parts: its metadata, and its body in the shared buffer or its own. */
export function partsOf(d: DeliveryMeta, batch: NativeBatch): DeliveryParts {
  const p = d.p as NativeMessageProperties & { messageId?: string | number; correlationId?: string | number };
  // Short ids travel beside the JSON (see `NativeBatch.strings`): put them back.
  if (typeof p.messageId === 'number') p.messageId = batch.strings[p.messageId];
  if (typeof p.correlationId === 'number') p.correlationId = batch.strings[p.correlationId];
  const own = d.l === undefined ? undefined : batch.large[d.l];
  const start = own ? 0 : (d.o ?? 0);
  return {
    exchange: d.x,
    routingKey: d.k,
    redelivered: d.r,
    attempt: d.a,
    properties: d.p,
    bytes: own ?? batch.bodies,
    start,
    end: own ? own.length : start + (d.n ?? 0),
  };
}

/** One delivery of `batch` as the handler gets it, and its message id when it has a string one. */
export function messageOf(d: DeliveryMeta, batch: NativeBatch): { msg: Message; messageId?: string } {
  const parts = partsOf(d, batch);
  const id = parts.properties.messageId;
  return { msg: new Message(parts), messageId: typeof id === 'string' ? id : undefined };
}
