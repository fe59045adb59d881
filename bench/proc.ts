/**
 * What a benchmark child needs of the harness without loading the broker
 * helpers (common.ts loads __test__/broker.ts, which loads this checkout's
 * lib and its addon): the result marker and CPU by thread from /proc.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** Marks the line of a child's stdout that carries its result. */
export const RESULT_MARK = 'BENCH_RESULT ';

/** A process's or thread's name and CPU ticks (user + system) from its `/proc/.../stat` file. */
export function procStat(file: string): { comm: string; ticks: number } {
  const stat = readFileSync(file, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of stat; f starts at field 3.
  return { comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ticks: Number(f[11]) + Number(f[12]) };
}

/** CPU ticks of each thread of this process, by thread name (Linux; empty elsewhere). */
export function threadTicks(): Map<string, number> {
  const ticks = new Map<string, number>();
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      const { comm, ticks: t } = procStat(`/proc/self/task/${tid}/stat`);
      const name = tid === String(process.pid) ? 'main (JS)' : comm === 'node' ? 'node workers (GC, libuv)' : comm;
      ticks.set(`${tid}\t${name}`, t);
    }
  } catch {
    // not Linux
  }
  return ticks;
}

/** CPU seconds by thread name between two {@link threadTicks} readings (100 ticks a second). */
export function threadCpu(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, t] of after) {
    const name = key.split('\t')[1];
    const s = (t - (before.get(key) ?? 0)) / 100;
    if (s > 0) out[name] = (out[name] ?? 0) + s;
  }
  return out;
}
