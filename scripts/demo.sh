#!/usr/bin/env bash
# The demo (`npm run demo`): builds what it needs, makes sure a broker answers,
# and runs the outage story of examples/demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
bash scripts/broker.sh
exec npx ts-node --transpile-only examples/nest-shipping/main.ts
