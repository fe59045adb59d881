/**
 * TLS on the retry table's connection: `sslmode` and `sslrootcert` in
 * `retryTable.url`, as libpq reads them.
 *
 * Two kinds of server. The machine's PostgreSQL as it is: `SHOW ssl` says
 * whether it speaks TLS, and the test checks what follows (a `require`
 * connection that the server lists in `pg_stat_ssl`, or a refusal), and
 * verifies against the server's own certificate when it can read it. And
 * proxies this file starts in front of that server, with a certificate
 * authority and certificates it makes: they answer PostgreSQL's SSLRequest,
 * end TLS themselves and record each connection's outcome, so that
 * verification is tested the same on every machine, whatever the server has.
 *
 * One database `rr_test_<random>_tls`, created in beforeAll and dropped in afterAll.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate, randomBytes } from 'node:crypto';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, type Server, type Socket, connect as netConnect, createServer, isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TLSSocket, createSecureContext } from 'node:tls';

import { RabbitRetry } from '../lib';
import { AMQP_URL, PG_HOST, PG_PORT, PG_USER, cleanup, closeAmqp, connectClient, createTestDatabase, dropTestDatabase, psql } from './helpers';

// ---------------------------------------------------------------------------
// Certificates and proxies.

/** What a proxy saw of one connection. */
interface Session {
  /** The client asked for TLS (SSLRequest) before its startup message. */
  sslRequest: boolean;
  /** A TLS session was established. */
  tls: boolean;
  /** The SNI host name the client sent (TLS only). */
  servername?: string | false | null;
  /** The ALPN protocol agreed (TLS only). */
  alpn?: string | false | null;
  /** Why the handshake failed. */
  error?: string;
}

interface Proxy {
  port: number;
  sessions: Session[];
  close(): Promise<void>;
}

const SSL_REQUEST_CODE = 80877103;

/**
 * A proxy to the machine's PostgreSQL that speaks TLS as a PostgreSQL server
 * does: it answers an SSLRequest with 'S' and a handshake with `tls`'s
 * certificate, or with 'N' (no TLS) when `tls` is not given, then passes the
 * bytes on in plain to the real server.
 */
async function startProxy(tls?: { key: Buffer; cert: Buffer }): Promise<Proxy> {
  const sessions: Session[] = [];
  const sockets = new Set<Socket | TLSSocket>();
  const keep = <T extends Socket | TLSSocket>(s: T): T => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
    return s;
  };
  /** Passes `down` (after `head`, bytes already read) to the real server and back. */
  const relay = (down: Socket | TLSSocket, head: Buffer): void => {
    const up = keep(netConnect(Number(PG_PORT), PG_HOST));
    if (head.length > 0) up.write(head);
    down.pipe(up).pipe(down);
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  };
  const context = tls && createSecureContext({ key: tls.key, cert: tls.cert });
  const server: Server = createServer((client) => {
    keep(client);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      if (head.length < 8) return;
      client.off('data', onData);
      client.pause();
      const sslRequest = head.length === 8 && head.readUInt32BE(0) === 8 && head.readUInt32BE(4) === SSL_REQUEST_CODE;
      if (!sslRequest) {
        sessions.push({ sslRequest: false, tls: false });
        relay(client, head);
        client.resume();
        return;
      }
      if (!context) {
        // As a server without TLS: 'N', and the client may go on in plain.
        sessions.push({ sslRequest: true, tls: false });
        client.write('N');
        relay(client, Buffer.alloc(0));
        client.resume();
        return;
      }
      client.write('S');
      const secure = keep(new TLSSocket(client, { isServer: true, secureContext: context, ALPNProtocols: ['postgresql'] }));
      let established = false;
      secure.on('secure', () => {
        established = true;
        sessions.push({ sslRequest: true, tls: true, servername: secure.servername, alpn: secure.alpnProtocol });
        relay(secure, Buffer.alloc(0));
      });
      secure.on('error', (e) => {
        if (!established) sessions.push({ sslRequest: true, tls: false, error: e.message });
      });
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    sessions,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let dir = '';
let db = '';
/** TLS with a certificate for localhost and 127.0.0.1 from the test CA. */
let good: Proxy;
/** TLS with a certificate for db.elsewhere.test only, from the test CA. */
let misnamed: Proxy;
/** No TLS: answers SSLRequest with 'N'. */
let plain: Proxy;
const proxies: Proxy[] = [];

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A key and a certificate for `san`, signed by the test CA. */
function serverCert(name: string, san: string): { key: Buffer; cert: Buffer } {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  writeFileSync(
    join(dir, `${name}.ext`),
    `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n`,
  );
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '1',
    '-extfile',
    `${name}.ext`,
  );
  return { key: readFileSync(join(dir, `${name}.key`)), cert: readFileSync(join(dir, `${name}.pem`)) };
}

/** The test database through `proxy` (or the real server), as `host`, with `params`. */
function urlVia(proxy: Proxy | null, params: string, host = '127.0.0.1', password = ''): string {
  const port = proxy ? proxy.port : Number(PG_PORT);
  const server = proxy ? host : PG_HOST;
  const auth = password ? `${PG_USER}:${password}` : PG_USER;
  return `postgres://${auth}@${server}:${port}/${db}${params ? `?${params}` : ''}`;
}

/** Connects a client (closed by cleanup()) whose retry table is at `url`. */
async function connectTable(url: string): Promise<RabbitRetry> {
  const rr = await connectClient({ retryTable: { url, scheduler: false } });
  await rr.retryTable.stats();
  return rr;
}

/** The error of a connect whose retry table is at `url`; fails the test when it connects. */
async function refusal(url: string): Promise<Error & { code?: string }> {
  const rr = await RabbitRetry.connect({ url: AMQP_URL, retryTable: { url, scheduler: false } }).catch((e: unknown) => e);
  if (rr instanceof RabbitRetry) {
    await rr.close();
    throw new Error(`connected with ${url}`);
  }
  return rr as Error & { code?: string };
}

beforeAll(async () => {
  db = createTestDatabase('tls');
  dir = mkdtempSync(join(tmpdir(), 'rr-pgtls-'));
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=rabbit-retry test CA');
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other-ca.key', '-out', 'other-ca.pem', '-days', '1', '-subj', '/CN=another CA');
  good = await startProxy(serverCert('localhost', 'DNS:localhost,IP:127.0.0.1'));
  misnamed = await startProxy(serverCert('elsewhere', 'DNS:db.elsewhere.test'));
  plain = await startProxy();
  proxies.push(good, misnamed, plain);
});

afterEach(async () => {
  await cleanup();
  for (const p of proxies) p.sessions.splice(0);
});

afterAll(async () => {
  await closeAmqp();
  for (const p of proxies) await p.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (db) dropTestDatabase(db);
});

const ca = (): string => join(dir, 'ca.pem');
const otherCa = (): string => join(dir, 'other-ca.pem');

// ---------------------------------------------------------------------------

describe('sslmode through a TLS proxy with certificates made here', () => {
  it('require: TLS without checking the certificate, as libpq does without sslrootcert', async () => {
    // A certificate for another host, from an authority nobody trusts: require takes it.
    await connectTable(urlVia(misnamed, 'sslmode=require'));
    expect(misnamed.sessions.length).toBeGreaterThan(0);
    for (const s of misnamed.sessions) expect(s).toMatchObject({ sslRequest: true, tls: true, alpn: 'postgresql' });
  });

  it('prefer (the default): TLS when the server offers it, plain when it does not', async () => {
    await connectTable(urlVia(good, ''));
    expect(good.sessions.length).toBeGreaterThan(0);
    for (const s of good.sessions) expect(s).toMatchObject({ sslRequest: true, tls: true });

    await connectTable(urlVia(plain, 'sslmode=prefer'));
    expect(plain.sessions.length).toBeGreaterThan(0);
    for (const s of plain.sessions) expect(s).toEqual({ sslRequest: true, tls: false });
  });

  it('disable: plain, without asking for TLS', async () => {
    await connectTable(urlVia(good, 'sslmode=disable'));
    expect(good.sessions.length).toBeGreaterThan(0);
    for (const s of good.sessions) expect(s).toEqual({ sslRequest: false, tls: false });
  });

  it('require against a server without TLS: RETRY_TABLE, without the password', async () => {
    const err = await refusal(urlVia(plain, 'sslmode=require', '127.0.0.1', 's3cret'));
    expect(err.code).toBe('RETRY_TABLE');
    expect(err.message).toContain('server does not support TLS');
    expect(err.message).toContain('the TLS handshake failed: the server does not take TLS');
    expect(err.message).toContain(`postgres://${PG_USER}:***@127.0.0.1:${plain.port}/${db}`);
    expect(err.message).not.toContain('s3cret');
  });

  it('verify-full with sslrootcert: connects when the certificate is for the host, by name or by address', async () => {
    await connectTable(urlVia(good, `sslmode=verify-full&sslrootcert=${encodeURIComponent(ca())}`, 'localhost'));
    await connectTable(urlVia(good, `sslmode=verify-full&sslrootcert=${encodeURIComponent(ca())}`, '127.0.0.1'));
    expect(good.sessions.length).toBeGreaterThan(1);
    for (const s of good.sessions) expect(s).toMatchObject({ sslRequest: true, tls: true });
    // SNI carries a host name, not an address.
    expect(good.sessions.map((s) => s.servername)).toContain('localhost');
  });

  it('verify-full refuses a certificate for another host with RETRY_TABLE naming the name', async () => {
    const err = await refusal(urlVia(misnamed, `sslmode=verify-full&sslrootcert=${encodeURIComponent(ca())}`, 'localhost', 's3cret'));
    expect(err.code).toBe('RETRY_TABLE');
    expect(err.message).toMatch(/certificate not valid for name "localhost"/);
    expect(err.message).toContain("the TLS handshake failed: the server's certificate is not for the host name in the URL");
    expect(err.message).not.toContain('s3cret');
    expect(misnamed.sessions.every((s) => !s.tls)).toBe(true);
  });

  it('verify-ca takes that certificate: its chain is checked, not its name', async () => {
    await connectTable(urlVia(misnamed, `sslmode=verify-ca&sslrootcert=${encodeURIComponent(ca())}`, 'localhost'));
    expect(misnamed.sessions.length).toBeGreaterThan(0);
    for (const s of misnamed.sessions) expect(s).toMatchObject({ tls: true });
  });

  it('verify-ca, and require with sslrootcert, refuse a certificate from another authority', async () => {
    for (const mode of ['verify-ca', 'require']) {
      const err = await refusal(urlVia(good, `sslmode=${mode}&sslrootcert=${encodeURIComponent(otherCa())}`));
      expect(err.code).toBe('RETRY_TABLE');
      expect(err.message).toMatch(/invalid peer certificate: UnknownIssuer/);
      expect(err.message).toContain('the TLS handshake failed');
      expect(err.message).toContain('give sslrootcert=');
    }
  });

  it("verify-full without sslrootcert checks against the platform's authorities, which do not know the test CA", async () => {
    const err = await refusal(urlVia(good, 'sslmode=verify-full', 'localhost'));
    expect(err.code).toBe('RETRY_TABLE');
    expect(err.message).toMatch(/UnknownIssuer|no trusted certificate authority found on this system/);
  });
});

describe('options refused before connecting', () => {
  it('an sslmode that does not exist: INVALID_OPTIONS listing the valid ones, without the password', async () => {
    const err = await refusal(urlVia(good, 'sslmode=verify_full', '127.0.0.1', 's3cret'));
    expect(err.code).toBe('INVALID_OPTIONS');
    expect(err.message).toContain("sslmode 'verify_full' is not one of disable, prefer, require, verify-ca, verify-full");
    expect(err.message).toContain('retryTable.url');
    expect(err.message).not.toContain('s3cret');
    expect(good.sessions).toEqual([]);
  });

  it('an sslrootcert that cannot be read: INVALID_OPTIONS naming it', async () => {
    const missing = join(dir, 'missing.pem');
    const err = await refusal(urlVia(good, `sslmode=verify-full&sslrootcert=${encodeURIComponent(missing)}`, 'localhost', 's3cret'));
    expect(err.code).toBe('INVALID_OPTIONS');
    expect(err.message).toContain(`sslrootcert '${missing}' cannot be read`);
    expect(err.message).not.toContain('s3cret');
  });

  it('a client certificate (sslcert), which is not supported: INVALID_OPTIONS naming it', async () => {
    const err = await refusal(urlVia(good, 'sslmode=require&sslcert=client.pem'));
    expect(err.code).toBe('INVALID_OPTIONS');
    expect(err.message).toContain('unknown option `sslcert`');
  });

  it('sslrootcert=system with a weaker sslmode: INVALID_OPTIONS', async () => {
    const err = await refusal(urlVia(good, 'sslmode=require&sslrootcert=system'));
    expect(err.code).toBe('INVALID_OPTIONS');
    expect(err.message).toContain('use sslmode=verify-full');
  });
});

// ---------------------------------------------------------------------------
// The machine's PostgreSQL, TLS or not.

const serverTls = psql('SHOW ssl') === 'on';

/** The server's certificate, when it speaks TLS and this process can read the file (a server on this machine). */
function serverCertificate(): { path: string; x509: X509Certificate } | null {
  if (!serverTls) return null;
  const path = psql('SHOW ssl_cert_file');
  const file = path.startsWith('/') ? path : join(psql('SHOW data_directory'), path);
  try {
    accessSync(file, constants.R_OK);
    return { path: file, x509: new X509Certificate(readFileSync(file)) };
  } catch {
    return null;
  }
}
const ownCert = serverCertificate();

describe("the machine's PostgreSQL", () => {
  it(`sslmode=require ${serverTls ? 'connects over TLS, as pg_stat_ssl shows' : 'is refused: the server has ssl = off'}`, async () => {
    const app = `rr-tls-${randomBytes(4).toString('hex')}`;
    const url = urlVia(null, `sslmode=require&application_name=${app}`);
    if (!serverTls) {
      const err = await refusal(url);
      expect(err.code).toBe('RETRY_TABLE');
      expect(err.message).toContain('server does not support TLS');
      return;
    }
    await connectTable(url);
    const [tls, plainCount] = psql(
      `SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl)
       FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '${app}'`,
    ).split('|');
    expect(Number(tls)).toBeGreaterThan(0);
    expect(Number(plainCount)).toBe(0);
  });

  // Verification against the server's own certificate; the outcome each check
  // expects is what Node's X.509 code says of the certificate.
  const withOwnCert = ownCert ? it : it.skip;

  withOwnCert("verify-full with the server's own certificate as sslrootcert follows the names it is for", async () => {
    if (!ownCert) return;
    const own = ownCert;
    const root = `sslrootcert=${encodeURIComponent(own.path)}`;
    const selfSigned = own.x509.checkIssued(own.x509);
    for (const [host, valid] of [
      ['localhost', own.x509.checkHost('localhost') !== undefined],
      ['127.0.0.1', own.x509.checkIP('127.0.0.1') !== undefined],
    ] as const) {
      // hostaddr: the name is checked, the address is where the server is.
      const url = `postgres://${PG_USER}@${host}:${PG_PORT}/${db}?hostaddr=${isIP(PG_HOST) ? PG_HOST : '127.0.0.1'}&sslmode=verify-full&${root}`;
      if (selfSigned && valid) {
        await connectTable(url);
      } else {
        const err = await refusal(url);
        expect(err.code).toBe('RETRY_TABLE');
        expect(err.message).toMatch(selfSigned ? /certificate not valid for name/ : /invalid peer certificate/);
      }
    }
  });

  withOwnCert("verify-ca with the server's own certificate as sslrootcert connects when it is self-signed", async () => {
    if (!ownCert) return;
    const own = ownCert;
    const url = urlVia(null, `sslmode=verify-ca&sslrootcert=${encodeURIComponent(own.path)}`);
    if (own.x509.checkIssued(own.x509)) {
      await connectTable(url);
    } else {
      expect((await refusal(url)).code).toBe('RETRY_TABLE');
    }
  });
});
