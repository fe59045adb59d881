/**
 * The console's replays and purges run in the server, one at a time on each
 * parked queue, whether or not a page is watching: closing the page stops
 * nothing. Each keeps its progress for the page to read. Stopping one aborts
 * its signal: every wait of the job ends at once, and it takes no message
 * more from the parked queue.
 */
import { RabbitRetryError } from '../errors';
import { reasonOf } from '../support/error-text';

/** What a job does. */
export type JobKind = 'replay' | 'purge';

/** What a job acts on: the whole parked queue, a group, or one message. */
export type JobScope = 'queue' | 'group' | 'message';

/** A job as the page reads it. */
export interface JobView {
  /** Its id, in the order jobs were asked for. */
  id: number;
  /** `replay` or `purge`. */
  kind: JobKind;
  /** The work queue. */
  queue: string;
  /** `queue`, `group` or `message`. */
  scope: JobScope;
  /** The group's or the message's key. */
  key: string | null;
  /** What it acts on, in words. */
  label: string;
  /** `queued` (waits for another job on the queue), `running`, `done`, `failed` or `stopped`. */
  state: 'queued' | 'running' | 'done' | 'failed' | 'stopped';
  /** Messages replayed or purged so far. */
  done: number;
  /** Messages looked at and left parked so far. */
  skipped: number;
  /**
   * Messages in the parked queue once the job ended: what it had not moved
   * is among them. Null while it is queued or running, when it was stopped
   * before it began, and when the depth could not be read.
   */
  left: number | null;
  /** The most it acts on: the count the operator confirmed. */
  total: number;
  /** Replays: publishes a second at most. */
  ratePerSec: number | null;
  /** Messages done, by the key of their group. */
  byGroup: Record<string, number>;
  /** Why it failed. */
  error: {
    /** The error's stable code. */
    code: string;
    /** What happened. */
    message: string;
  } | null;
  /** When it was asked for, ISO 8601. */
  createdAt: string;
  /** When it started, ISO 8601; null while queued. */
  startedAt: string | null;
  /** When it ended, ISO 8601; null until then. */
  finishedAt: string | null;
}

/** A job's working state. */
export interface Job extends JobView {
  /** Aborted by {@link Jobs.stop} and {@link Jobs.stopAll}: the job's waits end, and it takes no message more. */
  signal: AbortSignal;
  /** Aborts {@link signal}. */
  controller: AbortController;
  /** The parked queue's depth when the job began: the messages it holds while it works are not counted as ready. */
  parkedAtStart?: number;
}

/** Runs one task at a time for each key, in the order asked. */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<void>>();
  private readonly running = new Map<string, number>();

  /** Whether a task of `key` runs or waits. */
  busy(key: string): boolean {
    return (this.running.get(key) ?? 0) > 0;
  }

  /** Runs `f` after every task of `key` asked before it has ended. */
  run<T>(key: string, f: () => Promise<T>): Promise<T> {
    this.running.set(key, (this.running.get(key) ?? 0) + 1);
    const prev = this.tails.get(key) ?? Promise.resolve();
    const result = prev.then(f);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      const n = (this.running.get(key) ?? 1) - 1;
      if (n === 0) {
        this.running.delete(key);
        if (this.tails.get(key) === tail) this.tails.delete(key);
      } else this.running.set(key, n);
    });
    return result;
  }
}

/** Whether `job` is queued or running. */
function going(job: Job): boolean {
  return job.state === 'queued' || job.state === 'running';
}

/** `job` without its working state, as the page reads it. */
function viewOf(job: Job): JobView {
  const { signal: _signal, controller: _controller, parkedAtStart: _parkedAtStart, ...view } = job;
  return { ...view, byGroup: { ...view.byGroup } };
}

/** Jobs kept for the page once ended. */
const KEEP_ENDED = 50;

/** The console's jobs. */
export class Jobs {
  private readonly list: Job[] = [];
  private nextId = 1;
  private readonly ended = new Set<Promise<void>>();

  constructor(
    /** The per-queue order that jobs and readings of the parked queue share. */
    private readonly order: KeyedQueue,
  ) {}

  /** The id the next job will get. */
  get nextJobId(): number {
    return this.nextId;
  }

  /**
   * Queues `work` on `queue`'s turn and returns the job at once; `work`
   * reports progress by changing the job it is given.
   */
  start(fields: Pick<JobView, 'kind' | 'queue' | 'scope' | 'key' | 'label' | 'total' | 'ratePerSec'>, work: (job: Job) => Promise<void>): Job {
    const controller = new AbortController();
    const job: Job = {
      ...fields,
      id: this.nextId++,
      state: 'queued',
      done: 0,
      skipped: 0,
      left: null,
      byGroup: {},
      error: null,
      createdAt: new Date().toISOString(),
      startedAt: null,
      finishedAt: null,
      signal: controller.signal,
      controller,
    };
    this.list.push(job);
    const run = this.order
      .run(job.queue, async () => {
        if (job.signal.aborted) {
          job.state = 'stopped';
          return;
        }
        job.state = 'running';
        job.startedAt = new Date().toISOString();
        await work(job);
        job.state = job.signal.aborted ? 'stopped' : 'done';
      })
      .catch((err: unknown) => {
        job.state = 'failed';
        job.error = {
          code: err instanceof RabbitRetryError ? err.code : 'INTERNAL',
          message: reasonOf(err),
        };
      })
      .finally(() => {
        job.finishedAt = new Date().toISOString();
        this.ended.delete(run);
        this.trim();
      });
    this.ended.add(run);
    return job;
  }

  /**
   * Stops job `id`: its waits end at once, it takes no message more, and
   * what it holds goes back to its place in the parked queue. False when
   * there is no such job still going.
   */
  stop(id: number): boolean {
    const job = this.list.find((j) => j.id === id);
    if (!job || !going(job)) return false;
    job.controller.abort();
    return true;
  }

  /** The job running on `queue`, if one is. */
  running(queue: string): Job | undefined {
    return this.list.find((j) => j.queue === queue && j.state === 'running');
  }

  /** Whether a job of `queue` is queued or running. */
  active(queue: string): boolean {
    return this.list.some((j) => j.queue === queue && going(j));
  }

  /** Every job kept, oldest first. */
  views(): JobView[] {
    return this.list.map(viewOf);
  }

  /** Job `id` as the page reads it. */
  view(id: number): JobView | undefined {
    const job = this.list.find((j) => j.id === id);
    return job && viewOf(job);
  }

  /** Stops every job and waits for them to end; resolves to those it stopped, as they ended. */
  async stopAll(): Promise<JobView[]> {
    const stopping = this.list.filter(going);
    for (const j of stopping) j.controller.abort();
    await Promise.all([...this.ended]);
    return stopping.map(viewOf);
  }

  private trim(): void {
    const ended = this.list.filter((j) => !going(j));
    for (const j of ended.slice(0, Math.max(0, ended.length - KEEP_ENDED))) this.list.splice(this.list.indexOf(j), 1);
  }
}
