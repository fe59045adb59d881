#!/usr/bin/env bash
# The demo (`npm run demo`): builds what it needs, makes sure a broker and
# PostgreSQL answer, and runs the outage story of examples/nest-shipping: act one
# (retry queues through a short outage), then act two (a long outage: retry
# queues and a burst replay beside the retry table drained at a set rate).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
bash scripts/broker.sh
bash scripts/postgres.sh
exec npx ts-node --transpile-only examples/nest-shipping/main.ts
