/**
 * The module's AmqpConnection without amqplib's channel (`amqplibChannel: false`
 * in RabbitRetryModule's options), and `managedChannel`, which it never has.
 * (The standalone connection's `amqplibChannel: false` is in amqp-connection.test.ts.)
 */
import 'reflect-metadata';

import { AmqpConnection, RabbitRetryModule } from '../lib/nestjs';
import { AMQP_URL, closeAmqp, rabbitmqctl, uniqueName } from './helpers';
import { boot, closeApps } from './nest-boot';

afterEach(closeApps);
afterAll(closeAmqp);

/** The broker's connections whose client says it is amqplib, and the named ones of this test. */
async function connectionsNamed(prefix: string): Promise<{ named: number; amqplibFromSameProcess: number }> {
  const listing = await rabbitmqctl(['list_connections', '-q', '--no-table-headers', 'client_properties']);
  const lines = listing.split('\n').filter((l) => l.trim() !== '');
  return {
    named: lines.filter((l) => l.includes(`"${prefix}`)).length,
    amqplibFromSameProcess: lines.filter((l) => l.includes('"amqplib"')).length,
  };
}

describe("RabbitRetryModule's AmqpConnection", () => {
  test("with amqplibChannel: false opens no amqplib connection; channel and connection throw UNSUPPORTED_OPTION naming the client's methods", async () => {
    const name = uniqueName('amqp-module');
    const amqplibBefore = (await connectionsNamed(name)).amqplibFromSameProcess;
    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, connectionName: name, amqplibChannel: false })] });
    const amqp = app.get(AmqpConnection);
    const after = await connectionsNamed(name);
    expect(after.named).toBe(1);
    expect(after.amqplibFromSameProcess).toBe(amqplibBefore);

    let thrown: unknown;
    try {
      expect(amqp.channel).toBeUndefined();
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ code: 'UNSUPPORTED_OPTION', option: 'channel' });
    const message = (thrown as Error).message;
    expect(message).toContain('the module was given `amqplibChannel: false`');
    for (const method of ['amqpConnection.client.declareQueue', '`declareExchange`', '`bindQueue`', '`checkQueue`']) expect(message).toContain(method);
    expect(() => amqp.connection).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_OPTION', option: 'connection' }));
    // The client is there, and publishes.
    await expect(amqp.publish('', uniqueName('nobody'), { n: 1 })).resolves.toBe(true);
  });

  test('managedChannel throws UNSUPPORTED_OPTION, with or without the amqplib channel, naming publish and channel', async () => {
    const amqplibBefore = (await connectionsNamed('-')).amqplibFromSameProcess;
    const app = await boot({ imports: [RabbitRetryModule.forRoot({ url: AMQP_URL })] });
    const amqp = app.get(AmqpConnection);
    expect(amqp.channel).toBeDefined();
    // By default the amqplib channel has its connection, which the broker lists as amqplib's (what the test above counts).
    expect((await connectionsNamed('-')).amqplibFromSameProcess).toBe(amqplibBefore + 1);
    for (const c of [amqp, new AmqpConnection({ url: AMQP_URL, amqplibChannel: false })]) {
      let thrown: unknown;
      try {
        expect(c.managedChannel).toBeUndefined();
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toMatchObject({ code: 'UNSUPPORTED_OPTION', option: 'managedChannel' });
      expect((thrown as Error).message).toContain('there is no amqp-connection-manager wrapper');
      expect((thrown as Error).message).toContain('amqpConnection.publish');
      expect((thrown as Error).message).toContain('amqpConnection.channel');
    }
  });
});
