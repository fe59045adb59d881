/**
 * Top self-time functions of the CPU profiles a benchmark run wrote with
 * BENCH_CPU_PROF=dir:
 *
 *   BENCH_CPU_PROF=/tmp/prof BENCH_ROUNDS=1 npm run bench
 *   npx ts-node --transpile-only bench/cpu-top.ts /tmp/prof [top=20]
 *
 * Profiles cover the child's main thread (JavaScript and the native calls it
 * makes synchronously); the native core's own threads do not show here: their
 * CPU is in the benchmark's "CPU s per 10k" column.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const dir = process.argv[2];
const top = Number(process.argv[3] ?? 20);
if (!dir) {
  console.error('usage: ts-node bench/cpu-top.ts <dir of .cpuprofile files> [top]');
  process.exit(2);
}
const root = path.resolve(__dirname, '..') + path.sep;

for (const f of readdirSync(dir)
  .filter((x) => x.endsWith('.cpuprofile'))
  .sort()) {
  const p = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const cf = byId.get(p.samples[i])?.callFrame;
    const d = p.timeDeltas[i] ?? 0;
    total += d;
    if (!cf) continue;
    if (cf.functionName === '(idle)') {
      idle += d;
      continue;
    }
    const where = cf.url ? ` ${cf.url.replace('file://', '').replace(root, '')}:${cf.lineNumber + 1}` : '';
    const key = `${cf.functionName || '(anonymous)'}${where}`;
    self.set(key, (self.get(key) ?? 0) + d);
  }
  const busy = total - idle;
  console.log(`\n${f}: ${(total / 1000).toFixed(0)} ms profiled, ${(busy / 1000).toFixed(0)} ms busy`);
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`  ${(v / 1000).toFixed(1).padStart(8)} ms ${((100 * v) / busy).toFixed(1).padStart(5)}% of busy  ${k}`);
  }
}
