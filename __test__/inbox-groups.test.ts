/**
 * The inbox's groups (`inbox: { pool, group }`) against the machine's PostgreSQL
 * and broker, beyond what every test of inbox.test.ts checks with groups of 10:
 * deliveries handed over together share a transaction, and a handler that
 * throws, goes on after a failed statement, never settles, or ends the
 * transaction costs only what it must. One database `rr_test_<random>` per run.
 */
import { Pool, type PoolClient } from 'pg';

import { type Delay, retryQueueName } from '../lib';
import { closeAmqp, cleanup, connectClient, createTestDatabase, dropTestDatabase, pgUrl, sleep, testQueue, track, waitFor, withChannel } from './helpers';
import { createEffects, effectsOf, inboxIdsOf, settled } from './inbox-fixture';

let db = '';
let pool: Pool;

beforeAll(() => {
  db = createTestDatabase('inbox_groups');
  createEffects(db);
  pool = new Pool({ connectionString: pgUrl(db), max: 20 });
});

afterEach(cleanup);

afterAll(async () => {
  await pool.end();
  await closeAmqp();
  dropTestDatabase(db);
});

describe('inbox groups (inbox.group)', () => {
  /**
   * Ten messages `<queue>-0` to `<queue>-9`, waiting in `queue` before its consumer starts, so that they are
   * handed over together; the handler writes each one's effect with its transaction's id as the note, calls
   * `twist` on its first attempt, and counts its calls.
   */
  async function groupRun(queue: string, twist: (id: string, tx: PoolClient) => Promise<void>, groupTimeout?: Delay) {
    const rr = await connectClient();
    const ids = Array.from({ length: 10 }, (_, i) => `${queue}-${i}`);
    // The topology, declared by a first start of the consumer.
    await (await rr.consume({ queue, onFailure: { delays: ['200ms'] }, inbox: { pool } }, () => undefined)).close();
    for (const id of ids) await rr.publish('', queue, 'x', { messageId: id });
    await waitFor(async () => (await withChannel((ch) => ch.checkQueue(queue))).messageCount === 10, 5_000, 'ten waiting');
    const calls = new Map<string, number>();
    const errors: string[] = [];
    const consumer = track(
      await rr.consume({ queue, prefetch: 10, onFailure: { delays: ['200ms'] }, inbox: { pool, group: 10, groupTimeout } }, async (msg, { tx }) => {
        const id = msg.properties.messageId ?? '?';
        calls.set(id, (calls.get(id) ?? 0) + 1);
        await tx.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, txid_current()::text)', [id, queue]);
        if (msg.attempt === 0) await twist(id, tx);
      }),
    );
    consumer.on('error', (e) => errors.push(e.message));
    const retried: string[] = [];
    consumer.on('retry', (e) => retried.push(`${e.messageId ?? '?'}: ${e.error}`));
    await waitFor(() => effectsOf(db, queue).length === 10, 15_000, 'ten effects');
    await settled(queue);
    await settled(retryQueueName(queue, '200ms'));
    return { ids, calls, errors, retried, consumer, effects: effectsOf(db, queue) };
  }

  it('deliveries handed over together share a transaction; a handler that throws rolls back its own work only, and no other handler runs twice', async () => {
    const queue = testQueue(['200ms']);
    const { ids, calls, effects } = await groupRun(queue, async (id) => {
      if (id.endsWith('-3')) throw new Error('carrier down');
    });
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(ids.map((id) => calls.get(id))).toEqual([1, 1, 1, 2, 1, 1, 1, 1, 1, 1]);
    // The nine handled at the first attempt committed in fewer transactions than nine.
    const first = effects.filter((e) => !e.id.endsWith('-3')).map((e) => e.note);
    expect(new Set(first).size).toBeLessThan(9);
    expect(inboxIdsOf(db, queue)).toEqual([...ids].sort());
  });

  it('a handler that went on after a failed statement: its message is tried again with an InboxError, the others of its group commit once', async () => {
    const queue = testQueue(['200ms']);
    const { ids, calls, effects, errors } = await groupRun(queue, async (id, tx) => {
      if (id.endsWith('-2')) await tx.query('SELECT 1 / 0').catch(() => undefined);
    });
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(ids.map((id) => calls.get(id))).toEqual([1, 1, 2, 1, 1, 1, 1, 1, 1, 1]);
    expect(errors).toEqual([
      expect.stringMatching(/^inbox '.*': the handler's transaction was rolled back: a statement in it failed and the handler went on/),
    ]);
  });

  it('a handler that does not settle within groupTimeout costs its group a retry, not a stall: every message has its effect once', async () => {
    const queue = testQueue(['200ms']);
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const { ids, calls, effects, retried } = await groupRun(
      queue,
      async (id) => {
        if (id.endsWith('-5')) await stuck;
      },
      '300ms',
    );
    release();
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(retried.find((r) => r.startsWith(`${queue}-5: `))).toMatch(
      /did not settle within inbox\.groupTimeout \(300 ms\), and its group's transaction was abandoned/,
    );
    // Those its transaction held are tried again; none runs more than twice, and the stuck one's late end commits nothing.
    expect(Math.max(...ids.map((id) => calls.get(id) ?? 0))).toBe(2);
    await sleep(300);
    expect(effectsOf(db, queue)).toHaveLength(10);
  });

  it.each(['COMMIT', 'ROLLBACK'])('a handler that ends the shared transaction (%s through tx): every message still has its effect once', async (end) => {
    const queue = testQueue(['200ms']);
    const { ids, effects, errors, calls } = await groupRun(queue, async (id, tx) => {
      if (id.endsWith('-4')) await tx.query(end);
    });
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(inboxIdsOf(db, queue)).toEqual([...ids].sort());
    expect(errors).toContainEqual(expect.stringMatching(/the handler ended the transaction itself/));
    // After a COMMIT, the messages it committed are duplicates when tried again; after a ROLLBACK, they are handled again.
    const again = ids.filter((id) => (calls.get(id) ?? 0) > 1);
    if (end === 'COMMIT') expect(again).toEqual([]);
    else expect(again.length).toBeGreaterThan(0);
  });
});
