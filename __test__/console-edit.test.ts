/**
 * The console's Edit and failure timeline through its JSON API, against the
 * broker: `POST api/queues/<queue>/edit` sends the one message opened back to
 * the work queue, edited, with who edited it; every refusal is coded and
 * moves nothing; a queue's grouping counts its parked messages over time by
 * group, from when each parked.
 */
import { type Message, NonRetryableError, type RabbitRetry, parkedQueueName } from '../lib';
import { type ConsoleServer, type EditAnswer, type GroupsAnswer, type MessageDetail, startConsole } from '../lib/console';
import { amqpConnection, deleteQueue } from './broker';
import { ConsoleApi } from './console-fixture';
import {
  cleanup,
  closeAmqp,
  connectClient,
  drain,
  parkedHeaders,
  parkedNow as parkedMessages,
  queueDepth,
  seedParked,
  sleep,
  testQueue,
  track,
  waitFor,
} from './helpers';

const servers: ConsoleServer[] = [];

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  await cleanup();
});
afterAll(closeAmqp);

/** A console of `rr` showing `queue`, and a client of its API. */
async function consoleOf(rr: RabbitRetry, queue: string): Promise<ConsoleApi> {
  const server = await startConsole({ client: rr, port: 0, queues: [queue], management: false });
  servers.push(server);
  return ConsoleApi.of(server.url);
}

/** The messages of `queue`'s only group, as the page opens them. */
async function opened(api: ConsoleApi, queue: string): Promise<MessageDetail[]> {
  const groups = await api.get<GroupsAnswer>(`api/queues/${encodeURIComponent(queue)}/groups?refresh=1`);
  const key = groups.body.grouping?.groups[0]?.key as string;
  const r = await api.get<{ messages: MessageDetail[] }>(`api/queues/${encodeURIComponent(queue)}/groups/${key}/messages`);
  return r.body.messages;
}

/** The ids and bodies of the parked queue of `queue`, taken and put back in their order. */
async function parkedNow(queue: string): Promise<{ id?: string; body: string }[]> {
  return (await parkedMessages(queue)).map((m) => ({ id: m.properties.messageId, body: m.content.toString() }));
}

/** Parks `raw` (bytes as they are, of `contentType`) in `queue`'s parked queue with id `messageId`. */
async function parkRaw(queue: string, messageId: string, raw: string, contentType: string, failedAt?: string): Promise<void> {
  const ch = await (await amqpConnection()).createConfirmChannel();
  try {
    await ch.assertQueue(queue, { durable: true });
    await ch.assertQueue(parkedQueueName(queue), { durable: true });
    const headers = parkedHeaders(queue, { errorMessage: 'cannot read the order' });
    if (failedAt !== undefined) headers['retry-failed-at'] = failedAt;
    ch.sendToQueue(parkedQueueName(queue), Buffer.from(raw), { persistent: true, contentType, messageId, headers });
    await ch.waitForConfirms();
  } finally {
    await ch.close();
  }
}

const path = (queue: string) => `api/queues/${encodeURIComponent(queue)}/edit`;

describe('POST api/queues/<queue>/edit', () => {
  test('sends the message opened back with the fixed body, once, with who edited it; the rest stays parked in order', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, [
      { messageId: 'o1', body: { orderId: 1, qty: 'two' }, headers: { tenant: 'us', stale: 'x' } },
      { messageId: 'o2', body: { orderId: 2, qty: 'three' } },
    ]);
    const api = await consoleOf(rr, queue);
    const [first] = await opened(api, queue);
    expect(first.edit).toEqual({ editable: true, json: true, text: null, headers: { tenant: 'us', stale: 'x' } });
    expect(first.body.text).toBe('{\n  "orderId": 1,\n  "qty": "two"\n}');

    const r = await api.post<EditAnswer>(path(queue), {
      messageId: 'o1',
      key: first.key,
      by: 'ana@example.com',
      body: '{\n  "orderId": 1,\n  "qty": 2\n}',
      headers: { tenant: 'eu' },
      removeHeaders: ['stale'],
    });
    expect(r).toEqual({ status: 200, body: { messageId: 'o1', changed: ['body', 'header tenant', 'header stale'], queue, by: 'ana@example.com' } });
    expect(await parkedNow(queue)).toEqual([{ id: 'o2', body: '{"orderId":2,"qty":"three"}' }]);

    const calls: Message[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [] } }, async (msg: Message) => {
        calls.push(msg);
        if (typeof msg.json<{ qty: unknown }>().qty !== 'number') throw new NonRetryableError('qty must be a number');
      }),
    );
    await waitFor(() => consumer.stats().acked === 1, 10_000, 'the edited order handled');
    await sleep(300);
    expect(calls).toHaveLength(1);
    // The JSON goes without the spaces between its values.
    expect(calls[0].body.toString()).toBe('{"orderId":1,"qty":2}');
    expect(calls[0].properties).toMatchObject({ messageId: 'o1', contentType: 'application/json' });
    expect(calls[0].headers).toMatchObject({ tenant: 'eu', 'retry-edited-by': 'ana@example.com', 'retry-attempt': 0 });
    expect(calls[0].headers).not.toHaveProperty('stale');
    expect(await parkedNow(queue)).toEqual([{ id: 'o2', body: '{"orderId":2,"qty":"three"}' }]);
  });

  test('refuses, with a code and nothing moved: a body that is no longer JSON, a message changed since it was opened, an id not parked or shared', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, [
      { messageId: 'a', body: { n: 1 } },
      { messageId: 'twin', body: { n: 2 } },
      { messageId: 'twin', body: { n: 3 } },
    ]);
    const api = await consoleOf(rr, queue);
    const [a, twin] = await opened(api, queue);
    const before = await parkedNow(queue);
    const refusal = async (body: Record<string, unknown>) => {
      const r = await api.post<{ error: { code: string; message: string } }>(path(queue), body);
      return { status: r.status, code: r.body.error.code };
    };

    expect(await refusal({ messageId: 'a', key: a.key, by: 'ana', body: '{"n": 1,' })).toEqual({ status: 400, code: 'BODY_NOT_JSON' });
    // Not even when the request asks to send it as text: the original is JSON.
    expect(await refusal({ messageId: 'a', key: a.key, by: 'ana', body: 'n=1', asText: true })).toEqual({ status: 400, code: 'BODY_NOT_JSON' });
    expect(await refusal({ messageId: 'a', key: twin.key, by: 'ana', body: '{"n":9}' })).toEqual({ status: 409, code: 'MESSAGE_CHANGED' });
    expect(await refusal({ messageId: 'gone', key: a.key, by: 'ana', body: '{"n":9}' })).toEqual({ status: 404, code: 'NOT_PARKED' });
    expect(await refusal({ messageId: 'twin', key: twin.key, by: 'ana', body: '{"n":9}' })).toEqual({ status: 409, code: 'AMBIGUOUS_MESSAGE_ID' });
    expect(await refusal({ messageId: 'a', key: a.key, by: ' ', body: '{"n":9}' })).toEqual({ status: 400, code: 'BAD_REQUEST' });
    expect(await refusal({ messageId: 'a', key: a.key, by: 'ana' })).toEqual({ status: 400, code: 'BAD_REQUEST' });
    expect(await refusal({ messageId: 'a', key: a.key, by: 'ana', headers: { 'retry-attempt': 0 } })).toEqual({ status: 400, code: 'INVALID_OPTIONS' });

    expect(await parkedNow(queue)).toEqual(before);
    expect(await queueDepth(queue)).toBe(0);
  });

  test('a body the work queue refuses (its x-max-length-bytes, reject-publish) is PUBLISH_NACKED, and the message stays parked', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await seedParked(queue, [{ messageId: 'a', body: { n: 1 } }]);
    await deleteQueue(queue);
    await rr.declareQueue(queue, { arguments: { 'x-max-length-bytes': 100, 'x-overflow': 'reject-publish' } });
    const api = await consoleOf(rr, queue);
    const [a] = await opened(api, queue);
    const before = await parkedNow(queue);
    const r = await api.post<{ error: { code: string } }>(path(queue), {
      messageId: 'a',
      key: a.key,
      by: 'ana',
      body: JSON.stringify({ n: 'x'.repeat(1000) }),
    });
    expect({ status: r.status, code: r.body.error.code }).toEqual({ status: 502, code: 'PUBLISH_NACKED' });
    expect(await parkedNow(queue)).toEqual(before);
    expect(await queueDepth(queue)).toBe(0);
  });

  test('a body that was not JSON may be sent as text, only when the request says so', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    await parkRaw(queue, 'csv-1', 'id;qty\n1;two', 'text/csv');
    const api = await consoleOf(rr, queue);
    const [m] = await opened(api, queue);
    expect(m.edit).toMatchObject({ editable: true, json: false, text: null });
    const refused = await api.post<{ error: { code: string } }>(path(queue), { messageId: 'csv-1', key: m.key, by: 'ana', body: 'id;qty\n1;2' });
    expect({ status: refused.status, code: refused.body.error.code }).toEqual({ status: 400, code: 'BODY_NOT_JSON' });
    expect(await queueDepth(queue)).toBe(0);
    const sent = await api.post<EditAnswer>(path(queue), { messageId: 'csv-1', key: m.key, by: 'ana', body: 'id;qty\n1;2', asText: true });
    expect(sent.status).toBe(200);
    const [copy, ...more] = await drain(queue);
    expect(more).toHaveLength(0);
    expect(copy.content.toString()).toBe('id;qty\n1;2');
    expect(copy.properties.contentType).toBe('text/csv');
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });
});

describe("a queue's failure timeline", () => {
  test('counts the parked messages by group, per minute over the last hour and per hour over the last week, from when each parked', async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const now = Date.now();
    const minutesAgo = (m: number) => new Date(now - m * 60_000).toISOString();
    await seedParked(queue, [
      { messageId: 'a1', errorName: 'TypeError', errorMessage: 'no rate' },
      { messageId: 'a2', errorName: 'TypeError', errorMessage: 'no rate' },
    ]);
    await parkRaw(queue, 'b1', '{}', 'application/json', minutesAgo(30));
    await parkRaw(queue, 'b2', '{}', 'application/json', minutesAgo(3 * 60));
    await parkRaw(queue, 'b3', '{}', 'application/json', minutesAgo(9 * 24 * 60));
    const api = await consoleOf(rr, queue);
    const { grouping } = (await api.get<GroupsAnswer>(`api/queues/${encodeURIComponent(queue)}/groups?refresh=1`)).body;
    if (!grouping) throw new Error('no grouping');
    const keyOf = (errorName: string) => grouping.groups.find((g) => g.errorName === errorName)?.key;
    const { minute, hour } = grouping.timeline;

    expect(minute.groups.map((g) => [g.key, g.total])).toEqual([
      [keyOf('TypeError'), 2],
      [keyOf('Error'), 1],
    ]);
    expect(minute.groups[0].counts.slice(-2).reduce((a, b) => a + b, 0)).toBe(2);
    const thirty = minute.groups[1].counts.findIndex((c) => c > 0);
    expect(Math.abs(59 - thirty - 30)).toBeLessThanOrEqual(1);
    expect(minute).toMatchObject({ before: 2, undated: 0, buckets: 60 });
    expect(hour.groups.map((g) => [g.key, g.total])).toEqual([
      [keyOf('TypeError'), 2],
      [keyOf('Error'), 2],
    ]);
    expect(hour).toMatchObject({ before: 1, undated: 0, buckets: 168 });
    expect(Date.parse(hour.to) - Date.parse(hour.from)).toBe(168 * 3_600_000);
    expect(await queueDepth(parkedQueueName(queue))).toBe(5);
  });
});
