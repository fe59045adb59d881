/**
 * A broker that stops answering, with every socket still open, cannot hold a
 * consumer: each broker round trip of starting, recovering or stopping has a
 * bound (`recovery.stepTimeoutMs`), so recovery keeps trying and `close()`
 * returns even when JavaScript's own bound is far away.
 */
import { RabbitRetry } from '../lib';
import { freezeProxy, type FreezeProxy } from './fixtures/freeze-proxy';
import { cleanup, closeAmqp, deleteQueue, queueDepth, sleep, testQueue, track, waitFor, withChannel } from './helpers';

const proxies: FreezeProxy[] = [];
const clients: RabbitRetry[] = [];
afterEach(async () => {
  for (const p of proxies) p.thaw();
  for (const rr of clients.splice(0)) await rr.close({ timeoutMs: 2000 });
  for (const p of proxies.splice(0)) await p.close();
});
afterEach(cleanup);
afterAll(closeAmqp);

/** A client whose connection goes through a proxy the test can freeze; no heartbeats, so nothing else notices. */
async function frozenLater(): Promise<{ rr: RabbitRetry; proxy: FreezeProxy }> {
  const proxy = await freezeProxy();
  proxies.push(proxy);
  const rr = await RabbitRetry.connect({ url: `amqp://guest:guest@127.0.0.1:${proxy.port}`, heartbeat: 0 });
  clients.push(rr);
  return { rr, proxy };
}

describe('a broker that stops answering', () => {
  it('close() returns within the step bound, not the 60 s close bound', async () => {
    const { rr, proxy } = await frozenLater();
    const queue = testQueue(['1m']);
    const handled: string[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['1m'] }, recovery: { stepTimeoutMs: 300 } }, (m) => {
        handled.push(m.text());
      }),
    );
    await withChannel(async (ch) => {
      ch.sendToQueue(queue, Buffer.from('before'));
    });
    await waitFor(async () => handled.length === 1, 5000, 'the first message handled');
    proxy.freeze();
    const started = Date.now();
    const result = await consumer.close({ timeoutMs: 60_000 });
    const took = Date.now() - started;
    expect(result.unfinished).toBe(0);
    // cancel, drain and channel close each give up after 300 ms.
    expect(took).toBeLessThan(10_000);
    expect(consumer.state).toBe('closed');
    proxy.thaw();
    expect(handled).toEqual(['before']);
  });

  it('a recovery step with no answer does not hold close(), and recovery goes on once the broker answers', async () => {
    const { rr, proxy } = await frozenLater();
    const lost = testQueue(['1m']);
    const steady = testQueue(['1m']);
    const handled: string[] = [];
    const opts = (queue: string) => ({
      queue,
      onFailure: { delays: ['1m' as const] },
      recovery: { initialDelayMs: 50, maxDelayMs: 200, stepTimeoutMs: 300 },
    });
    const consumer = track(await rr.consume(opts(lost), () => undefined));
    const other = track(
      await rr.consume(opts(steady), (m) => {
        handled.push(m.text());
      }),
    );
    const disconnected = new Promise((resolve) => consumer.once('disconnected', resolve));
    // The client's frames stop reaching the broker; the broker's still reach the client.
    proxy.freeze({ toBroker: true, toClient: false });
    // Deleting the queue cancels the consumer: it starts recovering, and its
    // first step (a channel for declaring) gets no answer.
    await deleteQueue(lost);
    await disconnected;
    await sleep(1000);
    expect(consumer.state).toBe('recovering');
    proxy.thaw();
    // Recovery tries again after the bounded step and consumes again.
    await waitFor(async () => consumer.state === 'connected', 15_000, 'the consumer recovered');
    // The other consumer of the same client was never disturbed.
    await withChannel(async (ch) => {
      ch.sendToQueue(steady, Buffer.from('after'));
    });
    await waitFor(async () => handled.includes('after'), 5000, 'the other consumer handled a message');
    expect(other.state).toBe('connected');

    // Frozen again, during recovery: close() returns within the step bounds.
    proxy.freeze({ toBroker: true, toClient: false });
    const again = new Promise((resolve) => consumer.once('disconnected', resolve));
    await deleteQueue(lost);
    await again;
    await sleep(500);
    const started = Date.now();
    await consumer.close({ timeoutMs: 60_000 });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(consumer.state).toBe('closed');
    proxy.thaw();
    expect(await queueDepth(steady)).toBe(0);
  });
});
