/**
 * Circuits: consumers that stop calling a dependency that is down.
 *
 * A circuit counts the retryable failures of its consumers' handlers. After
 * `openAfter.failures` of them within `openAfter.within` it opens: each of
 * its consumers cancels its subscription, so the messages stay in the work
 * queue, in order, and nothing more fails into the retry queues. Deliveries
 * that reach a consumer after the circuit opened are given back to the queue
 * at once, never started. Every `probeEvery` the circuit takes one message
 * (`basic.get`) and runs its handler: success closes the circuit after
 * `closeAfter` of them in a row, a failure keeps it open (the message takes
 * the usual failure path: a retry queue, or parked). With a `check`, the
 * check is the probe and no message is spent. When it closes, the consumers
 * consume again and the messages waiting in their retry queues are sent back
 * to the work queue at once, at `returnRate` a second, each acked in its
 * retry queue only after the broker confirmed its copy.
 *
 * Consumers of one process that name the same `dependency` share one
 * circuit. Its state is also written to a state queue per work queue,
 * `<queue>.circuit`, holding only the latest: operators see it (the CLI's
 * `status`), and a process that starts (or restarts after a crash during a
 * probe) with a circuit left open or probing starts with it open.
 */
import { InvalidOptionsError } from '../errors';
import { parseDelay } from '../options/check';
import { reasonOf } from '../support/error-text';
import { BOOLEAN, fence } from '../support/fence';
import type { CircuitOptions, Delay } from '../options';

/** Where a circuit is: letting everything through, stopped, or trying. */
export type CircuitState = 'closed' | 'open' | 'halfOpen';

/** Why a circuit closed. */
export type CircuitCloseCause = 'probe' | 'check' | 'trial';

/** Emitted on each consumer of a circuit when it opens (or opens again after a failed probe). */
export interface CircuitOpenEvent {
  /** The consumer's work queue. */
  queue: string;
  /** The circuit's dependency (the work queue's name when none was given). */
  dependency: string;
  /** `failures` (the count within the window), `probe` (a probe failed) or `restored` (the state queue said so at start). */
  cause: 'failures' | 'probe' | 'restored';
  /** Retryable failures counted within `openAfter.within` when it opened. */
  failures: number;
}

/** Emitted on each consumer of a circuit when it starts a probe. */
export interface CircuitHalfOpenEvent {
  /** The consumer's work queue. */
  queue: string;
  /** The circuit's dependency. */
  dependency: string;
  /** `message` (a message taken from a work queue), `check` (the health check) or `trial` (the queues were empty: consuming again, the next outcome decides). */
  probe: 'message' | 'check' | 'trial';
}

/** Emitted on each consumer of a circuit when it closes. */
export interface CircuitClosedEvent {
  /** The consumer's work queue. */
  queue: string;
  /** The circuit's dependency. */
  dependency: string;
  /** What closed it. */
  cause: CircuitCloseCause;
  /** Milliseconds it was open. */
  openMs: number;
}

/** A circuit as `health()` and `stats()` report it. */
export interface CircuitStatus {
  /** The circuit's dependency. */
  dependency: string;
  /** `closed`, `open` or `halfOpen`. */
  state: CircuitState;
  /** Milliseconds since the epoch when it entered this state. */
  since: number;
  /** Retryable failures counted within the window now. */
  failures: number;
  /** Probes made since it last opened from closed. */
  probes: number;
}

/** What a circuit's state queue (`<queue>.circuit`) holds: its last recorded state. */
export interface CircuitRecord {
  /** The circuit's dependency. */
  dependency: string;
  /** `closed`, `open` or `halfOpen`. */
  state: CircuitState;
  /** When it entered this state, ISO 8601. */
  since: string;
  /** A message probe was running when this was written. */
  probing: boolean;
}

/** How a probe went. @internal */
export type ProbeResult = 'success' | 'failure' | 'empty' | 'other';

/** What a circuit needs from each consumer on it. @internal */
export interface CircuitMember {
  readonly queue: string;
  /** Stops taking deliveries; those in flight settle as usual. */
  pause(): Promise<void>;
  /** Takes deliveries again. */
  resume(): Promise<void>;
  /** Takes one message and runs the handler on it. */
  probe(): Promise<ProbeResult>;
  /** Sends what waits in the retry queues back to the work queue at `rate` a second while `go()` holds; how many. */
  returnEarly(rate: number, go: () => boolean): Promise<number>;
  /** Writes the circuit's state to the state queue. */
  record(r: CircuitRecord): Promise<void>;
  /** Emits a circuit event on the consumer. */
  notify(event: 'circuitOpen', e: CircuitOpenEvent): void;
  notify(event: 'circuitHalfOpen', e: CircuitHalfOpenEvent): void;
  notify(event: 'circuitClosed', e: CircuitClosedEvent): void;
  /** Logs a problem of the circuit's own (a check that threw, a state write that failed). */
  warn(line: string): void;
}

/** The defaults of {@link CircuitOptions}. */
export const CIRCUIT_DEFAULTS = {
  /** 5 retryable failures within 10 seconds open it. */
  openAfter: {
    /** Retryable failures. */
    failures: 5,
    /** The window they fall in. */
    within: '10s',
  },
  /** A probe every 5 seconds while open. */
  probeEvery: '5s',
  /** One probe that succeeds closes it. */
  closeAfter: 1,
  /** Held messages sent back a second once it closes. */
  returnRate: 50,
} as const;

/** The options with every default filled in and every delay in milliseconds. @internal */
export interface CircuitSettings {
  dependency?: string;
  failures: number;
  withinMs: number;
  probeEveryMs: number;
  closeAfter: number;
  returnRate: number;
  check?: () => Promise<boolean> | boolean;
}

const ms = (d: Delay, option: string): number => parseDelay(d, option).ms;

/** `options` with defaults, delays in milliseconds. Options are checked before (lib/options/check.ts). @internal */
export function circuitSettings(options: CircuitOptions): CircuitSettings {
  return {
    dependency: options.dependency,
    failures: options.openAfter?.failures ?? CIRCUIT_DEFAULTS.openAfter.failures,
    withinMs: ms(options.openAfter?.within ?? CIRCUIT_DEFAULTS.openAfter.within, 'onFailure.circuit.openAfter.within'),
    probeEveryMs: ms(options.probeEvery ?? CIRCUIT_DEFAULTS.probeEvery, 'onFailure.circuit.probeEvery'),
    closeAfter: options.closeAfter ?? CIRCUIT_DEFAULTS.closeAfter,
    returnRate: options.returnRate ?? CIRCUIT_DEFAULTS.returnRate,
    check: options.check,
  };
}

/** The settings two consumers of one circuit must agree on, by the option that gives each. */
const SETTING_NAMES = {
  failures: 'openAfter.failures',
  withinMs: 'openAfter.within',
  probeEveryMs: 'probeEvery',
  closeAfter: 'closeAfter',
  returnRate: 'returnRate',
  check: 'check',
} as const satisfies Partial<Record<keyof CircuitSettings, string>>;

/** The circuits of this process, by dependency. */
const circuits = new Map<string, Circuit>();

/**
 * The circuit of `dependency`, made on first use; a consumer joins it with
 * {@link Circuit.join}. Consumers naming the same dependency must give the
 * same settings. @internal
 */
export function circuitFor(dependency: string, settings: CircuitSettings): Circuit {
  checkCircuitFits(dependency, settings);
  let c = circuits.get(dependency);
  if (!c) {
    c = new Circuit(dependency, settings);
    circuits.set(dependency, c);
  }
  return c;
}

/**
 * Refuses settings that differ from those of the circuit of `dependency`
 * this process already has, before anything is declared. @internal
 */
export function checkCircuitFits(dependency: string, settings: CircuitSettings): void {
  const mismatch = circuits.get(dependency)?.differsFrom(settings);
  if (mismatch) {
    throw new InvalidOptionsError(
      `onFailure.circuit: the circuit of dependency '${dependency}' is already in use with another ${mismatch}; consumers that share a circuit give it the same options`,
    );
  }
}

/** One dependency's circuit, shared by the consumers of this process that name it. @internal */
export class Circuit {
  #state: CircuitState = 'closed';
  #since = Date.now();
  #openedAt = 0;
  /** Failure times within the window (closed only). */
  #failures: number[] = [];
  #probes = 0;
  #successes = 0;
  /** While halfOpen: `message`/`check` probe from a paused consumer, or `trial` with the consumers consuming. */
  #mode: CircuitHalfOpenEvent['probe'] = 'message';
  #timer: NodeJS.Timeout | undefined;
  #members: CircuitMember[] = [];
  /** Which member probes next. */
  #next = 0;
  /** Bumped by every transition: work begun in an earlier state checks it before acting. */
  #epoch = 0;

  constructor(
    readonly dependency: string,
    readonly settings: CircuitSettings,
  ) {}

  /** What differs between these settings and the circuit's, if anything. */
  differsFrom(s: CircuitSettings): string | undefined {
    const mine = this.settings;
    const key = (Object.keys(SETTING_NAMES) as (keyof typeof SETTING_NAMES)[]).find((k) => mine[k] !== s[k]);
    return key && SETTING_NAMES[key];
  }

  /** Where it is now. */
  get state(): CircuitState {
    return this.#state;
  }

  /** Whether a delivery that reaches a consumer now may run (false: give it back). */
  get admits(): boolean {
    return this.#state === 'closed' || (this.#state === 'halfOpen' && this.#mode === 'trial');
  }

  /** Its state for `health()`. */
  status(): CircuitStatus {
    return { dependency: this.dependency, state: this.#state, since: this.#since, failures: this.#failuresNow(Date.now()), probes: this.#probes };
  }

  /**
   * Adds a consumer; when the circuit is open, the consumer pauses at once.
   * `restored` is what its state queue held: a circuit left open, or a probe
   * that never finished, opens it.
   */
  async join(m: CircuitMember, restored?: CircuitRecord): Promise<void> {
    this.#members.push(m);
    if (this.#state !== 'closed') {
      // Open or probing: it waits with the others. (In a trial the others consume, and so does it.)
      if (!this.admits) await m.pause();
      return;
    }
    if (restored && restored.state !== 'closed') {
      // Open, or a probe was running when the process that wrote it ended: a failure.
      this.#open('restored');
    }
  }

  /** Removes a consumer (it closes); the last one stops the circuit's timer. */
  leave(m: CircuitMember): void {
    this.#members = this.#members.filter((x) => x !== m);
    if (this.#members.length === 0) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#epoch++;
      if (circuits.get(this.dependency) === this) circuits.delete(this.dependency);
    }
  }

  /** A handler's retryable failure. */
  failure(): void {
    const now = Date.now();
    if (this.#state === 'closed') {
      this.#failures.push(now);
      if (this.#failuresNow(now) >= this.settings.failures) this.#open('failures');
    } else if (this.#state === 'halfOpen' && this.#mode === 'trial') {
      this.#open('probe');
    }
  }

  /** A handler's success. */
  success(): void {
    if (this.#state === 'halfOpen' && this.#mode === 'trial') this.#succeeded('trial');
  }

  #failuresNow(now: number): number {
    const from = now - this.settings.withinMs;
    while (this.#failures.length > 0 && this.#failures[0] < from) this.#failures.shift();
    return this.#failures.length;
  }

  #enter(state: CircuitState): number {
    this.#state = state;
    this.#since = Date.now();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    return ++this.#epoch;
  }

  #open(cause: CircuitOpenEvent['cause']): void {
    const failures = this.#failuresNow(Date.now());
    if (this.#state === 'closed') {
      this.#openedAt = Date.now();
      this.#probes = 0;
    }
    const resumed = this.#state === 'halfOpen' && this.#mode === 'trial';
    this.#enter('open');
    this.#failures = [];
    this.#successes = 0;
    void this.#record(false);
    for (const m of this.#members) {
      m.notify('circuitOpen', { queue: m.queue, dependency: this.dependency, cause, failures });
      // A consumer that consumes (closed, or in a trial) stops; one paused for a probe stays paused.
      if (cause !== 'probe' || resumed)
        void m.pause().catch((err: unknown) => m.warn(`pausing for the circuit of '${this.dependency}' failed: ${reasonOf(err)}`));
    }
    this.#schedule();
  }

  #schedule(): void {
    const epoch = this.#epoch;
    this.#timer = setTimeout(() => {
      if (epoch !== this.#epoch) return;
      this.#timer = undefined;
      this.#probe().catch((err: unknown) => {
        this.#members[0]?.warn(`a probe of the circuit of '${this.dependency}' failed: ${reasonOf(err)}`);
        // Whatever went wrong, the circuit is not left open or probing with no probe to come.
        const waiting = this.#state === 'open' || (this.#state === 'halfOpen' && this.#mode !== 'trial');
        if (waiting && this.#timer === undefined && this.#members.length > 0) this.#open('probe');
      });
    }, this.settings.probeEveryMs);
    this.#timer.unref();
  }

  async #probe(): Promise<void> {
    if (this.#members.length === 0) return;
    this.#probes++;
    const check = this.settings.check;
    if (check) {
      void this.#halfOpen('check');
      const mine = this.#epoch;
      // Fenced: a throw, a rejection of any value, an answer other than a boolean, or none within probeEvery is a failed check.
      const r = await fence(`the health check (onFailure.circuit.check) of the circuit of '${this.dependency}'`, () => check(), {
        expect: BOOLEAN,
        timeoutMs: this.settings.probeEveryMs,
        keepAlive: false,
      });
      if (!r.ok) this.#members[0]?.warn(`${r.problem}; it counts as failed`);
      if (mine !== this.#epoch) return;
      if (r.ok && r.value) this.#close('check');
      else this.#open('probe');
      return;
    }
    await this.#probeMessage();
  }

  /** Enters halfOpen; resolves once the state queues hold it (a probe that ends the process then counts). */
  #halfOpen(mode: CircuitHalfOpenEvent['probe']): Promise<void> {
    this.#mode = mode;
    this.#enter('halfOpen');
    const recorded = this.#record(mode === 'message');
    for (const m of this.#members) m.notify('circuitHalfOpen', { queue: m.queue, dependency: this.dependency, probe: mode });
    return recorded;
  }

  /** Takes a message from each consumer's queue in turn until one runs; with every queue empty, a trial. */
  async #probeMessage(): Promise<void> {
    const recorded = this.#halfOpen('message');
    let epochAfterHalfOpen = this.#epoch;
    await recorded;
    for (let tried = 0; tried < this.#members.length * 2 + 1; tried++) {
      if (this.#epoch !== epochAfterHalfOpen || this.#members.length === 0) return;
      const m = this.#members[this.#next++ % this.#members.length];
      let result: ProbeResult;
      try {
        result = await m.probe();
      } catch (err) {
        m.warn(`a probe of the circuit of '${this.dependency}' failed: ${reasonOf(err)}`);
        result = 'failure';
      }
      if (this.#epoch !== epochAfterHalfOpen) return;
      if (result === 'success') {
        this.#succeeded('probe');
        if (this.#state === 'halfOpen') {
          // More successes needed: probe again at once.
          epochAfterHalfOpen = this.#epoch;
          tried = -1;
        }
        continue;
      }
      if (result === 'failure') {
        this.#open('probe');
        return;
      }
      // `empty`: try the next queue; `other` (parked before or by its handler): take another.
    }
    if (this.#epoch !== epochAfterHalfOpen) return;
    // Nothing to probe with: consume again; the next outcome decides.
    this.#mode = 'trial';
    void this.#record(false);
    for (const m of this.#members) {
      m.notify('circuitHalfOpen', { queue: m.queue, dependency: this.dependency, probe: 'trial' });
      void m.resume().catch((err: unknown) => m.warn(`resuming for a trial of the circuit of '${this.dependency}' failed: ${reasonOf(err)}`));
    }
  }

  #succeeded(cause: CircuitCloseCause): void {
    this.#successes++;
    if (this.#successes >= this.settings.closeAfter) this.#close(cause);
  }

  #close(cause: CircuitCloseCause): void {
    const openMs = Date.now() - this.#openedAt;
    const wasTrial = this.#mode === 'trial';
    const epoch = this.#enter('closed');
    this.#failures = [];
    this.#successes = 0;
    void this.#record(false);
    for (const m of this.#members) {
      m.notify('circuitClosed', { queue: m.queue, dependency: this.dependency, cause, openMs });
      const resumed = wasTrial ? Promise.resolve() : m.resume();
      void resumed
        .then(() => m.returnEarly(this.settings.returnRate, () => this.#epoch === epoch))
        .catch((err: unknown) =>
          m.warn(`sending the retry queues of '${m.queue}' back after the circuit of '${this.dependency}' closed failed: ${reasonOf(err)}`),
        );
    }
  }

  /** Writes the state to every consumer's state queue; never rejects. */
  #record(probing: boolean): Promise<void> {
    const r: CircuitRecord = { dependency: this.dependency, state: this.#state, since: new Date(this.#since).toISOString(), probing };
    return Promise.all(
      this.#members.map((m) =>
        m.record(r).catch((err: unknown) => m.warn(`writing the state of the circuit of '${this.dependency}' failed: ${reasonOf(err)}`)),
      ),
    ).then(() => undefined);
  }
}
