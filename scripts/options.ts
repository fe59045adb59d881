/**
 * Writes what is derived from the declared options (lib/options/consume.ts):
 *
 *   lib/options/consume.generated.ts        the option types, with their docs and defaults, and the tables of their keys
 *   lib/options/consume-check.generated.ts  the checks of their declared rules, and their native form
 *   src/binding/spec/options.rs             the native layer's struct of them (napi-rs writes its TypeScript type)
 *   src/consumer/defaults.rs                the native layer's defaults of them
 *   docs/api.md                             the table of `rr.consume`'s options
 *
 * `npm run options` writes them; `--check` (in `npm test`, through `npm run lint:ts`) fails, naming each, when one
 * differs from what the declaration makes.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import * as prettier from 'prettier';

import { CONSUME, CONSUME_IMPORTS, CONSUME_NATIVE_ONLY, NATIVE_WHOLE_MAX } from '../lib/options/consume';
import { type Field, type Shape, isShape } from '../lib/options/declare';

const root = join(__dirname, '..');
const HEADER = 'Written by `npm run options` (scripts/options.ts) from lib/options/consume.ts: do not edit.';

/** Every shape of the tree, parents first. */
function shapes(s: Shape): Shape[] {
  return [s, ...Object.values(s.fields).filter(isShape).flatMap(shapes)];
}

/**
 * Every field with its path (`onFailure.table.maxAttempts`), depth first, and
 * whether it is always given: it is required, and so is each object it is in.
 */
function leaves(s: Shape, prefix = '', given = true): { path: string; field: Field; always: boolean }[] {
  return Object.entries(s.fields).flatMap(([key, f]) =>
    isShape(f)
      ? leaves(f, `${prefix}${key}.`, given && f.required === true)
      : [{ path: `${prefix}${key}`, field: f, always: given && f.required === true }],
  );
}

/** `OnFailureOptions` → `ON_FAILURE_OPTION_KEYS`. */
function keysName(s: Shape): string {
  return `${s.name
    .replace(/Options$/, '')
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toUpperCase()}_OPTION_KEYS`;
}

/** `recovery_initial_delay_ms` → `recoveryInitialDelayMs`, as napi-rs names a field for JavaScript. */
function camel(snake: string): string {
  return snake.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** A doc comment of `text` (and a `@default`), indented by `indent`. */
function docComment(text: string, indent: string, dflt?: string): string {
  const lines = wrap(text, 110 - indent.length);
  if (dflt !== undefined) lines.push(`@default ${dflt}`);
  if (lines.length === 1 && lines[0].length < 100 - indent.length) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`).join('\n')}\n${indent} */\n`;
}

function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = '';
  // A link is one word: a line break inside it would end the tag.
  const words = text.replace(/\{@link ([^}]+)\}/g, (_, name: string) => `{@link\u00a0${name}}`).split(/[ \t\n]+/);
  for (const word of words.map((w) => w.replace(/\u00a0/g, ' '))) {
    if (line !== '' && line.length + word.length + 1 > width) {
      out.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') out.push(line);
  return out;
}

/** The types and key tables. */
function typesFile(): string {
  let out = `// ${HEADER}\n${CONSUME_IMPORTS.join('\n')}\n\n`;
  for (const s of shapes(CONSUME)) {
    out += docComment(s.doc, '');
    out += `export interface ${s.name} {\n`;
    for (const [key, f] of Object.entries(s.fields)) {
      const required = f.required === true ? '' : '?';
      if (isShape(f)) {
        out += docComment(f.asOption?.doc ?? f.doc, '  ', f.asOption?.default);
        out += `  ${key}${required}: ${f.name};\n`;
      } else {
        out += docComment(f.doc, '  ', f.default);
        out += `  ${key}${required}: ${f.type};\n`;
      }
    }
    out += '}\n\n';
    out += `/** The keys of {@link ${s.name}}. @internal */\n`;
    out += `export const ${keysName(s)} = {\n${Object.keys(s.fields)
      .map((k) => `  ${k}: true,\n`)
      .join('')}} satisfies OptionKeys<${s.name}>;\n\n`;
  }
  return out;
}

/** The check of one field's rule, at `path` of the object `o`. */
function ruleCheck(key: string, path: string, f: Field): string | undefined {
  const v = `o.${key}`;
  const at = `\`\${path}${key}\``;
  const rule = f.rule;
  switch (rule.kind) {
    case 'string': {
      const opts = [f.required ? 'optional: false' : '', rule.nonEmpty ? 'nonEmpty: true' : '', rule.what ? `what: ${JSON.stringify(rule.what)}` : '']
        .filter(Boolean)
        .join(', ');
      return `  checkString(${at}, ${v}${opts ? `, { ${opts} }` : ''});`;
    }
    case 'boolean':
      return `  checkBoolean(${at}, ${v});`;
    case 'oneOf':
      return `  checkOneOf(${at}, ${v}, ${JSON.stringify(rule.values)});`;
    case 'whole':
      return `  checkWhole(${at}, ${v}, ${rule.min}, ${rule.max}, ${JSON.stringify(rule.what)});`;
    case 'native-whole':
      return `  checkWhole(${at}, ${v}, 0, ${NATIVE_WHOLE_MAX}, ${JSON.stringify(rule.what)});`;
    case 'function':
      return `  checkFunction(${at}, ${v}${rule.what ? `, ${JSON.stringify(rule.what)}` : ''});`;
    case 'by-hand':
      return undefined;
  }
}

/** The value `path` (`onFailure.brokerDelay.min`) of the options `o`, read with `?.` where a parent may be absent. */
function read(path: string): string {
  const parts = path.split('.');
  return `o.${parts.map((p, i) => (i === parts.length - 1 ? p : `${p}?`)).join('.')}`;
}

/** Whether `s` has a rule to check, itself or in an object it holds. */
function checked(s: Shape): boolean {
  return Object.values(s.fields).some((f) => isShape(f) || f.rule.kind !== 'by-hand');
}

/** The checks and the native form. */
function checkFile(): string {
  const all = shapes(CONSUME).filter(checked);
  const nested = all.flatMap((s) => Object.values(s.fields).filter(isShape));
  let out = `// ${HEADER}\n`;
  out += "import type * as Native from '../../binding';\n";
  const names = [...new Set([...nested.map((s) => keysName(s)), ...all.map((s) => `type ${s.name}`), 'type ConsumeOptions'])];
  out += `import { ${names.join(', ')} } from './consume.generated';\n`;
  out += "import { delayText } from './delay-text';\n";
  out += "import { checkKeys } from './keys';\n";
  out += "import { checkBoolean, checkFunction, checkObject, checkOneOf, checkString, checkWhole } from './rules';\n\n";
  for (const s of all) {
    const body: string[] = [];
    for (const [key, f] of Object.entries(s.fields)) {
      if (isShape(f)) {
        const example =
          f.asOption?.row && /^`\{/.test(f.asOption.row)
            ? `, ${JSON.stringify(`an object such as ${f.asOption.row.slice(1, f.asOption.row.indexOf('`', 1))}`)}`
            : '';
        body.push(`  if (o.${key} !== undefined) {`);
        body.push(`    checkObject(\`\${path}${key}\`, o.${key}${example});`);
        body.push(`    checkKeys(\`\${path}${key}\`, o.${key}, ${keysName(f)});`);
        if (checked(f)) body.push(`    check${f.name.replace(/Options$/, '')}Fields(o.${key}, \`\${path}${key}.\`);`);
        body.push('  }');
      } else {
        const c = ruleCheck(key, 'path', f);
        if (c) body.push(c);
      }
    }
    out += `/** Checks the declared rules of {@link ${s.name}}'s options (\`path\` goes before each name), and of the options objects in it. @internal */\n`;
    out += `export function check${s.name.replace(/Options$/, '')}Fields(o: ${s.name}, path = ''): void {\n${body.join('\n')}\n}\n\n`;
  }
  out += "/** The native consumer's fields that the declared options give as they are, or as JSON, a delay's text, a flag. @internal */\n";
  out += 'export function nativeConsumeFields(o: ConsumeOptions): Omit<Native.ConsumeOptions, ';
  const byHand = leaves(CONSUME).filter((l) => l.field.native?.as === 'by-hand');
  out += [...byHand.map((l) => `'${camel(l.field.native!.field)}'`), ...CONSUME_NATIVE_ONLY.map((n) => `'${camel(n.field)}'`)].join(' | ');
  out += '> {\n  return {\n';
  for (const { path, field } of leaves(CONSUME)) {
    const n = field.native;
    if (!n || n.as === 'by-hand') continue;
    const v = read(path);
    let value: string;
    switch (n.as) {
      case 'same':
        value = v;
        break;
      case 'json':
        value = `${v} === undefined ? undefined : JSON.stringify(${v})`;
        break;
      case 'delay':
        value = `${v} === undefined ? undefined : delayText(${v}, '${path}')`;
        break;
      case 'full':
        value = `${v} === 'full'`;
        break;
      case 'given':
        value = `${v} !== undefined`;
        break;
    }
    out += `    ${camel(n.field)}: ${value},\n`;
  }
  out += '  };\n}\n';
  return out;
}

/** A Rust doc comment of `text`. */
function rustDoc(text: string, indent: string): string {
  return wrap(text, 96 - indent.length)
    .map((l) => `${indent}/// ${l}\n`)
    .join('');
}

/** The native struct. */
function rustOptionsFile(): string {
  let out = `// ${HEADER}\n\n`;
  out += "//! `rr.consume`'s options as the native layer takes them, each absent when left out: the TypeScript layer passes them\n";
  out += '//! flattened, and the native layer holds the rules of their values and applies their defaults (`ConsumeSpec`).\n\n';
  out += 'use napi_derive::napi;\n\n';
  out += '/// What to consume and how to treat failures, as the TypeScript layer passes it (one field for each of\n';
  out += "/// `rr.consume`'s options that crosses, declared in lib/options/consume.ts).\n";
  out += '#[napi(object)]\npub struct ConsumeOptions {\n';
  for (const { path, field, always } of leaves(CONSUME)) {
    const n = field.native;
    if (!n) continue;
    const first = field.doc.split(/(?<=\.)\s/)[0];
    const dflt = field.default === undefined ? '' : ` @default ${n.default ? `\`consumeDefaults().${camel(n.field)}\`` : field.default}`;
    out += rustDoc(plain(`\`${path}\`: ${first}${dflt}`), '    ');
    const optional = always || n.rust.startsWith('Vec') ? n.rust : `Option<${n.rust}>`;
    out += `    pub ${n.field}: ${optional},\n`;
  }
  for (const n of CONSUME_NATIVE_ONLY) {
    out += rustDoc(n.doc, '    ');
    out += `    pub ${n.field}: Option<${n.rust}>,\n`;
  }
  out += '}\n';
  return out;
}

/** The native defaults. */
function rustDefaultsFile(): string {
  let out = `// ${HEADER}\n\n`;
  out += "//! The defaults of `rr.consume`'s options that the native layer applies, declared with the options\n";
  out += '//! (lib/options/consume.ts).\n\n';
  for (const { path, field } of leaves(CONSUME)) {
    const d = field.native?.default;
    if (!d) continue;
    out += rustDoc(`\`${path}\` when it is left out: ${field.default ?? d.value}.`, '');
    out += `pub(crate) const ${d.name}: ${d.rust} = ${d.value};\n\n`;
  }
  return out.trimEnd() + '\n';
}

/** `text` with its `{@link X}` as code: what Rust docs and markdown read. */
function plain(text: string): string {
  return text.replace(/\{@link ([^}]+)\}/g, '`$1`');
}

/** A default as the docs' table shows it: code in backticks. */
function shownDefault(d: string): string {
  const p = plain(d);
  return /^(['[{]|true$|false$)/.test(p) ? `\`${p}\`` : p;
}

/** The docs' table of `rr.consume`'s options. */
function docsTable(): string {
  const rows: string[] = ['| option | default | what it is |', '|---|---|---|'];
  const firstSentence = (doc: string) => {
    const s = doc.split(/(?<=\.)\s/)[0].replace(/\.$/, '');
    return s.charAt(0).toLowerCase() + s.slice(1);
  };
  const walk = (s: Shape, prefix: string) => {
    for (const [key, f] of Object.entries(s.fields)) {
      const name = `${prefix}${key}`;
      if (isShape(f)) {
        if (f.asOption?.row)
          rows.push(`| \`${name}\` | ${f.asOption.default === undefined ? 'none' : shownDefault(f.asOption.default)} | ${plain(f.asOption.row)} |`);
        else walk(f, `${name}.`);
        continue;
      }
      const dflt = f.required ? 'required' : f.default === undefined ? 'none' : shownDefault(f.default);
      rows.push(`| \`${name}\` | ${dflt} | ${plain(f.row ?? firstSentence(f.doc))} |`);
    }
  };
  walk(CONSUME, '');
  return rows.join('\n');
}

const DOCS_START = "<!-- The table of `rr.consume`'s options: written by `npm run options` from lib/options/consume.ts. -->";
const DOCS_END = "<!-- End of the table of `rr.consume`'s options. -->";

function docsFile(current: string): string {
  const i = current.indexOf(DOCS_START);
  const j = current.indexOf(DOCS_END);
  if (i < 0 || j < 0) throw new Error(`docs/api.md has no ${DOCS_START} … ${DOCS_END}`);
  return `${current.slice(0, i + DOCS_START.length)}\n\n${docsTable()}\n\n${current.slice(j)}`;
}

async function tsFormatted(file: string, text: string): Promise<string> {
  const config = (await prettier.resolveConfig(join(root, file))) ?? {};
  return prettier.format(text, { ...config, filepath: join(root, file) });
}

function rustFormatted(text: string): string {
  return execFileSync('rustfmt', ['--edition', '2021', '--emit', 'stdout', '--quiet'], { cwd: root, input: text, encoding: 'utf8' });
}

async function main(): Promise<void> {
  const check = process.argv.includes('--check');
  const api = readFileSync(join(root, 'docs/api.md'), 'utf8');
  const outputs: [string, string][] = [
    ['lib/options/consume.generated.ts', await tsFormatted('lib/options/consume.generated.ts', typesFile())],
    ['lib/options/consume-check.generated.ts', await tsFormatted('lib/options/consume-check.generated.ts', checkFile())],
    ['src/binding/spec/options.rs', rustFormatted(rustOptionsFile())],
    ['src/consumer/defaults.rs', rustFormatted(rustDefaultsFile())],
    ['docs/api.md', docsFile(api)],
  ];
  const differ: string[] = [];
  for (const [file, text] of outputs) {
    let have = '';
    try {
      have = readFileSync(join(root, file), 'utf8');
    } catch {
      // Not written yet.
    }
    if (have === text) continue;
    if (check) differ.push(file);
    else writeFileSync(join(root, file), text);
  }
  if (differ.length > 0) {
    console.error(`options: ${differ.join(', ')} differ from what lib/options/consume.ts declares: run \`npm run options\``);
    process.exit(1);
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
