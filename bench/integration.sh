#!/usr/bin/env bash
# Mapped delivery benchmark (issue 21): events per second to buyers taking leads through
# their own API (a JSON CRM body, a form body, built by the integration document) against
# the generic signed webhook, in the same run, with buyers answering after 200 ms and at
# once. See bench/integration_bench.rs for what runs.
#
#   bench/integration.sh                          # 4000 events, 20 buyers, 200 ms and 0 ms
#   EVENTS=10000 DELAYS=200 bench/integration.sh
#
# Settings (environment): EVENTS (4000), BUYERS (20), DELAYS (200,0), RUST_LOG (warn).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export RUST_LOG="${RUST_LOG:-warn}"

(cd "$ROOT" && cargo build --release --quiet --example integration_bench)
echo "leadrelay integration benchmark: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$ROOT/target/release/examples/integration_bench" \
  --events "${EVENTS:-4000}" --buyers "${BUYERS:-20}" --delays "${DELAYS:-200,0}"
