/**
 * Every TypeScript example of the README and the guides compiles against the
 * package as it is: each ```ts block is type-checked on its own, importing
 * `rabbit-retry` (and its `/nestjs`, `/microservices`, `/testing` entries) from
 * lib/. A name a block uses without declaring it (the client `rr` of an
 * earlier block, a `pool`, a `carrier` of the reader's own) is declared for it:
 * the library's with their types, the reader's as `any`. An example that calls
 * the library wrongly fails here.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import ts from 'typescript';

const root = join(__dirname, '..');

/** The names the examples take as known, with the types they have where the guides introduce them. */
const KNOWN: Readonly<Record<string, string>> = {
  rr: "import('rabbit-retry').RabbitRetry",
  consumer: "import('rabbit-retry').Consumer",
  handler: "import('rabbit-retry').Handler",
  msg: "import('rabbit-retry').Message",
  pool: "import('pg').Pool",
  dataSource: "import('typeorm').DataSource",
};

/** Every ```ts block of the docs: where it is, and its text. */
function examples(): { where: string; code: string }[] {
  const files = [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  const out: { where: string; code: string }[] = [];
  for (const file of files) {
    const lines = readFileSync(join(root, file), 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (lines[i].trim() !== '```ts') continue;
      const start = i + 1;
      let end = start;
      while (end < lines.length && lines[end].trim() !== '```') end++;
      // `where` names the block's first line, counted from 1.
      out.push({ where: `${file}:${start + 1}`, code: lines.slice(start, end).join('\n') });
      i = end;
    }
  }
  return out;
}

const options: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
  // The reader's own values are `any`: what the examples write of them is theirs.
  noImplicitAny: false,
  types: ['node'],
  strict: true,
  esModuleInterop: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  skipLibCheck: true,
  noEmit: true,
  baseUrl: root,
  paths: {
    'rabbit-retry': ['lib/index.ts'],
    'rabbit-retry/nestjs': ['lib/nestjs/index.ts'],
    'rabbit-retry/microservices': ['lib/microservices/index.ts'],
    'rabbit-retry/testing': ['lib/testing/index.ts'],
  },
};

/** The diagnostics of `files` (virtual file name to text), type-checked together with the library. */
function diagnose(files: ReadonlyMap<string, string>): readonly ts.Diagnostic[] {
  const host = ts.createCompilerHost(options);
  const disk = ts.createCompilerHost(options);
  host.fileExists = (f) => files.has(f) || disk.fileExists(f);
  host.readFile = (f) => files.get(f) ?? disk.readFile(f);
  host.getSourceFile = (f, v, onError, create) => {
    const text = files.get(f);
    return text !== undefined ? ts.createSourceFile(f, text, v) : disk.getSourceFile(f, v, onError, create);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  return [...files.keys()].flatMap((f) => {
    const sf = program.getSourceFile(f);
    return sf ? [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)] : [];
  });
}

/** The names each entry of the package exports, by entry. */
function entryExports(): Map<string, string> {
  // The package's entries first, then the Nest packages the guides' applications use.
  const entries: Record<string, string> = {
    'rabbit-retry': 'lib/index.ts',
    'rabbit-retry/nestjs': 'lib/nestjs/index.ts',
    'rabbit-retry/microservices': 'lib/microservices/index.ts',
    ...Object.fromEntries(
      ['@nestjs/common', '@nestjs/core', '@nestjs/microservices'].map((m) => [
        m,
        ts.resolveModuleName(m, join(root, 'index.ts'), options, ts.sys).resolvedModule?.resolvedFileName ?? '',
      ]),
    ),
  };
  const program = ts.createProgram(
    Object.values(entries).map((f) => (f.startsWith('/') ? f : join(root, f))),
    options,
  );
  const checker = program.getTypeChecker();
  const byName = new Map<string, string>();
  for (const [entry, file] of Object.entries(entries)) {
    const sf = program.getSourceFile(file.startsWith('/') ? file : join(root, file));
    const symbol = sf && checker.getSymbolAtLocation(sf);
    for (const s of symbol ? checker.getExportsOfModule(symbol) : []) {
      // Of Nest's, its values only: an interface of theirs is not what a reader's class of that name is.
      const own = entry.startsWith('rabbit-retry');
      const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
      if (!byName.has(s.name) && (own || target.flags & ts.SymbolFlags.Value)) byName.set(s.name, entry);
    }
  }
  return byName;
}

/**
 * `code` with a declaration for each name it uses without declaring: an
 * import of the package's own names, the guides' usual names with their
 * types, anything else (the reader's own) as `any`, as a value and a type.
 */
function declared(code: string, missing: ReadonlySet<string>, exported: ReadonlyMap<string, string>): string {
  const decls = [...missing].map((name) => {
    const entry = exported.get(name);
    if (KNOWN[name] !== undefined) return `declare const ${name}: ${KNOWN[name]};`;
    if (entry !== undefined) return `import { ${name} } from '${entry}';`;
    return `declare const ${name}: any; type ${name}<A = any, B = any, C = any> = any;`;
  });
  // A module (so that its top-level await and its names are its own), the declarations first.
  return `${decls.join('\n')}\n${code}\nexport {};\n`;
}

/**
 * A declaration file saying that each package the examples import and the
 * project does not install (an ORM of the reader's, the library a guide
 * migrates from) is there, each name imported from it untyped: `any` as a
 * value and a type, and `any` for each `Name.Member` the examples write.
 */
function elsewhere(codes: readonly string[]): string {
  const text = codes.join('\n');
  const names = new Map<string, Set<string>>();
  for (const m of text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'/g)) {
    const [, list, module] = m;
    if (module.startsWith('rabbit-retry') || ts.resolveModuleName(module, join(root, 'index.ts'), options, ts.sys).resolvedModule) continue;
    if (!names.has(module)) names.set(module, new Set());
    for (const part of list.split(',')) {
      const name = part
        .trim()
        .split(/\s+as\s+/)[0]
        .replace(/^type\s+/, '');
      if (name) names.get(module)?.add(name);
    }
  }
  return [...names]
    .map(([module, imported]) => {
      const members = [...imported].map((name) => {
        const used = new Set([...text.matchAll(new RegExp(`\\b${name}\\.(\\w+)`, 'g'))].map((u) => u[1]));
        const inner = [...used].map((u) => `type ${u} = any;`).join(' ');
        return `export declare const ${name}: any; export type ${name} = any; export declare namespace ${name} { ${inner} }`;
      });
      return `declare module '${module}' {\n${members.join('\n')}\n}`;
    })
    .join('\n');
}

const CANNOT_FIND = new Set([2304, 2552, 18004]);

describe('the TypeScript examples of the README and the guides', () => {
  const all = examples();

  it('there are examples to check', () => {
    expect(all.length).toBeGreaterThan(20);
  });

  it('each compiles against the package', () => {
    const fileOf = (i: number) => join(root, `__example_${i}.ts`);
    // First pass: the names each block uses without declaring them.
    const exported = entryExports();
    const ambient: [string, string] = [join(root, '__examples_elsewhere.d.ts'), elsewhere(all.map((e) => e.code))];
    const first = new Map([...all.map((e, i): [string, string] => [fileOf(i), declared(e.code, new Set(), exported)]), ambient]);
    const missing = new Map<string, Set<string>>();
    for (const d of diagnose(first)) {
      if (!d.file || !CANNOT_FIND.has(d.code)) continue;
      const name = /'([^']+)'/.exec(ts.flattenDiagnosticMessageText(d.messageText, '\n'))?.[1];
      if (!name) continue;
      if (!missing.has(d.file.fileName)) missing.set(d.file.fileName, new Set());
      missing.get(d.file.fileName)?.add(name);
    }
    const second = new Map([
      ...all.map((e, i): [string, string] => [fileOf(i), declared(e.code, missing.get(fileOf(i)) ?? new Set(), exported)]),
      ambient,
    ]);
    const problems = diagnose(second).map((d) => {
      const i = [...second.keys()].indexOf(d.file?.fileName ?? '');
      const { line } = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : { line: 0 };
      // The declarations take the first lines of the file (one, empty, when there are none).
      const offset = Math.max(missing.get(d.file?.fileName ?? '')?.size ?? 0, 1);
      const where = i >= 0 ? all[i].where.replace(/:(\d+)$/, (_, n: string) => `:${Number(n) + line - offset}`) : d.file?.fileName;
      return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    });
    expect(problems).toEqual([]);
  }, 120_000);
});
