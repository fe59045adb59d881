#!/usr/bin/env bash
# `npm run test:faults`: the fault suite (it restarts the broker under test: run it alone).
# With RABBITMQ_SERIES=4.3 it runs against the 4.3 node of scripts/broker-root.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n ${RABBITMQ_SERIES:-} ]]; then
  eval "$(bash scripts/broker-root.sh env)"
fi
bash scripts/broker.sh
# FAULT_INBOX=1: the inbox keeps its rows in PostgreSQL (FAULT_INBOX_GROUP=n: with inbox.group n). FAULT_BROKER_DELAY=min,max,attempts (4.3):
# onFailure.brokerDelay instead of retry queues. FAULT_N, FAULT_RESTARTS: __test__/faults/ledger.fault.ts.
if [[ -n ${FAULT_INBOX:-} ]]; then bash scripts/postgres.sh; fi
exec npx jest -c jest.faults.config.js --runInBand "$@"
