/**
 * The guard on the `tx` of an inbox group's handler (lib/inbox/tx-guard.ts),
 * without a database: which statements it reads as ending the transaction,
 * and what reaches the client. The group's behaviour against PostgreSQL is in
 * inbox-groups.test.ts.
 */
import { InboxError } from '../lib';
import { guardTx, statementHeads } from '../lib/inbox/tx-guard';
import type { PgClientLike, PgQueryResultLike } from '../lib/sql/transaction';

/** A client that records what it was sent, and fails what `fails` says. */
function fakeClient(fails: (text: string) => boolean = () => false) {
  const sent: string[] = [];
  const client = {
    sent,
    released: 0,
    query(q: unknown, ...rest: unknown[]): Promise<PgQueryResultLike> | undefined {
      const text = typeof q === 'string' ? q : String((q as { text?: string }).text);
      sent.push(text);
      const cb = rest[rest.length - 1];
      const err = fails(text) ? Object.assign(new Error('division by zero'), { code: '22012' }) : undefined;
      if (typeof cb === 'function') {
        process.nextTick(() => (cb as (e?: Error, r?: PgQueryResultLike) => void)(err, err ? undefined : { rows: [], rowCount: 0, command: 'SELECT' }));
        return undefined;
      }
      return err ? Promise.reject(err) : Promise.resolve({ rows: [], rowCount: 0, command: 'SELECT' });
    },
    release() {
      client.released++;
    },
    escapeLiteral: (s: string) => `'${s}'`,
  };
  return client;
}

/** Calls `tx.query` with arguments of any form node-postgres takes. */
function queryOf(tx: PgClientLike, args: unknown[]): unknown {
  return (tx as unknown as { query(...a: unknown[]): unknown }).query(...args);
}

describe('statementHeads', () => {
  it.each<[string, string[][]]>([
    ['COMMIT', [['COMMIT']]],
    ['  commit  ;', [['COMMIT']]],
    ['insert into t values (1); commit', [['INSERT', 'INTO', 'T'], ['COMMIT']]],
    ["SELECT 'x; COMMIT'", [['SELECT']]],
    ["SELECT 'it''s; COMMIT'; SELECT 2", [['SELECT'], ['SELECT']]],
    ["SELECT E'\\'; COMMIT'", [['SELECT']]],
    ["SELECT e'\\\\'; COMMIT", [['SELECT'], ['COMMIT']]],
    ['SELECT "a;""COMMIT" FROM t', [['SELECT']]],
    ['SELECT 1 -- ; COMMIT\n; ROLLBACK', [['SELECT'], ['ROLLBACK']]],
    ['/* a /* nested; */ COMMIT; */ SELECT x', [['SELECT', 'X']]],
    ['DO $$ BEGIN COMMIT; END $$', [['DO']]],
    ['DO $fn$ BEGIN COMMIT; $$ END $fn$; END', [['DO'], ['END']]],
    ['SELECT $1; COMMIT', [['SELECT'], ['COMMIT']]],
    ['SELECT a$b; COMMIT', [['SELECT', 'A$B'], ['COMMIT']]],
    ['ROLLBACK TO SAVEPOINT s', [['ROLLBACK', 'TO', 'SAVEPOINT']]],
    ['', []],
    [';;', []],
  ])('%j', (sql, heads) => {
    expect(statementHeads(sql)).toEqual(heads);
  });
});

describe('guardTx', () => {
  it.each([
    ['COMMIT', 'COMMIT'],
    ['commit and chain', 'COMMIT'],
    ['END', 'END'],
    ['ROLLBACK', 'ROLLBACK'],
    ['ROLLBACK AND CHAIN', 'ROLLBACK'],
    ['ABORT', 'ABORT'],
    ['BEGIN', 'BEGIN'],
    ['START TRANSACTION', 'START TRANSACTION'],
    ["PREPARE TRANSACTION 'g'", 'PREPARE TRANSACTION'],
    ['SELECT 1; COMMIT; BEGIN', 'COMMIT'],
    ['/* x */ -- y\n  commit', 'COMMIT'],
  ])('refuses %j without sending it', async (text, what) => {
    const client = fakeClient();
    const { tx, use } = guardTx(client as PgClientLike, 'c');
    await expect(tx.query(text)).rejects.toThrow(
      new InboxError(
        `inbox 'c': the handler's tx refused ${what}: the deliveries of an inbox group share one transaction, which the inbox ends; the statement was not sent`,
      ),
    );
    expect(client.sent).toEqual([]);
    expect(use).toMatchObject({ sent: 0, failed: false, refused: expect.any(InboxError) });
  });

  it.each([
    'ROLLBACK TO SAVEPOINT s',
    'rollback work to s',
    'ROLLBACK TRANSACTION TO SAVEPOINT s',
    'SAVEPOINT s',
    'RELEASE SAVEPOINT s',
    'PREPARE q AS SELECT 1',
    'START',
    "SELECT 'COMMIT'",
    'SET LOCAL statement_timeout = 1000',
  ])('sends %j', async (text) => {
    const client = fakeClient();
    const { tx, use } = guardTx(client as PgClientLike, 'c');
    await tx.query(text);
    expect(client.sent).toEqual([text]);
    expect(use).toMatchObject({ sent: 1, failed: false });
    expect(use.refused).toBeUndefined();
  });

  it('reads a query config, a named statement without its text, and a callback; refuses a query it cannot read', async () => {
    const client = fakeClient();
    const { tx, use } = guardTx(client as PgClientLike, 'c');
    const q = (...a: unknown[]): unknown => queryOf(tx, a);
    await q({ text: 'SELECT $1::int', values: [1] });
    await q({ name: 'prepared-before' });
    await expect(q({ text: 'COMMIT' })).rejects.toThrow(/refused COMMIT/);
    const viaCallback = await new Promise<unknown>((resolve) => q('COMMIT', (err: unknown) => resolve(err)));
    expect(viaCallback).toBeInstanceOf(InboxError);
    await expect(q({ values: [] })).rejects.toThrow(/has no text it can read/);
    expect(client.sent).toEqual(['SELECT $1::int', 'undefined']);
    expect(use.sent).toBe(2);
  });

  it("tells the group of a statement that failed, by promise or callback, and keeps the caller's answer as it was", async () => {
    const client = fakeClient((text) => text.includes('1 / 0'));
    const { tx, use } = guardTx(client as PgClientLike, 'c');
    await tx.query('SELECT 1');
    expect(use.failed).toBe(false);
    await expect(tx.query('SELECT 1 / 0')).rejects.toThrow('division by zero');
    expect(use).toMatchObject({ sent: 2, failed: true, abortedBefore: false, failure: expect.objectContaining({ code: '22012' }) });

    // A statement that finds the transaction aborted already is not the handler's own failure.
    const late = fakeClient(() => true);
    const after = guardTx(late as PgClientLike, 'c');
    late.query = (q: unknown) => {
      late.sent.push(String(q));
      return Promise.reject(Object.assign(new Error('current transaction is aborted'), { code: '25P02' }));
    };
    await expect(after.tx.query('SELECT 2')).rejects.toThrow('current transaction is aborted');
    expect(after.use).toMatchObject({ sent: 1, failed: false, abortedBefore: true });
    expect(after.use.failure).toBeUndefined();

    const other = guardTx(client as PgClientLike, 'c');
    const q = (...a: unknown[]): unknown => queryOf(other.tx, a);
    const err = await new Promise<unknown>((resolve) => q('SELECT 1 / 0', [], (e: unknown) => resolve(e)));
    expect(err).toMatchObject({ code: '22012' });
    expect(other.use.failed).toBe(true);
  });

  it("refuses release(), and every query once the handler's turn ended; passes the client's other members through", async () => {
    const client = fakeClient();
    const { tx, end } = guardTx(client as PgClientLike, 'c');
    expect(() => tx.release()).toThrow(/tx of an inbox group is the group's client/);
    expect(client.released).toBe(0);
    expect((tx as unknown as { escapeLiteral(s: string): string }).escapeLiteral('x')).toBe("'x'");
    end();
    await expect(tx.query('SELECT 1')).rejects.toThrow(/tx was used after the handler's turn in its group ended/);
    expect(client.sent).toEqual([]);
  });
});
