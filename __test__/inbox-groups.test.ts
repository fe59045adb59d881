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
  async function groupRun(queue: string, twist: (id: string, tx: PoolClient) => Promise<void>, groupTimeout?: Delay, twistFirst = false) {
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
        if (twistFirst && msg.attempt === 0) await twist(id, tx);
        await tx.query('INSERT INTO effects (id, queue, note) VALUES ($1, $2, txid_current()::text)', [id, queue]);
        if (!twistFirst && msg.attempt === 0) await twist(id, tx);
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

  it('deliveries handed over together share a transaction; a handler that throws before writing costs no other handler a second call', async () => {
    const queue = testQueue(['200ms']);
    const { ids, calls, effects } = await groupRun(
      queue,
      async (id) => {
        if (id.endsWith('-3')) throw new Error('carrier down');
      },
      undefined,
      true,
    );
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(ids.map((id) => calls.get(id))).toEqual([1, 1, 1, 2, 1, 1, 1, 1, 1, 1]);
    // The nine handled at the first attempt committed in fewer transactions than nine.
    const first = effects.filter((e) => !e.id.endsWith('-3')).map((e) => e.note);
    expect(new Set(first).size).toBeLessThan(9);
    expect(inboxIdsOf(db, queue)).toEqual([...ids].sort());
  });

  it('a handler that throws after writing: its work is rolled back and its message retried; the others of its group run again under savepoints and commit once', async () => {
    const queue = testQueue(['200ms']);
    const { ids, calls, effects, retried } = await groupRun(queue, async (id) => {
      if (id.endsWith('-3')) throw new Error('carrier down');
    });
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(inboxIdsOf(db, queue)).toEqual([...ids].sort());
    expect(retried).toEqual([`${queue}-3: carrier down`]);
    // Once at its first attempt, once at its retry; no handler is called more than twice for one delivery.
    expect(calls.get(`${queue}-3`)).toBe(2);
    expect(Math.max(...ids.map((id) => calls.get(id) ?? 0))).toBe(2);
    // Those after it in its group are called once.
    expect(ids.slice(4).map((id) => calls.get(id))).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it('a handler that went on after a failed statement: its message is tried again with an InboxError, the others of its group commit once', async () => {
    const queue = testQueue(['200ms']);
    const { ids, calls, effects, errors } = await groupRun(queue, async (id, tx) => {
      if (id.endsWith('-2')) await tx.query('SELECT 1 / 0').catch(() => undefined);
    });
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(inboxIdsOf(db, queue)).toEqual([...ids].sort());
    expect(calls.get(`${queue}-2`)).toBe(2);
    expect(Math.max(...ids.map((id) => calls.get(id) ?? 0))).toBe(2);
    expect(ids.slice(3).map((id) => calls.get(id))).toEqual([1, 1, 1, 1, 1, 1, 1]);
    expect(errors).toEqual([
      expect.stringMatching(
        /^inbox '.*': the handler's transaction was rolled back: a statement in it failed and the handler went on \(division by zero\)/,
      ),
    ]);
  });

  it('a handler that leaves a failing statement behind it: the handler after it, which finds the transaction aborted, is not blamed', async () => {
    const queue = testQueue(['200ms']);
    const { ids, calls, effects, errors, retried } = await groupRun(queue, async (id, tx) => {
      // Not awaited: it fails after the handler resolved, while the next handler runs.
      if (id.endsWith('-2')) void tx.query('SELECT pg_sleep(0.05), 1 / 0').catch(() => undefined);
    });
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(inboxIdsOf(db, queue)).toEqual([...ids].sort());
    expect(retried).toEqual([
      expect.stringMatching(new RegExp(`^${queue}-2: inbox '.*': the handler's transaction was rolled back: a statement in it failed`)),
    ]);
    expect(errors).toEqual([
      expect.stringMatching(/^inbox '.*': the handler's transaction was rolled back: a statement in it failed and the handler went on/),
    ]);
    // Its delivery ran twice (the group's first try, then under savepoints, where its failure was found its own), then its retry.
    expect(calls.get(`${queue}-2`)).toBe(3);
    expect(Math.max(...ids.filter((id) => !id.endsWith('-2')).map((id) => calls.get(id) ?? 0))).toBe(2);
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

  it.each(['COMMIT', 'ROLLBACK', 'end', 'begin; select 1', "PREPARE TRANSACTION 'x'", '/* c */ ROLLBACK AND CHAIN'])(
    "a handler's tx refuses a statement that would end the shared transaction (%s): nothing is sent, the handler and the consumer hear of it, and every message still has its effect once",
    async (end) => {
      const queue = testQueue(['200ms']);
      const { ids, effects, errors, retried } = await groupRun(queue, async (id, tx) => {
        if (id.endsWith('-4')) await tx.query(end);
      });
      expect(effects.map((e) => e.id)).toEqual([...ids].sort());
      expect(inboxIdsOf(db, queue)).toEqual([...ids].sort());
      const refusal =
        /^inbox '.*': the handler's tx refused [A-Z ]+: the deliveries of an inbox group share one transaction, which the inbox ends; the statement was not sent$/;
      expect(errors).toEqual([expect.stringMatching(refusal)]);
      expect(retried).toEqual([expect.stringMatching(new RegExp(`^${queue}-4: inbox '`))]);
    },
  );

  it("a handler's tx lets through statements that only mention an end: in strings, identifiers, comments, dollar quotes, savepoints of its own", async () => {
    const queue = testQueue(['200ms']);
    const { ids, effects, errors, retried, calls } = await groupRun(queue, async (id, tx) => {
      await tx.query(`SELECT 'COMMIT; ROLLBACK' AS "end;commit", E'\\'; COMMIT' AS e -- ; COMMIT`);
      await tx.query('/* COMMIT; /* nested; */ ROLLBACK */ SELECT $1::text AS a', ['; COMMIT']);
      await tx.query(`DO $body$ BEGIN PERFORM 1; END $body$`);
      await tx.query('SAVEPOINT mine; ROLLBACK TO SAVEPOINT mine; RELEASE mine');
      await tx.query({ text: 'SELECT $1::text AS b', values: [id] });
    });
    expect(errors).toEqual([]);
    expect(retried).toEqual([]);
    expect(effects.map((e) => e.id)).toEqual([...ids].sort());
    expect(ids.map((id) => calls.get(id))).toEqual(ids.map(() => 1));
  });

  it('a copy in another group while the first is in flight waits for it, and is a duplicate: its handler is not called', async () => {
    const first = testQueue();
    const second = testQueue();
    const name = `${first}-both`;
    const rr = await connectClient();
    const calls: string[] = [];
    let entered: () => void = () => undefined;
    const inFirst = new Promise<void>((resolve) => (entered = resolve));
    const handler =
      (queue: string) =>
      async (msg: { properties: { messageId?: string } }, { tx }: { tx: PoolClient }) => {
        calls.push(queue);
        await tx.query('INSERT INTO effects (id, queue) VALUES ($1, $2)', [msg.properties.messageId, first]);
        if (queue === first) {
          entered();
          await sleep(500);
        }
      };
    const a = track(await rr.consume({ queue: first, inbox: { pool, group: 10, consumer: name } }, handler(first)));
    const b = track(await rr.consume({ queue: second, inbox: { pool, group: 10, consumer: name } }, handler(second)));
    let duplicates = 0;
    b.on('duplicate', () => duplicates++);
    await rr.publish('', first, 'x', { messageId: `${first}-m` });
    await inFirst;
    await rr.publish('', second, 'x', { messageId: `${first}-m` });
    await waitFor(() => duplicates === 1, 10_000, 'the second copy counted a duplicate');
    await settled(first);
    await settled(second);
    expect(calls).toEqual([first]);
    expect(effectsOf(db, first).map((e) => e.id)).toEqual([`${first}-m`]);
    expect(a.stats()).toMatchObject({ acked: 1 });
  });

  it('two copies of one message in one group: the second waits for the first, and is a duplicate', async () => {
    const queue = testQueue(['200ms']);
    const rr = await connectClient();
    await (await rr.consume({ queue, inbox: { pool } }, () => undefined)).close();
    for (const id of ['a', 'b', 'a', 'c', 'a']) await rr.publish('', queue, 'x', { messageId: `${queue}-${id}` });
    await waitFor(async () => (await withChannel((ch) => ch.checkQueue(queue))).messageCount === 5, 5_000, 'five waiting');
    const calls = new Map<string, number>();
    let duplicates = 0;
    const consumer = track(
      await rr.consume({ queue, prefetch: 10, inbox: { pool, group: 10 } }, async (msg, { tx }) => {
        const id = msg.properties.messageId ?? '?';
        calls.set(id, (calls.get(id) ?? 0) + 1);
        await tx.query('INSERT INTO effects (id, queue) VALUES ($1, $2)', [id, queue]);
      }),
    );
    consumer.on('duplicate', () => duplicates++);
    await waitFor(() => duplicates === 2, 10_000, 'two duplicates');
    await settled(queue);
    expect(effectsOf(db, queue).map((e) => e.id)).toEqual([`${queue}-a`, `${queue}-b`, `${queue}-c`]);
    expect([...calls.values()]).toEqual([1, 1, 1]);
  });
});
