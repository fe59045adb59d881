import { spawn } from 'node:child_process';
import path from 'node:path';

import { AMQP_URL, cleanup, closeAmqp, queueDepth, testQueue } from './helpers';

afterEach(cleanup);
afterAll(closeAmqp);

const ROOT = path.resolve(__dirname, '..');
const SCRIPT = path.join(__dirname, 'fixtures', 'exit-script.ts');

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** Runs the script and waits for it to exit by itself; kills it after `timeoutMs`. */
function run(args: string[], timeoutMs: number): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['ts-node', '--transpile-only', SCRIPT, ...args], {
      cwd: ROOT,
      env: { ...process.env, AMQP_URL },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

it('a process exits by itself after consumer.close() and rr.close()', async () => {
  const queue = testQueue(['1m']);
  const result = await run([queue], 20_000);
  expect({ timedOut: result.timedOut, code: result.code, stderr: result.stderr }).toEqual({
    timedOut: false,
    code: 0,
    stderr: '',
  });
  expect(result.stdout).toContain('done');
  expect(await queueDepth(queue)).toBe(0);
}, 30_000);
