#!/usr/bin/env bash
# The test command (`npm test`): lint, the Rust unit tests, a build, then the
# Jest suites against a real broker (started by scripts/broker.sh when none answers).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x $HOME/.cargo/bin/cargo ]] && export PATH="$HOME/.cargo/bin:$PATH"

echo "== lint"
cargo fmt --check
cargo clippy --all-targets -- -D warnings

echo "== cargo test (pure logic, no broker)"
cargo test

echo "== build"
bash scripts/build.sh
npx tsc --noEmit -p tsconfig.json

echo "== broker"
bash scripts/broker.sh

echo "== jest (real broker)"
results=$(mktemp)
status=0
npx jest --runInBand --json --outputFile="$results" "$@" || status=$?
node -e '
const r = require(process.argv[1]);
console.log(`jest: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);
' "$results" || true
rm -f "$results"
exit $status
