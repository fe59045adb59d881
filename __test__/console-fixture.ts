/**
 * What the console's tests share: a consumer that parks messages for three
 * kinds of failure (and handles them once they are replayed), parked
 * messages of the past, and a client of the console's HTTP API.
 */
import { type Consumer, type Message, NonRetryableError, type RabbitRetry, parkedQueueName } from '../lib';
import { CONSOLE_TOKEN_HEADER } from '../lib/console';
import { amqpConnection } from './broker';
import { parkedHeaders, queueDepth, waitFor } from './helpers';

/** The three kinds of failure, in the order messages are published. */
export const KINDS = ['carrier', 'address', 'tax'] as const;

/** What each kind looks like on the page: the error's name and its message with the numbers replaced. */
export const KIND_ERRORS: Record<(typeof KINDS)[number], { errorName: string; message: string; reason: string }> = {
  carrier: { errorName: 'Error', message: 'carrier timeout after <n> ms for order <n>', reason: 'exhausted' },
  address: { errorName: 'NonRetryableError', message: 'order <n> has no address', reason: 'non-retryable' },
  tax: { errorName: 'TypeError', message: "Cannot read properties of undefined (reading 'rate')", reason: 'exhausted' },
};

/** A consumer of the three failures, and the message ids its handler completed. */
export interface ThreeKinds {
  consumer: Consumer;
  /** Ids of the messages the handler completed (each a replayed one). */
  succeeded: string[];
  /** Ids of every message published, by kind. */
  ids: Record<(typeof KINDS)[number], string[]>;
}

/**
 * Consumes `queue` with no retry delays: a message fails at once for one of
 * three reasons by its `kind` (a carrier timeout, a missing address that is
 * not retryable, a TypeError), and parks; a replayed message (it carries
 * `retry-replayed-at`) succeeds. Publishes `perKind` messages of each kind,
 * interleaved, and waits until all are parked.
 */
export async function parkThreeKinds(rr: RabbitRetry, queue: string, perKind: number): Promise<ThreeKinds> {
  const succeeded: string[] = [];
  const consumer = await rr.consume({ queue, onFailure: { delays: [] } }, async function rateShipment(msg: Message) {
    const { kind, order } = msg.json<{ kind: string; order: number }>();
    if (msg.headers['retry-replayed-at'] !== undefined) {
      succeeded.push(msg.properties.messageId ?? '');
      return;
    }
    if (kind === 'carrier') throw new Error(`carrier timeout after 3000 ms for order ${order}`);
    if (kind === 'address') throw new NonRetryableError(`order ${order} has no address`);
    const quote: { tax?: { rate: number } } = {};
    // The handler's own bug: a TypeError, reading the rate of a quote without tax.
    const rate = (quote.tax as { rate: number }).rate;
    throw new Error(`not reached: the rate was ${rate}`);
  });
  const ids: ThreeKinds['ids'] = { carrier: [], address: [], tax: [] };
  for (let i = 0; i < perKind * KINDS.length; i++) {
    const kind = KINDS[i % KINDS.length];
    const order = 48_000 + i;
    ids[kind].push(`order-${order}`);
    await rr.publish(
      '',
      queue,
      { kind, order, items: [{ sku: `SKU-${i % 7}`, qty: 1 + (i % 3) }] },
      { messageId: `order-${order}`, correlationId: `checkout-${order}` },
    );
  }
  const total = perKind * KINDS.length;
  await waitFor(() => consumer.stats().parked === total, 15_000, `${total} parked messages`);
  await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === total, 5000, 'the parked depth');
  return { consumer, succeeded, ids };
}

/** An HTTP answer: status and parsed JSON. */
export interface Answer<T = Record<string, unknown>> {
  status: number;
  body: T;
}

/** A client of a console's API at `url` (ending in `/`), carrying `token`. */
export class ConsoleApi {
  constructor(
    readonly url: string,
    readonly token: string | undefined,
  ) {}

  /** The console's token as its page carries it (`undefined` when the page carries none). */
  static async pageToken(url: string): Promise<string | undefined> {
    const html = await (await fetch(url)).text();
    return /<meta name="rabbit-retry-token" content="([0-9a-f]+)">/.exec(html)?.[1];
  }

  /** A client with the token the console's page carries. */
  static async of(url: string): Promise<ConsoleApi> {
    return new ConsoleApi(url, await ConsoleApi.pageToken(url));
  }

  async get<T = Record<string, unknown>>(path: string): Promise<Answer<T>> {
    const res = await fetch(this.url + path, { headers: this.token ? { [CONSOLE_TOKEN_HEADER]: this.token } : {} });
    return { status: res.status, body: (await res.json()) as T };
  }

  async post<T = Record<string, unknown>>(path: string, body: unknown): Promise<Answer<T>> {
    const res = await fetch(this.url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(this.token ? { [CONSOLE_TOKEN_HEADER]: this.token } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as T };
  }
}

/** A parked message of the past: its id, its error, and how long ago it parked. */
export interface PastFailure {
  messageId: string;
  errorName: string;
  errorMessage: string;
  /** Minutes before now that it parked (its `retry-failed-at`). */
  minutesAgo: number;
}

/** Parks `failures` in `queue`'s parked queue, as the consumer would have parked them that long ago, in order. */
export async function parkPast(queue: string, failures: readonly PastFailure[]): Promise<void> {
  const ch = await (await amqpConnection()).createConfirmChannel();
  try {
    await ch.assertQueue(queue, { durable: true });
    await ch.assertQueue(parkedQueueName(queue), { durable: true });
    for (const f of failures) {
      const headers = parkedHeaders(queue, { errorName: f.errorName, errorMessage: f.errorMessage });
      const at = new Date(Date.now() - f.minutesAgo * 60_000).toISOString();
      headers['retry-failed-at'] = at;
      headers['retry-first-failed-at'] = at;
      ch.sendToQueue(parkedQueueName(queue), Buffer.from(JSON.stringify({ id: f.messageId })), {
        persistent: true,
        contentType: 'application/json',
        messageId: f.messageId,
        headers,
      });
    }
    await ch.waitForConfirms();
  } finally {
    await ch.close();
  }
}
