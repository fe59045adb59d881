#!/usr/bin/env bash
# Installs rabbit-retry into a new NestJS project, as a user would, and runs
# that project's Jest e2e spec against the broker at AMQP_URL:
#   1. builds dist/ and packs the package (npm pack), checking what the tarball carries;
#   2. creates a project in a temporary folder from registry packages (NestJS 11, Jest 29);
#   3. installs the tarball and runs the spec with cargo off the PATH: the
#      prebuilt native binary in the tarball is all it needs.
# Exits non-zero on any failure. KEEP_PROJECT=1 leaves the project folder.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fixture=$root/scripts/install-spec
export AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}

# Major versions the spec pins; a newer major is a new decision.
NEST=^11
JEST=^29
TS=^5
NODE_TYPES=^20

work=$(mktemp -d -t rabbit-retry-install-XXXXXX)
queues=$work/queues.txt
cleanup() {
  # Delete the spec's queues with the repo's amqplib (a devDependency, not the package's).
  if [[ -s $queues ]]; then
    node -e '
      const amqp = require(process.argv[1]);
      const names = require("fs").readFileSync(process.argv[2], "utf8").split("\n").filter(Boolean);
      (async () => {
        const c = await amqp.connect(process.env.AMQP_URL);
        const ch = await c.createChannel();
        for (const n of names) await ch.deleteQueue(n);
        await c.close();
      })().catch((e) => console.error(`could not delete the spec queues: ${e.message}`));
    ' "$root/node_modules/amqplib" "$queues" || true
  fi
  if [[ ${KEEP_PROJECT:-} == 1 ]]; then echo "kept $work/app"; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "== build and pack"
npx tsc -p tsconfig.build.json
tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
tarball=$work/$tarball
contents=$(tar -tzf "$tarball")
for f in package/dist/index.js package/dist/index.d.ts package/dist/nestjs/index.js package/dist/nestjs/index.d.ts \
  package/dist/testing/index.js package/dist/testing/index.d.ts package/index.js package/index.d.ts; do
  grep -qx "$f" <<<"$contents" || { echo "the tarball lacks $f" >&2; exit 1; }
done
grep -q '^package/.*\.node$' <<<"$contents" || { echo 'the tarball carries no native binary (*.node)' >&2; exit 1; }
echo "$(basename "$tarball"): $(du -h "$tarball" | cut -f1), $(grep -c . <<<"$contents") files, native: $(grep '\.node$' <<<"$contents" | sed 's#^package/##' | paste -sd' ')"

# From here on, no Rust toolchain: cargo and rustc are taken off the PATH.
PATH=$(tr ':' '\n' <<<"$PATH" | grep -v -e '\.cargo' -e '\.rustup' | paste -sd:)
export PATH
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  echo "cargo or rustc is still on the PATH ($(command -v cargo rustc | paste -sd' ')); the spec must run without them" >&2
  exit 1
fi
echo "cargo on PATH: no"

echo "== new NestJS project"
app=$work/app
mkdir -p "$app"
cp -R "$fixture"/. "$app"/
cd "$app"
cat >package.json <<JSON
{
  "name": "shipping-service",
  "version": "0.0.1",
  "private": true,
  "scripts": { "test:e2e": "jest --config ./test/jest-e2e.json --runInBand" }
}
JSON
npm_install() { timeout 300 npm install --no-audit --no-fund --loglevel=error "$@"; }
npm_install "@nestjs/common@$NEST" "@nestjs/core@$NEST" reflect-metadata@^0.2 rxjs@^7
npm_install --save-dev "jest@$JEST" "ts-jest@$JEST" "typescript@$TS" "@types/jest@$JEST" "@types/node@$NODE_TYPES"

echo "== install the tarball"
npm_install "$tarball"
node -e 'require("rabbit-retry"); require("rabbit-retry/nestjs"); require("rabbit-retry/testing")'
nest_version=$(node -p 'require("@nestjs/core/package.json").version')
jest_version=$(npx jest --version)
ts_version="TypeScript $(node -p 'require("typescript/package.json").version')"

echo "== type-check the project"
timeout 120 npx tsc --noEmit -p tsconfig.json

echo "== jest e2e (broker $(sed -E 's#//([^:/]+):[^@]*@#//\1:***@#' <<<"$AMQP_URL"))"
RR_SPEC_QUEUES=$queues timeout 180 npx jest --config ./test/jest-e2e.json --runInBand --ci

echo "install spec passed: NestJS $nest_version (@nestjs/core, @nestjs/common), Jest $jest_version, ts-jest $(node -p 'require("ts-jest/package.json").version'), $ts_version, Node $(node --version), without cargo"
