#!/usr/bin/env bash
# The demo (`npm run demo`): builds the native addon (one line on the screen; the
# build's output goes to target/demo-build.log), makes sure a broker and PostgreSQL
# answer, and runs the outage story of examples/nest-shipping: act one (a short
# outage, met by a plain amqplib consumer that requeues and then by rabbit-retry's
# retry queues, side by side), then act two (a long outage: retry queues and a burst
# replay beside the retry table drained at a set rate).
# However the story ends, Ctrl-C included, the run's queues and exchanges and the
# database rabbit_retry_demo are removed; KEEP_QUEUES=1 keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."

build_log=target/demo-build.log
# Lines of cargo's that mean it has work to do (an up-to-date build prints none of them).
build_work='^[[:space:]]*(Updating|Downloading|Downloaded|Locking|Blocking|Compiling)[[:space:]]'

building=0
story_started=0
story_done=0

tidy_up() {
  local status=$?
  trap - EXIT INT TERM
  if ((building)); then
    echo
    echo "demo: the build stopped; its log is $build_log" >&2
  fi
  if ((story_started && !story_done)) && [[ ${KEEP_QUEUES:-0} != 1 ]]; then
    npx ts-node --transpile-only examples/nest-shipping/tidy.ts || true
  fi
  exit "$status"
}
trap tidy_up EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The demo needs the native addon only (ts-node runs lib/ from source): a debug build.
build_addon() {
  if ! command -v cargo >/dev/null 2>&1 && [[ -x $HOME/.cargo/bin/cargo ]]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "the native addon needs Rust (cargo); install it from https://rustup.rs"
    return 1
  fi
  npx napi build --platform --js binding.js --dts binding.d.ts
}

# Copies the build's output to the log; the first sign of work starts the progress line.
log_build() {
  local line started=0
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line" >>"$build_log"
    if ((!started)) && [[ $line =~ $build_work ]]; then
      printf 'native addon: building (the first run takes a few minutes)... '
      started=1
    fi
  done
}

mkdir -p target
: >"$build_log"
build_started=$SECONDS
building=1
if build_addon 2>&1 | log_build; then
  building=0
  if grep -Eq "$build_work" "$build_log"; then
    echo "built in $((SECONDS - build_started)) s"
  else
    echo "native addon: up to date ($((SECONDS - build_started)) s)"
  fi
else
  status=$?
  building=0
  grep -Eq "$build_work" "$build_log" && echo "failed after $((SECONDS - build_started)) s"
  {
    echo "demo: the native addon did not build; the end of its log:"
    # The error comes last, before napi's stack trace; cargo's progress lines would push it out.
    sed 's/\x1b\[[0-9;]*m//g' "$build_log" | grep -Ev "$build_work|^[[:space:]]+at " | tail -n 25 | sed 's/^/  /' || true
    echo "demo: the full log is $build_log"
  } >&2
  exit "$status"
fi

bash scripts/broker.sh
bash scripts/postgres.sh

# Names this run's queues, so that tidy.ts can find what an interrupted run left.
export SHIPPING_PREFIX=${SHIPPING_PREFIX:-nest-demo-$(date +%s)-$$}
story_started=1
npx ts-node --transpile-only examples/nest-shipping/main.ts
story_done=1
