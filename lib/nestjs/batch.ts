/**
 * golevelup's `batchOptions` of `@RabbitSubscribe`: the method is called with
 * up to `size` messages at once, as soon as that many have arrived or
 * `timeout` milliseconds after the last one. The batch's outcome is each of
 * its messages': acked together when the method resolves, and when it throws
 * each message takes the failure path on its own (a retry queue, then the
 * parked queue), never requeued. A message whose body cannot be read never
 * joins a batch: it parks alone.
 */
import { checkKeys, checkObject, checkWhole, foreignOptions, type ForeignOption } from '../options/check';
import type { Message } from '../message';
import type { OptionKeys } from '../options';

/** golevelup's `batchOptions`, as {@link RabbitSubscribe} takes them. */
export interface RabbitSubscribeBatchOptions {
  /** How many messages make a full batch, from 1 to 65535. The consumer's prefetch is raised to it when lower. @default 10 */
  size?: number;
  /** How long a partial batch waits for another message, in milliseconds, from the last one's arrival. @default 200 */
  timeout?: number;
  /** Refused at start-up: a batch that throws takes the failure path, each of its messages on its own. */
  errorHandler?: unknown;
}

/** The checked batch options. @internal */
export interface BatchPlan {
  size: number;
  timeoutMs: number;
}

const BATCH_OPTION_KEYS = { size: true, timeout: true, errorHandler: true } satisfies OptionKeys<RabbitSubscribeBatchOptions>;

const REFUSED_BATCH_OPTIONS: Readonly<Record<string, string>> = {
  errorHandler:
    'a batch whose method throws takes the failure path, each of its messages on its own (a retry queue, then the parked queue): set `onFailure` or @OnFailure',
};

/** The batch options' keys with no meaning here, for the decorator's one refusal of them all. @internal */
export function refusedBatchOptions(where: string, batch: unknown): ForeignOption[] {
  return batch !== null && typeof batch === 'object' ? foreignOptions(where, batch, REFUSED_BATCH_OPTIONS, 'batchOptions.') : [];
}

/** Checks `batchOptions` (their refused keys already refused); `undefined` without them. @internal */
export function batchPlan(where: string, batch: unknown): BatchPlan | undefined {
  if (batch === undefined) return undefined;
  checkObject('batchOptions', batch, 'an object such as { size: 10, timeout: 200 }');
  const o = batch as RabbitSubscribeBatchOptions;
  checkKeys(`${where} batchOptions`, o, BATCH_OPTION_KEYS);
  checkWhole('batchOptions.size', o.size, 1, 0xffff, 'a whole number of messages from 1 to 65535');
  checkWhole('batchOptions.timeout', o.timeout, 1, 2_147_483_647, 'a whole number of milliseconds, at least 1');
  return { size: o.size ?? 10, timeoutMs: o.timeout ?? 200 };
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
 * @internal
 */
export function batching(plan: BatchPlan, read: (msg: Message) => unknown, run: BatchRun): (msg: Message) => Promise<void> {
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
      let failure: { err: unknown } | undefined;
      try {
        await run(
          batch.map((w) => w.body),
          batch.map((w) => w.msg),
        );
      } catch (err) {
        failure = { err };
      }
      for (const w of batch) w.done(failure);
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
