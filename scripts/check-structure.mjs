// The structure checks that dependency-cruiser does not make (`npm run check:structure`, in `npm test`'s lint stage):
// - no file in src/ or lib/ over 500 lines (Rust, TypeScript and the console's page alike);
// - every lib/ module stands in a layer of scripts/lib-layers.cjs, so that .dependency-cruiser.cjs checks its imports;
// - no upward import in the Rust core: retry <- amqp <- table <- consumer <- binding, a lower module never names a
//   higher one through `crate::`.
// It prints every finding, then exits 1 if there was one.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const { LAYERS, pathOf } = createRequire(import.meta.url)('./lib-layers.cjs');
const MAX_LINES = 500;
const RUST_ORDER = ['retry', 'amqp', 'table', 'consumer', 'binding'];

/** Every file under `dir` (none if there is no such folder), as paths relative to the repository's root. */
function filesUnder(dir) {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .sort();
}

/** Lines as `wc -l` counts them. */
const lineCount = (text) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

/** Rust source without its comments and with its string and char literals emptied. */
function rustCode(text) {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += '""';
      i = j;
    } else if (c === "'" && (text[i + 1] === '\\' || text[i + 2] === "'")) {
      // A char literal ('"', '\''); a lifetime ('a) has no closing quote and stays as code.
      const close = text[i + 1] === '\\' ? text.indexOf("'", i + 3) : i + 2;
      if (close === -1) break;
      out += "' '";
      i = close;
    } else if (c === '/' && text[i + 1] === '/') {
      const nl = text.indexOf('\n', i);
      i = (nl === -1 ? text.length : nl) - 1;
    } else if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      i = (close === -1 ? text.length : close + 2) - 1;
    } else {
      out += c;
    }
  }
  return out;
}

/** The top modules of the crate that this Rust code names: `crate::amqp::…` and `use crate::{amqp::…, table}`. */
function crateModulesNamed(code) {
  const named = new Set();
  for (const m of code.matchAll(/\bcrate::([a-z_][a-z0-9_]*)/g)) named.add(m[1]);
  for (const m of code.matchAll(/\bcrate::\{/g)) {
    // The group's top-level entries, up to its closing brace: `error::E`, `table::{a, b}`.
    let depth = 0;
    let token = '';
    for (const c of code.slice(m.index + m[0].length)) {
      if (c === '{') depth++;
      if (c === '}') depth--;
      if ((c === ',' && depth === 0) || depth < 0) {
        const head = /^\s*([a-z_][a-z0-9_]*)/.exec(token);
        if (head && head[1] !== 'self') named.add(head[1]);
        token = '';
        if (depth < 0) break;
        continue;
      }
      token += c;
    }
  }
  return named;
}

const findings = [];

for (const file of [...filesUnder('src'), ...filesUnder('lib')]) {
  const n = lineCount(readFileSync(join(root, file), 'utf8'));
  if (n > MAX_LINES) findings.push(`${file}: ${n} lines, over ${MAX_LINES}: split it by concern`);
}

const layered = new RegExp(pathOf(LAYERS.flatMap(([, modules]) => modules)));
for (const file of filesUnder('lib')) {
  if (file.endsWith('.ts') && !layered.test(file)) {
    findings.push(`${file}: in no layer of scripts/lib-layers.cjs: add its module to the layer it belongs to`);
  }
}

for (const [rank, module] of RUST_ORDER.entries()) {
  const higher = RUST_ORDER.slice(rank + 1);
  const files = [...filesUnder(`src/${module}`), `src/${module}.rs`].filter((f) => f.endsWith('.rs') && existsSync(join(root, f)));
  for (const file of files) {
    for (const named of crateModulesNamed(rustCode(readFileSync(join(root, file), 'utf8')))) {
      if (higher.includes(named)) findings.push(`${file}: names crate::${named}, above ${module} (${RUST_ORDER.join(' <- ')})`);
    }
  }
}

for (const f of findings) console.log(f);
if (findings.length > 0) {
  console.log(`check-structure: ${findings.length} finding(s)`);
  process.exit(1);
}
