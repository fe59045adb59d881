#!/usr/bin/env bash
# The test command (`npm test`): lint, the Rust unit tests, a build, then the
# Jest suites against a real broker (started by scripts/broker.sh when none answers).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x $HOME/.cargo/bin/cargo ]] && export PATH="$HOME/.cargo/bin:$PATH"

echo "== lint"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
bash scripts/lint-workflows.sh

echo "== cargo test (pure logic, no broker)"
cargo test

echo "== build"
bash scripts/build.sh
npm run --silent typecheck

echo "== broker and database"
bash scripts/broker.sh
bash scripts/postgres.sh

echo "== jest (real broker)"
results=$(mktemp)
status=0
npx jest --runInBand --json --outputFile="$results" "$@" || status=$?
RESULTS=$results node -e '
const r = JSON.parse(require("fs").readFileSync(process.env.RESULTS, "utf8"));
console.log(`jest: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);
' || true
rm -f "$results"
[[ $status -eq 0 ]] || exit $status

echo "== install into a new NestJS project (no Rust toolchain)"
bash scripts/install-spec.sh
