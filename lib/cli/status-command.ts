/**
 * `status <queue>`: the depths of a work queue's queues and its consumers;
 * for a queue that retries with the broker's delayed retry
 * (`onFailure.brokerDelay`), the messages the broker holds delayed, which
 * only the management API counts.
 */
import type { Command } from 'commander';

import { brokerUrlsOf } from '../client';
import { reasonOf } from '../support/error-text';
import { parkedQueueName, retryQueueName } from '../native';
import { DEFAULT_DELAYS, type Delay } from '../options';
import { type ManagementQueueCounts, isBrokerDelay, managementQueue, managementTarget } from '../console/management';
import { type Cli, UsageError, formatTable } from './common';

/** The options of `status`. */
interface StatusOptions {
  delays: string;
  management?: string | false;
}

/** What the management API said of the queue: its counts (null: no such queue), or why it could not say. */
type Management =
  { state: 'ok'; detail: string; queue: ManagementQueueCounts | null } | { state: 'unavailable' | 'off'; detail: string; queue?: undefined };

/** `rabbit-retry status <queue>`. */
export function statusCommand(program: Command, cli: Cli): void {
  const { io } = cli;
  program
    .command('status')
    .description(
      "depth of the work queue, each retry queue and the parked queue, and consumers on the work queue; with the broker's delayed retry, the messages it holds delayed",
    )
    .argument('<queue>', 'the work queue')
    .option('--delays <list>', "the consumer's delays, comma-separated (not used for a queue with the broker's delayed retry)", DEFAULT_DELAYS.join(','))
    .option(
      '--management <url>',
      "the management API, which alone counts the broker's delayed messages (default: http on the broker's host, port 15672, the broker URL's user and password)",
    )
    .option('--no-management', 'do not ask the management API')
    .action((queue: string, o: StatusOptions) => {
      const delays = o.delays
        .split(',')
        .map((d) => d.trim())
        .filter(Boolean);
      let retryQueues: string[];
      try {
        // retryQueueName refuses what is not a delay, with the error below.
        retryQueues = delays.map((d) => retryQueueName(queue, d as Delay));
      } catch (e) {
        throw new UsageError(`--delays: ${reasonOf(e)}`);
      }
      if (typeof o.management === 'string') {
        try {
          managementTarget(undefined, o.management);
        } catch (e) {
          throw new UsageError(`--management: ${reasonOf(e)}`);
        }
      }
      cli.action = async (rr) => {
        const mgmt = await askManagement(brokerUrlsOf(rr)[0], o.management, queue);
        const brokerDelay = mgmt.queue ? isBrokerDelay(mgmt.queue.arguments) : false;
        // The broker's delayed retry declares no retry queue.
        const names = [queue, ...(brokerDelay ? [] : retryQueues), parkedQueueName(queue)];
        const rows = [];
        for (const [i, name] of names.entries()) {
          const info = await rr.queueInfo(name);
          const role = i === 0 ? 'work' : i === names.length - 1 ? 'parked' : 'retry';
          rows.push({ queue: name, role, exists: info !== null, messages: info?.messages ?? 0, consumers: info?.consumers ?? 0 });
        }
        const delayed = brokerDelay && mgmt.queue ? mgmt.queue.delayed : null;
        const circuit = await rr.circuitState(queue);
        if (cli.json()) {
          const management = { state: mgmt.state, detail: mgmt.detail };
          io.out(JSON.stringify({ queue, queues: rows, brokerDelay: mgmt.state === 'ok' ? brokerDelay : null, delayed, management, circuit }, null, 2));
          return;
        }
        const table = rows.map((r) => [r.queue, r.role, r.exists ? String(r.messages) : 'missing', r.exists ? String(r.consumers) : '-']);
        // The delayed messages, under the work queue: the broker holds them there.
        if (delayed !== null) table.splice(1, 0, [queue, 'delayed', String(delayed), '-']);
        io.out(formatTable(['QUEUE', 'ROLE', 'MESSAGES', 'CONSUMERS'], table));
        if (mgmt.state === 'unavailable') {
          io.out(`delayed messages: unavailable, the management API did not answer (${mgmt.detail}); only it counts the broker's delayed retry`);
        }
        if (circuit) {
          io.out('');
          io.out(`circuit  ${circuit.state}${circuit.probing ? ' (probing)' : ''}  dependency ${circuit.dependency}  since ${circuit.since}`);
        }
      };
    });
}

/** Asks the management API for `queue`'s arguments and counts, unless told not to. */
async function askManagement(brokerUrl: string | undefined, option: string | false | undefined, queue: string): Promise<Management> {
  if (option === false) return { state: 'off', detail: 'not asked (--no-management)' };
  const target = managementTarget(brokerUrl, option);
  if (!target) return { state: 'off', detail: 'no broker URL to derive it from' };
  try {
    const found = await managementQueue(target, queue);
    return { state: 'ok', detail: target.base, queue: found };
  } catch (e) {
    return { state: 'unavailable', detail: `${target.base}: ${reasonOf(e)}` };
  }
}
