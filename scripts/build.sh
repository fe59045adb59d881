#!/usr/bin/env bash
# Builds the native addon (debug unless RELEASE=1) and compiles lib/ to dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  [[ -x $HOME/.cargo/bin/cargo ]] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "build: the native addon needs Rust (cargo); install it from https://rustup.rs" >&2
  exit 1
fi
if [[ ${RELEASE:-0} == 1 ]]; then
  npx napi build --platform --js binding.js --dts binding.d.ts --release
else
  npx napi build --platform --js binding.js --dts binding.d.ts
fi
npm run --silent build:ts
