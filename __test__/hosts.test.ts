/**
 * Several brokers in `url`: the first connect tries each, a lost connection
 * moves to the next, and every event and error names the node without its
 * password. The two "nodes" here are two addresses of the one local broker
 * (127.0.0.1 and localhost), so a move is visible in the URLs; the cluster
 * test (`npm run test:cluster`) does the same against three real nodes.
 */
import { ConnectionError, InvalidOptionsError, RabbitRetry, type Message } from '../lib';
import { run, type CliIo } from '../lib/cli';
import { AMQP_URL, closeAmqp, sleep, uniqueName } from './broker';
import { cleanup, closeOwnConnection, connectClient, testQueue, track, waitFor } from './helpers';

const local = new URL(AMQP_URL);
const port = local.port || '5672';
const NODE_A = `amqp://guest:guest@127.0.0.1:${port}`;
const NODE_B = `amqp://guest:guest@localhost:${port}`;
const shown = (url: string) => url.replace(':guest@', ':***@');
/** Ports nothing listens on: a node that is down. */
const DOWN_1 = 'amqp://app:s3cret@127.0.0.1:1';
const DOWN_2 = 'amqp://app:s3cret@127.0.0.1:9';

afterEach(cleanup);
afterAll(closeAmqp);

describe('connecting to one of several brokers', () => {
  it('tries the nodes as listed with hostOrder ordered, and says which one it is on', async () => {
    const rr = await connectClient({ url: [DOWN_1, NODE_A, NODE_B], hostOrder: 'ordered', connectTimeoutMs: 2000 });
    expect(rr.url).toBe(shown(NODE_A));
    expect(rr.urls).toEqual(['amqp://app:***@127.0.0.1:1', shown(NODE_A), shown(NODE_B)]);
  });

  it('shuffles by default, so a fleet spreads over the nodes', async () => {
    const firsts = new Set<string>();
    for (let i = 0; i < 12 && firsts.size < 2; i++) {
      const rr = await RabbitRetry.connect({ url: [NODE_A, NODE_B] });
      firsts.add(rr.url);
      expect([...rr.urls].sort()).toEqual([shown(NODE_A), shown(NODE_B)].sort());
      await rr.close();
      await sleep(3);
    }
    expect(firsts.size).toBe(2);
  });

  it('fails with CONNECTION naming every node tried, without passwords, when none answers', async () => {
    const err = await RabbitRetry.connect({ url: [DOWN_1, DOWN_2], connectTimeoutMs: 2000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    const message = (err as Error).message;
    expect(message).toContain('none of the 2 brokers could be reached');
    expect(message).toContain('amqp://app:***@127.0.0.1:1');
    expect(message).toContain('amqp://app:***@127.0.0.1:9');
    expect(message).not.toContain('s3cret');
  });

  it.each([
    [{ url: [] }, 'url must be'],
    [{ url: [NODE_A, ''] }, 'url[1] must be'],
    [{ url: [NODE_A, 5] }, 'url[1] must be'],
    [{ url: NODE_A, hostOrder: 'random' }, "hostOrder must be 'shuffle' or 'ordered'"],
    [{ url: [NODE_A, 'http://x'] }, 'is not an AMQP URL'],
  ])('refuses %j with INVALID_OPTIONS', async (options, text) => {
    const err = await RabbitRetry.connect(options as never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toContain(text);
  });

  it('reads several brokers from AMQP_URL, separated by commas', async () => {
    const saved = process.env.AMQP_URL;
    process.env.AMQP_URL = ` ${DOWN_1} , ${NODE_A}`;
    try {
      const rr = await RabbitRetry.connect({ hostOrder: 'ordered', connectTimeoutMs: 2000 });
      expect(rr.urls).toEqual(['amqp://app:***@127.0.0.1:1', shown(NODE_A)]);
      expect(rr.url).toBe(shown(NODE_A));
      await rr.close();
    } finally {
      if (saved === undefined) delete process.env.AMQP_URL;
      else process.env.AMQP_URL = saved;
    }
  });
});

describe('failover', () => {
  it('moves a consumer to the next node when its connection is lost, and loses nothing', async () => {
    const connectionName = uniqueName('rr-hosts');
    const rr = await connectClient({ url: [NODE_A, NODE_B], hostOrder: 'ordered', connectionName });
    const queue = testQueue(['1s']);
    const seen = new Set<string>();
    const disconnected: string[] = [];
    const recovered: string[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: ['1s'] }, recovery: { initialDelayMs: 100 } }, async (msg: Message) => {
        seen.add(msg.properties.messageId ?? '');
      }),
    );
    expect(consumer.stats().url).toBe(shown(NODE_A));
    consumer.on('disconnected', (e) => disconnected.push(e.url));
    consumer.on('recovered', (e) => recovered.push(e.url));
    for (let i = 0; i < 20; i++) await rr.publish('', queue, { n: i }, { messageId: `m${i}` });
    await waitFor(async () => seen.size === 20, 10_000, 'the first 20 messages');

    await closeOwnConnection(connectionName);
    await waitFor(async () => recovered.length === 1, 15_000, 'the consumer to recover');
    expect(disconnected).toEqual([shown(NODE_A)]);
    expect(recovered).toEqual([shown(NODE_B)]);
    expect(rr.url).toBe(shown(NODE_B));
    expect(consumer.stats().url).toBe(shown(NODE_B));

    for (let i = 20; i < 40; i++) await rr.publish('', queue, { n: i }, { messageId: `m${i}` });
    await waitFor(async () => seen.size === 40, 10_000, 'the 20 published after the move');
  });
});

describe('the CLI', () => {
  function io(env: Record<string, string> = {}): CliIo & { text: () => string; errors: () => string } {
    let text = '';
    let errors = '';
    return {
      out: (s: string) => void (text += s),
      err: (s: string) => void (errors += s),
      isTTY: false,
      env,
      text: () => text,
      errors: () => errors,
    };
  }

  it('takes --url repeated or separated by commas', async () => {
    const queue = testQueue();
    const rr = await connectClient();
    track(await rr.consume({ queue }, async () => undefined));
    for (const args of [
      ['--url', DOWN_1, '--url', NODE_A],
      ['--url', `${DOWN_1},${NODE_A}`],
    ]) {
      const out = io();
      const code = await run([...args, '--json', 'status', queue], out);
      expect({ code, errors: out.errors() }).toEqual({ code: 0, errors: '' });
      expect(JSON.parse(out.text())).toMatchObject({ queue });
    }
  });

  it('names every broker it tried when none answers', async () => {
    const out = io({ AMQP_URL: `${DOWN_1},${DOWN_2}` });
    const code = await run(['status', 'q'], out);
    expect(code).toBe(1);
    expect(out.errors()).toContain('none of the 2 brokers could be reached');
    expect(out.errors()).not.toContain('s3cret');
  });
});
