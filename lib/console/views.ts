/**
 * What the console's page reads: a parked message as data (its body as
 * pretty JSON, text or hex), and a parked queue grouped by fingerprint.
 */
import { createHash } from 'node:crypto';

import { HEADERS } from '../native';
import type { Parked, ParkedMessage } from '../parked';
import { type EditView, editViewOf } from './edit-view';
import { fingerprint } from './fingerprint';
import { type ParkedStamp, type Timelines, timelinesOf } from './timeline';

/** A JSON value with its object keys sorted, so that equal values write equal text. */
function stable(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stable);
  if (v !== null && typeof v === 'object' && !Buffer.isBuffer(v)) {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, stable((v as Record<string, unknown>)[k])]),
    );
  }
  return typeof v === 'bigint' ? String(v) : v;
}

/**
 * An id for one parked message that stays the same from one look to the
 * next: a hash of its properties, headers and body. Two messages equal in all
 * three share it; an action on one of them takes the first.
 */
export function messageKey(m: ParkedMessage): string {
  return createHash('sha256')
    .update(JSON.stringify(stable(m.properties)))
    .update('\u0000')
    .update(JSON.stringify(stable(m.headers)))
    .update('\u0000')
    .update(m.body)
    .digest('hex')
    .slice(0, 24);
}

/** A parked message's body, ready to show as text. */
export interface BodyView {
  /** `json` (pretty-printed), `text`, `hex` (a dump: offset, bytes, characters) or `empty`. */
  kind: 'json' | 'text' | 'hex' | 'empty';
  /** What to show. */
  text: string;
  /** The body's size in bytes. */
  bytes: number;
  /** Whether `text` shows only the start of the body. */
  truncated: boolean;
}

/** The most of a text or JSON body shown, in characters. */
const MAX_TEXT = 64 * 1024;
/** The most of a binary body shown, in bytes. */
const MAX_HEX = 4 * 1024;

/** A hex dump of `b`: 16 bytes a line, with the offset and the printable characters. */
function hexDump(b: Buffer): string {
  const lines: string[] = [];
  for (let off = 0; off < b.length; off += 16) {
    const row = b.subarray(off, off + 16);
    const hex = [...row].map((x) => x.toString(16).padStart(2, '0')).join(' ');
    const chars = [...row].map((x) => (x >= 0x20 && x < 0x7f ? String.fromCharCode(x) : '.')).join('');
    lines.push(`${off.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${chars}`);
  }
  return lines.join('\n');
}

/** The body `b` (of content type `contentType`) as pretty JSON, text, or a hex dump. */
export function bodyView(b: Buffer, contentType: string | undefined): BodyView {
  if (b.length === 0) return { kind: 'empty', text: '', bytes: 0, truncated: false };
  let text: string | undefined;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(b);
  } catch {
    text = undefined;
  }
  // eslint-disable-next-line no-control-regex
  if (text !== undefined && !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) {
    const trimmed = text.trimStart();
    if (/json/i.test(contentType ?? '') || trimmed.startsWith('{') || trimmed.startsWith('[')) {
      try {
        const pretty = JSON.stringify(JSON.parse(text), null, 2);
        return { kind: 'json', text: pretty.slice(0, MAX_TEXT), bytes: b.length, truncated: pretty.length > MAX_TEXT };
      } catch {
        // Not JSON after all: shown as text.
      }
    }
    return { kind: 'text', text: text.slice(0, MAX_TEXT), bytes: b.length, truncated: text.length > MAX_TEXT };
  }
  return { kind: 'hex', text: hexDump(b.subarray(0, MAX_HEX)), bytes: b.length, truncated: b.length > MAX_HEX };
}

/** A parked message in a line: what a group's example and a group's list show. */
export interface MessageSummary {
  /** The message's id in the console (see {@link messageKey}). */
  key: string;
  /** `message-id`, or null. */
  messageId: string | null;
  /** `correlation-id`, or null. */
  correlationId: string | null;
  /** `retry-reason`: `exhausted`, `non-retryable`, ... */
  reason: string | null;
  /** `retry-attempt`. */
  attempt: number;
  /** `retry-error-name`. */
  errorName: string | null;
  /** `retry-last-error`. */
  error: string | null;
  /** `retry-failed-at`. */
  failedAt: string | null;
}

/** A parked message in full, for the page. */
export interface MessageDetail extends MessageSummary {
  /** Where it stands in the parked queue, counting from 0, when it was read. */
  position: number;
  /** `retry-error-stack`, in full. */
  stack: string | null;
  /** Its properties. */
  properties: Record<string, unknown>;
  /** Its headers, `retry-*` ones included. */
  headers: Record<string, unknown>;
  /** Its body. */
  body: BodyView;
  /**
   * What the console's editor starts from, or why it cannot edit the message
   * (docs/console.md, "Edit one message").
   */
  edit: EditView;
}

function text(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** `m` in a line. */
export function summaryOf(m: ParkedMessage): MessageSummary {
  return {
    key: messageKey(m),
    messageId: m.properties.messageId ?? null,
    correlationId: m.properties.correlationId ?? null,
    reason: m.reason ?? null,
    attempt: m.attempt,
    errorName: m.errorName ?? null,
    error: m.errorMessage ?? null,
    failedAt: text(m.headers[HEADERS.failedAt]),
  };
}

/** `m` in full; `position` is where it stood in the queue. */
export function detailOf(m: ParkedMessage, position: number): MessageDetail {
  const body = bodyView(m.body, m.properties.contentType);
  return {
    ...summaryOf(m),
    position,
    stack: m.errorStack ?? null,
    properties: { ...m.properties },
    headers: m.headers,
    body,
    edit: editViewOf(m, body),
  };
}

/** Parked messages that failed the same way (see {@link fingerprint}). */
export interface ParkedGroup {
  /** The fingerprint's key: the group's id. */
  key: string;
  /** The error's name. */
  errorName: string;
  /** The error message with its variable parts replaced. */
  message: string;
  /** The first frame of the application's code. */
  frame: string;
  /** Messages in the group (among those read). */
  count: number;
  /** How many parked for each reason. */
  reasons: Record<string, number>;
  /** The earliest first failure (`retry-first-failed-at`, else `retry-failed-at`), ISO 8601. */
  firstFailedAt: string | null;
  /** The latest failure (`retry-failed-at`), ISO 8601. */
  lastFailedAt: string | null;
  /** The group's first message. */
  example: MessageSummary;
}

/** A parked queue, grouped. */
export interface Grouping {
  /** The work queue. */
  queue: string;
  /** Parked messages when the grouping began. */
  depth: number;
  /** Messages read and grouped: the first `scanned` of the queue. */
  scanned: number;
  /** The most it reads. */
  scanLimit: number;
  /** Whether the queue held more than it read: the counts are of the first `scanned` only. */
  truncated: boolean;
  /** The groups, largest first. */
  groups: ParkedGroup[];
  /**
   * The messages read, counted over time by group, from when each parked:
   * per minute over the last hour and per hour over the last week
   * (docs/console.md, "The failure timeline").
   */
  timeline: Timelines;
  /** Milliseconds the reading and grouping took. */
  tookMs: number;
  /** When it was read, ISO 8601. */
  at: string;
}

function earlier(a: string | null, b: string | null): string | null {
  if (a === null) return b;
  if (b === null) return a;
  return Date.parse(b) < Date.parse(a) ? b : a;
}

function later(a: string | null, b: string | null): string | null {
  if (a === null) return b;
  if (b === null) return a;
  return Date.parse(b) > Date.parse(a) ? b : a;
}

/**
 * Reads the first `scanLimit` messages of `parked` (each stays parked, in its
 * place) and groups them by fingerprint: the largest group first, and among
 * equals the one whose first message comes first. Once `signal` is aborted it
 * takes no message more (the grouping is then of the messages read so far).
 */
export async function groupParked(parked: Parked, scanLimit: number, signal?: AbortSignal): Promise<Grouping> {
  const started = Date.now();
  const at = new Date(started).toISOString();
  const depth = await parked.count();
  const groups = new Map<string, ParkedGroup>();
  const stamps: ParkedStamp[] = [];
  const scanned = await parked.scan(scanLimit, (m) => {
    const f = fingerprint(m);
    const failedAt = text(m.headers[HEADERS.failedAt]);
    const firstFailedAt = text(m.headers[HEADERS.firstFailedAt]) ?? failedAt;
    const reason = m.reason ?? 'unknown';
    let g = groups.get(f.key);
    if (!g) {
      g = { ...f, count: 0, reasons: {}, firstFailedAt: null, lastFailedAt: null, example: summaryOf(m) };
      groups.set(f.key, g);
    }
    g.count++;
    g.reasons[reason] = (g.reasons[reason] ?? 0) + 1;
    g.firstFailedAt = earlier(g.firstFailedAt, firstFailedAt);
    g.lastFailedAt = later(g.lastFailedAt, failedAt);
    stamps.push({ key: f.key, at: failedAt === null ? null : Date.parse(failedAt) });
    return signal?.aborted !== true;
  });
  const ordered = [...groups.values()];
  // A stable sort keeps the order of first appearance among equal counts.
  ordered.sort((a, b) => b.count - a.count);
  return {
    queue: parked.queue,
    depth: Math.max(depth, scanned),
    scanned,
    scanLimit,
    truncated: depth > scanned,
    groups: ordered,
    timeline: timelinesOf(stamps, started),
    tookMs: Date.now() - started,
    at,
  };
}
