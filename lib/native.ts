/**
 * The generated Node-API binding (`binding.js` at the package root), typed,
 * and the names it gives queues and headers. Nothing outside lib/ uses the
 * binding itself; `delayLabel`, `retryQueueName` (typed with `Delay` there)
 * and `parkedQueueName` are public through the package's index.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import type * as Native from '../binding.js';
import { nativeSync } from './errors';

/** @internal */
export type {
  NativeClient,
  NativeConsumer,
  NativeOutbox,
  NativeBatch,
  NativeParkedSession,
  NativeReplySession,
  NativeDeclaration,
  FailureInfo as NativeFailureInfo,
  MessageProperties as NativeMessageProperties,
} from '../binding.js';

/**
 * The package's root: the nearest folder above this file whose package.json
 * is rabbit-retry's, wherever the compiled file sits below it.
 */
function packageRoot(): string {
  for (let dir = __dirname; ;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'rabbit-retry') return dir;
      } catch {
        // Not a readable package.json: keep looking above it.
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error(`rabbit-retry: no package.json of rabbit-retry above ${__dirname}; the package is incomplete`);
    dir = up;
  }
}

/** The loaded binding. @internal */
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const binding = require(join(packageRoot(), 'binding.js')) as typeof Native;

// The names the library gives queues and headers come from the native side,
// which declares them for its own use (src/retry/names.rs, src/retry/headers.rs).

/**
 * The label of a delay (milliseconds, or text such as `90s`) in queue names:
 * its largest exact unit (`500ms`, `5s`, `90s`, `1m`, `2h`). The package's
 * index gives it the `Delay` type.
 */
export function delayLabel(delay: number | string): string {
  return nativeSync(() => binding.delayLabel(delay));
}

/** The retry queue of `queue` for `delay`: `<queue>.retry.<label>`. The package's index gives it the `Delay` type. */
export function retryQueueName(queue: string, delay: number | string): string {
  return nativeSync(() => binding.retryQueueName(queue, delay));
}

/** The parked queue of `queue`: `<queue>.parked`. */
export function parkedQueueName(queue: string): string {
  return nativeSync(() => binding.parkedQueueName(queue));
}

/**
 * What a queue's name says it is: a retry queue (`<queue>.retry.<delay>`), a
 * parked queue (`<queue>.parked`), or another queue (`queue` is the name).
 * @internal
 */
export type QueueRole = { role: 'retry'; queue: string; delay: string } | { role: 'parked' | 'other'; queue: string };

/** Reads a queue's name as the library writes retry and parked queue names. @internal */
export function queueRole(name: string): QueueRole {
  return binding.queueRole(name) as QueueRole;
}

/** The names of the headers the library writes on a message it moves. @internal */
export const HEADERS: Readonly<Native.HeaderNames> = Object.freeze(binding.headerNames());
