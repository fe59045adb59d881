/**
 * A connection that fails says what happened and what to do, without the password.
 */
import { ConnectionError, RabbitRetry } from '../lib';
import { brokerUrl } from './broker';

const connectError = (url: string): Promise<Error> =>
  RabbitRetry.connect({ url, connectTimeoutMs: 5000 }).then(
    async (rr) => {
      await rr.close();
      return new Error(`connect to ${url} resolved`);
    },
    (e: unknown) => e as Error,
  );

describe('connection errors say what to do', () => {
  it('nothing listening: is RabbitMQ running, and how to start one', async () => {
    const err = await connectError('amqp://guest:s3cret@127.0.0.1:1');
    expect(err).toBeInstanceOf(ConnectionError);
    expect(err.message).toContain('is RabbitMQ running at 127.0.0.1:1?');
    expect(err.message).toContain('npm run broker');
    expect(err.message).not.toContain('s3cret');
  });

  it('a wrong password: check the user and password', async () => {
    const err = await connectError(brokerUrl({ password: 'not-the-password' }));
    expect(err).toBeInstanceOf(ConnectionError);
    expect(err.message).toContain("refused user 'guest'");
    expect(err.message).toContain('check the user and password');
    expect(err.message).not.toContain('not-the-password');
  });

  it('an unknown vhost: names it and says how to fix it', async () => {
    const err = await connectError(brokerUrl({ vhost: 'no-such-vhost-here' }));
    expect(err).toBeInstanceOf(ConnectionError);
    expect(err.message).toContain("vhost 'no-such-vhost-here' does not exist");
    expect(err.message).not.toContain(':guest@');
  });

  it('a host name that does not resolve: check the host', async () => {
    const err = await connectError('amqp://guest:guest@no-such-host.invalid:5672');
    expect(err).toBeInstanceOf(ConnectionError);
    expect(err.message).toContain("host name 'no-such-host.invalid' could not be resolved");
  });

  it('a trailing slash is the default vhost, as amqplib reads it', async () => {
    const rr = await RabbitRetry.connect({ url: `${brokerUrl()}/` });
    await rr.close();
  });
});
