/**
 * A request whose `reply-to` the broker refuses costs only that request:
 * RabbitRetryServer checks `reply-to` before it answers, answers on a
 * connection of its own, and parks the request (`retry-reason:
 * reply-refused`) when the broker refuses the reply anyway. The consumer's
 * connection stays up, and every other message in flight is handled once.
 */
import 'reflect-metadata';

import { Controller, type INestMicroservice, type LoggerService } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import amqp, { type ConsumeMessage } from 'amqplib';

import { RabbitRetryServer, type RabbitRetryContext } from '../lib/microservices';
import { cleanup, closeAmqp, getOne, it43, queueDepth, queueUnacked, sleep, testQueue, waitFor } from './helpers';
import { AMQP_URL, amqpConnection } from './broker';

/** Collects what Nest logs. */
class CaptureLogger implements LoggerService {
  readonly lines: string[] = [];
  log(message: unknown): void {
    this.lines.push(String(message));
  }
  warn(message: unknown): void {
    this.lines.push(String(message));
  }
  error(message: unknown): void {
    this.lines.push(String(message));
  }
  debug(): void {}
  verbose(): void {}
}

const apps: INestMicroservice[] = [];

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
  await cleanup();
});
afterAll(closeAmqp);

/**
 * A direct reply-to address in the form RabbitMQ gives (the pid of a channel
 * on node `reply@<hash>`, then a key): well formed, so only the broker can
 * tell that no running node has that hash. RabbitMQ 3.10 then closes the
 * publishing connection (541 INTERNAL_ERROR).
 */
function wellFormedReplyTo(nodeHash: number): string {
  const node = Buffer.from(`reply@${nodeHash}`, 'utf8');
  const pid = Buffer.concat([Buffer.from([131, 88, 118, 0, node.length]), node, Buffer.alloc(12)]);
  return `amq.rabbitmq.reply-to.${pid.toString('base64')}.${Buffer.alloc(16, 7).toString('base64')}`;
}

/**
 * Whether the broker closes the connection that publishes to `replyTo`
 * (RabbitMQ 3.10 does for a node it does not know; a broker that decodes
 * such names leniently drops the publish), tried on a connection of its own.
 */
async function brokerClosesOn(replyTo: string): Promise<boolean> {
  const conn = await amqp.connect(AMQP_URL);
  let closed = false;
  conn.on('error', () => (closed = true));
  conn.on('close', () => (closed = true));
  const ch = await conn.createConfirmChannel();
  ch.on('error', () => undefined);
  await new Promise<void>((resolve) => ch.publish('', replyTo, Buffer.from('probe'), { mandatory: true }, () => resolve()));
  await sleep(200);
  const closedByBroker = closed;
  if (!closedByBroker) await conn.close();
  return closedByBroker;
}

/** The parked copies, taken off `queue.parked` once `n` are there. */
async function takeParked(queue: string, n: number): Promise<{ headers: Record<string, unknown>; body: Buffer }[]> {
  await waitFor(async () => (await queueDepth(`${queue}.parked`)) === n, 15_000, `${n} parked message(s) in ${queue}.parked`);
  const out = [];
  for (let i = 0; i < n; i++) {
    const m = await getOne(`${queue}.parked`);
    if (m) out.push({ headers: m.headers, body: m.content });
  }
  return out;
}

describe('RabbitRetryServer: a reply the broker refuses costs only its request', () => {
  test('requests whose reply-to the broker refuses are handled once and parked once as reply-refused; the 20 others are handled once, and the connection stays up', async () => {
    const queue = testQueue(['100ms']);
    const calls = new Map<string, number>();
    const count = (key: string) => calls.set(key, (calls.get(key) ?? 0) + 1);

    @Controller()
    class OrdersController {
      @EventPattern('order_placed')
      async placed(@Payload() data: { key: string }): Promise<void> {
        count(data.key);
        await sleep(30);
      }

      @MessagePattern({ cmd: 'price' })
      async price(@Payload() data: { key: string; amount: number }, @Ctx() ctx: RabbitRetryContext): Promise<{ key: string; total: number }> {
        count(data.key);
        expect(ctx.getMessage().attempt).toBe(0);
        await sleep(30);
        return { key: data.key, total: data.amount * 2 };
      }
    }

    const logger = new CaptureLogger();
    const moduleRef = await Test.createTestingModule({ controllers: [OrdersController] })
      .setLogger(logger)
      .compile();
    const server = new RabbitRetryServer({ queue, prefetch: 30, onFailure: { delays: ['100ms'] } });
    const disconnected: unknown[] = [];
    server.on('disconnected', (e) => disconnected.push(e));
    const app = moduleRef.createNestMicroservice({ strategy: server });
    apps.push(app);
    await app.listen();

    // The callers' side, as Nest's RMQ client does it: direct reply-to on one channel.
    const conn = await amqpConnection();
    const ch = await conn.createConfirmChannel();
    const replies = new Map<string, Record<string, unknown>>();
    await ch.consume(
      'amq.rabbitmq.reply-to',
      (m: ConsumeMessage | null) => {
        if (m) replies.set(String(m.properties.correlationId), JSON.parse(m.content.toString()) as Record<string, unknown>);
      },
      { noAck: true },
    );
    const send = (body: unknown, options: Record<string, unknown> = {}) => ch.sendToQueue(queue, Buffer.from(JSON.stringify(body)), options);

    const bad = [
      // Refused before it is sent: not in the form RabbitMQ gives.
      { key: 'bad-form', replyTo: 'amq.rabbitmq.reply-to.abc.def' },
      // Well formed: refused by the broker, which closes the connection that published it.
      { key: 'bad-node', replyTo: wellFormedReplyTo(12345) },
    ];
    const good: string[] = [];
    for (let i = 0; i < 20; i++) {
      const key = `ok-${i}`;
      good.push(key);
      if (i === 5)
        send({ pattern: { cmd: 'price' }, data: { key: bad[0].key, amount: 1 }, id: bad[0].key }, { replyTo: bad[0].replyTo, correlationId: bad[0].key });
      if (i === 10)
        send({ pattern: { cmd: 'price' }, data: { key: bad[1].key, amount: 1 }, id: bad[1].key }, { replyTo: bad[1].replyTo, correlationId: bad[1].key });
      if (i % 2 === 0) send({ pattern: 'order_placed', data: { key } });
      else send({ pattern: { cmd: 'price' }, data: { key, amount: i }, id: key }, { replyTo: 'amq.rabbitmq.reply-to', correlationId: key });
    }
    await ch.waitForConfirms();

    // The well-formed address is refused only by brokers that close the connection over it.
    const refusing = await brokerClosesOn(bad[1].replyTo);
    const refused = refusing ? bad : bad.slice(0, 1);
    const parked = await takeParked(queue, refused.length);
    await waitFor(() => replies.size === 10, 10_000, 'the 10 replies');
    await waitFor(async () => (await queueDepth(queue)) === 0 && (await queueUnacked(queue)) === 0, 10_000, 'an empty work queue');
    // Long enough for a request that went round again to be seen again.
    await sleep(1_000);
    await ch.close();

    for (const key of [...good, ...bad.map((b) => b.key)]) expect([key, calls.get(key)]).toEqual([key, 1]);
    expect(calls.size).toBe(22);
    const byKey = Object.fromEntries(parked.map((p) => [(JSON.parse(p.body.toString()) as { data: { key: string } }).data.key, p.headers]));
    expect(Object.keys(byKey).sort()).toEqual(refused.map((b) => b.key));
    for (const b of refused) {
      expect(byKey[b.key]).toMatchObject({ 'retry-reason': 'reply-refused', 'retry-attempt': 0, 'retry-error-name': 'ReplyRefusedError' });
      expect(String(byKey[b.key]['retry-last-error'])).toContain(b.replyTo);
    }
    expect(String(byKey['bad-form']['retry-last-error'])).toMatch(/not a direct reply-to address/);
    if (refusing) expect(String(byKey['bad-node']['retry-last-error'])).toMatch(/closed the connection of replies \(541 INTERNAL_ERROR\)/);
    for (let i = 1; i < 20; i += 2)
      expect(replies.get(`ok-${i}`)).toMatchObject({ id: `ok-${i}`, response: { key: `ok-${i}`, total: i * 2 }, isDisposed: true });
    expect(disconnected).toEqual([]);
    expect(server.consumer?.state).toBe('connected');
    expect(await queueDepth(`${queue}.retry.100ms`)).toBe(0);
  });

  it43('a reply the broker refuses for its size answers the caller at once with REPLY_REFUSED, and parks the request', async () => {
    const queue = testQueue(['100ms']);

    @Controller()
    class BigController {
      @MessagePattern({ cmd: 'big' })
      big(): string {
        return 'x'.repeat(17 * 1024 * 1024);
      }
    }

    const moduleRef = await Test.createTestingModule({ controllers: [BigController] })
      .setLogger(new CaptureLogger())
      .compile();
    const app = moduleRef.createNestMicroservice({ strategy: new RabbitRetryServer({ queue, onFailure: { delays: ['100ms'] } }) });
    apps.push(app);
    await app.listen();

    const conn = await amqpConnection();
    const ch = await conn.createConfirmChannel();
    let reply: Record<string, unknown> | undefined;
    await ch.consume(
      'amq.rabbitmq.reply-to',
      (m: ConsumeMessage | null) => {
        if (m) reply = JSON.parse(m.content.toString()) as Record<string, unknown>;
      },
      { noAck: true },
    );
    const sent = Date.now();
    ch.sendToQueue(queue, Buffer.from(JSON.stringify({ pattern: { cmd: 'big' }, data: {}, id: 'big-1' })), {
      replyTo: 'amq.rabbitmq.reply-to',
      correlationId: 'big-1',
    });
    await waitFor(() => reply !== undefined, 10_000, 'the answer');
    expect(Date.now() - sent).toBeLessThan(10_000);
    expect(reply).toMatchObject({ id: 'big-1', isDisposed: true });
    expect(String(reply?.err)).toMatch(/^REPLY_REFUSED: .*max_message_size/);
    const [parked] = await takeParked(queue, 1);
    expect(parked.headers).toMatchObject({ 'retry-reason': 'reply-refused', 'retry-error-name': 'ReplyRefusedError' });
    await ch.close();
  });
});
