/**
 * amqps:// with a CA file. The broker here has no TLS listener, so the test
 * puts a TLS-terminating proxy with a certificate it makes in front of it:
 * the client side (verification against the CA file, the handshake, AMQP over
 * TLS) is the real thing.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:tls';
import { randomBytes } from 'node:crypto';

import { RabbitRetry, type Message } from '../lib';
import { BROKER } from './broker';

let dir: string;
let server: Server;
let port: number;

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rr-tls-'));
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=rabbit-retry test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
  writeFileSync(
    join(dir, 'san.ext'),
    'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n',
  );
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '1',
    '-extfile',
    'san.ext',
  );
  server = createServer({ key: readFileSync(join(dir, 'server.key')), cert: readFileSync(join(dir, 'server.pem')) }, (tlsSocket) => {
    const upstream = netConnect(BROKER.port, BROKER.host);
    tlsSocket.pipe(upstream).pipe(tlsSocket);
    const end = () => {
      tlsSocket.destroy();
      upstream.destroy();
    };
    tlsSocket.on('error', end);
    upstream.on('error', end);
    tlsSocket.on('close', end);
    upstream.on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

describe('amqps://', () => {
  it('connects with tls.caFile, consumes and publishes over TLS', async () => {
    const rr = await RabbitRetry.connect({ url: `amqps://guest:guest@localhost:${port}`, tls: { caFile: join(dir, 'ca.pem') } });
    const queue = `rr-test-tls-${randomBytes(4).toString('hex')}`;
    try {
      let resolve: (m: Message) => void = () => undefined;
      const got = new Promise<Message>((r) => (resolve = r));
      const consumer = await rr.consume({ queue, onFailure: { delays: [] } }, async (msg) => resolve(msg));
      await rr.publish('', queue, { over: 'tls' }, { messageId: 'tls-1' });
      const msg = await got;
      expect(msg.json()).toEqual({ over: 'tls' });
      expect(msg.properties.messageId).toBe('tls-1');
      expect(rr.url).toBe(`amqps://guest:***@localhost:${port}`);
      // Closed before its queue goes: a running consumer would declare it again.
      await consumer.close();
    } finally {
      await rr.deleteQueue(queue);
      await rr.deleteQueue(`${queue}.parked`);
      await rr.close();
    }
  });

  it('refuses a broker whose certificate the system does not trust, without the password in the error', async () => {
    const err = await RabbitRetry.connect({ url: `amqps://guest:s3cret@localhost:${port}`, connectTimeoutMs: 5000 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CONNECTION' });
    expect((err as Error).message).not.toContain('s3cret');
    // The handshake is named, with its cause and what to do.
    expect((err as Error).message).toContain(`the TLS handshake with localhost:${port} failed`);
    expect((err as Error).message).toMatch(/invalid peer certificate: UnknownIssuer/);
    expect((err as Error).message).toContain('tls.caFile');
  });

  it('says it was the TLS handshake that failed on a port that speaks plain AMQP, and why', async () => {
    const plain = `${BROKER.host.includes(':') ? `[${BROKER.host}]` : BROKER.host}:${BROKER.port}`;
    const err = await RabbitRetry.connect({ url: `amqps://guest:s3cret@${plain}`, connectTimeoutMs: 5000 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CONNECTION' });
    const message = (err as Error).message;
    expect(message).toContain(`the TLS handshake with ${plain} failed`);
    expect(message).toContain(`the server on port ${BROKER.port} does not speak TLS`);
    expect(message).toMatch(/received corrupt message of type InvalidContentType/);
    expect(message).not.toContain('s3cret');
  });

  it('rejects a CA file that cannot be read with INVALID_OPTIONS naming the option', async () => {
    const err = await RabbitRetry.connect({ url: `amqps://guest:guest@localhost:${port}`, tls: { caFile: join(dir, 'missing.pem') } }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'INVALID_OPTIONS' });
    expect((err as Error).message).toContain('tls.caFile');
  });
});
