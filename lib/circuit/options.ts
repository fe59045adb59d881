/**
 * The options of a consumer's circuit breaker (`onFailure.circuit`), declared
 * with the other consume options (lib/options/consume.ts); lib/options/check.ts
 * checks them.
 */
export { type CircuitOptions, CIRCUIT_OPTION_KEYS } from '../options/consume.generated';
