import { spawn } from 'node:child_process';
import path from 'node:path';

import { type CliIo, run } from '../lib/cli';
import { parkedQueueName, retryQueueName, type Delay } from '../lib';
import { AMQP_URL, cleanup, closeAmqp, connectClient, drain, queueDepth, seedParked, testQueue, track, waitFor } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const ROOT = path.resolve(__dirname, '..');
const UNREACHABLE = 'amqp://guest:s3cret@127.0.0.1:1';

interface Ran {
  code: number;
  out: string;
  err: string;
}

/** Runs the CLI in-process against the test broker (AMQP_URL in its env unless `env` says otherwise). */
async function cli(argv: string[], opts: { env?: Record<string, string | undefined>; isTTY?: boolean } = {}): Promise<Ran> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = {
    out: (t) => out.push(t),
    err: (t) => err.push(t),
    isTTY: opts.isTTY ?? false,
    env: opts.env ?? { AMQP_URL },
  };
  const code = await run(argv, io);
  return { code, out: out.join('\n'), err: err.join('') };
}

/** Runs `npx ts-node --transpile-only lib/cli/index.ts ...argv` as a child process. */
function cliProcess(argv: string[], env: Record<string, string | undefined> = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['ts-node', '--transpile-only', 'lib/cli/index.ts', ...argv], {
      cwd: ROOT,
      env: { ...process.env, AMQP_URL, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => (err += b.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, out, err }));
  });
}

function json<T = Record<string, unknown>>(r: Ran): T {
  try {
    return JSON.parse(r.out) as T;
  } catch {
    throw new Error(`output is not JSON (exit ${r.code}):\n${r.out}\nstderr:\n${r.err}`);
  }
}

interface StatusRow {
  queue: string;
  role: string;
  exists: boolean;
  messages: number;
  consumers: number;
}

interface PeekJson {
  queue: string;
  parkedQueue: string;
  messages: {
    messageId: string | null;
    correlationId: string | null;
    reason: string | null;
    attempt: number;
    errorName: string | null;
    error: string | null;
    failedAt: unknown;
    headers: Record<string, unknown>;
    body: string;
  }[];
}

const seeds = [
  { messageId: 'm0', correlationId: 'c0', reason: 'exhausted', errorName: 'Error', errorMessage: 'carrier timeout after 30s', body: { i: 0 } },
  { messageId: 'm1', correlationId: 'c1', reason: 'non-retryable', errorName: 'ValidationError', errorMessage: 'missing field sku', body: { i: 1 } },
  { messageId: 'm2', correlationId: 'c2', reason: 'exhausted', errorName: 'TimeoutError', errorMessage: 'stock service timeout', body: { i: 2 } },
  { messageId: 'm3', correlationId: 'c3', reason: 'non-retryable', errorName: 'ValidationError', errorMessage: 'bad date', body: { i: 3 } },
  { messageId: 'm4', correlationId: 'c4', reason: 'exhausted', errorName: 'Error', errorMessage: 'carrier said 503', body: { i: 4 } },
];

describe('status', () => {
  it('--json: depth of the work queue, each retry queue and the parked queue, and consumers', async () => {
    const delays: Delay[] = ['1m', '10m'];
    const queue = testQueue(delays);
    const rr = await connectClient();
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays } }, async () => {
        throw new Error('carrier down');
      }),
    );
    for (let i = 0; i < 3; i++) await rr.publish('', queue, { i });
    await waitFor(() => consumer.stats().retried === 3, 10_000, '3 retried messages');
    await seedParked(queue, seeds.slice(0, 2));
    await waitFor(async () => (await queueDepth(retryQueueName(queue, '1m'))) === 3, 5000, '3 in the 1m retry queue');

    const r = await cli(['status', queue, '--delays', '1m,10m', '--json']);
    expect(r.code).toBe(0);
    expect(r.err).toBe('');
    const s = json<{ queue: string; queues: StatusRow[] }>(r);
    expect(s.queue).toBe(queue);
    expect(s.queues).toEqual([
      { queue, role: 'work', exists: true, messages: 0, consumers: 1 },
      { queue: retryQueueName(queue, '1m'), role: 'retry', exists: true, messages: 3, consumers: 0 },
      { queue: retryQueueName(queue, '10m'), role: 'retry', exists: true, messages: 0, consumers: 0 },
      { queue: parkedQueueName(queue), role: 'parked', exists: true, messages: 2, consumers: 0 },
    ]);
  });

  it('--json without --delays lists the default retry queues; missing queues say exists: false', async () => {
    const queue = testQueue(['5s', '1m', '10m']);
    const r = await cli(['--json', 'status', queue]);
    expect(r.code).toBe(0);
    const s = json<{ queues: StatusRow[] }>(r);
    expect(s.queues.map((q) => [q.queue, q.role, q.exists, q.messages])).toEqual([
      [queue, 'work', false, 0],
      [`${queue}.retry.5s`, 'retry', false, 0],
      [`${queue}.retry.1m`, 'retry', false, 0],
      [`${queue}.retry.10m`, 'retry', false, 0],
      [`${queue}.parked`, 'parked', false, 0],
    ]);
  });

  it('without --json prints a table with every queue', async () => {
    const queue = testQueue(['200ms']);
    await seedParked(queue, seeds.slice(0, 3));
    const r = await cli(['status', queue, '--delays', '200ms']);
    expect(r.code).toBe(0);
    const lines = r.out.split('\n');
    expect(lines[0]).toMatch(/QUEUE\s+ROLE\s+MESSAGES\s+CONSUMERS/);
    expect(lines.find((l) => l.startsWith(`${queue}.parked `))).toMatch(/parked\s+3\s+0$/);
    expect(lines.find((l) => l.startsWith(`${queue}.retry.200ms `))).toMatch(/retry\s+missing/);
    expect(lines.find((l) => l.startsWith(`${queue} `))).toMatch(/work\s+0\s+0$/);
  });

  it('a bad --delays list exits 2 naming the option', async () => {
    const queue = testQueue();
    const r = await cli(['status', queue, '--delays', '5x', '--json']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('--delays');
    expect(r.out).toBe('');
  });
});

describe('parked peek', () => {
  it('--json --limit returns the first N with ids, reason, error and headers, and leaves all parked', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const r = await cli(['parked', 'peek', queue, '--limit', '2', '--json']);
    expect(r.code).toBe(0);
    const p = json<PeekJson>(r);
    expect(p.queue).toBe(queue);
    expect(p.parkedQueue).toBe(parkedQueueName(queue));
    expect(p.messages).toHaveLength(2);
    expect(p.messages[0]).toMatchObject({
      messageId: 'm0',
      correlationId: 'c0',
      reason: 'exhausted',
      attempt: 2,
      errorName: 'Error',
      error: 'carrier timeout after 30s',
    });
    expect(JSON.parse(p.messages[0].body)).toEqual({ i: 0 });
    expect(p.messages[0].headers['retry-queue']).toBe(queue);
    expect(p.messages[1].messageId).toBe('m1');
    expect(await queueDepth(parkedQueueName(queue))).toBe(seeds.length);
  });

  it('--reason and --error select exactly the matching messages', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const byReason = json<PeekJson>(await cli(['parked', 'peek', queue, '--reason', 'non-retryable', '--json']));
    expect(byReason.messages.map((m) => m.messageId)).toEqual(['m1', 'm3']);
    const byError = json<PeekJson>(await cli(['parked', 'peek', queue, '--error', 'carrier', '--json']));
    expect(byError.messages.map((m) => m.messageId)).toEqual(['m0', 'm4']);
    const both = json<PeekJson>(await cli(['parked', 'peek', queue, '--reason', 'exhausted', '--error', 'timeout', '--json']));
    expect(both.messages.map((m) => m.messageId)).toEqual(['m0', 'm2']);
    const none = await cli(['parked', 'peek', queue, '--reason', 'poison', '--json']);
    expect(none.code).toBe(0);
    expect(json<PeekJson>(none).messages).toEqual([]);
    expect(await queueDepth(parkedQueueName(queue))).toBe(seeds.length);
  });

  it('without --json prints a table of the messages', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds.slice(0, 2));
    const r = await cli(['parked', 'peek', queue]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/MESSAGE ID\s+REASON\s+ATTEMPT\s+ERROR/);
    expect(r.out).toMatch(/m0\s+exhausted\s+2\s+Error: carrier timeout after 30s/);
    expect(r.out).toMatch(/m1\s+non-retryable\s+2\s+ValidationError: missing field sku/);
  });
});

describe('parked replay', () => {
  it('--json --rate --limit moves the first N to the work queue with attempts reset', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const r = await cli(['parked', 'replay', queue, '--rate', '100', '--limit', '3', '--json']);
    expect(r.code).toBe(0);
    const res = json<{ queue: string; replayed: number; skipped: number; durationMs: number }>(r);
    expect(res).toMatchObject({ queue, replayed: 3, skipped: 0 });
    expect(typeof res.durationMs).toBe('number');
    // 3 messages at 100/s: the third goes out no earlier than 20 ms after the first.
    expect(res.durationMs).toBeGreaterThanOrEqual(19);
    const moved = await drain(queue);
    expect(moved.map((m) => m.properties.messageId)).toEqual(['m0', 'm1', 'm2']);
    expect(moved.map((m) => m.headers['retry-attempt'])).toEqual([0, 0, 0]);
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 2, 5000, '2 still parked');
    expect((await drain(parkedQueueName(queue))).map((m) => m.properties.messageId)).toEqual(['m3', 'm4']);
  });

  it('--reason replays only those; --rate limits the pace', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const t0 = Date.now();
    const r = await cli(['parked', 'replay', queue, '--reason', 'non-retryable', '--rate', '5', '--json']);
    const elapsed = Date.now() - t0;
    expect(r.code).toBe(0);
    expect(json(r)).toMatchObject({ replayed: 2, skipped: 3 });
    // Two messages at 5/s: at least 200 ms apart.
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect((await drain(queue)).map((m) => m.properties.messageId)).toEqual(['m1', 'm3']);
    expect(await queueDepth(parkedQueueName(queue))).toBe(3);
  });

  it('on a terminal draws a progress bar on stderr and prints a summary', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds.slice(0, 3));
    const r = await cli(['parked', 'replay', queue, '--rate', '1000'], { isTTY: true });
    expect(r.code).toBe(0);
    expect(r.err).toContain('3/3');
    expect(r.err).toMatch(/\[#+\] 3\/3/);
    expect(r.out).toMatch(/replayed 3 message/);
    expect(await queueDepth(queue)).toBe(3);
  });
});

describe('parked purge', () => {
  it('--yes --json deletes them all and says how many', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const r = await cli(['parked', 'purge', queue, '--yes', '--json']);
    expect(r.code).toBe(0);
    expect(json(r)).toEqual({ queue, parkedQueue: parkedQueueName(queue), purged: seeds.length });
    expect(await queueDepth(parkedQueueName(queue))).toBe(0);
  });

  it('without --yes exits 2, says to add --yes, and deletes nothing', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const r = await cli(['parked', 'purge', queue, '--json']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('--yes');
    expect(r.out).toBe('');
    expect(await queueDepth(parkedQueueName(queue))).toBe(seeds.length);
  });
});

describe('bad arguments exit 2 with a message saying what to do', () => {
  it.each([
    ['an unknown command', ['frobnicate'], /unknown command/],
    ['an unknown parked command', ['parked', 'shovel', 'q'], /unknown command/],
    ['--limit 0', ['parked', 'peek', 'q', '--limit', '0'], /--limit.*at least 1/s],
    ['--limit abc', ['parked', 'replay', 'q', '--limit', 'abc'], /--limit/],
    ['--rate 0', ['parked', 'replay', 'q', '--rate', '0'], /--rate.*positive/s],
    ['a missing queue argument', ['parked', 'peek'], /missing required argument/],
    ['an unknown option', ['status', 'q', '--bogus'], /unknown option/],
  ])('%s', async (_label, argv, pattern) => {
    // An unreachable broker: bad arguments must be reported before any connection.
    const r = await cli(argv, { env: { AMQP_URL: UNREACHABLE } });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(pattern);
    expect(r.err).toMatch(/--help|usage|Usage/);
    expect(r.out).toBe('');
  });

  it('no command prints the usage and exits 2', async () => {
    const r = await cli([]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/Usage|usage/);
    expect(r.err).toContain('status');
    expect(r.err).toContain('parked');
  });
});

describe('broker errors exit 1', () => {
  it('an unreachable --url: exit 1, a hint, and the password not printed', async () => {
    const r = await cli(['--url', UNREACHABLE, 'status', 'q', '--json']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('CONNECTION');
    expect(r.err).toMatch(/--url|AMQP_URL/);
    expect(r.err).not.toContain('s3cret');
    expect(r.out).not.toContain('s3cret');
    expect(r.out).toBe('');
  });

  it('AMQP_URL is used when --url is not given, and --url wins over it', async () => {
    const viaEnv = await cli(['parked', 'peek', 'q', '--json'], { env: { AMQP_URL: UNREACHABLE } });
    expect(viaEnv.code).toBe(1);
    expect(viaEnv.err).not.toContain('s3cret');
    const queue = testQueue();
    await seedParked(queue, seeds.slice(0, 1));
    const viaFlag = await cli(['--url', AMQP_URL, 'parked', 'peek', queue, '--json'], { env: { AMQP_URL: UNREACHABLE } });
    expect(viaFlag.code).toBe(0);
    expect(json<PeekJson>(viaFlag).messages.map((m) => m.messageId)).toEqual(['m0']);
  });

  it('peek of a queue with no parked queue exits 1 and names it', async () => {
    const queue = testQueue();
    const r = await cli(['parked', 'peek', queue, '--json']);
    expect(r.code).toBe(1);
    expect(r.err).toContain(parkedQueueName(queue));
  });
});

describe('as a child process (real exit codes)', () => {
  jest.setTimeout(60_000);

  it('parked peek --json exits 0 with JSON on stdout', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const r = await cliProcess(['parked', 'peek', queue, '--limit', '2', '--json']);
    expect(r.code).toBe(0);
    expect(json<PeekJson>(r).messages.map((m) => m.messageId)).toEqual(['m0', 'm1']);
    expect(await queueDepth(parkedQueueName(queue))).toBe(seeds.length);
  });

  it('purge without --yes exits 2 and deletes nothing', async () => {
    const queue = testQueue();
    await seedParked(queue, seeds);
    const r = await cliProcess(['parked', 'purge', queue]);
    expect(r.code).toBe(2);
    expect(r.err).toContain('--yes');
    expect(await queueDepth(parkedQueueName(queue))).toBe(seeds.length);
  });

  it('an unknown command exits 2', async () => {
    const r = await cliProcess(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/unknown command/);
  });

  it('an unreachable broker exits 1 without printing the password', async () => {
    const r = await cliProcess(['--url', UNREACHABLE, 'status', 'q']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('CONNECTION');
    expect(r.err + r.out).not.toContain('s3cret');
  });
});
