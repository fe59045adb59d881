// Written by `npm run options` (scripts/options.ts) from lib/options/consume.ts: do not edit.
import type * as Native from '../../binding';
import {
  ON_FAILURE_OPTION_KEYS,
  ALERT_OPTION_KEYS,
  RECOVERY_OPTION_KEYS,
  BROKER_DELAY_OPTION_KEYS,
  TABLE_ROUTE_OPTION_KEYS,
  CIRCUIT_OPTION_KEYS,
  FAULT_OPTION_KEYS,
  type ConsumeOptions,
  type OnFailureOptions,
  type TableRouteOptions,
  type CircuitOptions,
  type FaultOptions,
  type AlertOptions,
  type RecoveryOptions,
} from './consume.generated';
import { delayText } from './delay-text';
import { checkKeys } from './keys';
import { checkBoolean, checkFunction, checkObject, checkOneOf, checkString, checkWhole } from './rules';

/** Checks the declared rules of {@link ConsumeOptions}'s options (`path` goes before each name), and of the options objects in it. @internal */
export function checkConsumeFields(o: ConsumeOptions, path = ''): void {
  checkString(`${path}queue`, o.queue, { optional: false, nonEmpty: true, what: 'a non-empty string: the work queue to consume' });
  checkString(`${path}exchange`, o.exchange);
  checkString(`${path}exchangeType`, o.exchangeType, { what: "'topic', 'direct', 'fanout' or 'headers'" });
  checkWhole(`${path}prefetch`, o.prefetch, 0, 4294967295, 'a whole number from 1 to 65535');
  checkString(`${path}consumerTag`, o.consumerTag, { nonEmpty: true });
  checkString(`${path}queueType`, o.queueType, { what: "'classic' or 'quorum'" });
  checkWhole(`${path}deliveryLimit`, o.deliveryLimit, 0, 4294967295, 'a whole number of at least 1');
  checkWhole(`${path}consumerTimeoutMs`, o.consumerTimeoutMs, 0, 4294967295, 'a whole number of milliseconds of at least 1');
  checkBoolean(`${path}assertQueue`, o.assertQueue);
  if (o.onFailure !== undefined) {
    checkObject(`${path}onFailure`, o.onFailure);
    checkKeys(`${path}onFailure`, o.onFailure, ON_FAILURE_OPTION_KEYS);
    checkOnFailureFields(o.onFailure, `${path}onFailure.`);
  }
  if (o.alert !== undefined) {
    checkObject(`${path}alert`, o.alert, "an object such as { parkedAbove, oldestDueAboveMs, every ('1m'), onAlert, onTableAlert }");
    checkKeys(`${path}alert`, o.alert, ALERT_OPTION_KEYS);
    checkAlertFields(o.alert, `${path}alert.`);
  }
  if (o.recovery !== undefined) {
    checkObject(`${path}recovery`, o.recovery);
    checkKeys(`${path}recovery`, o.recovery, RECOVERY_OPTION_KEYS);
    checkRecoveryFields(o.recovery, `${path}recovery.`);
  }
  checkWhole(`${path}stuckAfterMs`, o.stuckAfterMs, 1, 2147483647, 'a whole number of milliseconds from 1 to 2147483647');
}

/** Checks the declared rules of {@link OnFailureOptions}'s options (`path` goes before each name), and of the options objects in it. @internal */
export function checkOnFailureFields(o: OnFailureOptions, path = ''): void {
  if (o.brokerDelay !== undefined) {
    checkObject(`${path}brokerDelay`, o.brokerDelay, 'an object such as { min, max, attempts }');
    checkKeys(`${path}brokerDelay`, o.brokerDelay, BROKER_DELAY_OPTION_KEYS);
  }
  checkFunction(`${path}retryable`, o.retryable, 'a function (err, msg) => boolean');
  checkBoolean(`${path}stackOnRetry`, o.stackOnRetry);
  checkOneOf(`${path}retryHeaders`, o.retryHeaders, ['minimal', 'full']);
  if (o.table !== undefined) {
    checkObject(`${path}table`, o.table, 'an object such as { dependency, tenant, nextAttemptAt, maxAttempts }');
    checkKeys(`${path}table`, o.table, TABLE_ROUTE_OPTION_KEYS);
    checkTableRouteFields(o.table, `${path}table.`);
  }
  if (o.circuit !== undefined) {
    checkObject(`${path}circuit`, o.circuit, 'an object such as { dependency, openAfter, probeEvery, closeAfter, check, returnRate }');
    checkKeys(`${path}circuit`, o.circuit, CIRCUIT_OPTION_KEYS);
    checkCircuitFields(o.circuit, `${path}circuit.`);
  }
  if (o.faults !== undefined) {
    checkObject(`${path}faults`, o.faults, 'an object such as { exchange }');
    checkKeys(`${path}faults`, o.faults, FAULT_OPTION_KEYS);
    checkFaultFields(o.faults, `${path}faults.`);
  }
}

/** Checks the declared rules of {@link TableRouteOptions}'s options (`path` goes before each name), and of the options objects in it. @internal */
export function checkTableRouteFields(o: TableRouteOptions, path = ''): void {
  checkFunction(`${path}dependency`, o.dependency);
  checkFunction(`${path}tenant`, o.tenant);
  checkFunction(`${path}nextAttemptAt`, o.nextAttemptAt);
  checkWhole(`${path}maxAttempts`, o.maxAttempts, 0, 4294967295, 'a whole number of at least 1');
}

/** Checks the declared rules of {@link CircuitOptions}'s options (`path` goes before each name), and of the options objects in it. @internal */
export function checkCircuitFields(o: CircuitOptions, path = ''): void {
  checkFunction(`${path}check`, o.check, 'a function () => Promise<boolean>');
}

/** Checks the declared rules of {@link FaultOptions}'s options (`path` goes before each name), and of the options objects in it. @internal */
export function checkFaultFields(o: FaultOptions, path = ''): void {
  checkString(`${path}exchange`, o.exchange, { optional: false, nonEmpty: true, what: 'a non-empty string: the exchange of the fault events' });
}

/** Checks the declared rules of {@link AlertOptions}'s options (`path` goes before each name), and of the options objects in it. @internal */
export function checkAlertFields(o: AlertOptions, path = ''): void {
  checkFunction(`${path}onAlert`, o.onAlert);
  checkFunction(`${path}onTableAlert`, o.onTableAlert);
}

/** Checks the declared rules of {@link RecoveryOptions}'s options (`path` goes before each name), and of the options objects in it. @internal */
export function checkRecoveryFields(o: RecoveryOptions, path = ''): void {
  checkWhole(`${path}initialDelayMs`, o.initialDelayMs, 0, 4294967295, 'a whole number of milliseconds');
  checkWhole(`${path}maxDelayMs`, o.maxDelayMs, 0, 4294967295, 'a whole number of milliseconds');
  checkWhole(`${path}stepTimeoutMs`, o.stepTimeoutMs, 0, 4294967295, 'a whole number of milliseconds');
}

/** The native consumer's fields that the declared options give as they are, or as JSON, a delay's text, a flag. @internal */
export function nativeConsumeFields(
  o: ConsumeOptions,
): Omit<Native.ConsumeOptions, 'routingKey' | 'delays' | 'recoveryMaxAttempts' | 'moreRoutingKeys' | 'table' | 'watchMoves'> {
  return {
    queue: o.queue,
    exchange: o.exchange,
    exchangeType: o.exchangeType,
    prefetch: o.prefetch,
    consumerTag: o.consumerTag,
    queueType: o.queueType,
    deliveryLimit: o.deliveryLimit,
    consumerTimeoutMs: o.consumerTimeoutMs,
    assertQueue: o.assertQueue,
    queueArguments: o.queueArguments === undefined ? undefined : JSON.stringify(o.queueArguments),
    retryQueueArguments: o.retryQueueArguments === undefined ? undefined : JSON.stringify(o.retryQueueArguments),
    parkedQueueArguments: o.parkedQueueArguments === undefined ? undefined : JSON.stringify(o.parkedQueueArguments),
    brokerDelayMin: o.onFailure?.brokerDelay?.min === undefined ? undefined : delayText(o.onFailure?.brokerDelay?.min, 'onFailure.brokerDelay.min'),
    brokerDelayMax: o.onFailure?.brokerDelay?.max === undefined ? undefined : delayText(o.onFailure?.brokerDelay?.max, 'onFailure.brokerDelay.max'),
    brokerDelayAttempts: o.onFailure?.brokerDelay?.attempts,
    fullRetryHeaders: o.onFailure?.retryHeaders === 'full',
    tableMaxAttempts: o.onFailure?.table?.maxAttempts,
    faultsExchange: o.onFailure?.faults?.exchange,
    recoveryInitialDelayMs: o.recovery?.initialDelayMs,
    recoveryMaxDelayMs: o.recovery?.maxDelayMs,
    recoveryStepTimeoutMs: o.recovery?.stepTimeoutMs,
  };
}
