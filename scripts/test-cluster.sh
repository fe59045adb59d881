#!/usr/bin/env bash
# `npm run test:cluster`: starts the three-node cluster of scripts/cluster.sh, runs the
# cluster suite against it, and stops it again whatever the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/cluster.sh start
status=0
npx jest -c jest.cluster.config.js --runInBand "$@" || status=$?
bash scripts/cluster.sh stop || true
exit "$status"
