import {
  ClosedError,
  ConnectionError,
  InvalidOptionsError,
  Message,
  NoHandlerError,
  NonRetryableError,
  PublishFailedError,
  PublishNackedError,
  RabbitRetryError,
  ReplyRefusedError,
  TopologyMismatchError,
  UnroutableError,
  delayLabel,
  parkedQueueName,
  retryQueueName,
  type Delay,
} from '../lib';
import { FailureReporter, type FailureKind } from '../lib/consumer/failure';
import { isTopicPattern, matchesTopic } from '../lib/messaging/topic';

type Delivery = ConstructorParameters<typeof Message>[0];

function message(body: string | Buffer, overrides: Partial<Delivery> = {}): Message {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  return new Message({
    bytes,
    start: 0,
    end: bytes.length,
    exchange: 'orders',
    routingKey: 'order.created',
    redelivered: false,
    deliveryTag: 1,
    attempt: 0,
    properties: { messageId: 'm-1', contentType: 'application/json', headers: { tenant: 'acme' } },
    ...overrides,
  });
}

describe('error classes', () => {
  const cases: [string, new (message: string) => RabbitRetryError, string][] = [
    ['NonRetryableError', NonRetryableError, 'NON_RETRYABLE'],
    ['TopologyMismatchError', TopologyMismatchError, 'TOPOLOGY_MISMATCH'],
    ['UnroutableError', UnroutableError, 'UNROUTABLE'],
    ['PublishNackedError', PublishNackedError, 'PUBLISH_NACKED'],
    ['PublishFailedError', PublishFailedError, 'PUBLISH_FAILED'],
    ['ConnectionError', ConnectionError, 'CONNECTION'],
    ['InvalidOptionsError', InvalidOptionsError, 'INVALID_OPTIONS'],
    ['ClosedError', ClosedError, 'CLOSED'],
  ];

  it.each(cases)('%s has its code and name and is a RabbitRetryError', (name, Ctor, code) => {
    const err = new Ctor('what to do next');
    expect(err).toBeInstanceOf(Ctor);
    expect(err).toBeInstanceOf(RabbitRetryError);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe(code);
    expect(err.name).toBe(name);
    expect(err.message).toBe('what to do next');
    expect(err.stack).toContain(name);
  });

  it('NonRetryableError keeps its cause', () => {
    const cause = new Error('root');
    const err = new NonRetryableError('bad input', { cause });
    expect(err.cause).toBe(cause);
  });
});

describe('delay labels and queue names', () => {
  it.each<[Delay, string]>([
    [500, '500ms'],
    ['500ms', '500ms'],
    ['90s', '90s'],
    [90_000, '90s'],
    ['60s', '1m'],
    ['1m', '1m'],
    ['10m', '10m'],
    [7_200_000, '2h'],
    ['120m', '2h'],
    [1500, '1500ms'],
  ])('delayLabel(%p) is %p', (delay, label) => {
    expect(delayLabel(delay)).toBe(label);
  });

  it('retryQueueName uses the label', () => {
    expect(retryQueueName('shipment.requested', 500)).toBe('shipment.requested.retry.500ms');
    expect(retryQueueName('shipment.requested', '90s')).toBe('shipment.requested.retry.90s');
    expect(retryQueueName('shipment.requested', '1m')).toBe('shipment.requested.retry.1m');
    expect(retryQueueName('shipment.requested', 7_200_000)).toBe('shipment.requested.retry.2h');
  });

  it('parkedQueueName appends .parked', () => {
    expect(parkedQueueName('shipment.requested')).toBe('shipment.requested.parked');
  });

  it.each<[Delay]>([[0], [-5], ['5d' as never], ['0s'], [1.5]])('delayLabel(%p) throws InvalidOptionsError', (delay) => {
    expect(() => delayLabel(delay)).toThrow(InvalidOptionsError);
  });
});

describe('Message', () => {
  it('json() parses the body', () => {
    expect(message('{"orderId":48213}').json<{ orderId: number }>()).toEqual({ orderId: 48213 });
  });

  it('json() on invalid JSON throws a NonRetryableError', () => {
    const msg = message('{"orderId":');
    let thrown: unknown;
    try {
      msg.json();
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(NonRetryableError);
    expect((thrown as NonRetryableError).code).toBe('NON_RETRYABLE');
    expect((thrown as NonRetryableError).message).toMatch(/JSON/);
  });

  it('text(), properties, headers and delivery info', () => {
    const msg = message('héllo', { attempt: 2, redelivered: true });
    expect(msg.text()).toBe('héllo');
    expect(msg.properties).toEqual({ messageId: 'm-1', contentType: 'application/json' });
    expect(msg.headers).toEqual({ tenant: 'acme' });
    expect(msg.exchange).toBe('orders');
    expect(msg.routingKey).toBe('order.created');
    expect(msg.redelivered).toBe(true);
    expect(msg.attempt).toBe(2);
  });

  it('a body that shares its buffer with other deliveries reads as its own part only', () => {
    const shared = Buffer.from('[1]{"orderId":48213}héllo', 'utf8');
    const json = message(shared, { start: 3, end: 20 });
    expect(json.json()).toEqual({ orderId: 48213 });
    expect(json.body.toString()).toBe('{"orderId":48213}');
    const text = message(shared, { start: 20, end: shared.length });
    expect(text.text()).toBe('héllo');
    expect(text.body.equals(Buffer.from('héllo'))).toBe(true);
    // The body is a copy: changing it leaves the shared buffer (and the other messages) alone.
    text.body[0] = 0x48;
    expect(shared.toString('utf8', 20)).toBe('héllo');
    expect(text.body).toBe(text.body);
  });

  it('a body with a buffer of its own is that buffer, not a copy', () => {
    const own = Buffer.from('{"a":1}');
    expect(message(own).body).toBe(own);
  });

  it('headers default to an empty object', () => {
    const msg = message('x', { properties: {} });
    expect(msg.headers).toEqual({});
  });
});

describe('the failure report: JavaScript says what the handler threw, the native verdict decides', () => {
  const report = (err: unknown, retryable: (err: unknown) => boolean, tableBound = false, o: { parks?: true; stackOnRetry?: boolean } = {}) => {
    const lines: string[] = [];
    const route = new FailureReporter({
      queue: 'orders',
      retryable,
      stackOnRetry: o.stackOnRetry,
      table: { dependency: () => 'carrier' },
      log: (_level, line) => lines.push(line),
    });
    return { failure: route.failureOf(err, message('x'), { ...(tableBound ? { table: true } : {}), parks: o.parks }), lines };
  };
  const yes = () => true;
  const no = () => false;

  it.each<[string, unknown, (err: unknown) => boolean, FailureKind]>([
    ['a NoHandlerError, whatever the predicate says', new NoHandlerError('no handler for x'), yes, 'no-handler'],
    ['a ReplyRefusedError, whatever the predicate says', new ReplyRefusedError('reply-to refused'), yes, 'reply-refused'],
    ['a NonRetryableError, whatever the predicate says', new NonRetryableError('bad input'), yes, 'non-retryable'],
    ['an error the predicate retries', new Error('carrier 503'), yes, 'retryable'],
    ['an error the predicate does not retry', new Error('carrier 503'), no, 'non-retryable'],
    [
      'an error the predicate throws on',
      new Error('carrier 503'),
      () => {
        throw new Error('predicate bug');
      },
      'non-retryable',
    ],
    ['a thrown string', 'just a string', yes, 'retryable'],
  ])('%s', (_label, err, retryable, kind) => {
    const { failure } = report(err, retryable);
    expect(failure.kind).toBe(kind);
    expect(failure).not.toHaveProperty('park');
    expect(failure).not.toHaveProperty('retryable');
  });

  it('asks the table callbacks only for a retryable failure the native side routes to the table', () => {
    expect(report(new Error('down'), yes, true).failure.table?.dependency).toBe('carrier');
    expect(report(new Error('down'), yes, false).failure.table).toBeUndefined();
    expect(report(new Error('down'), no, true).failure.table).toBeUndefined();
    expect(report(new NoHandlerError('none'), yes, true).failure.table).toBeUndefined();
  });

  it('reads the stack for a copy that parks or goes to the table, and for a retried one only with stackOnRetry', () => {
    const stack = (f: { stack: string }) => f.stack.split('\n')[0];
    const err = () => new Error('carrier 503');
    expect(report(err(), yes).failure).toMatchObject({ message: 'carrier 503', stack: '' });
    expect(stack(report(err(), yes, false, { stackOnRetry: true }).failure)).toBe('Error: carrier 503');
    expect(stack(report(err(), yes, false, { parks: true }).failure)).toBe('Error: carrier 503');
    expect(stack(report(err(), yes, true).failure)).toBe('Error: carrier 503');
    expect(stack(report(err(), no).failure)).toBe('Error: carrier 503');
    expect(stack(report(new NoHandlerError('none'), yes).failure)).toBe('NoHandlerError: none');
  });
});

describe('topic patterns, matched as RabbitMQ matches them', () => {
  it.each([
    ['wildcard.*.*', 'wildcard.a.b', true],
    ['wildcard.*.*', 'wildcard.a', false],
    ['wildcard.*.*', 'wildcard.a.b.c', false],
    ['orders.#', 'orders', true],
    ['orders.#', 'orders.eu.paid', true],
    ['#.paid', 'orders.eu.paid', true],
    ['#.paid', 'orders.eu.shipped', false],
    ['a.#.b.#.c', 'a.x.b.y.z.c', true],
    ['#', '', true],
    ['exact.key', 'exact.key', true],
    ['exact.key', 'exact.other', false],
  ])('%s against %s: %s', (pattern, key, want) => {
    expect(matchesTopic(pattern, key)).toBe(want);
  });

  it('tells a pattern from a plain key', () => {
    expect(isTopicPattern('orders.*')).toBe(true);
    expect(isTopicPattern('orders.#')).toBe(true);
    expect(isTopicPattern('orders.paid')).toBe(false);
  });
});
