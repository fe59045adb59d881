#!/usr/bin/env bash
# The test command (`npm test`): lint, the Rust unit tests, a build, then the
# Jest suites against a real broker (started by scripts/broker.sh when none answers).
#
# RABBITMQ_SERIES=4.3 runs the Jest suites against a RabbitMQ 4.3 node that scripts/broker-root.sh
# starts (AMQP_URL and RABBITMQCTL point at it). TEST_STAGES picks stages (default: all of
# "lint cargo build jest install"), e.g. TEST_STAGES=jest for the suite alone on a built checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x $HOME/.cargo/bin/cargo ]] && export PATH="$HOME/.cargo/bin:$PATH"
stages=" ${TEST_STAGES:-lint cargo build jest install} "
stage() { [[ $stages == *" $1 "* ]]; }

if stage lint; then
  echo "== lint"
  cargo fmt --check
  cargo clippy --all-targets -- -D warnings
  bash scripts/lint-workflows.sh
  # ESLint, Prettier, import layers and circles, file lengths, Rust module order, doc comments (scripts/check-ts.sh).
  npm run --silent lint:ts
fi

if stage cargo; then
  echo "== cargo test (pure logic, no broker)"
  cargo test
fi

if stage build; then
  echo "== build"
  bash scripts/build.sh
  npm run --silent typecheck
fi

stage jest || stage install || exit 0

if [[ -n ${RABBITMQ_SERIES:-} ]]; then
  eval "$(bash scripts/broker-root.sh env)"
fi
echo "== broker and database"
bash scripts/broker.sh
bash scripts/postgres.sh
if ! stage jest; then
  echo "== install into a new NestJS project (no Rust toolchain)"
  exec bash scripts/install-spec.sh
fi

shown=$(sed -E 's#(//[^:/@]*):[^@]*@#\1:***@#g' <<<"${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}")
echo "== jest (real broker: $shown)"
results=$(mktemp)
status=0
# --forceExit: golevelup's specs, ported as their authors wrote them, leave applications open
# (serialization makes one for each test and closes the last), which would keep Jest running.
npx jest --runInBand --forceExit --json --outputFile="$results" "$@" || status=$?
RESULTS=$results node -e '
const r = JSON.parse(require("fs").readFileSync(process.env.RESULTS, "utf8"));
console.log(`jest: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);
' || true
rm -f "$results"
[[ $status -eq 0 ]] || exit $status
# golevelup's specs again, every handler bound to an exchange written without a queue, as golevelup's users write
# them (jest.peers-queueless.config.js; __test__/peers/CHANGES.md). Only when no test files were named.
if [[ $# -eq 0 ]]; then
  echo "== jest: golevelup's specs with queue-less handlers"
  npx jest -c jest.peers-queueless.config.js --runInBand --forceExit
fi
stage install || exit 0

echo "== install into a new NestJS project (no Rust toolchain)"
bash scripts/install-spec.sh
