/**
 * golevelup's `batchOptions` of `@RabbitSubscribe`: the method is called with
 * up to `size` messages at once, as soon as that many have arrived or
 * `timeout` milliseconds after the last one. The batch's outcome is each of
 * its messages': acked together when the method resolves, and when it throws
 * each message takes the failure path on its own (a retry queue, then the
 * parked queue), never requeued. A message whose body cannot be read never
 * joins a batch: it parks alone.
 */
import { checkFunction, checkKeys, checkObject, checkWhole } from '../options/check';
import { NonRetryableError } from '../errors';
import type { Message } from '../message';
import type { OptionKeys } from '../options';
import type { AmqplibMessage, ErrorHandlerOf } from './amqplib';
import { type RabbitSubscribeMessage, rawOf } from './raw';

/** golevelup's `batchOptions`, as {@link RabbitSubscribe} takes them. */
export interface RabbitSubscribeBatchOptions {
  /** How many messages make a full batch, from 1 to 65535. The consumer's prefetch is raised to it when lower. @default 10 */
  size?: number;
  /** How long a partial batch waits for another message, in milliseconds, from the last one's arrival. @default 200 */
  timeout?: number;
  /**
   * golevelup's batch error handler (its `BatchMessageErrorHandler`): called when
   * the method throws, with a channel, the batch's messages and the error.
   * `channel.ack(msg)` acks a message; `nack(msg, false, true)` or `reject(msg, true)`
   * sends it to the next retry queue (never requeued at once); `nack(msg, false, false)`
   * or `reject(msg, false)` parks it. A message it leaves unsettled takes the failure
   * path with the method's error. A handler typed with amqplib's `Channel` and
   * `ConsumeMessage[]` compiles as it is (see {@link BatchErrorHandler}).
   */
  errorHandler?: BatchErrorHandler;
}

/**
 * A batch's `errorHandler`: `(channel, msgs, error)`, its parameters checked as
 * a method's are (bivariantly), so that golevelup's handlers typed with amqplib's
 * `Channel` and `ConsumeMessage[]` compile: amqplib's `Channel` has each method of
 * {@link BatchErrorChannel}, and its `ConsumeMessage` is an {@link AmqplibMessage}.
 * The messages given are {@link RabbitSubscribeMessage}s.
 */
export type BatchErrorHandler = ErrorHandlerOf<BatchErrorChannel, AmqplibMessage[]>;

/** The channel a batch's `errorHandler` settles its messages on: amqplib's `Channel`, as far as an error handler uses it. */
export interface BatchErrorChannel {
  /** Acks `msg`. */
  ack(msg: AmqplibMessage, allUpTo?: boolean): void;
  /** `requeue` (the default): the next retry queue; `false`: parks it. */
  nack(msg: AmqplibMessage, allUpTo?: boolean, requeue?: boolean): void;
  /** As {@link BatchErrorChannel.nack}. */
  reject(msg: AmqplibMessage, requeue?: boolean): void;
}

/** The checked batch options. @internal */
export interface BatchPlan {
  size: number;
  timeoutMs: number;
  errorHandler?: BatchErrorHandler;
}

const BATCH_OPTION_KEYS = { size: true, timeout: true, errorHandler: true } satisfies OptionKeys<RabbitSubscribeBatchOptions>;

/** Checks `batchOptions`; `undefined` without them. @internal */
export function batchPlan(where: string, batch: unknown): BatchPlan | undefined {
  if (batch === undefined) return undefined;
  checkObject('batchOptions', batch, 'an object such as { size: 10, timeout: 200 }');
  const o = batch as RabbitSubscribeBatchOptions;
  checkKeys(`${where} batchOptions`, o, BATCH_OPTION_KEYS);
  checkWhole('batchOptions.size', o.size, 1, 0xffff, 'a whole number of messages from 1 to 65535');
  checkWhole('batchOptions.timeout', o.timeout, 1, 2_147_483_647, 'a whole number of milliseconds, at least 1');
  checkFunction('batchOptions.errorHandler', o.errorHandler, 'a function (channel, msgs, error) => void');
  return { size: o.size ?? 10, timeoutMs: o.timeout ?? 200, errorHandler: o.errorHandler };
}

/** What a batch's method is called with: the bodies, the messages and their headers, in arrival order. @internal */
export type BatchRun = (bodies: unknown[], msgs: Message[]) => Promise<void>;

interface Waiting {
  body: unknown;
  msg: Message;
  /** Settles the message's handler: with the batch's failure, or as a success. */
  done: (failure?: { err: unknown }) => void;
}

/**
 * A consumer's handler that gathers messages into batches for `run`: each
 * message's promise settles with its batch's outcome. `read` turns a body
 * into the method's value; a message it throws for fails alone, at once.
 * `raw` makes the message the method and `errorHandler` get (golevelup's).
 * @internal
 */
export function batching(
  plan: BatchPlan,
  read: (msg: Message) => unknown,
  run: BatchRun,
  raw: (msg: Message) => RabbitSubscribeMessage = rawOf,
): (msg: Message) => Promise<void> {
  let open: Waiting[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    clearTimeout(timer);
    timer = undefined;
    const batch = open;
    open = [];
    if (batch.length === 0) return;
    // The method runs outside the message's own call: its outcome reaches every message of the batch.
    void (async () => {
      const msgs = batch.map((w) => raw(w.msg));
      let failure: { err: unknown } | undefined;
      try {
        await run(
          batch.map((w) => w.body),
          msgs,
        );
      } catch (err) {
        failure = { err };
      }
      if (!failure || !plan.errorHandler) {
        for (const w of batch) w.done(failure);
        return;
      }
      const verdicts = await settleByHandler(plan.errorHandler, msgs, failure.err);
      batch.forEach((w, i) => {
        const msg = msgs[i];
        w.done(verdicts.has(msg) ? verdicts.get(msg) : failure);
      });
    })();
  };
  return (msg: Message): Promise<void> => {
    // Read first: a body that cannot be read costs only its own message.
    const body = read(msg);
    return new Promise<void>((resolve, reject) => {
      // What the method threw, as it threw it: the failure path reads any value.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the method's own thrown value is passed on
      open.push({ body, msg, done: (failure) => (failure ? reject(failure.err) : resolve()) });
      if (open.length >= plan.size) {
        flush();
      } else if (timer === undefined) {
        timer = setTimeout(flush, plan.timeoutMs);
      } else {
        timer.refresh();
      }
    });
  };
}

/** Runs a batch's `errorHandler`: what it says of each message (`undefined` for an ack), by message. */
async function settleByHandler(
  handler: BatchErrorHandler,
  msgs: RabbitSubscribeMessage[],
  error: unknown,
): Promise<Map<object, { err: unknown } | undefined>> {
  const verdicts = new Map<object, { err: unknown } | undefined>();
  const fail = (msg: object, requeue: boolean | undefined): void => {
    const err =
      requeue === false ? new NonRetryableError('the batch error handler rejected the message without requeue: it is parked', { cause: error }) : error;
    verdicts.set(msg, { err });
  };
  const channel: BatchErrorChannel = {
    ack: (msg) => verdicts.set(msg, undefined),
    nack: (msg, _allUpTo, requeue) => fail(msg, requeue),
    reject: (msg, requeue) => fail(msg, requeue),
  };
  try {
    await handler(channel, msgs, error);
  } catch (err) {
    return new Map(msgs.map((m) => [m, { err }]));
  }
  return verdicts;
}
