/**
 * The page's files (`assets/`: HTML, CSS and plain JavaScript modules, no framework),
 * read from beside this module: `lib/console/assets/` in the sources, and
 * `dist/console/assets/`, where the build copies them, in the package.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { reasonOf } from '../support/error-text';

/** The page's script modules: `console.js` starts the page and imports the others. */
export const SCRIPTS = [
  'console.js',
  'actions.js',
  'api.js',
  'diff.js',
  'dom.js',
  'edit.js',
  'reading.js',
  'render.js',
  'render-outbox.js',
  'render-queue.js',
  'store.js',
  'timeline.js',
] as const;

/** The page's style sheets, linked in this order by `index.html`. */
export const STYLES = ['console.css', 'tables.css'] as const;

/** The page's files. */
export type AssetName = 'index.html' | (typeof STYLES)[number] | (typeof SCRIPTS)[number];

const cache = new Map<AssetName, Buffer>();

/** The bytes of asset `name`, read once. */
export function asset(name: AssetName): Buffer {
  let b = cache.get(name);
  if (!b) {
    try {
      b = readFileSync(join(__dirname, 'assets', name));
    } catch (err) {
      throw new Error(`rabbit-retry: the console's ${name} is missing beside ${__dirname}; the package is incomplete (${reasonOf(err)})`, { cause: err });
    }
    cache.set(name, b);
  }
  return b;
}
