/**
 * One redaction: the TypeScript layer hides passwords with the native layer's
 * function (src/redact.rs), and real errors, events, log lines and CLI output
 * keep no part of a password, whatever form its connection string takes: a
 * URL with characters left unencoded, a list of cluster URLs, a password in
 * the query, a libpq `key=value` string.
 *
 * One broker user `rr-redact-<random>` with a password full of special
 * characters, added in beforeAll and deleted in afterAll.
 */
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';

import { type Logger, RabbitRetry } from '../lib';
import { brokerUrls } from '../lib/options/check';
import { type CliIo, run } from '../lib/cli';
import { binding } from '../lib/native';
import { redactIn, redactUrl } from '../lib/support/redact';
import {
  AMQP_URL,
  PG_HOST,
  PG_PORT,
  PG_USER,
  cleanup,
  closeAmqp,
  closeOwnConnection,
  rabbitmqctl,
  testQueue,
  track,
  uniqueName,
  waitFor,
} from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

/** The broker of the tests, as `host:port`. */
const NODE = (() => {
  const u = new URL(AMQP_URL.split(',')[0]);
  return `${u.hostname}:${u.port || (u.protocol === 'amqps:' ? 5671 : 5672)}`;
})();

const enc = encodeURIComponent;

/**
 * Six random capitals that no message writes four of in a row by chance, and
 * none of which this file's fixed passwords use: `util.inspect` of a client
 * can reach Jest's own state, which holds this file's test names.
 */
function token(): string {
  return [...randomBytes(6)].map((b) => 'GHJWXZ'[b % 6]).join('');
}

/** A password with '@', ',', '%', '/' and '#': every character a URL gives a meaning to. */
function specialPassword(): string {
  return `${token()}@${token()},${token()}%${token()}/${token()}#${token()}`;
}

/** Everything a user could print of `value`: JSON (Errors expanded), its stack, util.inspect, and String(). */
function everything(value: unknown): string {
  const json = JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof Error) {
      const e = v as Error & { cause?: unknown };
      return { ...e, name: e.name, message: e.message, stack: e.stack, cause: e.cause };
    }
    return v;
  });
  const stack = value instanceof Error ? (value.stack ?? '') : '';
  return [json, stack, inspect(value, { depth: 20, showHidden: true }), String(value)].join('\n');
}

/** Fails when `text` holds any part of four characters of `password`, as written or percent-encoded. */
function expectNoPart(text: string, password: string): void {
  for (const form of [password, enc(password)]) {
    for (let i = 0; i + 4 <= form.length; i++) {
      const part = form.slice(i, i + 4);
      const at = text.indexOf(part);
      if (at >= 0) throw new Error(`found '${part}' of '${form}' in: …${text.slice(Math.max(0, at - 120), at + 120)}…`);
    }
  }
}

/** The error `connect` rejects with; fails the test when it connects. */
async function refusal(connect: () => Promise<RabbitRetry>): Promise<Error & { code?: string }> {
  const rr = await connect().catch((e: unknown) => e);
  if (rr instanceof RabbitRetry) {
    await rr.close();
    throw new Error('connected');
  }
  expect(rr).toBeInstanceOf(Error);
  return rr as Error & { code?: string };
}

/** Runs the CLI in-process with `env`; resolves to its exit code and what it wrote. */
async function cli(argv: string[], env: Record<string, string | undefined>): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (t) => out.push(t), err: (t) => err.push(t), isTTY: false, env };
  const code = await run(argv, io);
  return { code, out: out.join(''), err: err.join('') };
}

describe('the TypeScript side hides passwords with the native function', () => {
  const forms: [string, string][] = [
    ['amqp://app:s3cret@rabbit:5672/orders', 'amqp://app:***@rabbit:5672/orders'],
    ['amqp://rabbit:5672', 'amqp://rabbit:5672'],
    ['guest:s3cret@127.0.0.1:5672', 'guest:***@127.0.0.1:5672'],
    ['amqps://u:Qz7%40x%2CK9%25q@h/vh', 'amqps://u:***@h/vh'],
    ['amqp://u:Qz7@x,K9%q/Vt#e@h/vh', 'amqp://u:***@h/vh'],
    ['amqp://u:p1@h1,amqp://u:p2@h2', 'amqp://u:***@h1,amqp://u:***@h2'],
    ['amqp://u:p1@h1, u:p2@h2:5672', 'amqp://u:***@h1, u:***@h2:5672'],
    ['postgres://db/app?password=s3cret', 'postgres://db/app?password=***'],
    ['amqp://h/?PASS=x', 'amqp://h/?PASS=***'],
    ['postgres://u@db/app?sslpassword=k3y&sslmode=require', 'postgres://u@db/app?sslpassword=***&sslmode=require'],
    ["host=db password='s3 cret' user=app", 'host=db password=*** user=app'],
    ['host=db user=app', 'host=db user=app'],
  ];

  it.each(forms)('%s', (source, shown) => {
    expect(redactUrl(source)).toBe(shown);
    expect(binding.redactUrl(source)).toBe(shown);
  });

  it('takes every form of a password out of a text, as the native layer does', () => {
    const sources = ['amqp://u:Qz7%40x%2CK9%25q@h', "host=db password='Pq5 m,N3'"];
    const text = 'auth failed for Qz7@x,K9%q (Qz7%40x%2CK9%25q), then for Pq5 m,N3 and a part: x,K9';
    const hidden = redactIn(text, sources);
    expect(hidden).toBe('auth failed for *** (***), then for *** and a part: ***');
    expect(binding.redactIn(text, sources)).toBe(hidden);
    expect(redactIn(text, [undefined, ''])).toBe(text);
  });

  it('the CLI writes a URL it was given by mistake without its password', async () => {
    const url = `amqp://app:Qz7@x,K9%q/Vt#e@${NODE}`;
    const r = await cli([url], {});
    expect(r.code).toBe(2);
    expect(r.err).toContain(`unknown command '${redactUrl(url)}'`);
    expectNoPart(r.err, 'Qz7@x,K9%q/Vt#e');
  });

  it('an empty AMQP_URL is named without what it holds', () => {
    expect(() => brokerUrls(undefined, ' , ', 'amqp://127.0.0.1')).toThrow(
      "AMQP_URL must be a non-empty string such as 'amqp://user:password@host:5672/vhost', or a non-empty list of them, got ' , '",
    );
  });
});

describe('the broker: errors, events and log lines keep no part of the password', () => {
  const user = `rr-redact-${randomBytes(4).toString('hex')}`;
  const password = specialPassword();
  const wrong = specialPassword();

  beforeAll(async () => {
    await rabbitmqctl(['add_user', user, password]);
    await rabbitmqctl(['set_permissions', '-p', '/', user, '.*', '.*', '.*']);
  });
  afterAll(async () => {
    await rabbitmqctl(['delete_user', user]);
  });

  const cases: [string, () => string[]][] = [
    ['percent-encoded', () => [`amqp://${user}:${enc(wrong)}@${NODE}`]],
    ['with its special characters left unencoded', () => [`amqp://${user}:${wrong}@${NODE}`]],
    [
      'in a list as AMQP_URL holds it, split at its commas',
      () => brokerUrls(undefined, `amqp://${user}:${wrong}@${NODE},amqp://${user}:${enc(wrong)}@${NODE}`, ''),
    ],
    ['in a list of encoded URLs', () => brokerUrls(undefined, `amqp://${user}:${enc(wrong)}@${NODE}, amqp://${user}:${enc(wrong)}@${NODE}`, '')],
  ];

  it.each(cases)('a wrong password %s', async (_label, urls) => {
    const err = await refusal(() => RabbitRetry.connect({ url: urls(), hostOrder: 'ordered', connectTimeoutMs: 5000 }));
    expect(['CONNECTION', 'INVALID_OPTIONS']).toContain(err.code);
    expectNoPart(everything(err), wrong);
  });

  it('a wrong password on the real broker says what happened', async () => {
    const url = `amqp://${user}:${enc(wrong)}@${NODE}`;
    const err = await refusal(() => RabbitRetry.connect({ url, connectTimeoutMs: 5000 }));
    expect(err.code).toBe('CONNECTION');
    expect(err.message).toContain(`connection to ${redactUrl(url)} failed: the broker refused user '${user}'`);
  });

  it('the right password: rr.url, events, stats and log lines across a connection loss', async () => {
    const url = `amqp://${user}:${enc(password)}@${NODE}`;
    const connectionName = uniqueName('rr-test-redact');
    const lines: string[] = [];
    const logger: Logger = { warn: (line) => lines.push(line), error: (line) => lines.push(line) };
    const rr = await RabbitRetry.connect({ url, connectionName, logger });
    try {
      expect(rr.url).toBe(`amqp://${user}:***@${NODE}`);
      expect(rr.url).toBe(redactUrl(url));
      const queue = testQueue(['100ms']);
      const events: unknown[] = [];
      const consumer = track(
        await rr.consume({ queue, onFailure: { delays: ['100ms'] }, recovery: { initialDelayMs: 100, maxDelayMs: 1000 } }, async () => {
          throw new Error('always fails');
        }),
      );
      // No 'disconnected' listener: the loss goes to the logger.
      for (const name of ['retry', 'parked', 'recovered', 'error'] as const) consumer.on(name, (e: unknown) => events.push({ name, e }));
      await rr.publish('', queue, 'x', { messageId: 'redact-1' });
      await waitFor(() => events.some((e) => (e as { name: string }).name === 'parked'), 10_000, 'the park');
      await closeOwnConnection(connectionName);
      await waitFor(() => events.some((e) => (e as { name: string }).name === 'recovered'), 20_000, 'recovery');
      expect(lines.length).toBeGreaterThan(0);
      for (const text of [
        everything(events),
        JSON.stringify(consumer.stats()),
        lines.join('\n'),
        everything(rr),
        everything(consumer),
        rr.urls.join(','),
      ]) {
        expectNoPart(text, password);
      }
    } finally {
      await rr.close();
    }
  }, 40_000);

  it('the CLI writes its errors without the password', async () => {
    const list = `amqp://${user}:${wrong}@${NODE},amqp://${user}:${wrong}@${NODE}`;
    const viaEnv = await cli(['status', 'rr-redact-queue'], { AMQP_URL: list });
    const viaUrl = await cli(['status', 'rr-redact-queue', '--url', `amqp://${user}:${enc(wrong)}@${NODE}`], {});
    const viaDb = await cli(['table', 'stats', '--db', `host=${PG_HOST} port=${PG_PORT} user=rr_no_such_role password='${wrong}' dbname=postgres`], {
      AMQP_URL,
    });
    for (const r of [viaEnv, viaUrl, viaDb]) {
      expect(r.code).toBe(1);
      expectNoPart(`${r.out}\n${r.err}`, wrong);
    }
    expect(viaUrl.err).toContain('[CONNECTION]');
    expect(viaDb.err).toContain('[RETRY_TABLE]');
  });
});

describe('the retry table: errors keep no part of the password', () => {
  const pw = specialPassword();
  const at = `${PG_HOST}:${PG_PORT}`;
  const missingDb = `rr_no_such_db_${randomBytes(4).toString('hex')}`;
  const cases: [string, string][] = [
    ['key=value, quoted with a space', `host=${PG_HOST} port=${PG_PORT} user=rr_no_such_role password='${pw} and more' dbname=postgres sslmode=disable`],
    ['key=value, plain', `host=${PG_HOST} port=${PG_PORT} user=rr_no_such_role password=${pw} dbname=postgres sslmode=disable`],
    ['key=value, a database that does not exist', `host=${PG_HOST} port=${PG_PORT} user=${PG_USER} PASSWORD=${pw} dbname=${missingDb}`],
    ['a query-string password, encoded', `postgres://rr_no_such_role@${at}/postgres?sslmode=disable&password=${enc(pw)}`],
    ['a query-string password, unencoded', `postgres://rr_no_such_role@${at}/postgres?password=${pw}`],
    ['a query-string Password, a database that does not exist', `postgresql://${PG_USER}@${at}/${missingDb}?Password=${enc(pw)}&sslmode=disable`],
    ['user info, encoded, a database that does not exist', `postgres://${PG_USER}:${enc(pw)}@${at}/${missingDb}?sslmode=disable`],
    ['user info, unencoded', `postgres://rr_no_such_role:${pw}@${at}/postgres`],
  ];

  it.each(cases)('%s', async (_label, url) => {
    const err = await refusal(() => RabbitRetry.connect({ url: AMQP_URL, retryTable: { url, scheduler: false } }));
    expect(['RETRY_TABLE', 'INVALID_OPTIONS']).toContain(err.code);
    expect(err.message).toContain(redactUrl(url));
    expectNoPart(everything(err), pw);
  });
});
