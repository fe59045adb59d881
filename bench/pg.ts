/**
 * A PostgreSQL database of a benchmark's own (created and dropped by the
 * benchmark): its name, its URL, and psql in it. The server is the tests'
 * (PGHOST_TEST, PGPORT_TEST, PGUSER_TEST; trust auth).
 */
import { spawnSync } from 'node:child_process';

/** Where the server is. */
export const PG = {
  host: process.env.PGHOST_TEST ?? '127.0.0.1',
  port: process.env.PGPORT_TEST ?? '5432',
  user: process.env.PGUSER_TEST ?? 'postgres',
};

/** The database `rr_bench_<name>_<pid>`: its name, its URL, and `psql(sql, db?)`, which runs `sql` there (or in `db`) and returns its output. */
export function benchDatabase(name: string): { db: string; url: string; psql: (sql: string, db?: string) => string } {
  const db = `rr_bench_${name}_${process.pid}`;
  const psql = (sql: string, inDb = db): string => {
    const r = spawnSync('psql', ['-h', PG.host, '-p', PG.port, '-U', PG.user, '-d', inDb, '-v', 'ON_ERROR_STOP=1', '-Atc', sql], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`psql: ${r.stderr.trim()}`);
    return r.stdout.trim();
  };
  return { db, url: `postgres://${PG.user}@${PG.host}:${PG.port}/${db}`, psql };
}
