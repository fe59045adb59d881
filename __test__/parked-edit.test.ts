/**
 * `rr.parked(queue).edit()` and `rabbit-retry parked edit`: one parked
 * message, its body or headers fixed, sent back to its work queue once, with
 * who, when and what changed in its headers; nothing else moves, and what
 * cannot be edited is refused with a code, nothing moved.
 */
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { type Message, NonRetryableError, type RabbitRetry, parkedQueueName } from '../lib';
import { deleteQueue } from './broker';
import { runCli } from './cli-run';
import { type GotMessage, cleanup, closeAmqp, connectClient, drain, parkedNow, queueDepth, seedParked, sleep, testQueue, track, waitFor } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface Order {
  orderId: number;
  qty: unknown;
}

/** A consumer of `queue` whose handler parks an order whose `qty` is not a number, and records every call. */
async function orders(rr: RabbitRetry, queue: string) {
  const calls: { body: Order; headers: Record<string, unknown>; messageId?: string; correlationId?: string }[] = [];
  const consumer = track(
    await rr.consume({ queue, onFailure: { delays: ['1s'] } }, async function shipOrder(msg: Message) {
      const body = msg.json<Order>();
      calls.push({ body, headers: msg.headers, messageId: msg.properties.messageId, correlationId: msg.properties.correlationId });
      if (typeof body.qty !== 'number') throw new NonRetryableError(`order ${body.orderId}: qty must be a number`);
    }),
  );
  return { consumer, calls };
}

/** Parks `n` orders o0..o(n-1) through a real consumer (each with a bad `qty`), and closes it. */
async function parkOrders(rr: RabbitRetry, queue: string, n: number): Promise<void> {
  const { consumer } = await orders(rr, queue);
  for (let i = 0; i < n; i++) {
    await rr.publish('', queue, { orderId: i, qty: 'two' }, { messageId: `o${i}`, correlationId: `c${i}`, headers: { tenant: 'us', stale: 'x' } });
  }
  await waitFor(() => consumer.stats().parked === n, 10_000, `${n} parked orders`);
  await consumer.close();
}

const view = (ms: readonly GotMessage[]) => ms.map((m) => ({ id: m.properties.messageId, body: m.content.toString(), headers: m.headers }));

describe('edit()', () => {
  it('sends the edited body to the handler once, with the audit trail, and leaves the rest parked in order', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await parkOrders(rr, queue, 5);
    const before = view(await parkedNow(queue));

    const result = await rr
      .parked(queue)
      .edit('o2', { body: { orderId: 2, qty: 2 }, headers: { tenant: 'eu', stale: undefined } }, { by: 'ana@example.com' });
    expect(result).toEqual({ messageId: 'o2', changed: ['body', 'header tenant', 'header stale'], queue });
    expect(await queueDepth(parkedQueueName(queue))).toBe(4);
    expect(view(await parkedNow(queue))).toEqual(before.filter((m) => m.id !== 'o2'));

    const { consumer, calls } = await orders(rr, queue);
    await waitFor(() => consumer.stats().acked === 1, 10_000, 'the edited order handled');
    await sleep(300);
    expect(calls).toHaveLength(1);
    const [call] = calls;
    expect(call.body).toEqual({ orderId: 2, qty: 2 });
    expect(call.messageId).toBe('o2');
    expect(call.correlationId).toBe('c2');
    expect(call.headers.tenant).toBe('eu');
    expect(call.headers).not.toHaveProperty('stale');
    expect(call.headers['retry-attempt']).toBe(0);
    expect(call.headers['retry-edited-by']).toBe('ana@example.com');
    expect(call.headers['retry-edited-at']).toMatch(ISO_8601);
    expect(call.headers['retry-edits']).toEqual([
      { by: 'ana@example.com', at: call.headers['retry-edited-at'], changed: ['body', 'header tenant', 'header stale'] },
    ]);
    expect(consumer.stats().parked).toBe(0);
    expect(await queueDepth(parkedQueueName(queue))).toBe(4);
  });

  it('keeps the trail of every edit: a copy that parks again and is edited again carries both', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await parkOrders(rr, queue, 1);
    await rr.parked(queue).edit('o0', { body: { orderId: 0, qty: 'still wrong' } }, { by: 'ana' });
    const { consumer, calls } = await orders(rr, queue);
    await waitFor(() => consumer.stats().parked === 1, 10_000, 'the first edit parked again');
    await rr.parked(queue).edit('o0', { body: { orderId: 0, qty: 1 } }, { by: 'bo' });
    await waitFor(() => consumer.stats().acked === 1, 10_000, 'the second edit handled');
    expect(calls.map((c) => c.body.qty)).toEqual(['still wrong', 1]);
    const edits = calls[1].headers['retry-edits'] as { by: string; changed: string[] }[];
    expect(edits.map((e) => [e.by, e.changed])).toEqual([
      ['ana', ['body']],
      ['bo', ['body']],
    ]);
    expect(calls[1].headers['retry-edited-by']).toBe('bo');
  });

  it('refuses an id no parked message has, or several have, with a code, and moves nothing', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await expect(rr.parked(queue).edit('o1', { body: 'x' }, { by: 'ana' })).rejects.toMatchObject({ code: 'NOT_PARKED' });
    await seedParked(queue, [
      { messageId: 'a', body: { n: 1 } },
      { messageId: 'twin', body: { n: 2 } },
      { messageId: 'b', body: { n: 3 } },
      { messageId: 'twin', body: { n: 4 } },
    ]);
    const before = view(await parkedNow(queue));
    await expect(rr.parked(queue).edit('missing', { body: 'x' }, { by: 'ana' })).rejects.toMatchObject({
      code: 'NOT_PARKED',
      message: expect.stringContaining('looked at 4') as unknown,
    });
    await expect(rr.parked(queue).edit('twin', { body: 'x' }, { by: 'ana' })).rejects.toMatchObject({
      code: 'AMBIGUOUS_MESSAGE_ID',
      message: expect.stringContaining('messages 2 and 4') as unknown,
    });
    expect(view(await parkedNow(queue))).toEqual(before);
    expect(await queueDepth(queue)).toBe(0);
  });

  it('refuses an edit it cannot make, before any message is touched', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await seedParked(queue, [{ messageId: 'a', body: { n: 1 } }]);
    const parked = rr.parked(queue);
    const refused = [
      () => parked.edit('a', {}, { by: 'ana' }),
      () => parked.edit('a', { body: 'x' }, { by: '' }),
      () => parked.edit('a', { body: 'x' }, {} as { by: string }),
      () => parked.edit('', { body: 'x' }, { by: 'ana' }),
      () => parked.edit('a', { body: 10n as unknown as object }, { by: 'ana' }),
      () => parked.edit('a', { headers: { 'retry-attempt': 0 } }, { by: 'ana' }),
      () => parked.edit('a', { headers: { 'x-death': undefined } }, { by: 'ana' }),
      () => parked.edit('a', { headers: { CC: ['other'] } }, { by: 'ana' }),
      () => parked.edit('a', { headers: { when: new Date() } }, { by: 'ana' }),
      () => parked.edit('a', { body: 'x', qty: 2 } as { body: string }, { by: 'ana' }),
    ];
    for (const call of refused) await expect(call()).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
    expect(await queueDepth(parkedQueueName(queue))).toBe(1);
    expect(await queueDepth(queue)).toBe(0);
  });

  it('leaves the message parked when the work queue refuses the edited copy', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await seedParked(queue, [
      { messageId: 'a', body: { n: 1 } },
      { messageId: 'b', body: { n: 2 } },
    ]);
    // A work queue that takes no more than 100 bytes of bodies, and refuses a publish beyond them.
    await deleteQueue(queue);
    await rr.declareQueue(queue, { arguments: { 'x-max-length-bytes': 100, 'x-overflow': 'reject-publish' } });
    const before = view(await parkedNow(queue));
    await expect(rr.parked(queue).edit('a', { body: { n: 1, note: 'x'.repeat(1000) } }, { by: 'ana' })).rejects.toMatchObject({ code: 'PUBLISH_NACKED' });
    const after = await parkedNow(queue);
    expect(view(after)).toEqual(before);
    expect(await queueDepth(queue)).toBe(0);
  });
});

describe('rabbit-retry parked edit', () => {
  const cli = runCli;

  it('sends the file as the body, sets and removes headers, and says what it did', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    await seedParked(queue, [
      { messageId: 'a', body: { n: 1 }, headers: { tenant: 'us', stale: 'x' } },
      { messageId: 'b', body: { n: 2 } },
    ]);
    const file = join(tmpdir(), `${queue}.json`);
    await writeFile(file, '{"n":10}');
    const r = await cli(['parked', 'edit', queue, 'a', '--body-file', file, '--header', 'tenant=eu', '--remove-header', 'stale', '--by', 'ana']);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toBe(
      `edited a (changed: body, header tenant, header stale) and sent it to ${queue}; the other parked messages stay in ${parkedQueueName(queue)}`,
    );
    const [sent, ...more] = await drain(queue);
    expect(more).toHaveLength(0);
    expect(sent.content.toString()).toBe('{"n":10}');
    expect(sent.properties.messageId).toBe('a');
    expect(sent.headers).toMatchObject({ tenant: 'eu', 'retry-edited-by': 'ana', 'retry-attempt': 0 });
    expect(sent.headers).not.toHaveProperty('stale');
    expect((await parkedNow(queue)).map((m) => m.properties.messageId)).toEqual(['b']);
    await rr.close();
  });

  it('prints JSON with --json, and the code of a refusal', async () => {
    const queue = testQueue();
    await seedParked(queue, [{ messageId: 'a', body: { n: 1 } }]);
    const ok = await cli(['--json', 'parked', 'edit', queue, 'a', '--header', 'tenant=eu', '--by', 'ana']);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.out)).toEqual({ messageId: 'a', changed: ['header tenant'], queue, parkedQueue: parkedQueueName(queue), by: 'ana' });
    const missing = await cli(['parked', 'edit', queue, 'a', '--header', 'tenant=eu', '--by', 'ana']);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('error [NOT_PARKED]');
    const noEdit = await cli(['parked', 'edit', queue, 'a', '--by', 'ana']);
    expect(noEdit.code).toBe(2);
    const noBy = await cli(['parked', 'edit', queue, 'a', '--header', 'x=1']);
    expect(noBy.code).toBe(2);
  });
});
