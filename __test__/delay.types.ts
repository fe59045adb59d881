/**
 * Type-level tests of `Delay`, checked by `tsc --noEmit -p tsconfig.json`
 * (part of `npm test`), not run by Jest: every form the runtime accepts
 * compiles, and each line under `@ts-expect-error` must fail to compile.
 */
import type { AlertOptions, ConsumeOptions, Delay, OnFailureOptions, PauseWhenOptions } from '../lib';

/** Every form of a delay the runtime accepts. */
export const accepted: Delay[] = ['500ms', '1500ms', '5s', '90s', '1m', '10m', '2h', '4294967295ms', '500', 500, 90_000, 7_200_000];

const seconds = 5;
/** A delay computed from a number. */
export const computed: Delay[] = [`${seconds}s`, `${seconds * 60}s`, `${seconds}m`, `${seconds * 100}ms`, `${seconds}h`];

// @ts-expect-error a unit spelled out
export const spelledOut: Delay = '5 seconds';

// @ts-expect-error an abbreviation that is not a unit
export const sec: Delay = '5sec';

// @ts-expect-error words, not a number and a unit
export const words: Delay = 'five';

// @ts-expect-error days are not a unit: RabbitMQ's TTL stops at about 49 days, write '24h'
export const days: Delay = '5d';

// @ts-expect-error units are lower case
export const upperCase: Delay = '5S';

// @ts-expect-error the unit without a number
export const unitOnly: Delay = 'ms';

// @ts-expect-error an empty string
export const empty: Delay = '';

const strings: string[] = ['5s', '1m'];
// @ts-expect-error an array of any strings: declare it as Delay[]
export const fromStrings: Delay[] = strings;

/** Where delays go: onFailure.delays, alert.every, pauseWhen's every. */
export const consume: ConsumeOptions = {
  queue: 'shipment.requested',
  onFailure: { delays: ['5s', '1m', 600_000] },
  alert: { parkedAbove: 0, every: '30s' },
};

export const onFailure: OnFailureOptions = {
  // @ts-expect-error a unit spelled out, in onFailure.delays
  delays: ['5s', '1 minute'],
};

export const alert: AlertOptions = {
  parkedAbove: 0,
  // @ts-expect-error a unit spelled out, in alert.every
  every: '1 minute',
};

export const pauseWhen: PauseWhenOptions = {
  // @ts-expect-error an abbreviation, in pauseWhen's every
  every: '10secs',
};
