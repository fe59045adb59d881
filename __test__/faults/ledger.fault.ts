/**
 * The fault suite: a ledger of N messages with unique ids runs through a
 * consumer in a child process while one fault is injected on this machine's
 * own broker. At the end every id is acked after a success or parked with the
 * expected reason: zero lost. Duplicate handler calls are counted and printed.
 * Every parked message also publishes a fault event (onFailure.faults), which
 * the suite reads from a queue of its own: each parked id has one (or more:
 * at least once), and no other id does.
 */
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';

import * as amqp from 'amqplib';

import { RabbitRetry, parkedQueueName, retryQueueName, type Delay } from '../../lib';
import { parseDelay } from '../../lib/options/check';
import { RABBITMQCTL } from '../broker';
import { PG_HOST, PG_PORT, PG_USER, psql } from '../helpers';
import { expectedEnd, expectedOutcome, swallowsFirstAttempt } from './plan';
import {
  type Run as KitRun,
  callsNeeded,
  deleteFamily,
  eventsOf,
  drainParked as parkedOf,
  lines,
  newRun,
  sleep,
  startConsumer as start,
  stopConsumer,
  waitForEvent,
  waitForProgress as progress,
} from './kit';

const URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const N = Number(process.env.FAULT_N ?? 2000);
const DELAYS: Delay[] = ['100ms', '200ms'];
// FAULT_BROKER_DELAY=100ms,200ms,2 runs the suite with onFailure.brokerDelay on RabbitMQ 4.3: the same
// number of attempts as DELAYS, so the same handler calls are needed, and no retry queue to delete.
const BROKER_DELAY = Boolean(process.env.FAULT_BROKER_DELAY);
// Retry queues that dead-letter back to a classic work queue: RabbitMQ does that hop at most once.
const CLASSIC_HOP = !BROKER_DELAY && process.env.FAULT_QUEUE_TYPE !== 'quorum';
const delayMs = (d: Delay) => parseDelay(d, 'delay').ms;
const DEADLINE_MS = 150_000;
// FAULT_RESTARTS=K restarts the broker K times in one run of (b) (default 1).
const RESTARTS = Number(process.env.FAULT_RESTARTS ?? 1);
// FAULT_INBOX=1 runs the suite with an inbox in PostgreSQL (database `test`): each success's
// effect is a row written in the handler's transaction, and every id's effect must happen exactly
// once, through every fault, a killed PostgreSQL backend among them. Every 7th message's first
// attempt swallows a failed statement in its transaction (plan.ts): none may be acked without its effect.
// FAULT_INBOX_GROUP=n runs that inbox with inbox.group: the deliveries handed over together share a transaction.
const INBOX = process.env.FAULT_INBOX ? `postgres://${PG_USER}@${PG_HOST}:${PG_PORT}/test` : '';

jest.setTimeout(240_000);

function rabbitmqctl(...args: string[]): string {
  return execFileSync(RABBITMQCTL[0], [...RABBITMQCTL.slice(1), ...args], { encoding: 'utf8', timeout: 60_000 });
}

async function brokerUp(): Promise<void> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      const c = await amqp.connect(URL);
      await c.close();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(500);
    }
  }
}

/** Runs `f` on a fresh amqplib channel (the broker may have restarted since the last one). */
async function withChannel<T>(f: (ch: amqp.Channel) => Promise<T>): Promise<T> {
  const conn = await amqp.connect(URL);
  try {
    const ch = await conn.createChannel();
    return await f(ch);
  } finally {
    await conn.close().catch(() => undefined);
  }
}

async function depth(queue: string): Promise<number> {
  return withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount).catch(() => 0);
}

interface Run extends KitRun {
  /** A queue the fault deleted: what was confirmed into it went with it, by the operator's hand. */
  deletedQueue?: string;
  /** When it was deleted (ms since the epoch). */
  deletedAt?: number;
  /** When the fault was injected (ms since the epoch), for the account of a lost message. */
  faultAt?: number;
  /** Each broker restart's stop_app (ms since the epoch). */
  restarts?: number[];
}

/** The exchange of `run`'s fault events (onFailure.faults), and the queue the suite reads them from. */
const faultsExchange = (run: Run) => `${run.queue}.faults`;
const faultsSeen = (run: Run) => `${run.queue}.faults-seen`;

const startConsumer = (run: Run) => start(run, DELAYS, { FAULT_EXCHANGE: faultsExchange(run), ...(INBOX ? { FAULT_INBOX: INBOX } : {}) });

/** The fault events of `run`, by message id: how many each parked id got. */
async function faultEventsOf(run: Run): Promise<Map<string, number>> {
  return withChannel(async (ch) => {
    const seen = new Map<string, number>();
    for (let m = await ch.get(faultsSeen(run), { noAck: true }); m; m = await ch.get(faultsSeen(run), { noAck: true })) {
      const id = String((JSON.parse(m.content.toString()) as { messageId?: unknown }).messageId);
      seen.set(id, (seen.get(id) ?? 0) + 1);
    }
    return seen;
  });
}

/** With the inbox: the committed effects of `run`, how many of each id. */
function effectsOf(run: Run): Map<string, number> {
  const rows = psql(`SELECT id, count(*) FROM fault_effects WHERE queue = '${run.queue}' GROUP BY id`, 'test');
  return new Map(rows ? rows.split('\n').map((l) => [l.split('|')[0], Number(l.split('|')[1])] as const) : []);
}
const waitForProgress = (run: Run, successes: number) => progress(run, successes, DEADLINE_MS);

const ids = Array.from({ length: N }, (_, i) => `m-${i}`);

/** Where messages wait: Q and its retry queues (with brokerDelay, Q alone, where delayed ones are not counted). */
function waitingQueues(run: Run): string[] {
  return [run.queue, ...(BROKER_DELAY ? [] : DELAYS.map((d) => retryQueueName(run.queue, d)))];
}

/** Waits until every message is acked or parked and nothing waits in Q or its retry queues. */
async function waitForSettled(run: Run): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  const queues = waitingQueues(run);
  let last = -1;
  let quietSince = Date.now();
  for (;;) {
    const acked = new Set(lines(run.successFile)).size;
    const parked = await depth(parkedQueueName(run.queue));
    const waiting = (await Promise.all(queues.map(depth))).reduce((a, b) => a + b, 0);
    if (acked + parked >= N && waiting === 0) return;
    if (run.deletedQueue && waiting === 0 && Date.now() > quietSince + 15_000) return;
    if (waiting > 0 || acked + parked !== last) {
      last = acked + parked;
      quietSince = Date.now();
    }
    if (Date.now() > deadline) return; // the assertions below say what is missing
    await sleep(250);
  }
}

async function drainParked(queue: string): Promise<Map<string, string[]>> {
  return withChannel((ch) => parkedOf(ch, queue));
}

interface Report {
  fault: string;
  n: number;
  lost: number;
  /** What became of each lost id (the first 20): empty when none was lost. */
  lostAccount: string[];
  destroyed: number;
  /**
   * Ids RabbitMQ dropped while it shut down: confirmed into a classic retry queue, whose delay
   * ended during the broker's shutdown, when the broker's dead-lettering (at most once on
   * classic queues) found the work queue already stopped. Printed with their times, not lost.
   */
  droppedAtShutdown: string[];
  wrong: string[];
  duplicateCalls: number;
  duplicateParked: number;
  /** With the inbox: ids whose effect was committed more than once (must be none). */
  effectsTwice: string[];
  /** With the inbox: ids acked without their effect (their handler resolved, no effect, not parked, waiting nowhere): must be none. */
  ackedWithoutEffect: string[];
  /** Parked ids without a fault event (must be none), and fault events of ids that did not park (must be none). */
  faultsMissing: string[];
  faultsUnparked: string[];
  events: string[];
}

async function ledger(fault: string, inject: (run: Run) => Promise<void>): Promise<Report> {
  const run: Run = newRun(fault);
  try {
    // Where the fault events are read: bound before the consumer's first park.
    await withChannel(async (ch) => {
      await ch.assertExchange(faultsExchange(run), 'topic', { durable: true });
      await ch.assertQueue(faultsSeen(run), { durable: true });
      await ch.bindQueue(faultsSeen(run), faultsExchange(run), run.queue);
    });
    await startConsumer(run);
    const rr = await RabbitRetry.connect({ url: URL });
    for (let i = 0; i < N; i += 100) {
      await Promise.all(ids.slice(i, i + 100).map((id) => rr.publish('', run.queue, { id }, { messageId: id })));
    }
    await rr.close();
    await inject(run);
    await waitForSettled(run);
    await stopConsumer(run);

    // With the inbox, what was done is what committed: an id is acked when its effect row is there.
    const effects = INBOX ? effectsOf(run) : new Map<string, number>();
    const acked = INBOX ? new Set(effects.keys()) : new Set(lines(run.successFile));
    const effectsTwice = [...effects].filter(([, n]) => n > 1).map(([id, n]) => `${id}×${n}`);
    const parked = await drainParked(run.queue);
    const leftover = await withChannel(async (ch) => {
      const out: string[] = [];
      for (const q of waitingQueues(run)) {
        for (let m = await ch.get(q, { noAck: true }); m; m = await ch.get(q, { noAck: true })) {
          out.push(`${String(m.properties.messageId)}@${q}`);
        }
      }
      return out;
    });
    const stuckEvents = run.events.filter((e) => !e.includes('"ready"') && !e.includes('"swallowed"'));
    if (stuckEvents.length) console.log(`fault ${fault}: consumer events: ${stuckEvents.slice(0, 20).join(' | ')}`);
    if (leftover.length) console.log(`fault ${fault}: still waiting after the deadline: ${leftover.slice(0, 20).join(', ')}`);
    // An id whose last move was into the queue the fault deleted, close to the
    // deletion (its TTL is short, so earlier ones had left), went with it.
    const lastMove = new Map<string, { target: string; at: number }>();
    for (const [id, target, at] of lines(run.retriesFile).map((l) => l.split(' '))) {
      lastMove.set(id, { target, at: Number(at) });
    }
    const deletedAt = run.deletedAt ?? 0;
    const wentWithQueue = (id: string) => {
      const m = lastMove.get(id);
      return m !== undefined && m.target === run.deletedQueue && m.at > deletedAt - 2000 && m.at < deletedAt + 1000;
    };
    // The broker's shutdown: from the fault to the consumer's first `disconnected` after it. A message
    // confirmed into a classic retry queue then, whose delay ended before its queue stopped, was
    // dead-lettered to a work queue that may have stopped first: RabbitMQ's classic dead-lettering is
    // at most once (docs/reliability.md). Not with brokerDelay (no hop) nor quorum queues (at least once).
    const faultAt = run.faultAt ?? 0;
    const disconnects = eventsOf(run, 'disconnected').map((e) => Number(e.at));
    const shutdowns = (run.restarts ?? []).flatMap((from) => {
      const to = disconnects.find((t) => t >= from);
      return to === undefined ? [] : [{ from, to }];
    });
    const disconnectedAt = shutdowns.at(-1)?.to;
    const delayOf = new Map(DELAYS.map((d) => [retryQueueName(run.queue, d), delayMs(d)] as const));
    const hopDuringShutdown = (id: string) => {
      const m = lastMove.get(id);
      const delay = m && delayOf.get(m.target);
      if (!CLASSIC_HOP || !m || delay === undefined) return false;
      return shutdowns.some(({ from, to }) => m.at + delay >= from && m.at <= to);
    };
    const droppedAtShutdown: string[] = [];
    const wrong: string[] = [];
    const missing: string[] = [];
    const ackedWithoutEffect: string[] = [];
    // With the inbox, a handler that resolved is not an ack: its transaction may not have committed.
    const resolved = new Set(lines(run.successFile));
    const waiting = new Set(leftover.map((l) => l.slice(0, l.indexOf('@'))));
    let destroyed = 0;
    for (const id of ids) {
      const want = expectedEnd(id);
      const reasons = parked.get(id);
      if (!acked.has(id) && !reasons) {
        if (wentWithQueue(id)) destroyed++;
        else if (hopDuringShutdown(id)) droppedAtShutdown.push(id);
        else if (INBOX && resolved.has(id) && !waiting.has(id)) ackedWithoutEffect.push(id);
        else missing.push(id);
      } else if (want === 'acked' ? !acked.has(id) : !reasons?.includes(want)) wrong.push(`${id}: wanted ${want}`);
    }
    const calls = lines(run.callsFile);
    // A swallowed failure costs its message a second call (the plan's successes only: the others throw first).
    const swallowing = INBOX ? ids.filter((id) => swallowsFirstAttempt(id) && expectedOutcome(id) === 'success').length : 0;
    const minCalls = callsNeeded(ids, DELAYS) + swallowing;
    const swallowed = run.events.filter((e) => e.includes('"swallowed"')).length;
    const duplicateParked = [...parked.values()].reduce((n, r) => n + r.length - 1, 0);
    const faults = await faultEventsOf(run);
    const faultsMissing = [...parked.keys()].filter((id) => !faults.has(id));
    const faultsUnparked = [...faults.keys()].filter((id) => !parked.has(id));
    const faultsTwice = [...faults.values()].filter((n) => n > 1).length;
    const lost = missing.length;
    // What became of each lost id, in ms from the fault: its handler calls, its confirmed moves, and
    // where it was found after the deadline (a message the consumer held unacked is given back when it stops).
    const moves = lines(run.retriesFile).map((l) => l.split(' '));
    const account = (id: string) => {
      const its = moves.filter(([m]) => m === id).map(([, target, t]) => `${target}@${Number(t) - faultAt}ms`);
      const left = leftover.filter((l) => l.startsWith(`${id}@`)).map((l) => l.slice(id.length + 1));
      return `${id}: calls ${calls.filter((c) => c === id).length}; moves ${its.join(', ') || 'none'}; after the deadline in ${left.join(', ') || 'no queue'}`;
    };
    const lostAccount = missing.slice(0, 20).map(account);
    if (lost && disconnectedAt !== undefined) lostAccount.push(`the consumer disconnected at ${disconnectedAt - faultAt}ms`);
    if (droppedAtShutdown.length) {
      console.log(
        `fault ${fault}: dropped by the broker's dead-lettering during its shutdown (the consumer disconnected at ${(disconnectedAt ?? faultAt) - faultAt}ms): ${droppedAtShutdown.slice(0, 20).map(account).join(' | ')}`,
      );
    }
    const closing = run.events.filter((e) => e.includes('"closing"')).pop();
    if (lost && closing) lostAccount.push(`the consumer, told to stop: ${closing}`);
    if (lost) console.log(`fault ${fault}: lost ${lostAccount.join(' | ')}`);
    const report: Report = {
      fault,
      n: N,
      lost,
      lostAccount,
      destroyed,
      droppedAtShutdown,
      wrong,
      duplicateCalls: calls.length - minCalls,
      duplicateParked,
      effectsTwice,
      ackedWithoutEffect,
      faultsMissing,
      faultsUnparked,
      events: run.events,
    };
    const inbox = INBOX
      ? ` effects twice=${effectsTwice.length} acked without effect=${ackedWithoutEffect.length} swallowed failures caught=${swallowed} (of ${swallowing} planned first attempts) inbox duplicates skipped=${psql(`SELECT COALESCE(sum(n), 0) FROM rabbit_retry_inbox_duplicates WHERE consumer = '${run.queue}'`, 'test')}`
      : '';
    console.log(
      `fault ${fault}: N=${N} lost=${lost}${run.deletedQueue ? ` (${destroyed} went with the deleted queue)` : ''}${droppedAtShutdown.length ? ` (${droppedAtShutdown.length} dropped by the broker's dead-lettering during its shutdown)` : ''} duplicate handler calls=${report.duplicateCalls} duplicate parked copies=${duplicateParked}${inbox} fault events: ${faults.size} for ${parked.size} parked, missing=${faultsMissing.length} for unparked=${faultsUnparked.length} twice=${faultsTwice} consumer events=${stuckEvents.length}`,
    );
    if (effectsTwice.length) console.log(`fault ${fault}: effects committed twice: ${effectsTwice.slice(0, 20).join(', ')}`);
    if (ackedWithoutEffect.length) console.log(`fault ${fault}: acked without effect: ${ackedWithoutEffect.slice(0, 20).join(', ')}`);
    return report;
  } finally {
    await stopConsumer(run, 'SIGKILL');
    await withChannel((ch) => deleteFamily(ch, run.queue, DELAYS)).catch(() => undefined);
    await withChannel(async (ch) => {
      await ch.deleteQueue(faultsSeen(run));
      await ch.deleteExchange(faultsExchange(run));
    }).catch(() => undefined);
    if (INBOX) {
      psql(`DELETE FROM fault_effects WHERE queue = '${run.queue}'`, 'test');
      psql(`DELETE FROM rabbit_retry_inbox WHERE consumer = '${run.queue}'`, 'test');
      psql(`DELETE FROM rabbit_retry_inbox_duplicates WHERE consumer = '${run.queue}'`, 'test');
    }
    rmSync(run.dir, { recursive: true, force: true });
  }
}

describe(`fault suite (N=${N}, every message acked or parked${INBOX ? ', every effect exactly once' : ''})`, () => {
  beforeAll(async () => {
    if (INBOX) psql('CREATE TABLE IF NOT EXISTS fault_effects (queue text NOT NULL, id text NOT NULL)', 'test');
    await brokerUp();
  });
  afterAll(async () => {
    // The broker restarted by a test is up again for whoever comes next.
    try {
      rabbitmqctl('start_app');
    } catch {
      /* already running */
    }
    await brokerUp();
  });

  it('(a) rabbitmqctl close_all_connections', async () => {
    const r = await ledger('close-connections', async (run) => {
      await waitForProgress(run, N / 4);
      rabbitmqctl('close_all_connections', 'fault suite: close_all_connections');
      await waitForEvent(run, '"recovered"');
    });
    expect(r.lostAccount).toEqual([]);
    expect(r.lost).toBe(0);
    expect(r.wrong).toEqual([]);
    expect(r.effectsTwice).toEqual([]);
    expect(r.ackedWithoutEffect).toEqual([]);
    expect([r.faultsMissing, r.faultsUnparked]).toEqual([[], []]);
    expect(r.events.some((e) => e.includes('"recovered"'))).toBe(true);
  });

  it('(b) broker restart: stop_app, then start_app', async () => {
    const r = await ledger('broker-restart', async (run) => {
      for (let k = 1; k <= RESTARTS; k++) {
        await waitForProgress(run, (k * N) / (RESTARTS + 3));
        run.faultAt = Date.now();
        run.restarts = [...(run.restarts ?? []), run.faultAt];
        rabbitmqctl('stop_app');
        await sleep(2000);
        rabbitmqctl('start_app');
        await brokerUp();
        await waitForEvent(run, '"recovered"', k);
      }
    });
    expect(r.lostAccount).toEqual([]);
    expect(r.lost).toBe(0);
    expect(r.wrong).toEqual([]);
    expect(r.effectsTwice).toEqual([]);
    expect(r.ackedWithoutEffect).toEqual([]);
    expect([r.faultsMissing, r.faultsUnparked]).toEqual([[], []]);
    expect(r.events.some((e) => e.includes('"recovered"'))).toBe(true);
  });

  it('(c) SIGKILL of the consumer process, then a new one', async () => {
    const r = await ledger('sigkill', async (run) => {
      await waitForProgress(run, N / 3);
      await stopConsumer(run, 'SIGKILL');
      await startConsumer(run);
    });
    expect(r.lostAccount).toEqual([]);
    expect(r.lost).toBe(0);
    expect(r.wrong).toEqual([]);
    expect(r.effectsTwice).toEqual([]);
    expect(r.ackedWithoutEffect).toEqual([]);
    expect([r.faultsMissing, r.faultsUnparked]).toEqual([[], []]);
  });

  it('(d) a retry queue deleted mid-run, then declared again by the consumer', async () => {
    if (BROKER_DELAY) {
      console.warn('skipped with FAULT_BROKER_DELAY: onFailure.brokerDelay declares no retry queue');
      return;
    }
    const r = await ledger('retry-queue-deleted', async (run) => {
      await waitForProgress(run, N / 4);
      run.deletedQueue = retryQueueName(run.queue, DELAYS[0]);
      run.deletedAt = Date.now();
      const { messageCount } = await withChannel((ch) => ch.deleteQueue(run.deletedQueue ?? ''));
      console.log(`fault retry-queue-deleted: the deleted queue held ${messageCount} message(s)`);
    });
    expect(r.lostAccount).toEqual([]);
    expect(r.lost).toBe(0);
    expect(r.wrong).toEqual([]);
    expect(r.effectsTwice).toEqual([]);
    expect(r.ackedWithoutEffect).toEqual([]);
    expect([r.faultsMissing, r.faultsUnparked]).toEqual([[], []]);
  });

  it("(e) with the inbox: the inbox's PostgreSQL backends terminated mid-run", async () => {
    if (!INBOX) {
      console.warn('skipped without FAULT_INBOX: only an inbox consumer uses PostgreSQL');
      return;
    }
    const r = await ledger('postgres-backend-killed', async (run) => {
      await waitForProgress(run, N / 4);
      const killed = psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'rr-fault-inbox'");
      console.log(`fault postgres-backend-killed: ${killed} backend(s) terminated`);
      await waitForProgress(run, N / 2);
    });
    expect(r.lostAccount).toEqual([]);
    expect(r.lost).toBe(0);
    expect(r.wrong).toEqual([]);
    expect(r.effectsTwice).toEqual([]);
    expect(r.ackedWithoutEffect).toEqual([]);
    expect([r.faultsMissing, r.faultsUnparked]).toEqual([[], []]);
  });
});
