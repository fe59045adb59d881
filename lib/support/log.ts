/**
 * The lines rabbit-retry writes to the user's logger (the `logger` of the
 * connect options): warnings and errors nobody listens for otherwise.
 */
import { fenceSync } from './fence';
import type { Logger } from '../options';

/** Writes one line to the user's logger; never throws. */
export type Log = (level: 'warn' | 'error', text: string) => void;

/**
 * Logs through `logger`, fenced: a logger that throws, or returns a Promise
 * that rejects, is ignored (there is nowhere left to say it).
 */
export function logTo(logger: Logger): Log {
  return (level, text) => {
    fenceSync(`logger.${level}`, () => logger[level](text));
  };
}
