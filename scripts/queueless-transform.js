/**
 * The Jest transformer of jest.peers-queueless.config.js: golevelup's specs (__test__/peers/golevelup/) with every
 * handler written as golevelup's users write it, without a queue. Before ts-jest compiles a file under that folder,
 * it blanks out the `queue` property of each handler's options (the object given to `@RabbitSubscribe(…)`,
 * `@RabbitRPC(…)` or `amqpConnection.createSubscriber(handler, …)`, and each entry of a module's `handlers`) when
 * that handler is bound to an exchange (`exchange` or `bindings`); a handler that names a queue and no exchange
 * consumes that queue as it is, and keeps it. The tests listed in __test__/peers/golevelup-queueless.json become
 * `it.skip`, each with its reason there. Nothing else changes: the characters blanked out are replaced by spaces
 * (line breaks kept), so lines and columns stay upstream's.
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');
const tsJest = require('ts-jest');

const ROOT = path.resolve(__dirname, '..');
const PEERS = path.join(ROOT, '__test__', 'peers', 'golevelup') + path.sep;
const SKIPS_FILE = path.join(ROOT, '__test__', 'peers', 'golevelup-queueless.json');
const DECORATORS = new Set(['RabbitSubscribe', 'RabbitRPC']);
/** `AmqpConnection`'s methods that take a handler's options second. */
const SUBSCRIBERS = new Set(['createSubscriber', 'createRpc', 'createBatchSubscriber']);

/** The skip list: `{ file, test, reason }` entries, `file` relative to __test__/peers/golevelup/. */
function skipsOf(file) {
  const rel = path.relative(PEERS, file).split(path.sep).join('/');
  return JSON.parse(fs.readFileSync(SKIPS_FILE, 'utf8')).skip.filter((s) => s.file === rel);
}

function propertyName(p) {
  if (!p.name) return undefined;
  if (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) return p.name.text;
  return undefined;
}

function hasProperty(obj, name) {
  return obj.properties.some((p) => propertyName(p) === name);
}

/** The handler options objects of a file: decorators' first arguments, and the entries of a module's `handlers`. */
function handlerObjects(source) {
  const found = [];
  const visit = (node) => {
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && DECORATORS.has(node.expression.text)) {
      const [arg] = node.arguments;
      if (arg && ts.isObjectLiteralExpression(arg)) found.push(arg);
    }
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && SUBSCRIBERS.has(node.expression.name.text)) {
      const [, arg] = node.arguments;
      if (arg && ts.isObjectLiteralExpression(arg)) found.push(arg);
    }
    if (ts.isPropertyAssignment(node) && propertyName(node) === 'handlers' && ts.isObjectLiteralExpression(node.initializer)) {
      for (const entry of node.initializer.properties) {
        if (!ts.isPropertyAssignment(entry)) continue;
        const value = entry.initializer;
        const list = ts.isArrayLiteralExpression(value) ? value.elements : [value];
        for (const v of list) if (ts.isObjectLiteralExpression(v)) found.push(v);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The `it(…)`/`test(…)` calls whose title is `title`. */
function testCalls(source, title) {
  const found = [];
  const visit = (node) => {
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && ['it', 'test'].includes(node.expression.text)) {
      const [name] = node.arguments;
      if (name && (ts.isStringLiteral(name) || ts.isNoSubstitutionTemplateLiteral(name)) && name.text === title) found.push(node);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `text` with the handlers' queues blanked out and the listed tests skipped. */
function rewrite(text, file) {
  if (!path.resolve(file).startsWith(PEERS)) return text;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const edits = [];
  for (const obj of handlerObjects(source)) {
    if (!hasProperty(obj, 'exchange') && !hasProperty(obj, 'bindings')) continue;
    for (const p of obj.properties) {
      if (propertyName(p) !== 'queue') continue;
      let end = p.end;
      while (end < text.length && /\s/.test(text[end])) end++;
      if (text[end] === ',') end++;
      edits.push({ start: p.getStart(source), end, insert: null });
    }
  }
  for (const s of skipsOf(file)) {
    const calls = testCalls(source, s.test);
    if (calls.length !== 1) throw new Error(`${SKIPS_FILE}: '${s.test}' is ${calls.length === 0 ? 'not' : 'more than once'} in ${s.file}`);
    if (typeof s.reason !== 'string' || s.reason === '') throw new Error(`${SKIPS_FILE}: '${s.test}' gives no reason`);
    edits.push({ start: calls[0].expression.end, end: calls[0].expression.end, insert: '.skip' });
  }
  let out = text;
  for (const e of edits.sort((a, b) => b.start - a.start)) {
    const replaced = e.insert ?? out.slice(e.start, e.end).replace(/[^\n]/g, ' ');
    out = out.slice(0, e.start) + replaced + out.slice(e.end);
  }
  return out;
}

const SALT = crypto
  .createHash('sha256')
  .update(fs.readFileSync(__filename))
  .update(fs.existsSync(SKIPS_FILE) ? fs.readFileSync(SKIPS_FILE) : '')
  .digest('hex');

module.exports = {
  rewrite,
  createTransformer(options) {
    const inner = tsJest.default.createTransformer(options);
    return {
      process: (text, file, o) => inner.process(rewrite(text, file), file, o),
      processAsync: (text, file, o) => inner.processAsync(rewrite(text, file), file, o),
      getCacheKey: (text, file, o) => `${inner.getCacheKey(rewrite(text, file), file, o)}:queueless:${SALT}`,
      getCacheKeyAsync: async (text, file, o) => `${await inner.getCacheKeyAsync(rewrite(text, file), file, o)}:queueless:${SALT}`,
    };
  },
};
