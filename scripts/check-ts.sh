#!/usr/bin/env bash
# The TypeScript side's habits (`npm run lint:ts`, in `npm test`'s lint stage): ESLint, Prettier, the structure of
# lib/ and src/ (import circles and layers, file lengths, the Rust modules' order), what is written from the declared
# options (`npm run options`), a doc comment on every export and the relative links of the README and docs/.
# Runs every check, then fails if any did, naming them.
set -uo pipefail
cd "$(dirname "$0")/.."
PATH="$PWD/node_modules/.bin:$PATH"
failed=()
check() {
  local name=$1
  shift
  echo "-- $name"
  "$@" || failed+=("$name")
}
check eslint eslint --max-warnings 0 .
check prettier prettier --check --log-level warn .
check imports depcruise lib --config .dependency-cruiser.cjs
check structure node scripts/check-structure.mjs
check options ts-node --transpile-only scripts/options.ts --check
check links node scripts/check-links.mjs
check docs typedoc --emit none --treatValidationWarningsAsErrors --logLevel Warn
if ((${#failed[@]} > 0)); then
  echo "lint:ts: failed: ${failed[*]}"
  exit 1
fi
