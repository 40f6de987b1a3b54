#!/usr/bin/env bash
# Starts the Temporal dev server the way payguard expects it: UI on :8233,
# the OrderStatus/PaymentStatus search attributes registered, the task-hop
# tuning, a SQLite file so the history survives a restart, and the UI told to
# decode payloads through the worker's codec server (they are encrypted).
set -euo pipefail
cd "$(dirname "$0")/.."
db=${TEMPORAL_DB:-.temporal/dev.db}
mkdir -p "$(dirname "$db")"
exec bin/temporal server start-dev \
  --ip 127.0.0.1 --port 7233 --ui-port 8233 \
  --ui-codec-endpoint http://127.0.0.1:8081/codec \
  --db-filename "$db" \
  --search-attribute OrderStatus=Keyword --search-attribute PaymentStatus=Keyword \
  --dynamic-config-value history.transferProcessorMaxPollRPS=200 \
  --dynamic-config-value matching.numTaskqueueReadPartitions=1 \
  --dynamic-config-value matching.numTaskqueueWritePartitions=1 \
  --dynamic-config-value system.forceSearchAttributesCacheRefreshOnRead=false \
  --sqlite-pragma journal_mode=WAL --sqlite-pragma synchronous=NORMAL \
  --log-level warn "$@"
