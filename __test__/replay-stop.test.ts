/**
 * A replay stops on request: `replay({ signal })` and `rabbit-retry parked replay`
 * under SIGINT or SIGTERM end within a second, move nothing after the stop, and
 * leave what they had not moved parked, in its order. Every message is counted.
 */
import { InvalidOptionsError, parkedQueueName } from '../lib';
import { cleanup, closeAmqp, connectClient, drain, queueDepth, seedParked, startScript, testQueue, waitFor } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const N = 10;
const ids = Array.from({ length: N }, (_, i) => `order-${48200 + i}`);

/** What the stop left: the ids replayed to the work queue and those still parked, each drained. */
async function ledger(queue: string): Promise<{ replayed: string[]; parked: string[] }> {
  const replayed = (await drain(queue)).map((m) => String(m.properties.messageId));
  const parked = (await drain(parkedQueueName(queue))).map((m) => String(m.properties.messageId));
  return { replayed, parked };
}

function expectCounted(l: { replayed: string[]; parked: string[] }, moved: number): void {
  expect(l.replayed).toHaveLength(moved);
  expect(new Set(l.replayed).size).toBe(moved);
  // In = replayed + parked, each once, and what stayed parked kept its order.
  expect([...l.replayed, ...l.parked].sort()).toEqual([...ids].sort());
  expect(l.replayed).toEqual(ids.slice(0, moved));
  expect(l.parked).toEqual(ids.slice(moved));
}

describe('replay({ signal })', () => {
  it('ends within a second of the abort, moves nothing after it, and says it stopped', async () => {
    const queue = testQueue();
    await seedParked(
      queue,
      ids.map((messageId) => ({ messageId })),
    );
    const rr = await connectClient();
    const controller = new AbortController();
    const replay = rr.parked(queue).replay({ ratePerSec: 1, signal: controller.signal });
    await waitFor(async () => (await queueDepth(queue)) >= 2, 10_000, 'two replayed');
    const asked = Date.now();
    controller.abort();
    const result = await replay;
    const tookMs = Date.now() - asked;
    expect(tookMs).toBeLessThan(1000);
    expect(result.stopped).toBe(true);
    expect(result.replayed).toBeGreaterThanOrEqual(2);
    expect(result.replayed).toBeLessThan(N);
    await new Promise((r) => setTimeout(r, 1500)); // nothing more moves after the stop
    expectCounted(await ledger(queue), result.replayed);
  });

  it('an aborted signal replays nothing; a replay that ends by itself is not stopped', async () => {
    const queue = testQueue();
    await seedParked(
      queue,
      ids.map((messageId) => ({ messageId })),
    );
    const rr = await connectClient();
    const aborted = new AbortController();
    aborted.abort();
    expect(await rr.parked(queue).replay({ signal: aborted.signal })).toMatchObject({ replayed: 0, stopped: true });
    expect(await queueDepth(parkedQueueName(queue))).toBe(N);
    expect(await rr.parked(queue).replay({ signal: new AbortController().signal, ratePerSec: 1000 })).toMatchObject({ replayed: N, stopped: false });
    expectCounted(await ledger(queue), N);
  });

  it('a signal that is not an AbortSignal is INVALID_OPTIONS, and nothing moves', async () => {
    const queue = testQueue();
    await seedParked(
      queue,
      ids.slice(0, 1).map((messageId) => ({ messageId })),
    );
    const rr = await connectClient();
    const err = await rr
      .parked(queue)
      .replay({ signal: { aborted: false } as never })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toContain('signal must be an AbortSignal');
    expect(await queueDepth(parkedQueueName(queue))).toBe(1);
  });
});

describe('rabbit-retry parked replay', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('ends within a second of %s; its last line says how many were replayed and how many are left', async (sig) => {
    const queue = testQueue();
    await seedParked(
      queue,
      ids.map((messageId) => ({ messageId })),
    );
    const cli = startScript('lib/cli/index.ts', ['parked', 'replay', queue, '--rate', '1']);
    try {
      await waitFor(async () => (await queueDepth(queue)) >= 2, 20_000, `two replayed (stderr: ${cli.stderr()})`);
      const asked = Date.now();
      cli.child.kill(sig);
      const { code } = await cli.exited;
      const tookMs = Date.now() - asked;
      expect(tookMs).toBeLessThan(1500);
      expect(code).toBe(0);
      const line = cli.stdout().trim().split('\n').pop() ?? '';
      const m = /^replay of \S+ stopped by (SIG\w+): (\d+) message\(s\) replayed in [\d.]+ s; (\d+) left in \S+\.parked$/.exec(line);
      expect(m).not.toBeNull();
      expect(m?.[1]).toBe(sig);
      const moved = Number(m?.[2]);
      expect(moved + Number(m?.[3])).toBe(N);
      await new Promise((r) => setTimeout(r, 1500));
      expectCounted(await ledger(queue), moved);
    } finally {
      cli.child.kill('SIGKILL');
    }
  });
});
