/**
 * The consumer of the fault suite, run as a child process so a test can
 * SIGKILL it. It follows the ledger plan: `m-<i>` succeeds, fails once then
 * succeeds, always fails, or fails for good, by `i % 20`. Every handler call is
 * appended to CALLS_FILE and every success to SUCCESS_FILE (synchronously, so
 * a SIGKILL cannot lose a line that was written before the ack); every
 * confirmed move to a retry queue goes to RETRIES_FILE. With FAULT_INBOX (a
 * PostgreSQL URL) the handler runs with an inbox, and its effect is one row
 * of `fault_effects` per success, written in the inbox's transaction: the
 * suite counts those rows to tell effects that happened twice. Every 7th
 * message's first attempt also swallows a failed statement (plan.ts), which
 * the inbox must not ack. With FAULT_EXCHANGE, each message that parks publishes its fault event there.
 */
import { appendFileSync } from 'node:fs';

import { Pool } from 'pg';

import { type ConsumeOptions, type Consumer, type Delay, type Message, NonRetryableError, RabbitRetry } from '../../lib';
import { expectedOutcome, swallowsFirstAttempt } from './plan';

const queue = process.env.FAULT_QUEUE ?? '';
const callsFile = process.env.CALLS_FILE ?? '';
const successFile = process.env.SUCCESS_FILE ?? '';
const retriesFile = process.env.RETRIES_FILE ?? '';
const delays = (process.env.FAULT_DELAYS ?? '100ms,200ms').split(',') as Delay[];
const prefetch = Number(process.env.FAULT_PREFETCH ?? '20');
// Work takes a little time, so a fault lands while most messages are still to come.
const workMs = Number(process.env.FAULT_WORK_MS ?? '25');
// The cluster test: quorum queues, and the nodes of AMQP_URL tried as listed.
const queueType = process.env.FAULT_QUEUE_TYPE === 'quorum' ? 'quorum' : undefined;
const hostOrder = process.env.FAULT_HOST_ORDER === 'ordered' ? 'ordered' : undefined;
// FAULT_BROKER_DELAY=min,max,attempts: RabbitMQ 4.3's delayed retry on a quorum queue instead of
// retry queues. The delivery limit leaves room for one fault's lost delivery (it counts as failed).
const [bdMin, bdMax, bdAttempts] = (process.env.FAULT_BROKER_DELAY ?? '').split(',');
const brokerDelay = bdAttempts ? { min: bdMin as Delay, max: bdMax as Delay, attempts: Number(bdAttempts) } : undefined;
// A fault event of each message that parks, to the exchange the suite reads them from.
const faults = process.env.FAULT_EXCHANGE ? { exchange: process.env.FAULT_EXCHANGE } : undefined;
const failureOptions: Partial<ConsumeOptions> = brokerDelay
  ? { queueType: 'quorum' as const, deliveryLimit: brokerDelay.attempts + 2, onFailure: { brokerDelay, faults } }
  : { queueType, onFailure: { delays, faults } };

const inboxUrl = process.env.FAULT_INBOX ?? '';
// FAULT_INBOX_GROUP=n: the deliveries handed over together share a transaction, up to n (inbox.group).
const inboxGroup = Number(process.env.FAULT_INBOX_GROUP ?? 1);

/** The ledger plan's handler; `effect` is the success's work (the inbox's row), before it is recorded. */
async function work(msg: Message, effect?: (id: string) => Promise<unknown>): Promise<void> {
  const id = msg.properties.messageId ?? '?';
  appendFileSync(callsFile, `${id}\n`);
  await new Promise((r) => setTimeout(r, workMs));
  const outcome = expectedOutcome(id);
  if (outcome === 'exhausted') throw new Error(`carrier down for ${id}`);
  if (outcome === 'non-retryable') throw new NonRetryableError(`${id} has no address`);
  if (outcome === 'flaky' && msg.attempt === 0) throw new Error(`first attempt of ${id} fails`);
  await effect?.(id);
  appendFileSync(successFile, `${id}\n`);
}

async function main(): Promise<void> {
  const rr = await RabbitRetry.connect({ connectionName: `fault-consumer-${process.pid}`, hostOrder });
  const options = { queue, prefetch, ...failureOptions, recovery: { initialDelayMs: 200, maxDelayMs: 2000 } };
  let consumer: Consumer;
  if (inboxUrl) {
    // No `error` listener of its own, as the guide makes its pool: the inbox hears the idle clients' errors
    // when the suite terminates their backends.
    const pool = new Pool({ connectionString: inboxUrl, application_name: 'rr-fault-inbox', max: prefetch + 2 });
    consumer = await rr.consume({ ...options, inbox: { pool, group: inboxGroup } }, (msg, { tx }) =>
      work(msg, async (id) => {
        await tx.query('INSERT INTO fault_effects (queue, id) VALUES ($1, $2)', [queue, id]);
        if (msg.attempt === 0 && swallowsFirstAttempt(id)) await tx.query('SELECT 1 / 0').catch(() => undefined);
      }),
    );
    consumer.on('duplicate', (e) => console.log(JSON.stringify({ event: 'duplicate', id: e.messageId })));
  } else {
    consumer = await rr.consume(options, (msg) => work(msg));
  }
  // Where each failed message was confirmed to, so a test can tell what a deleted queue took with it.
  consumer.on('retry', (e) => appendFileSync(retriesFile, `${e.messageId ?? '?'} ${e.target} ${Date.now()}\n`));
  const at = () => Date.now();
  consumer.on('disconnected', (e) => console.log(JSON.stringify({ event: 'disconnected', error: e.error.message, url: e.url, at: at() })));
  consumer.on('recovered', (e) => console.log(JSON.stringify({ event: 'recovered', attempts: e.attempts, afterMs: e.afterMs, url: e.url, at: at() })));
  consumer.on('publishFailed', (e) => console.log(JSON.stringify({ event: 'publishFailed', id: e.messageId, code: e.error.code })));
  // The inbox reports each swallowed failure it caught: counted by the suite, apart from the other errors.
  consumer.on('error', (e) =>
    console.log(JSON.stringify(e.message.includes('the handler went on') ? { event: 'swallowed' } : { event: 'error', error: e.message })),
  );
  console.log(JSON.stringify({ event: 'ready', url: rr.url }));
  const stop = async () => {
    // What it still held when told to stop: the suite reads it when a message is missing.
    const { inFlight } = consumer.stats();
    console.log(JSON.stringify({ event: 'closing', state: consumer.state, inFlight }));
    await consumer.close();
    await rr.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
