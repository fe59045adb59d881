/**
 * Circuits on a real broker: a consumer whose dependency is down stops taking
 * messages (they stay in the work queue, in order), probes, and takes them
 * again when a probe succeeds, its retry queues sent back at once.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { InvalidOptionsError, NonRetryableError, type Consumer, type Message } from '../lib';
import type { CircuitClosedEvent, CircuitHalfOpenEvent, CircuitOpenEvent } from '../lib';
import { AMQP_URL, closeAmqp, queueDepth, readyMessages } from './broker';
import { cleanup, closeOwnConnection, connectClient, drain, startScript, testQueue, track, waitFor } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const DELAYS = ['10s'] as const;

interface Recorded {
  open: CircuitOpenEvent[];
  halfOpen: CircuitHalfOpenEvent[];
  closed: CircuitClosedEvent[];
}

function record(c: Consumer): Recorded {
  const r: Recorded = { open: [], halfOpen: [], closed: [] };
  c.on('circuitOpen', (e) => r.open.push(e));
  c.on('circuitHalfOpen', (e) => r.halfOpen.push(e));
  c.on('circuitClosed', (e) => r.closed.push(e));
  return r;
}

/** A carrier stub: down until told otherwise; every call recorded by order id. */
function carrier() {
  const c = { down: true, calls: [] as string[], succeeded: [] as string[], failed: [] as string[] };
  const handler = async (msg: Message) => {
    const id = String(msg.properties.messageId);
    c.calls.push(id);
    if (c.down) {
      c.failed.push(id);
      throw new Error(`carrier 503 for ${id}`);
    }
    c.succeeded.push(id);
  };
  return { c, handler };
}

async function publishOrders(rr: Awaited<ReturnType<typeof connectClient>>, queue: string, n: number, prefix = 'order'): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);
  for (const id of ids) await rr.publish('', queue, { id }, { messageId: id });
  return ids;
}

describe('a circuit on one consumer', () => {
  it('opens after its failures, keeps the queue in order while it probes, and closes on a probe that succeeds, sending the retry queue back at once', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    const { c, handler } = carrier();
    const consumer = track(
      await rr.consume(
        { queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 3, within: '10s' }, probeEvery: '300ms' } } },
        handler,
      ),
    );
    const ev = record(consumer);
    const ids = await publishOrders(rr, queue, 20);

    await waitFor(() => ev.open.length === 1, 10_000, 'the circuit to open');
    expect(ev.open[0]).toMatchObject({ queue, dependency: queue, cause: 'failures', failures: 3 });
    expect(consumer.health()).toMatchObject({ healthy: true, circuit: { dependency: queue, state: 'open' } });

    // Probes: one message each, every 300 ms, each failing into the retry queue.
    await waitFor(() => c.calls.length >= 6, 10_000, 'three probes');
    expect(ev.halfOpen.filter((e) => e.probe === 'message').length).toBeGreaterThanOrEqual(3);
    const failedCalls = c.calls.length;
    // Exactly the failures that opened it, then the probes: nothing else was called.
    expect(c.calls).toEqual(ids.slice(0, failedCalls));
    // The rest waits in the work queue, unstarted.
    await waitFor(async () => (await queueDepth(queue)) === 20 - failedCalls || c.calls.length > failedCalls, 5_000, 'the work queue to hold the rest');

    c.down = false;
    const closedAt = Date.now();
    await waitFor(() => ev.closed.length === 1, 10_000, 'the circuit to close');
    expect(ev.closed[0]).toMatchObject({ queue, cause: 'probe' });
    await waitFor(() => new Set(c.succeeded).size === 20, 8_000, 'every order to succeed');
    // Well before the 10 s delay: the retry queue was sent back when the circuit closed.
    expect(Date.now() - closedAt).toBeLessThan(8_000);

    // The orders that never failed ran in the order they were published.
    const neverFailed = c.succeeded.filter((id) => !c.failed.includes(id));
    expect(neverFailed).toEqual([...neverFailed].sort());
    // Nothing lost, nothing twice, nothing left behind.
    expect(new Set(c.succeeded).size).toBe(c.succeeded.length);
    for (const id of c.failed) expect(c.succeeded).toContain(id);
    expect(await queueDepth(`${queue}.retry.10s`)).toBe(0);
    expect(await queueDepth(`${queue}.parked`)).toBe(0);
    const stats = consumer.stats();
    // Every failed call's message waited in the retry queue and was sent back.
    expect(stats).toMatchObject({ acked: 20, parked: 0, retried: c.failed.length, returnedEarly: c.failed.length });
    expect(stats.circuit).toMatchObject({ state: 'closed' });
  });

  it('does not count a non-retryable failure: a bad message is not a dependency down', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    const consumer = track(
      await rr.consume({ queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 2, within: '10s' } } } }, async () => {
        throw new NonRetryableError('bad order');
      }),
    );
    const ev = record(consumer);
    await publishOrders(rr, queue, 5);
    await waitFor(() => consumer.stats().parked === 5, 10_000, 'five parked');
    expect(ev.open).toHaveLength(0);
    expect(consumer.health().circuit?.state).toBe('closed');
  });

  it('closes on its health check, without spending a message on a probe', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    const { c, handler } = carrier();
    let checks = 0;
    const check = async () => {
      checks++;
      return !c.down;
    };
    const consumer = track(
      await rr.consume(
        { queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 2, within: '10s' }, probeEvery: '200ms', check } } },
        handler,
      ),
    );
    const ev = record(consumer);
    await publishOrders(rr, queue, 10);
    await waitFor(() => ev.open.length >= 1, 10_000, 'the circuit to open');
    await waitFor(() => checks >= 3, 10_000, 'three checks');
    // The two failures that opened it, and no probe call.
    expect(c.calls).toHaveLength(2);
    expect(ev.halfOpen.every((e) => e.probe === 'check')).toBe(true);
    c.down = false;
    await waitFor(() => ev.closed.length === 1, 10_000, 'the check to close it');
    expect(ev.closed[0].cause).toBe('check');
    await waitFor(() => new Set(c.succeeded).size === 10, 15_000, 'every order to succeed');
  });

  it('a close is prompt while the circuit is open, and the messages stay in the work queue', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    const { handler } = carrier();
    const consumer = await rr.consume(
      { queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 1, within: '10s' }, probeEvery: '1h' } } },
      handler,
    );
    const ev = record(consumer);
    await publishOrders(rr, queue, 5);
    await waitFor(() => ev.open.length === 1, 10_000, 'the circuit to open');
    const t = Date.now();
    await expect(consumer.close()).resolves.toEqual({ unfinished: 0 });
    expect(Date.now() - t).toBeLessThan(3_000);
    await waitFor(async () => (await queueDepth(queue)) === 4, 5_000, 'four in the work queue');
    expect(await queueDepth(`${queue}.retry.10s`)).toBe(1);
  });

  it("a close during a probe waits for the probe's handler, settles its message, and resolves", async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    let calls = 0;
    let release!: () => void;
    const probing = new Promise<void>((resolve) => (release = resolve));
    let inProbe = false;
    const consumer = await rr.consume(
      { queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 1, within: '10s' }, probeEvery: '100ms' } } },
      async () => {
        calls++;
        if (calls === 1) throw new Error('carrier down');
        inProbe = true;
        await probing;
      },
    );
    await publishOrders(rr, queue, 3);
    await waitFor(() => inProbe, 10_000, 'a probe to start');
    const closing = consumer.close({ timeoutMs: 10_000 });
    setTimeout(release, 300);
    await expect(closing).resolves.toEqual({ unfinished: 0 });
    expect(consumer.stats()).toMatchObject({ acked: 1, retried: 1 });
    // The probe's message was acked; the third waits in the work queue, the first in its retry queue.
    await waitFor(async () => (await queueDepth(queue)) === 1, 5_000, 'one left in the work queue');
    expect(await queueDepth(`${queue}.retry.10s`)).toBe(1);
  });

  it('a probe whose handler hangs counts as failed after stuckAfterMs: the next probe goes on, and the hung message settles when it ends', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    let calls = 0;
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    const consumer = track(
      await rr.consume(
        {
          queue,
          prefetch: 1,
          stuckAfterMs: 300,
          onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 1, within: '10s' }, probeEvery: '100ms' } },
        },
        async () => {
          calls++;
          if (calls === 1) throw new Error('carrier down');
          // The first probe hangs; the next succeeds.
          if (calls === 2) await hung;
        },
      ),
    );
    consumer.on('stuck', () => undefined);
    const ev = record(consumer);
    await publishOrders(rr, queue, 3);
    await waitFor(() => ev.closed.length === 1, 10_000, 'a later probe to close the circuit');
    // Reopened once by the hung probe, then closed by the next.
    expect(ev.open.map((e) => e.cause)).toEqual(['failures', 'probe']);
    expect(consumer.stats().inFlight).toBe(1);
    release();
    // The third order, the first (sent back from its retry queue on the close), and the hung one.
    await waitFor(() => consumer.stats().acked === 3, 10_000, 'all three orders acked');
    expect(consumer.stats()).toMatchObject({ acked: 3, retried: 1, returnedEarly: 1, parked: 0, inFlight: 0 });
  });

  it('with every queue empty at a probe, consumes again on trial: the next success closes it', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    const { c, handler } = carrier();
    const consumer = track(
      await rr.consume(
        { queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 2, within: '10s' }, probeEvery: '200ms' } } },
        handler,
      ),
    );
    const ev = record(consumer);
    await publishOrders(rr, queue, 2);
    await waitFor(() => ev.open.length === 1, 10_000, 'the circuit to open');
    await waitFor(() => ev.halfOpen.some((e) => e.probe === 'trial'), 10_000, 'a trial');
    c.down = false;
    await rr.publish('', queue, { id: 'late' }, { messageId: 'late' });
    await waitFor(() => ev.closed.length === 1, 10_000, 'the circuit to close');
    expect(ev.closed[0].cause).toBe('trial');
    await waitFor(() => c.succeeded.length === 3, 10_000, 'the late order and the two sent back');
    expect(c.succeeded[0]).toBe('late');
  });
});

describe('a circuit shared by two consumers', () => {
  it('opens for both when one fails, probes both queues, and closes for both', async () => {
    const qa = testQueue(DELAYS);
    const qb = testQueue(DELAYS);
    const rr = await connectClient();
    const a = carrier();
    const b = carrier();
    const circuit = { dependency: `carrier-${qa}`, openAfter: { failures: 3, within: '10s' }, probeEvery: '300ms' } as const;
    const ca = track(await rr.consume({ queue: qa, prefetch: 1, onFailure: { delays: [...DELAYS], circuit } }, a.handler));
    const cb = track(await rr.consume({ queue: qb, prefetch: 1, onFailure: { delays: [...DELAYS], circuit } }, b.handler));
    const ea = record(ca);
    const eb = record(cb);

    await publishOrders(rr, qa, 5, 'a');
    await waitFor(() => ea.open.length === 1 && eb.open.length === 1, 10_000, 'both to see it open');
    expect(eb.open[0]).toMatchObject({ queue: qb, dependency: circuit.dependency });
    // B takes nothing while the shared circuit is open, except its probes.
    await publishOrders(rr, qb, 5, 'b');
    await waitFor(() => b.c.calls.length >= 1, 10_000, 'a probe from the second queue');
    expect(b.c.calls).toEqual(['b-000']);
    await waitFor(async () => (await queueDepth(qb)) === 4, 5_000, 'the rest of B waiting');
    expect(ca.health().circuit).toMatchObject({ dependency: circuit.dependency, state: expect.stringMatching(/open|halfOpen/) });

    a.c.down = false;
    b.c.down = false;
    await waitFor(() => ea.closed.length === 1 && eb.closed.length === 1, 10_000, 'both to see it close');
    await waitFor(() => new Set(a.c.succeeded).size === 5 && new Set(b.c.succeeded).size === 5, 15_000, 'every order of both');
  });

  it('refuses a consumer that gives the same dependency other options, before declaring anything', async () => {
    const qa = testQueue(DELAYS);
    const qb = testQueue(DELAYS);
    const rr = await connectClient();
    const dependency = `carrier-${qa}`;
    track(await rr.consume({ queue: qa, onFailure: { delays: [...DELAYS], circuit: { dependency, probeEvery: '5s' } } }, async () => undefined));
    const refused = rr.consume({ queue: qb, onFailure: { delays: [...DELAYS], circuit: { dependency, probeEvery: '6s' } } }, async () => undefined);
    await expect(refused).rejects.toThrow(InvalidOptionsError);
    await expect(refused).rejects.toThrow(/probeEvery/);
    expect(await readyMessages(qb)).toBeNull();
  });
});

describe('options', () => {
  it.each([
    [{ openAfter: { failures: 0, within: '1s' } }, /onFailure\.circuit\.openAfter\.failures/],
    [{ openAfter: { failures: 2 } }, /onFailure\.circuit\.openAfter\.within/],
    [{ probeEvery: 'soon' }, /onFailure\.circuit\.probeEvery/],
    [{ closeAfter: 1.5 }, /onFailure\.circuit\.closeAfter/],
    [{ check: true }, /onFailure\.circuit\.check/],
    [{ returnRate: -1 }, /onFailure\.circuit\.returnRate/],
    [{ probe: '5s' }, /probe.*onFailure\.circuit|onFailure\.circuit.*probe/],
  ])('refuses %j with INVALID_OPTIONS naming it', async (circuit, named) => {
    const rr = await connectClient();
    const queue = testQueue();
    const p = rr.consume({ queue, onFailure: { circuit: circuit as never } }, async () => undefined);
    await expect(p).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
    await expect(p).rejects.toThrow(named);
  });
});

describe('sending the retry queue back', () => {
  it('loses nothing when the connection closes halfway: what was not sent back comes back with its delay', async () => {
    const delays = ['6s'] as const;
    const queue = testQueue(delays);
    const connectionName = `circuit-return-${queue}`;
    const rr = await connectClient({ connectionName });
    const { c, handler } = carrier();
    const consumer = track(
      await rr.consume(
        {
          queue,
          prefetch: 1,
          onFailure: { delays: [...delays], circuit: { openAfter: { failures: 20, within: '1m' }, probeEvery: '200ms', returnRate: 2 } },
        },
        handler,
      ),
    );
    const ev = record(consumer);
    const ids = await publishOrders(rr, queue, 25);
    await waitFor(() => ev.open.length === 1, 10_000, 'the circuit to open');
    expect(c.failed).toHaveLength(20);
    c.down = false;
    await waitFor(() => ev.closed.length === 1, 10_000, 'the circuit to close');
    // Two a second come back: close the connection after the first few.
    await waitFor(() => consumer.stats().returnedEarly >= 3, 10_000, 'the first ones sent back');
    await closeOwnConnection(connectionName);
    const sentBack = consumer.stats().returnedEarly;
    await waitFor(() => new Set(c.succeeded).size === 25, 20_000, 'every order, the rest after their delay');
    // The sending back stopped with the connection: the rest waited out their delay.
    expect(consumer.stats().returnedEarly).toBe(sentBack);
    expect(sentBack).toBeLessThan(20);
    // In = acked: every order succeeded; a copy confirmed but not acked when the connection closed may run twice.
    expect([...new Set(c.succeeded)].sort()).toEqual(ids);
    const duplicates = c.succeeded.length - new Set(c.succeeded).size;
    expect(duplicates).toBeLessThanOrEqual(1);
    expect(await queueDepth(`${queue}.retry.6s`)).toBe(0);
    expect(await queueDepth(`${queue}.parked`)).toBe(0);
  });
});

describe('a process that ends during a probe', () => {
  it('counts as a failure: the next process starts with the circuit open', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    // A process whose circuit opens at the first failure and whose probe ends it.
    const child = startScript(path.join(__dirname, 'fixtures', 'circuit-crash.ts'), [queue]);
    await waitFor(() => child.stdout().includes('ready'), 20_000, 'the child to consume');
    await publishOrders(rr, queue, 3);
    const ended = await child.exited;
    expect(ended.signal).toBe('SIGKILL');
    expect(child.stdout()).toContain('probing');

    // The probed message went back to the queue with the crash; the state queue says a probe was running.
    const consumer = track(
      await rr.consume(
        { queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 1, within: '10s' }, probeEvery: '300ms' } } },
        async () => undefined,
      ),
    );
    const ev = record(consumer);
    expect(consumer.health().circuit?.state).toBe('open');
    await waitFor(() => ev.closed.length === 1, 10_000, 'a probe to close it');
    await waitFor(() => consumer.stats().acked === 3, 10_000, 'all three orders');
    const leftovers = await drain(`${queue}.retry.10s`);
    expect(leftovers).toHaveLength(0);
  });
});

describe('the CLI', () => {
  it('status shows the state of a circuit', async () => {
    const queue = testQueue(DELAYS);
    const rr = await connectClient();
    const consumer = track(
      await rr.consume(
        { queue, prefetch: 1, onFailure: { delays: [...DELAYS], circuit: { openAfter: { failures: 1, within: '10s' }, probeEvery: '1h' } } },
        async () => {
          throw new Error('down');
        },
      ),
    );
    const ev = record(consumer);
    await rr.publish('', queue, { id: 1 });
    await waitFor(() => ev.open.length === 1, 10_000, 'the circuit to open');
    await waitFor(async () => (await queueDepth(`${queue}.circuit`)) === 1, 5_000, 'the state queue');
    const out = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', 'lib/cli/index.ts', 'status', queue, '--url', AMQP_URL], {
      cwd: path.resolve(__dirname, '..'),
      encoding: 'utf8',
    });
    expect(out.stderr).toBe('');
    expect(out.stdout).toMatch(/circuit\s+open/);
  });
});
