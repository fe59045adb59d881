import { parseDelay } from './check-options';
import type { Delay } from './options';

/** The label of a delay in queue names: its largest exact unit (`500ms`, `5s`, `90s`, `1m`, `2h`). */
export function delayLabel(delay: Delay): string {
  return parseDelay(delay, 'delay').label;
}

/** The retry queue of `queue` for `delay`: `<queue>.retry.<label>`. */
export function retryQueueName(queue: string, delay: Delay): string {
  return `${queue}.retry.${delayLabel(delay)}`;
}

/** The parked queue of `queue`: `<queue>.parked`. */
export function parkedQueueName(queue: string): string {
  return `${queue}.parked`;
}
