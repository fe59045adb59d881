/**
 * The golevelup-compatible AmqpConnection made on its own, as a golevelup
 * service makes one: golevelup's 5 s heartbeat, a publish no queue takes
 * resolving unless `mandatory`, amqplib's channel on a connection of its own,
 * and `amqplibChannel: false` for no second connection.
 */
import { AmqpConnection, type RabbitRetryModuleOptions } from '../lib/nestjs';
import { AMQP_URL, closeAmqp, queueDepth, rabbitmqctl, testQueue, uniqueName, withChannel } from './helpers';

const opened: AmqpConnection[] = [];

afterEach(async () => {
  for (const c of opened.splice(0)) await c.close().catch(() => undefined);
});

afterAll(closeAmqp);

async function connect(config: RabbitRetryModuleOptions): Promise<AmqpConnection> {
  const c = new AmqpConnection(config);
  opened.push(c);
  await c.init();
  return c;
}

/** The broker's connections of this test: their names, timeouts (the heartbeat) and client products. */
async function connections(): Promise<{ name: string; timeout: number; product: string }[]> {
  const listing = await rabbitmqctl(['list_connections', '-q', '--no-table-headers', 'client_properties', 'timeout']);
  return listing
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [props, timeout] = l.split('\t');
      return {
        name: /\{"connection_name","([^"]*)"\}/.exec(props)?.[1] ?? '',
        timeout: Number(timeout),
        product: /\{"product","([^"]*)"\}/.exec(props)?.[1] ?? '',
      };
    });
}

describe('new AmqpConnection(config)', () => {
  it("heartbeats every 5 s, as golevelup's does, unless told otherwise", async () => {
    const name = uniqueName('amqp-connection');
    await connect({ url: AMQP_URL, connectionName: name, amqplibChannel: false });
    expect((await connections()).filter((c) => c.name === name).map((c) => c.timeout)).toEqual([5]);
  });

  it('resolves a publish no queue takes; with mandatory: true it rejects UNROUTABLE; a routed one arrives', async () => {
    const c = await connect({ url: AMQP_URL, amqplibChannel: false });
    await expect(c.publish('', uniqueName('nobody'), { orderId: 48213 })).resolves.toBe(true);
    await expect(c.publish('', uniqueName('nobody'), { orderId: 48213 }, { mandatory: true })).rejects.toMatchObject({ code: 'UNROUTABLE' });
    const queue = testQueue();
    await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
    await expect(c.publish('', queue, { orderId: 48213 }, { mandatory: true })).resolves.toBe(true);
    expect(await queueDepth(queue)).toBe(1);
  });

  it("offers amqplib's channel on an amqplib connection of its own", async () => {
    const queue = testQueue();
    const c = await connect({ url: AMQP_URL });
    const channel = c.channel as unknown as { assertQueue(q: string, o: object): Promise<{ queue: string }> };
    await expect(channel.assertQueue(queue, { durable: true })).resolves.toMatchObject({ queue });
    expect(await queueDepth(queue)).toBe(0);
  });

  it('with amqplibChannel: false opens no second connection, and channel names what to use instead', async () => {
    const name = uniqueName('amqp-connection');
    const before = (await connections()).length;
    const c = await connect({ url: AMQP_URL, connectionName: name, amqplibChannel: false });
    expect((await connections()).length).toBe(before + 1);
    expect(() => c.channel).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_OPTION', message: expect.stringContaining('amqplibChannel: false') }));
    expect(() => c.channel).toThrow(/amqpConnection\.client\.declareQueue/);
  });

  it('refuses an amqplibChannel that is not true or false', async () => {
    await expect(connect({ url: AMQP_URL, amqplibChannel: 'no' as never })).rejects.toMatchObject({ code: 'INVALID_OPTIONS' });
  });
});
