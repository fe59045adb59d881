// main.ts of the microservice, built with tsc and run with node: it starts the
// microservice, asks it a question through RabbitRetryClient, and stops.
import 'reflect-metadata';

import { appendFileSync } from 'node:fs';

import { RabbitRetryClient } from 'rabbit-retry/microservices';
import { uniqueQueueName } from 'rabbit-retry/testing';
import { lastValueFrom } from 'rxjs';

import { createMicroservice } from './microservice';

async function main(): Promise<void> {
  const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
  const queue = uniqueQueueName('install-spec-main');
  if (process.env.RR_SPEC_QUEUES) {
    appendFileSync(process.env.RR_SPEC_QUEUES, [queue, `${queue}.retry.200ms`, `${queue}.retry.400ms`, `${queue}.parked`].join('\n') + '\n');
  }
  const app = await createMicroservice(url, queue);
  await app.listen();
  const math = new RabbitRetryClient({ url, queue });
  try {
    const sum = await lastValueFrom(math.send<number>({ cmd: 'sum' }, [1, 2, 3]));
    if (sum !== 6) throw new Error(`sum answered ${sum}, not 6`);
    console.log(`microservice on ${queue}: { cmd: 'sum' } answered ${sum}`);
  } finally {
    await math.close();
    await app.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
