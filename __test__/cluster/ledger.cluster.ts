/**
 * The cluster suite: the fault suite's ledger on the three-node cluster of
 * `scripts/cluster.sh`, with quorum work, retry and parked queues (replicated
 * on all three nodes). A consumer in a child process knows all three nodes;
 * this process publishes the ledger through `rr.publish` on the same nodes.
 * Then, mid-run, the node the consumer is connected to is SIGKILLed (and
 * brought back later), and after it the node leading a retry queue while
 * messages wait in it. At the end: published = handled + parked, nothing
 * lost, duplicates counted and printed, and the time the consumer took to
 * consume again after each kill.
 *
 * The same ledger runs again with `onFailure.brokerDelay` (RabbitMQ 4.3 or
 * later: `RABBITMQ_SERIES=4.3 npm run test:cluster`): no retry queue, the
 * failed messages wait in the work queue's delayed state, and the second
 * kill is of the work queue's leader while messages wait there.
 */
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';

import * as amqp from 'amqplib';

import { RabbitRetry, parkedQueueName, retryQueueName, type Delay, type DisconnectedEvent, type RecoveredEvent } from '../../lib';
import { expectedEnd } from '../faults/plan';
import {
  type Run,
  callsNeeded,
  deleteFamily,
  drainParked as parkedOf,
  eventsOf,
  lines,
  newRun,
  sleep,
  startConsumer,
  stopConsumer,
  waitForEvent,
  waitForProgress,
} from '../faults/kit';

const BASE = Number(process.env.CLUSTER_PORT_BASE ?? 5681);
const NODES = [0, 1, 2].map((i) => `amqp://guest:guest@127.0.0.1:${BASE + i}`);
const N = Number(process.env.CLUSTER_N ?? 2000);
/** Long enough that messages wait in the second retry queue when its leader is killed. */
const DELAYS: Delay[] = ['1s', '4s'];
const DEADLINE_MS = 240_000;
/** The bound the test holds the consumer to after a kill (it prints what it took). */
const CONSUMING_AGAIN_WITHIN_MS = 30_000;

jest.setTimeout(600_000);

const script = join(__dirname, '..', '..', 'scripts', 'cluster.sh');
function cluster(...args: string[]): string {
  return execFileSync('bash', [script, ...args], { encoding: 'utf8', timeout: 180_000 }).trim();
}

/** The cluster node (1, 2 or 3) whose AMQP port `url` names. */
function nodeOf(url: string): number {
  return Number(new URL(url.replace(/^amqps?:/, 'http:')).port) - BASE + 1;
}

/** Runs `f` on a channel of the first node that answers. */
async function withChannel<T>(f: (ch: amqp.Channel) => Promise<T>): Promise<T> {
  let last: unknown;
  for (const url of NODES) {
    let conn: amqp.ChannelModel | undefined;
    try {
      conn = await amqp.connect(url);
    } catch (err) {
      last = err;
      continue;
    }
    try {
      const ch = await conn.createChannel();
      return await f(ch);
    } finally {
      await conn.close().catch(() => undefined);
    }
  }
  throw last;
}

/** The cluster's RabbitMQ version, as its first answering node tells it at connection start. */
async function clusterVersion(): Promise<[number, number]> {
  for (const url of NODES) {
    try {
      const conn = await amqp.connect(url);
      const props = (conn as unknown as { connection: { serverProperties?: { version?: unknown } } }).connection.serverProperties;
      await conn.close();
      const [major = 0, minor = 0] = (typeof props?.version === 'string' || Buffer.isBuffer(props?.version) ? props.version.toString() : '0.0')
        .split('.')
        .map((p) => Number.parseInt(p, 10) || 0);
      return [major, minor];
    } catch {
      // the next node
    }
  }
  return [0, 0];
}

async function depth(queue: string): Promise<number> {
  return withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount).catch(() => 0);
}

/** What this process's publishing saw: every publish ends confirmed or with an error. */
interface Publishing {
  confirmed: Set<string>;
  /** Publishes that failed (then published again). */
  errors: string[];
  /** Publishes that neither confirmed nor failed within the confirm timeout and a margin. */
  silent: number;
  done: Promise<void>;
}

const CONFIRM_TIMEOUT_MS = 10_000;

/** Publishes `ids` at about `perSec`, each until the broker confirms it. */
function publish(rr: RabbitRetry, queue: string, ids: readonly string[], perSec: number): Publishing {
  const p: Publishing = { confirmed: new Set(), errors: [], silent: 0, done: Promise.resolve() };
  const one = async (id: string): Promise<void> => {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const silence = new Promise<'silent'>((r) => (timer = setTimeout(() => r('silent'), CONFIRM_TIMEOUT_MS + 5000)));
      const outcome = await Promise.race([
        rr.publish('', queue, { id }, { messageId: id }).then(
          () => 'confirmed' as const,
          (e: unknown) => e as Error,
        ),
        silence,
      ]);
      clearTimeout(timer);
      if (outcome === 'confirmed') {
        p.confirmed.add(id);
        return;
      }
      if (outcome === 'silent') p.silent++;
      else p.errors.push(`${id}: ${outcome.message}`);
      await sleep(200);
    }
  };
  p.done = (async () => {
    const batch = Math.max(1, Math.round(perSec / 10));
    const pending: Promise<void>[] = [];
    for (let i = 0; i < ids.length; i += batch) {
      pending.push(...ids.slice(i, i + batch).map(one));
      await sleep(100);
    }
    await Promise.all(pending);
  })();
  return p;
}

async function drainParked(queue: string): Promise<Map<string, string[]>> {
  return withChannel((ch) => parkedOf(ch, queue));
}

/**
 * Waits until every id is acked or parked and nothing waits ready in the work
 * or retry queues (`delays`: those of the run; none with brokerDelay).
 */
async function waitForSettled(run: Run, ids: readonly string[], delays: readonly Delay[] = DELAYS): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  const queues = [run.queue, ...delays.map((d) => retryQueueName(run.queue, d))];
  for (;;) {
    const acked = new Set(lines(run.successFile)).size;
    const parked = await depth(parkedQueueName(run.queue));
    const waiting = (await Promise.all(queues.map(depth))).reduce((a, b) => a + b, 0);
    if (acked + parked >= ids.length && waiting === 0) return;
    if (Date.now() > deadline) return; // the assertions say what is missing
    await sleep(500);
  }
}

/** Kills `node` and waits until the consumer consumes again; returns the ms that took. */
async function killAndWait(run: Run, node: number, recoveredBefore: number): Promise<number> {
  const killedAt = Date.now();
  console.log(cluster('kill', String(node)));
  await waitForEvent(run, '"recovered"', recoveredBefore + 1, 120_000);
  const recovered = eventsOf(run, 'recovered')[recoveredBefore];
  return Number(recovered.at) - killedAt;
}

/** One run of the ledger on the cluster: how it retries, and where messages wait when the second node dies. */
interface LedgerMode {
  /** Names the run's queue, and starts its log lines. */
  label: string;
  /** The retry queues' delays (none with brokerDelay). */
  delays: Delay[];
  /** As many delays as the plan's attempts: what callsNeeded counts by. */
  attempts: Delay[];
  /** The consumer's environment beyond the nodes. */
  env: Record<string, string>;
  /** Messages published a second. */
  perSec: number;
  /** Waits until messages wait in the queue whose leader is killed second: its name, how many wait, and what that is. */
  waiting: (run: Run) => Promise<{ queue: string; count: number; what: string }>;
}

/**
 * Publishes the ledger through the kills of the consumer's node and of the
 * leader of the queue where messages wait, then holds the end to the plan:
 * published = handled + parked, nothing lost, each with its expected end.
 */
async function clusterLedger(mode: LedgerMode): Promise<void> {
  const { label } = mode;
  const run = newRun(label.replace(/ /g, '-'));
  const ids = Array.from({ length: N }, (_, i) => `m-${i}`);
  let publisher: RabbitRetry | undefined;
  try {
    await startConsumer(run, mode.delays, { AMQP_URL: NODES.join(','), FAULT_HOST_ORDER: 'ordered', ...mode.env });
    const consumerNode = nodeOf(String(eventsOf(run, 'ready')[0].url));
    publisher = await RabbitRetry.connect({ url: NODES, hostOrder: 'ordered', confirmTimeoutMs: CONFIRM_TIMEOUT_MS });
    // Paced so that publishing goes on through the first kill and the restart after it.
    const publishing = publish(publisher, run.queue, ids, mode.perSec);

    // 1. The node the consumer (and the publisher) is connected to dies mid-run.
    await waitForProgress(run, N / 4, DEADLINE_MS);
    const firstKill = await killAndWait(run, consumerNode, 0);
    const movedTo = String(eventsOf(run, 'recovered')[0].url);
    console.log(`${label}: killed rr${consumerNode}, the consumer's node: consuming again after ${firstKill} ms, on ${movedTo}`);
    console.log(cluster('restart', String(consumerNode)));

    // 2. The node leading the queue where messages wait dies while they wait.
    const waiting = await mode.waiting(run);
    const leader = cluster('leader', waiting.queue);
    const leaderNode = Number(leader.replace(/^rr(\d).*/, '$1'));
    const onLeader = nodeOf(String(eventsOf(run, 'recovered').at(-1)?.url)) === leaderNode;
    const recoveredSoFar = eventsOf(run, 'recovered').length;
    let secondKill: number | undefined;
    if (onLeader) secondKill = await killAndWait(run, leaderNode, recoveredSoFar);
    else console.log(cluster('kill', String(leaderNode)));
    console.log(
      `${label}: killed ${leader}, leader of ${waiting.queue} ${waiting.what}` +
        (secondKill === undefined ? ' (the consumer was on another node)' : `: consuming again after ${secondKill} ms`),
    );
    await sleep(5000);
    console.log(cluster('restart', String(leaderNode)));
    await publishing.done;

    await waitForSettled(run, ids, mode.delays);
    await stopConsumer(run);

    const successes = lines(run.successFile);
    const acked = new Set(successes);
    const parked = await drainParked(run.queue);
    const missing: string[] = [];
    const wrong: string[] = [];
    for (const id of ids) {
      const want = expectedEnd(id);
      const reasons = parked.get(id);
      if (!acked.has(id) && !reasons) missing.push(id);
      else if (want === 'acked' ? !acked.has(id) : !reasons?.includes(want)) wrong.push(`${id}: wanted ${want}, got ${reasons?.join('+') ?? 'acked'}`);
    }
    const calls = lines(run.callsFile).length;
    const duplicateParked = [...parked.values()].reduce((n, r) => n + r.length - 1, 0);
    const handled = acked.size;
    const parkedCount = [...parked.keys()].filter((id) => !acked.has(id)).length;
    console.log(
      `${label} ledger: published ${publishing.confirmed.size} (publish errors ${publishing.errors.length}, silent ${publishing.silent}), ` +
        `handled ${handled} + parked ${parkedCount} = ${handled + parkedCount}, lost ${missing.length}, ` +
        `handled twice ${successes.length - handled}, handler calls ${calls} (the plan needs ${callsNeeded(ids, mode.attempts)}), ` +
        `duplicate parked copies ${duplicateParked}, returns or moves to retry ${lines(run.retriesFile).length}; ` +
        `consuming again ${firstKill} ms after the kill of its node` +
        (secondKill === undefined ? '' : `, ${secondKill} ms after the kill of the leader of ${waiting.queue}`),
    );
    if (publishing.errors.length) console.log(`${label}: publish errors (each published again): ${publishing.errors.slice(0, 5).join(' | ')}`);
    if (missing.length) console.log(`${label}: lost ${missing.slice(0, 20).join(', ')}`);
    if (wrong.length) console.log(`${label}: wrong end ${wrong.slice(0, 20).join(', ')}`);
    expect(publishing.confirmed.size).toBe(N);
    expect(publishing.silent).toBe(0);
    expect(waiting.count).toBeGreaterThan(0);
    expect(missing).toEqual([]);
    expect(wrong).toEqual([]);
    expect(handled + parkedCount).toBe(N);
    expect(firstKill).toBeLessThan(CONSUMING_AGAIN_WITHIN_MS);
    if (secondKill !== undefined) expect(secondKill).toBeLessThan(CONSUMING_AGAIN_WITHIN_MS);
  } finally {
    await publisher?.close().catch(() => undefined);
    await stopConsumer(run, 'SIGKILL');
    await withChannel((ch) => deleteFamily(ch, run.queue, mode.delays)).catch(() => undefined);
    rmSync(run.dir, { recursive: true, force: true });
  }
}

/** Polls `count` until it reaches 10, for at most a minute; returns the last count. */
async function atLeastTen(count: () => number | Promise<number>): Promise<number> {
  const deadline = Date.now() + 60_000;
  while ((await count()) < 10 && Date.now() < deadline) await sleep(100);
  return count();
}

describe(`a three-node cluster loses a node mid-run (N=${N}, quorum queues)`, () => {
  beforeAll(() => {
    console.log(cluster('start'));
  });

  it('the consumer moves to another node, the retry queues keep their messages, and nothing is lost', async () => {
    await clusterLedger({
      label: 'cluster',
      delays: DELAYS,
      attempts: DELAYS,
      env: { FAULT_QUEUE_TYPE: 'quorum' },
      perSec: 100,
      waiting: async (run) => {
        const queue = retryQueueName(run.queue, DELAYS[1]);
        const count = await atLeastTen(() => depth(queue));
        return { queue, count, what: `holding ${count} message(s)` };
      },
    });
  });

  it("with onFailure.brokerDelay: the consumer moves, the work queue's leader dies with messages delayed in it, and nothing is lost", async () => {
    const [major, minor] = await clusterVersion();
    if (major < 4 || (major === 4 && minor < 3)) {
      console.warn(`skipped: the cluster runs RabbitMQ ${major}.${minor}; onFailure.brokerDelay needs 4.3 (RABBITMQ_SERIES=4.3 npm run test:cluster)`);
      return;
    }
    // 2 s, then 4 s, then it parks: 2 attempts, as many as DELAYS gives the first case.
    const minMs = 2000;
    await clusterLedger({
      label: 'cluster brokerDelay',
      delays: [],
      attempts: ['2s', '4s'],
      env: { FAULT_BROKER_DELAY: `${minMs}ms,4s,2` },
      // Slower: publishing goes on through the first kill, its restart and the second kill.
      perSec: 50,
      // Returned in the last 2 s, so each waits at least as long again (a passive declare cannot count them).
      waiting: async (run) => {
        const count = await atLeastTen(() => lines(run.retriesFile).filter((l) => Number(l.split(' ')[2]) > Date.now() - minMs).length);
        return { queue: run.queue, count, what: `with at least ${count} message(s) delayed` };
      },
    });
  });

  it('a classic queue whose node is down: its consumer waits, without a crash loop, and recovers when the node is back', async () => {
    const queue = `rr-cluster-classic-${Date.now()}`;
    // The work queue lives on rr3 (declared through it); the consumer is connected to rr1.
    const conn3 = await amqp.connect(NODES[2]);
    await (await conn3.createChannel()).assertQueue(queue, { durable: true });
    await conn3.close();
    const rr = await RabbitRetry.connect({ url: NODES, hostOrder: 'ordered' });
    const handled: string[] = [];
    const disconnected: DisconnectedEvent[] = [];
    const recovered: RecoveredEvent[] = [];
    const consumer = await rr.consume({ queue, onFailure: { delays: ['1s'] }, recovery: { initialDelayMs: 200, maxDelayMs: 2000 } }, async (msg) => {
      handled.push(msg.properties.messageId ?? '?');
    });
    consumer.on('disconnected', (e) => disconnected.push(e));
    consumer.on('recovered', (e) => recovered.push(e));
    try {
      for (let i = 0; i < 20; i++) await rr.publish('', queue, { i }, { messageId: `before-${i}` });
      const until = async (what: string, done: () => boolean, ms = 60_000) => {
        const deadline = Date.now() + ms;
        while (!done()) {
          if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
          await sleep(100);
        }
      };
      await until('the first 20', () => handled.length === 20);

      console.log(cluster('kill', '3'));
      const killedAt = Date.now();
      await until('the loss', () => disconnected.length === 1);
      await sleep(8000);
      // Recovery keeps trying with backoff while the queue's node is down: one event, no loop.
      expect(consumer.state).toBe('recovering');
      expect(disconnected.length).toBe(1);
      expect(recovered.length).toBe(0);
      console.log(`cluster: classic queue on rr3 down: ${disconnected[0].error.message}`);

      console.log(cluster('restart', '3'));
      await until('recovery after the node came back', () => recovered.length === 1, 120_000);
      console.log(
        `cluster: the consumer of the classic queue recovered ${Date.now() - killedAt} ms after the kill, after ${recovered[0].attempts} tries, on ${recovered[0].url}`,
      );
      for (let i = 0; i < 20; i++) await rr.publish('', queue, { i }, { messageId: `after-${i}` });
      await until('the 20 published after', () => new Set(handled).size === 40).catch(async (e: unknown) => {
        const q = await withChannel((ch) => ch.checkQueue(queue)).catch((err: unknown) => String(err));
        console.log(
          `cluster: classic queue after recovery: ${JSON.stringify(q)}, consumer ${consumer.state}, handled ${handled.length}: ${handled.join(',')}`,
        );
        throw e;
      });
      // A delivery whose ack was on its way when the queue's node died comes again (at least once).
      console.log(`cluster: classic queue: 40 messages, ${handled.length - 40} handled twice`);
      expect(new Set(handled).size).toBe(40);
    } finally {
      await consumer.close().catch(() => undefined);
      await withChannel(async (ch) => {
        await deleteFamily(ch, queue, ['1s']);
      }).catch(() => undefined);
      await rr.close().catch(() => undefined);
    }
  });
});
