/**
 * Removes what a run of the demo left behind: the queues and exchanges of
 * both acts and of the requeue baseline, named after SHIPPING_PREFIX, and act
 * two's database. scripts/demo.sh runs it when the story did not finish (it
 * failed, or was interrupted); a run that finishes removes its own.
 *
 *   SHIPPING_PREFIX=nest-demo-1712345678-4242 npx ts-node --transpile-only examples/nest-shipping/tidy.ts
 */
import { DEFAULT_URL, RabbitRetry } from '../../lib';
import { dropDemoDatabase } from './act-two';
import { DEMO_DATABASE, actTwoTopology } from './act-two.story';
import { requeueQueueFor, topologyFor } from './story';

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

async function main(): Promise<number> {
  const prefix = process.env.SHIPPING_PREFIX;
  if (!prefix) throw new Error('SHIPPING_PREFIX must name the run to tidy');
  const one = topologyFor(prefix);
  const two = actTwoTopology(`${prefix}-act2`);
  const queues = [
    requeueQueueFor(prefix),
    one.queue,
    ...one.retryQueues,
    one.parkedQueue,
    ...[two.a, two.b].flatMap((s) => [s.queue, ...s.retryQueues, s.parkedQueue]),
  ];
  let code = 0;
  const removed: string[] = [];
  try {
    const rr = await RabbitRetry.connect({ url: process.env.AMQP_URL ?? DEFAULT_URL, connectionName: 'rabbit-retry-nest-demo-tidy' });
    try {
      let n = 0;
      for (const q of queues) if ((await rr.deleteQueue(q)) !== null) n += 1;
      for (const e of [one.exchange, two.exchange]) await rr.deleteExchange(e);
      if (n > 0) removed.push(`${n} of its queues`);
    } finally {
      await rr.close();
    }
  } catch (err) {
    code = 1;
    console.error(`tidy: could not remove the run's queues (${message(err)}); their names start with ${prefix}`);
  }
  try {
    if (dropDemoDatabase()) removed.push(`the database ${DEMO_DATABASE}`);
  } catch (err) {
    code = 1;
    console.error(`tidy: could not drop the database ${DEMO_DATABASE} (${message(err)})`);
  }
  if (removed.length > 0) console.log(`tidy: removed what the run left behind: ${removed.join(' and ')}`);
  return code;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`tidy: ${message(err)}`);
    process.exitCode = 1;
  },
);
