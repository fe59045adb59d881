/**
 * The generated Node-API binding (`index.js` at the package root), typed.
 * Nothing outside lib/ uses it.
 * @internal
 */
import type * as Native from '../index';

export type {
  NativeClient,
  NativeConsumer,
  NativeDelivery,
  NativeEvent,
  NativeBatch,
  NativeParkedSession,
  FailureInfo as NativeFailureInfo,
  MessageProperties as NativeMessageProperties,
} from '../index';

/** The loaded binding. @internal */
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const binding: typeof Native = require('../index.js');
