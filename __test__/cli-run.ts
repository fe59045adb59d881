import { type CliIo, run } from '../lib/cli';
import { AMQP_URL } from './broker';

/** What one run of the CLI wrote, and its exit code. */
export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/** Runs the CLI in-process against the test broker (AMQP_URL), not on a terminal. */
export async function runCli(argv: string[]): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (t) => out.push(t), err: (t) => err.push(t), isTTY: false, env: { AMQP_URL } };
  const code = await run(argv, io);
  return { code, out: out.join('\n'), err: err.join('') };
}
