/**
 * A pool handed to the inbox never ends the process through an idle client's
 * error. The guide's own example (docs/inbox-outbox.md, "Turning it on": a
 * `new Pool({ connectionString })` with no `error` listener, `inbox: { pool }`)
 * runs as written in a child process; its pool's idle backends are terminated
 * from another connection, and the process must live on and handle the next
 * message, its effect committed once. The same with `pgAdapter(pool)`. One
 * database `rr_test_<random>` per run.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import {
  type Script,
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  dropTestDatabase,
  pgUrl,
  psql,
  psqlRows,
  startScript,
  testQueue,
  waitFor,
} from './helpers';
import { settled } from './inbox-fixture';

const ROOT = path.resolve(__dirname, '..');

let db = '';
let dir = '';

beforeAll(() => {
  db = createTestDatabase('inbox_pool');
  psql('CREATE TABLE payments (order_id text NOT NULL, amount numeric NOT NULL)', db);
  dir = mkdtempSync(path.join(tmpdir(), 'rr-guide-'));
});

afterEach(cleanup);

afterAll(async () => {
  await closeAmqp();
  dropTestDatabase(db);
  rmSync(dir, { recursive: true, force: true });
});

/** The guide's example of "Turning it on", as the guide shows it. */
function guideExample(): string {
  const guide = readFileSync(path.join(ROOT, 'docs', 'inbox-outbox.md'), 'utf8');
  const section = guide.slice(guide.indexOf('\n## Turning it on\n'));
  const block = /```ts\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error("no code block under 'Turning it on' in docs/inbox-outbox.md");
  return block[1];
}

/**
 * The example as a script: its imports of the package read from lib/, its
 * top-level awaits in an async function (the tests run CommonJS), its queue
 * named for the test, and `ready` printed once it consumes. `change` turns
 * it into a variant.
 */
function scriptOf(queue: string, change: (code: string) => string = (c) => c): string {
  const code = change(guideExample());
  expect(code).toContain("'payments.requested'");
  const lines = code.split('\n');
  const imports = lines.filter((l) => l.startsWith('import ')).map((l) => l.replace("'rabbit-retry'", JSON.stringify(path.join(ROOT, 'lib'))));
  const body = lines.filter((l) => !l.startsWith('import ')).join('\n');
  const file = path.join(dir, `${queue}.ts`);
  writeFileSync(
    file,
    `${imports.join('\n')}\n\nvoid (async () => {\n${body.replaceAll("'payments.requested'", JSON.stringify(queue))}\nprocess.stdout.write('ready\\n');\n})().catch((err: unknown) => {\n  console.error(err);\n  process.exit(1);\n});\n`,
  );
  return file;
}

/** The payments the example's handler committed for `orderId`. */
function payments(orderId: string): { order_id: string; amount: number }[] {
  return psqlRows(`SELECT order_id, amount FROM payments WHERE order_id = '${orderId}'`, db);
}

const variants: [string, (code: string) => string][] = [
  ['the example as written (inbox: { pool })', (c) => c],
  [
    'the example with pgAdapter(pool)',
    (c) =>
      c
        .replace("import { RabbitRetry } from 'rabbit-retry';", "import { RabbitRetry, pgAdapter } from 'rabbit-retry';")
        .replace('inbox: { pool }', 'inbox: { adapter: pgAdapter(pool) }'),
  ],
];

it.each(variants)(
  "%s: the pool's idle backends terminated, the process lives and handles the next message, its effect committed once",
  async (_, change) => {
    const queue = testQueue();
    const app = `rr-guide-${queue}`.slice(0, 63);
    let script: Script | undefined;
    try {
      script = startScript(scriptOf(queue, change), [], {
        DATABASE_URL: `${pgUrl(db)}?application_name=${app}`,
        NODE_PATH: path.join(ROOT, 'node_modules'),
      });
      const child = script;
      await waitFor(() => child.stdout().includes('ready') || child.child.exitCode !== null, 30_000, 'the example to consume');
      expect(child.stderr()).toBe('');
      const rr = await connectClient();
      await rr.publish('', queue, { orderId: `${queue}-1`, amount: 10 }, { messageId: `${queue}-pay-1` });
      await waitFor(() => payments(`${queue}-1`).length === 1, 10_000, 'the first payment');
      await settled(queue);
      // The client is back in the pool, idle: its backend is terminated from another connection.
      await waitFor(
        () => Number(psql(`SELECT count(*) FROM pg_stat_activity WHERE application_name = '${app}' AND state = 'idle'`)) > 0,
        10_000,
        'an idle backend of the pool',
      );
      expect(
        Number(psql(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '${app}' AND state = 'idle'`)),
      ).toBeGreaterThan(0);
      await waitFor(() => child.stderr().includes('an idle connection') || child.child.exitCode !== null, 10_000, 'the pool to hear of it');
      expect({ exitCode: child.child.exitCode, signal: child.child.signalCode }).toEqual({ exitCode: null, signal: null });
      // Nobody listens for the consumer's `error`: the default logger (console) writes it.
      expect(child.stderr()).toMatch(
        new RegExp(
          `^rabbit-retry: consumer of '${queue}': inbox '${queue}': an idle connection of the inbox's pool failed \\(terminating connection due to administrator command\\); the pool closed it, and the next transaction takes another\\n$`,
        ),
      );
      await rr.publish('', queue, { orderId: `${queue}-2`, amount: 20 }, { messageId: `${queue}-pay-2` });
      await waitFor(() => payments(`${queue}-2`).length === 1, 10_000, 'the second payment');
      await settled(queue);
      expect(payments(`${queue}-1`)).toEqual([{ order_id: `${queue}-1`, amount: 10 }]);
      expect(payments(`${queue}-2`)).toEqual([{ order_id: `${queue}-2`, amount: 20 }]);
      expect(child.child.exitCode).toBeNull();
    } finally {
      if (script?.child.exitCode === null && script.child.signalCode === null) {
        script.child.kill('SIGKILL');
        await script.exited;
      }
    }
  },
  60_000,
);
