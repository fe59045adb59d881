#!/usr/bin/env bash
# The install spec: rabbit-retry installed into new NestJS projects, as users
# would, across the supported matrix. Each row is a fresh project made from the
# same fixture (scripts/install-spec/), in a temporary folder, on its own Node:
#
#   row  Node  NestJS  TypeScript  Jest  transform
#   1    24    12      7           30    @swc/jest (TypeScript 7 has no JS API for ts-jest)
#   2    22    11      5           30    ts-jest
#   3    20    10      5           29    ts-jest
#
# Steps:
#   1. packs the package (npm pack; its prepack makes a release build), or takes
#      RR_TARBALL=/path/to/rabbit-retry-x.y.z.tgz instead, and checks the tarball:
#      the files it must carry, and a release native binary (no .debug_* sections,
#      no .symtab), printing its packed and unpacked size;
#   2. takes cargo and rustc off the PATH: the prebuilt binary is all a user needs;
#   3. per row: installs that row's Node from the npm registry's `node` package
#      (the machine's own node when its major matches), puts it first on the
#      PATH so npm, npx, tsc and jest run under it, creates the project (a
#      NestJS service with @nestjs/microservices), installs the tarball,
#      type-checks with skipLibCheck off (tsc --noEmit), runs the project's Jest
#      e2e specs against the broker at AMQP_URL (a RabbitRetryModule service, a
#      @RabbitRPC handler answering rr.request and AmqpConnection.request, and a
#      microservice on RabbitRetryServer), then builds the project with tsc and
#      runs the microservice's main with node;
#   4. prints one summary line per row with the versions it resolved.
# Rows run one after another; a failing row does not stop the next ones.
# Exits non-zero when any row fails.
#
# Environment:
#   AMQP_URL      the broker (default amqp://guest:guest@127.0.0.1:5672)
#   RR_TARBALL    a packed tarball to test instead of running npm pack
#   RR_ROWS       the rows to run, e.g. "1 3" (default: all)
#   KEEP_PROJECT  1 leaves the temporary folder with the projects
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fixture=$root/scripts/install-spec
export AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}
started=$SECONDS

# The matrix: Node major | NestJS | TypeScript | Jest | transform | @types/node.
# Each is a major the spec pins; a newer major is a new decision.
ROWS=(
  "24|^12|^7|^30|swc|^24"
  "22|^11|^5|^30|ts-jest|^22"
  "20|^10|^5|^29|ts-jest|^20"
)
SWC_CORE=^1
SWC_JEST=^0.2
TS_JEST=^29 # ts-jest 29 supports Jest 29 and 30
selected=${RR_ROWS:-$(seq -s' ' 1 ${#ROWS[@]})}
for n in $selected; do
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le ${#ROWS[@]} ]] || { echo "RR_ROWS: there is no row $n (rows 1 to ${#ROWS[@]})" >&2; exit 1; }
done

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
  wait # for the removal of earlier rows' folders
  if [[ ${KEEP_PROJECT:-} == 1 ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

npm_install() { timeout 300 npm install --no-audit --no-fund --loglevel=error "$@"; }
# The version of an installed package, read from its package.json (exports may hide it from require).
installed() { node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).version' "node_modules/$1/package.json"; }
iec() { numfmt --to=iec-i --suffix=B --format=%.1f "$1"; }

echo "== the tarball"
if [[ -n ${RR_TARBALL:-} ]]; then
  [[ -f $RR_TARBALL ]] || { echo "RR_TARBALL=$RR_TARBALL is not a file" >&2; exit 1; }
  tarball=$(cd "$(dirname "$RR_TARBALL")" && pwd)/$(basename "$RR_TARBALL")
  echo "using $tarball"
else
  echo "npm pack (prepack makes a release build)"
  tarball=$(npm pack --silent --pack-destination "$work" | tail -n 1)
  tarball=$work/$tarball
fi
contents=$(tar -tzf "$tarball")
for f in package/dist/index.js package/dist/index.d.ts package/dist/nestjs/index.js package/dist/nestjs/index.d.ts \
  package/dist/microservices/index.js package/dist/microservices/index.d.ts \
  package/dist/testing/index.js package/dist/testing/index.d.ts package/binding.js package/binding.d.ts; do
  grep -qx "$f" <<<"$contents" || { echo "the tarball lacks $f" >&2; exit 1; }
done
grep -q '^package/.*\.node$' <<<"$contents" || { echo 'the tarball carries no native binary (*.node)' >&2; exit 1; }
unpacked=$work/unpacked
mkdir -p "$unpacked"
tar -xzf "$tarball" -C "$unpacked"
# A release build is stripped (strip = "symbols"): no debug sections, no symbol table.
while IFS= read -r binary; do
  leftovers=$(readelf -S --wide "$unpacked/$binary" | grep -oE '\.(debug_[A-Za-z_]+|symtab)\b' | sort -u | paste -sd' ' || true)
  if [[ -n $leftovers ]]; then
    echo "${binary#package/} is not a release build: it has $leftovers; pack with a release build (npm pack runs prepack, RELEASE=1)" >&2
    exit 1
  fi
done < <(grep '\.node$' <<<"$contents")
echo "$(basename "$tarball"): packed $(iec "$(stat -c %s "$tarball")"), unpacked $(iec "$(du -sb "$unpacked/package" | cut -f1)"), $(grep -c . <<<"$contents") files"
echo "native (release, stripped): $(grep '\.node$' <<<"$contents" | while read -r b; do echo "${b#package/} $(iec "$(stat -c %s "$unpacked/$b")")"; done | paste -sd',')"

# From here on, no Rust toolchain: cargo and rustc are taken off the PATH.
PATH=$(tr ':' '\n' <<<"$PATH" | grep -v -e '\.cargo' -e '\.rustup' | paste -sd:)
export PATH
no_cargo() {
  if command -v cargo >/dev/null || command -v rustc >/dev/null; then
    echo "cargo or rustc is on the PATH ($(command -v cargo rustc | paste -sd' ')); the spec must run without them" >&2
    return 1
  fi
}
no_cargo
echo "cargo on PATH: no"

# Puts Node <major> first on the PATH: the machine's own node when its major
# matches, else the npm registry's `node` package (a prebuilt binary).
use_node() {
  local major=$1 dir
  if [[ $(node -p 'process.versions.node.split(".")[0]') != "$major" ]]; then
    dir=$work/node$major
    if [[ ! -x $dir/node_modules/node/bin/node ]]; then
      npm_install --prefix "$dir" "node@$major" >/dev/null
    fi
    [[ -x $dir/node_modules/node/bin/node ]] || { echo "node@$major installed no binary at $dir/node_modules/node/bin/node" >&2; return 1; }
    PATH=$dir/node_modules/node/bin:$PATH
    export PATH
  fi
  # npm, npx, tsc and jest start through `#!/usr/bin/env node`: they run under this node.
  local got npm_node
  got=$(node --version)
  npm_node=v$(cd "$work" && npm version --json | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).node')
  if [[ $got != "v$major."* || $npm_node != "$got" ]]; then
    echo "wanted Node $major, got node $got (npm runs under ${npm_node:-?})" >&2
    return 1
  fi
}

# One row, in a subshell (its PATH is its own). Writes the resolved versions
# to $work/row<n>.versions and the step it is on to $work/row<n>.step.
run_row() {
  local n=$1 node_major nest ts jest transform node_types
  IFS='|' read -r node_major nest ts jest transform node_types <<<"${ROWS[$((n - 1))]}"
  local step=$work/row$n.step versions=$work/row$n.versions app=$work/row$n
  set -Eeuo pipefail
  trap 'rc=$?; echo "row $n failed at \"$(cat "$step")\": $BASH_COMMAND (exit $rc)" >&2' ERR

  echo "Node $node_major" >"$step"
  use_node "$node_major"
  no_cargo

  echo "new project" >"$step"
  mkdir -p "$app"
  cp -R "$fixture"/. "$app"/
  cd "$app"
  local jest_cmd dev_deps
  if [[ $transform == swc ]]; then
    # As the NestJS 12 starter runs Jest: under --experimental-vm-modules, which lets
    # Jest require() the ESM-only @nestjs packages from the CommonJS test files.
    jest_cmd="node --experimental-vm-modules ./node_modules/jest/bin/jest.js --config ./test/jest-e2e.swc.json --runInBand"
    dev_deps="\"@swc/core\": \"$SWC_CORE\", \"@swc/jest\": \"$SWC_JEST\""
  else
    jest_cmd="jest --config ./test/jest-e2e.json --runInBand"
    dev_deps="\"ts-jest\": \"$TS_JEST\""
  fi
  cat >package.json <<JSON
{
  "name": "shipping-service",
  "version": "0.0.1",
  "private": true,
  "scripts": { "test:e2e": "$jest_cmd" },
  "dependencies": {
    "@nestjs/common": "$nest",
    "@nestjs/core": "$nest",
    "@nestjs/microservices": "$nest",
    "reflect-metadata": "^0.2",
    "rxjs": "^7"
  },
  "devDependencies": {
    "jest": "$jest",
    "@types/jest": "$jest",
    "typescript": "$ts",
    "@types/node": "$node_types",
    $dev_deps
  }
}
JSON
  npm_install

  echo "install the tarball" >"$step"
  npm_install "$tarball"
  node -e 'require("rabbit-retry"); require("rabbit-retry/nestjs"); require("rabbit-retry/microservices"); require("rabbit-retry/testing")'

  local transform_version
  if [[ $transform == swc ]]; then
    transform_version="@swc/jest $(installed @swc/jest) (@swc/core $(installed @swc/core))"
  else
    transform_version="ts-jest $(installed ts-jest)"
  fi
  local nest_version
  nest_version=$(installed @nestjs/core)
  [[ $(installed @nestjs/common) == "$nest_version" ]] || nest_version="$nest_version (@nestjs/common $(installed @nestjs/common))"
  echo "Node $(node --version), NestJS $nest_version, TypeScript $(installed typescript), Jest $(installed jest), $transform_version" >"$versions"
  echo "   $(cat "$versions")"

  echo "type-check" >"$step"
  echo "-- tsc --noEmit (skipLibCheck off)"
  timeout 120 npx tsc --noEmit -p tsconfig.json

  echo "jest e2e" >"$step"
  echo "-- jest e2e (broker $(sed -E 's#//([^:/]+):[^@]*@#//\1:***@#' <<<"$AMQP_URL"))"
  RR_SPEC_QUEUES=$queues timeout 180 npm run --silent test:e2e -- --ci

  echo "build" >"$step"
  echo "-- tsc (build to dist/)"
  timeout 120 npx tsc -p tsconfig.json --rootDir . --outDir dist

  echo "run the built microservice" >"$step"
  echo "-- node dist/src/microservice.main.js"
  RR_SPEC_QUEUES=$queues timeout 60 node dist/src/microservice.main.js
  echo "done" >"$step"
}

summary=()
failed=0
for n in $selected; do
  row_started=$SECONDS
  echo "== row $n: Node ${ROWS[$((n - 1))]%%|*}"
  set +e
  (run_row "$n")
  rc=$?
  set -e
  took=$((SECONDS - row_started))
  # Removing a project takes a while on some disks: do it while the next row runs.
  [[ ${KEEP_PROJECT:-} == 1 ]] || rm -rf "$work/row$n" "$work/node${ROWS[$((n - 1))]%%|*}" &
  resolved=$(cat "$work/row$n.versions" 2>/dev/null || echo "versions not resolved")
  if [[ $rc == 0 ]]; then
    summary+=("row $n: $resolved: pass (${took}s)")
  else
    failed=1
    summary+=("row $n: $resolved: FAIL at $(cat "$work/row$n.step" 2>/dev/null || echo '?') (${took}s)")
  fi
done

echo "== install spec, without cargo, in $((SECONDS - started))s"
printf '%s\n' "${summary[@]}"
exit "$failed"
