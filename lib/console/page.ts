/**
 * The console's page and the files it loads, with the headers that keep
 * them to themselves: no framing, no script or style from elsewhere.
 */
import type { ServerResponse } from 'node:http';

import { type AssetName, SCRIPTS, STYLES, asset } from './assets';
import { HttpError } from './http';

/** What the page shows of the console's token and mount. */
export interface PageSetup {
  /** The token the page carries, when the operator need not give it. */
  readonly token?: string;
  /** The path the console is mounted at (`/ops/rabbit-retry`), or `''`. */
  readonly basePath: string;
}

/** `s` as the value of a double-quoted HTML attribute. */
function attribute(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Answers the page. */
export function servePage(res: ServerResponse, method: string, setup: PageSetup): void {
  if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'the page is read with GET');
  const meta = setup.token === undefined ? '' : `<meta name="rabbit-retry-token" content="${setup.token}">`;
  let text = asset('index.html').toString('utf8').replace('<!--token-->', meta);
  if (setup.basePath !== '') {
    // Under a known path the assets are named from the root, whether or not the page's URL ends with a slash.
    const at = attribute(setup.basePath);
    for (const css of STYLES) text = text.replace(`href="${css}"`, `href="${at}/${css}"`);
    text = text.replace('src="console.js"', `src="${at}/console.js"`);
  }
  const html = Buffer.from(text, 'utf8');
  res.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': html.length,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'content-security-policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  });
  res.end(method === 'HEAD' ? undefined : html);
}

/** The page's files other than the page itself, served at `<path>/<name>`. */
type FileName = Exclude<AssetName, 'index.html'>;

const FILES: ReadonlySet<string> = new Set<FileName>([...SCRIPTS, ...STYLES]);

/** The file at `sub` (`/console.js`), the path under the console, if it is one of the page's. */
export function assetAt(sub: string): FileName | undefined {
  const name = sub.slice(1);
  return sub.startsWith('/') && FILES.has(name) ? (name as FileName) : undefined;
}

/** Answers one of the page's files. */
export function serveAsset(res: ServerResponse, method: string, name: FileName): void {
  if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'METHOD_NOT_ALLOWED', 'assets are read with GET');
  const body = asset(name);
  res.writeHead(200, {
    'content-type': name.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8',
    'content-length': body.length,
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
  });
  res.end(method === 'HEAD' ? undefined : body);
}
