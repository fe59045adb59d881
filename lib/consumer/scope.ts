/**
 * The handler scope: which consumer's handler the code running now belongs
 * to, followed through every await and callback the handler starts.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

import type { Message } from '../message';
import type { Tracked } from './in-flight';

/** A handler running now: whose it is, and what the stuck check reads. */
export interface HandlerRun extends Tracked {
  /** The consumer whose handler it is. */
  readonly owner: object;
  /** The handler returned (or threw); code it started may still run in its context. */
  done: boolean;
}

/** Which handler the code running now belongs to, if any. */
const handlerScope = new AsyncLocalStorage<HandlerRun>();

/** The consumer whose handler is running in the current async context and has not returned yet, if any. */
export function runningOwner(): object | undefined {
  const r = handlerScope.getStore();
  return r !== undefined && !r.done ? r.owner : undefined;
}

/**
 * Runs `f` outside any handler's context: what it starts does not count as
 * running inside a handler.
 * @internal
 */
export function outsideHandlers<T>(f: () => T): T {
  return handlerScope.exit(f);
}

/**
 * Calls `handler` on `msg` with `owner` as `this`, as handler run `r`: what
 * it starts belongs to `r`'s consumer. The call is the scope's own callback,
 * so no frame of ours sits between the scope and the handler.
 */
export function runHandler(r: HandlerRun, handler: (msg: Message) => unknown, owner: object, msg: Message): unknown {
  return handlerScope.run(r, Reflect.apply, handler, owner, [msg]);
}
