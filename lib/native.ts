/**
 * The generated Node-API binding (`binding.js` at the package root), typed.
 * Nothing outside lib/ uses it.
 * @internal
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import type * as Native from '../binding';

export type {
  NativeClient,
  NativeConsumer,
  NativeBatch,
  NativeParkedSession,
  NativeReplySession,
  FailureInfo as NativeFailureInfo,
  MessageProperties as NativeMessageProperties,
} from '../binding';

/**
 * The package's root: the nearest folder above this file whose package.json
 * is rabbit-retry's, wherever the compiled file sits below it.
 */
function packageRoot(): string {
  for (let dir = __dirname; ; ) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'rabbit-retry') return dir;
      } catch {
        // Not a readable package.json: keep looking above it.
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error(`rabbit-retry: no package.json of rabbit-retry above ${__dirname}; the package is incomplete`);
    dir = up;
  }
}

/** The loaded binding. @internal */
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const binding: typeof Native = require(join(packageRoot(), 'binding.js'));
