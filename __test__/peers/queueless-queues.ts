/**
 * The queue-less run's global setup and teardown (jest.peers-queueless.config.js): deletes the
 * durable queues its handlers derive (`app.<exchange>.<routingKey>.<Class>.<method>`, with their
 * retry and parked queues) before the run, so that it starts from none, and after it, so that they
 * do not keep taking the messages other suites publish to the specs' exchanges. Only queues named
 * after a class of golevelup's specs (`__test__/peers/golevelup/`) go.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import * as amqp from 'amqplib';

import { AMQP_URL, RABBITMQCTL } from '../broker';

const SPECS = join(__dirname, 'golevelup');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** The classes the specs declare: a derived queue's name has one as a segment. */
function specClasses(): Set<string> {
  const names = new Set<string>();
  for (const file of sources(SPECS)) {
    for (const m of readFileSync(file, 'utf8').matchAll(/\bclass\s+(\w+)/g)) names.add(m[1]);
  }
  return names;
}

export default async function deleteDerivedQueues(): Promise<void> {
  const classes = specClasses();
  let listed: string;
  try {
    listed = execFileSync(RABBITMQCTL[0], [...RABBITMQCTL.slice(1), 'list_queues', '-q', 'name'], { encoding: 'utf8', timeout: 60_000 });
  } catch (err) {
    console.warn(`the queue-less run's derived queues are left as they are: rabbitmqctl list_queues failed (${(err as Error).message})`);
    return;
  }
  const derived = listed
    .split('\n')
    .map((l) => l.trim())
    .filter((name) => name.startsWith('app.') && name.split('.').some((part) => classes.has(part)));
  if (derived.length === 0) return;
  const conn = await amqp.connect(AMQP_URL);
  try {
    const ch = await conn.createChannel();
    for (const name of derived) await ch.deleteQueue(name);
  } finally {
    await conn.close();
  }
}
