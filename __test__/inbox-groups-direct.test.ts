/**
 * The groups of one consumer's inbox (lib/inbox/pg-groups.ts), driven
 * without a broker against the machine's PostgreSQL: the deliveries are
 * handed over directly, so that which of them share a group is known. The
 * groups behind a consumer and a broker are in inbox-groups.test.ts. One
 * database `rr_test_<random>` per run.
 */
import { randomUUID } from 'node:crypto';

import { Pool, type PoolClient } from 'pg';

import { migrateTables, pgAdapter } from '../lib';
import { InboxGroups, SAVEPOINT_SPELL } from '../lib/inbox/pg-groups';
import type { PgClientLike } from '../lib/sql/transaction';
import { createTestDatabase, dropTestDatabase, pgUrl } from './helpers';
import { createEffects, effectsOf, inboxIdsOf } from './inbox-fixture';

let db = '';
let pool: Pool;

beforeAll(async () => {
  db = createTestDatabase('inbox_groups_direct');
  createEffects(db);
  pool = new Pool({ connectionString: pgUrl(db), max: 5 });
  await migrateTables(pgAdapter(pool));
});

afterAll(async () => {
  await pool.end();
  dropTestDatabase(db);
});

describe('the groups of one consumer', () => {
  const consumer = `direct-${randomUUID().slice(0, 8)}`;
  let groups: InboxGroups;
  // Each test with the groups of a consumer of its own, as a consumer that just started.
  beforeEach(() => {
    groups = new InboxGroups(pool, 10, { consumer, timeoutMs: 5_000, broke: () => undefined });
  });
  const calls = new Map<string, number>();

  /**
   * Hands over `<prefix>-0` to `<prefix>-<n-1>` in one turn (one group, up to 10): each handler writes its
   * effect; the one at `throwAt` then throws. Resolves to each one's outcome.
   */
  function handOver(prefix: string, n: number, throwAt?: number): Promise<string[]> {
    const keys = Array.from({ length: n }, (_, i) => `${consumer}-${prefix}-${i}`);
    return Promise.all(
      keys.map(
        (key, i) =>
          new Promise<string>((resolve) => {
            groups.add({
              key,
              run: async (tx: PgClientLike) => {
                calls.set(key, (calls.get(key) ?? 0) + 1);
                await (tx as unknown as PoolClient).query('INSERT INTO effects (id, queue) VALUES ($1, $2)', [key, consumer]);
                if (i === throwAt) throw new Error('after writing');
              },
              resolve: (fresh) => resolve(fresh ? 'committed' : 'duplicate'),
              reject: (err: unknown) => resolve(`failed: ${err instanceof Error ? err.message : String(err)}`),
            });
          }),
      ),
    );
  }

  const callsOf = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => calls.get(`${consumer}-${prefix}-${i}`) ?? 0);

  it('a first try rolled back by a handler that threw after writing runs the handlers before it again; the groups after it run under savepoints, then first tries again', async () => {
    // A first try: a-3 rolls back the group, and a-0 to a-2 run again under savepoints.
    expect(await handOver('a', 6, 3)).toEqual(['committed', 'committed', 'committed', 'failed: after writing', 'committed', 'committed']);
    expect(callsOf('a', 6)).toEqual([2, 2, 2, 1, 1, 1]);

    // Under savepoints: b-3's failure is its own, and nobody runs twice.
    expect(await handOver('b', 6, 3)).toEqual(['committed', 'committed', 'committed', 'failed: after writing', 'committed', 'committed']);
    expect(callsOf('b', 6)).toEqual([1, 1, 1, 1, 1, 1]);

    // The rest of the spell, a group each.
    for (let g = 1; g < SAVEPOINT_SPELL; g++) expect(await handOver(`s${g}`, 1)).toEqual(['committed']);

    // First tries again.
    expect(await handOver('c', 6, 3)).toEqual(['committed', 'committed', 'committed', 'failed: after writing', 'committed', 'committed']);
    expect(callsOf('c', 6)).toEqual([2, 2, 2, 1, 1, 1]);

    // Every message handled has its effect and its key once; the ones that threw have neither.
    const handled = [...calls.keys()].filter((k) => !k.endsWith('-3')).sort();
    expect(effectsOf(db, consumer).map((e) => e.id)).toEqual(handled);
    expect(inboxIdsOf(db, consumer)).toEqual(handled);
  });

  it('a handler that throws before writing costs no other handler a second call, and starts no spell of savepoints', async () => {
    const outcomes = await Promise.all([
      handOver('d', 3),
      new Promise<string>((resolve) => {
        groups.add({
          key: `${consumer}-d-x`,
          run: () => {
            throw new Error('before writing');
          },
          resolve: () => resolve('committed'),
          reject: (err: unknown) => resolve(`failed: ${err instanceof Error ? err.message : String(err)}`),
        });
      }),
    ]);
    expect(outcomes).toEqual([['committed', 'committed', 'committed'], 'failed: before writing']);
    expect(await handOver('e', 6, 3)).toEqual(['committed', 'committed', 'committed', 'failed: after writing', 'committed', 'committed']);
    // Still a first try: e-0 to e-2 ran again.
    expect(callsOf('e', 6)).toEqual([2, 2, 2, 1, 1, 1]);
  });
});
