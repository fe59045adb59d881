/**
 * What crosses from the native consumer, read in one place: a batch's events,
 * each one object tagged by `kind` (`Event` in src/consumer/event.rs,
 * serialised as it is), and each delivery's metadata (written by
 * `delivery_meta` in src/binding/wire.rs) and body as a {@link Message}. The
 * parked sessions take their messages in the same form.
 *
 * The types here are held to what the native side writes: `cargo test` keeps
 * __test__/fixtures/wire-schema.ts equal to an example of every event kind and
 * every form of metadata, and the type check holds that file to these types
 * (__test__/wire.test.ts checks that each kind and key is written).
 * @internal
 */
import type { ParkReason } from './contract';
import { type DeliveryParts, Message } from './message';
import type { NativeBatch, NativeMessageProperties } from './native';

/** An event of the native consumer; each kind has exactly its own fields. */
export type WireEvent =
  /** `reason` is the copy's `retry-reason` (`retry`). */
  | { kind: 'retry'; id: number; messageId: string | null; target: string; reason: string; attempt: number; delay: string; error: string }
  /** `faultError` is `[CODE] message` when the broker refused the copy's fault event (`onFailure.faults`). */
  | { kind: 'parked'; id: number; messageId: string | null; target: string; reason: ParkReason; attempt: number; error: string; faultError: string | null }
  /** `reason` is the row's `retry-reason` (`retry-table`). */
  | { kind: 'stored'; id: number; messageId: string | null; reason: string; rowId: number; attempt: number; dependency: string | null; error: string }
  /** `error` is `[CODE] message`. */
  | { kind: 'publish-failed'; id: number; messageId: string | null; target: string; error: string }
  /** `error` is `[CODE] message`. */
  | { kind: 'disconnected'; error: string; url: string }
  | { kind: 'recovered'; attempts: number; afterMs: number; url: string }
  /** `error` is `[CODE] message`. */
  | { kind: 'error'; error: string }
  /** The retries (by delay label) and parks (by reason) the consumer does not hear of one by one, since the last batch. */
  | { kind: 'tally'; retried: Record<string, number>; parked: Record<string, number> }
  /** A delivery settled after the broker had taken it back (its channel lost, a consumer timeout): nothing was acked; `acked` says whether its handler succeeded. */
  | { kind: 'taken-back'; id: number; acked: boolean };

/** Events as the native side writes them: a JSON array of {@link WireEvent}s. */
export function parseEvents(json: string): WireEvent[] {
  return json.length > 2 ? (JSON.parse(json) as WireEvent[]) : [];
}

/**
 * Message properties as they cross in a batch: a short `messageId` or
 * `correlationId` arrives as its index in the batch's `strings`.
 */
export type WireMessageProperties = Omit<NativeMessageProperties, 'messageId' | 'correlationId'> & {
  messageId?: string | number;
  correlationId?: string | number;
};

/** One delivery's entry in a batch's `meta` (written by `delivery_meta` in src/binding/wire.rs). */
export interface DeliveryMeta {
  /** Its id, to settle it with. */
  id: number;
  /** The exchange it was published to. */
  exchange: string;
  /** Its routing key. */
  routingKey: string;
  /** Whether the broker delivered it before. */
  redelivered: boolean;
  /** The broker's delivery tag, on the channel it came on. */
  deliveryTag: number;
  /** Earlier failed attempts. */
  attempt: number;
  /** Properties and headers. */
  properties: WireMessageProperties;
  /** Where its body starts in the batch's shared buffer. */
  offset?: number;
  /** Its body's length in the batch's shared buffer. */
  length?: number;
  /** Or the index of its own buffer in the batch's `large`. */
  large?: number;
  /** Present when a retryable failure of this attempt goes to the retry table. */
  table?: true;
  /** Present when a retryable failure of this attempt parks: no retry is left. */
  parks?: true;
  /** Present when the verdict refused it before its handler (it parks): handed over only to be watched, never handled. */
  refused?: true;
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
export function partsOf(d: DeliveryMeta, batch: NativeBatch, consumerTag?: string): DeliveryParts {
  const p = d.properties;
  // Short ids travel beside the JSON (see `NativeBatch.strings`): put them
  // back, in place (a delivery's metadata is read once).
  if (typeof p.messageId === 'number') p.messageId = batch.strings[p.messageId];
  if (typeof p.correlationId === 'number') p.correlationId = batch.strings[p.correlationId];
  const properties = p as NativeMessageProperties;
  const own = d.large === undefined ? undefined : batch.large[d.large];
  const start = own ? 0 : (d.offset ?? 0);
  return {
    exchange: d.exchange,
    routingKey: d.routingKey,
    redelivered: d.redelivered,
    deliveryTag: d.deliveryTag,
    attempt: d.attempt,
    properties,
    bytes: own ?? batch.bodies,
    start,
    end: own ? own.length : start + (d.length ?? 0),
    consumerTag,
  };
}

/** One delivery of `batch` as the handler gets it (from the consumer `consumerTag`), and its message id when it has a string one. */
export function messageOf(d: DeliveryMeta, batch: NativeBatch, consumerTag?: string): { msg: Message; messageId?: string } {
  const parts = partsOf(d, batch, consumerTag);
  const id = parts.properties.messageId;
  return { msg: new Message(parts), messageId: typeof id === 'string' ? id : undefined };
}
