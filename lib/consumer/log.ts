import type { Logger } from '../options';

/** Writes one line of a consumer's log; never throws. */
export type Log = (level: 'warn' | 'error', text: string) => void;

/** Logs through `logger`; a logger that throws is ignored. */
export function logTo(logger: Logger): Log {
  return (level, text) => {
    try {
      logger[level](text);
    } catch {
      // Nowhere left to say it.
    }
  };
}
