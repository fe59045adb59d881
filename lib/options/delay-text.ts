/**
 * Delays as the native layer reads them: their text, checked for their type
 * (the native layer holds the rules of their values).
 */
import { InvalidOptionsError } from '../errors';
import { type Delay, DEFAULT_DELAYS } from './delay';

/** The delays `delays` (the default ones when left out) as text, refused naming `option` when one is neither a string nor a positive whole number. @internal */
export function delayStrings(delays: readonly Delay[] | undefined, option = 'onFailure.delays'): string[] {
  const list = delays ?? DEFAULT_DELAYS;
  if (!Array.isArray(list)) throw new InvalidOptionsError(`${option} must be an array such as ['5s', '1m']`);
  return list.map((d, i) => {
    if (typeof d === 'number') {
      if (!Number.isInteger(d) || d <= 0) {
        throw new InvalidOptionsError(`${option}[${i}] is ${d}: a number of milliseconds must be a positive whole number`);
      }
      return String(d);
    }
    if (typeof d !== 'string') {
      throw new InvalidOptionsError(`${option}[${i}] must be a string such as '5s' or a number of milliseconds`);
    }
    return d;
  });
}

/** One delay as text, refused naming `option` as {@link delayStrings} refuses it. @internal */
export function delayText(delay: Delay, option: string): string {
  return delayStrings([delay], option)[0];
}
