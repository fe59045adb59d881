// Loads the package's native binding through the loader (binding.js) and checks
// that it works, without a broker:
//   node .github/scripts/smoke.cjs [platform-arch-abi]
// With an argument (e.g. linux-x64-musl), the binary that loaded must be that
// target's rabbit-retry.<platform-arch-abi>.node, from the package folder or
// from the rabbit-retry-<platform-arch-abi> package.
'use strict';

const path = require('node:path');
const net = require('node:net');

const expected = process.argv[2];
const root = path.resolve(__dirname, '..', '..');

function fail(message) {
  console.error(`smoke: ${message}`);
  process.exit(1);
}

async function closedPort() {
  // A port that was just free on 127.0.0.1: nothing listens there.
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function main() {
  const binding = require(path.join(root, 'binding.js'));
  const loaded = Object.keys(require.cache).filter((file) => file.endsWith('.node'));
  if (loaded.length !== 1) fail(`expected one native binary to load, got ${JSON.stringify(loaded)}`);
  const file = path.basename(loaded[0]);
  if (expected && file !== `rabbit-retry.${expected}.node`) {
    fail(`loaded ${loaded[0]}, expected rabbit-retry.${expected}.node`);
  }
  console.log(`smoke: loaded ${path.relative(root, loaded[0])} on ${process.platform}-${process.arch}, node ${process.version}`);

  for (const name of ['connect', 'NativeClient', 'NativeConsumer']) {
    if (typeof binding[name] !== 'function') fail(`the binding has no ${name}()`);
  }

  // The async path through the native runtime: a refused connection must come
  // back as a rejected promise, quickly, and leave the process able to exit.
  const port = await closedPort();
  const started = Date.now();
  let error;
  try {
    const client = await binding.connect({ url: `amqp://guest:guest@127.0.0.1:${port}`, connectTimeoutMs: 5000 });
    await client.close();
  } catch (e) {
    error = e;
  }
  if (!error) fail(`connect() to closed port ${port} succeeded`);
  const ms = Date.now() - started;
  if (ms > 10000) fail(`connect() to a closed port took ${ms} ms`);
  console.log(`smoke: connect() to a closed port rejected after ${ms} ms: ${String(error.message).split('\n')[0]}`);

  // Invalid options are refused by the binding itself.
  let invalid;
  try {
    await binding.connect({ url: 42 });
  } catch (e) {
    invalid = e;
  }
  if (!invalid) fail('connect() accepted a numeric url');
  console.log('smoke: ok');
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
