/**
 * The carrier outage, told through a NestJS service: ShipmentConsumer
 * (@Consume, @OnFailure) rates orders with the CarrierClient, OrdersPublisher
 * (@InjectRabbitRetry) publishes them, and the application's shutdown closes
 * the consumer gracefully. Act one meets a short outage twice, first with a
 * plain amqplib consumer that requeues (requeue.ts), then with the service,
 * and prints the two side by side. Act two compares retry queues with the
 * retry table.
 *
 *   AMQP_URL=amqp://user:pass@host:5672 npx ts-node --transpile-only examples/nest-shipping/main.ts
 *
 * Set NEST_LOGS=1 to see Nest's log as well (the module's retry and park
 * lines), KEEP_QUEUES=1 to leave the demo's queues and exchanges on the broker
 * (and act two's database), and SHIPPING_PREFIX to name them (tidy.ts removes
 * what a run with that prefix left behind).
 *
 * After the first act comes the second (act-two.ts): a long carrier outage,
 * retry queues and a burst replay beside the retry table drained at a set
 * rate; it needs PostgreSQL at PG_URL. ACT=1 or ACT=2 runs one act alone.
 */
import 'reflect-metadata';

import { type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { connect as amqpConnect, type Channel } from 'amqplib';

import { DEFAULT_URL, RabbitRetry, type Consumer, type ParkedEvent, type RetryEvent } from '../../lib';
import { RABBIT_RETRY, RabbitRetryConsumers } from '../../lib/nestjs';
import { CarrierStub } from './carrier';
import { AppModule } from './app.module';
import { OrdersPublisher } from './orders.publisher';
import { runRequeueBaseline } from './requeue';
import {
  DEADLINE_MS,
  FIRST_ORDER,
  Ledger,
  ORDER_COUNT,
  ORDER_THE_CARRIER_CANNOT_RATE,
  OUTAGE_MS,
  PUBLISH_EVERY_MS,
  TOPOLOGY,
  type Topology,
  log,
  numbersOf,
  orderIdOf,
  plural,
  printComparison,
  printHeader,
  printIntro,
  printSummary,
  reportStragglers,
  requeueQueueFor,
  sampleOrder,
  startClock,
} from './story';

const AMQP_URL = process.env.AMQP_URL ?? DEFAULT_URL;
const KEEP_QUEUES = process.env.KEEP_QUEUES === '1';
const NEST_LOGS = process.env.NEST_LOGS === '1';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function follow(consumer: Consumer, ledger: Ledger): void {
  consumer.on('retry', (e: RetryEvent) => {
    const id = orderIdOf(e.messageId);
    if (typeof id === 'number') ledger.moved(id, `retry.${e.delay}`);
    log(id, `retry.${e.delay}`, `attempt ${e.attempt} failed: ${e.error}`);
  });
  consumer.on('parked', (e: ParkedEvent) => {
    const id = orderIdOf(e.messageId);
    if (typeof id === 'number') ledger.moved(id, 'parked', e.reason);
    log(id, 'parked', `${e.reason} after ${plural(e.attempt + 1, 'attempt')}: ${e.error}`);
  });
  consumer.on('publishFailed', (e) => {
    log(orderIdOf(e.messageId), 'work', `could not move it to ${e.target}, the broker will redeliver it: ${e.error.message}`);
  });
  consumer.on('error', (err) => log('-', '-', `consumer error: ${err.message}`));
}

async function publishOrders(publisher: OrdersPublisher, ledger: Ledger): Promise<void> {
  for (let i = 0; i < ORDER_COUNT; i++) {
    if (i > 0) await sleep(PUBLISH_EVERY_MS);
    const orderId = FIRST_ORDER + i;
    // Tracked before the publish resolves, because the consumer can finish it first.
    ledger.published(orderId);
    await publisher.publish(sampleOrder(orderId));
    log(orderId, 'work', 'published');
  }
}

/** Ready messages per queue; runs once the application is closed, so nothing is unacked. */
async function queueDepths(t: Topology): Promise<Map<string, number>> {
  const rr = await RabbitRetry.connect({ url: AMQP_URL, connectionName: 'rabbit-retry-nest-demo-check' });
  try {
    const depths = new Map<string, number>();
    for (const q of [t.queue, ...t.retryQueues, t.parkedQueue]) depths.set(q, (await rr.queueInfo(q))?.messages ?? 0);
    return depths;
  } finally {
    await rr.close();
  }
}

async function withChannel<T>(use: (ch: Channel) => Promise<T>): Promise<T> {
  const conn = await amqpConnect(AMQP_URL);
  try {
    return await use(await conn.createChannel());
  } finally {
    await conn.close();
  }
}

function removeTopology(t: Topology): Promise<void> {
  return withChannel(async (ch) => {
    for (const q of [t.queue, ...t.retryQueues, t.parkedQueue]) await ch.deleteQueue(q);
    await ch.deleteExchange(t.exchange);
  });
}

/** Removes the run's queues and exchange; false when they could not be removed. */
async function tidyBroker(t: Topology, parkedDepth: number | undefined): Promise<boolean> {
  if (KEEP_QUEUES) {
    console.log(`kept      ${t.parkedQueue} (${parkedDepth ?? '?'} parked) and the rest of the demo's queues; KEEP_QUEUES=1`);
    return true;
  }
  try {
    await removeTopology(t);
    const parked = parkedDepth === undefined ? '' : `, ${plural(parkedDepth, 'parked order')} with it (KEEP_QUEUES=1 keeps them)`;
    console.log(`removed   ${t.exchange} and its ${2 + t.retryQueues.length} queues${parked}`);
    return true;
  } catch (err) {
    console.error(`could not remove the demo's queues (${err instanceof Error ? err.message : String(err)}); their names start with ${t.prefix}`);
    return false;
  }
}

/**
 * Starts the outage, publishes the orders and follows them until each is done
 * or parked, or the deadline passes; then closes the app.
 */
async function runOutage(app: INestApplicationContext, carrier: CarrierStub, ledger: Ledger): Promise<boolean> {
  try {
    const consumer = app.get(RabbitRetryConsumers).get(TOPOLOGY.queue);
    if (!consumer) throw new Error(`the application does not consume ${TOPOLOGY.queue}`);
    follow(consumer, ledger);
    const t0 = Date.now();
    startClock(t0);
    carrier.startOutage(t0);
    await publishOrders(app.get(OrdersPublisher), ledger);
    const settled = await ledger.settled(t0 + DEADLINE_MS);
    if (!settled) reportStragglers(ledger);
    return settled;
  } finally {
    // Closes the consumer gracefully (in-flight handlers finish), then the connection.
    await app.close();
  }
}

async function actOne(): Promise<number> {
  printIntro();
  const requeue = await runRequeueBaseline(requeueQueueFor(TOPOLOGY.prefix));
  console.log();

  const carrier = new CarrierStub({ outageMs: OUTAGE_MS, timesOutOn: [ORDER_THE_CARRIER_CANNOT_RATE] });
  const ledger = new Ledger();
  let depths: Map<string, number> | undefined;
  let code = 1;
  try {
    const app = await NestFactory.createApplicationContext(AppModule.register(carrier, ledger), {
      logger: NEST_LOGS ? undefined : false,
      abortOnError: false,
    });
    app.enableShutdownHooks();
    printHeader(app.get<RabbitRetry>(RABBIT_RETRY), TOPOLOGY);
    const settled = await runOutage(app, carrier, ledger);
    depths = await queueDepths(TOPOLOGY);
    const accounted = printSummary(ledger, carrier, TOPOLOGY, depths);
    code = settled && accounted ? 0 : 1;
  } finally {
    if (!(await tidyBroker(TOPOLOGY, depths?.get(TOPOLOGY.parkedQueue)))) code = 1;
  }
  console.log();
  printComparison(requeue, numbersOf(ledger, carrier, TOPOLOGY, depths ?? new Map()));
  return code || (requeue.lost === 0 ? 0 : 1);
}

async function main(): Promise<number> {
  const act = process.env.ACT ?? '';
  if (!['', '1', '2'].includes(act)) throw new Error(`ACT must be 1 or 2 (or unset for both acts), got '${act}'`);
  let code = 0;
  if (act !== '2') code = await actOne();
  if (act !== '1') {
    if (act === '') console.log();
    // Loaded only now, so that act one's clock and queue names are as they were; a require,
    // as this file is CommonJS: an import() stays an ESM import, which ts-node does not compile.
    const { runActTwo } = require('./act-two') as typeof import('./act-two');
    code =
      (await runActTwo().catch((err: unknown) => {
        console.error(`act two failed: ${err instanceof Error ? err.message : String(err)}`);
        return 1;
      })) || code;
  }
  return code;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
