/**
 * The handler scope: which consumers' handlers the code running now belongs
 * to. Each consumer calls its handler, and awaits what the handler returned,
 * through functions named for that consumer; a `close()` reads those names on
 * its own call stack, where V8 lists the synchronous frames and then the
 * awaits that lead back from the code running now. Nothing is tracked per
 * delivery, and no promise hook runs: asking costs one stack capture, and
 * only a close asks.
 *
 * Speed: an `AsyncLocalStorage` run around every handler call (the plain
 * way) turns promise hooks on for the whole process on Node 20 and 22. Bought:
 * 0.93x the whole process's CPU per failure on `../shared/bench/pinned.sh`'s
 * failure path, 18 alternating rounds (docs/performance.md, "The handler
 * scope, read from the stack").
 */
/** What the frames of a consumer's handler calls are named: the prefix, then a number of the process's own. */
const MARK = 'rabbit-retry handler ';

/** Each mark's consumer; an entry goes once its consumer is collected. */
const owners = new Map<string, WeakRef<object>>();
const forget = new FinalizationRegistry<string>((mark) => owners.delete(mark));
let marks = 0;

/**
 * A new name for the frames of `owner`'s handler calls: code that runs under
 * a frame of that name (or is awaited, however deep, by one) runs inside one
 * of `owner`'s handlers.
 */
export function handlerMark(owner: object): string {
  const mark = `${MARK}${++marks}`;
  owners.set(mark, new WeakRef(owner));
  forget.register(owner, mark);
  return mark;
}

/** `f`, with `mark` as its name: how its frames read on a stack. */
export function named<F extends (...args: never[]) => unknown>(mark: string, f: F): F {
  return Object.defineProperty(f, 'name', { value: mark });
}

/** The most frames read when looking for a mark: far more than a handler's own calls nest. */
const FRAMES = 1000;

/**
 * The consumers whose handler calls are on the current call stack, or await
 * (however deep) the code running now: a handler that has not returned yet
 * runs it. Code a handler started without awaiting it (a timer's callback, a
 * promise nobody awaits) does not count, as it does not after the handler
 * returned.
 */
export function runningOwners(): object[] {
  const found: object[] = [];
  for (const name of frameNames()) {
    if (!name.startsWith(MARK)) continue;
    const owner = owners.get(name)?.deref();
    if (owner !== undefined && !found.includes(owner)) found.push(owner);
  }
  return found;
}

/** The function names on the current stack, its awaits included (those V8 follows). */
function frameNames(): string[] {
  const limit = Error.stackTraceLimit;
  // Put back as it was found: a value, an accessor, or nothing.
  const prepare = Object.getOwnPropertyDescriptor(Error, 'prepareStackTrace');
  const holder: { stack?: unknown } = {};
  try {
    Error.stackTraceLimit = FRAMES;
    Object.defineProperty(Error, 'prepareStackTrace', {
      value: (_err: Error, sites: NodeJS.CallSite[]) => sites,
      writable: true,
      configurable: true,
    });
    Error.captureStackTrace(holder, frameNames);
    const sites = holder.stack;
    if (Array.isArray(sites)) return sites.map((s: NodeJS.CallSite) => s.getFunctionName() ?? '');
  } catch {
    // A frozen `Error` (a hardened realm): the text below still names the frames.
  } finally {
    try {
      Error.stackTraceLimit = limit;
      if (prepare) Object.defineProperty(Error, 'prepareStackTrace', prepare);
      else delete (Error as { prepareStackTrace?: unknown }).prepareStackTrace;
    } catch {
      // Nothing was changed.
    }
  }
  // An application's `prepareStackTrace` may throw or return anything: then no mark is read.
  let text: unknown;
  try {
    text = new Error().stack;
  } catch {
    return [];
  }
  if (typeof text !== 'string') return [];
  return [...text.matchAll(new RegExp(`${MARK}\\d+`, 'g'))].map((m) => m[0]);
}
