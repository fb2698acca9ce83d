#!/usr/bin/env bash
# Delivery benchmark: events per second from the outbox workers to a local receiver that
# answers 200 at once, and the delay from the commit of a delivery to its first attempt on
# an idle queue (with and without a wake-up). See bench/delivery_bench.rs for what runs.
#
#   bench/delivery.sh                         # 20000 events, 4 senders, 200 latency samples
#   EVENTS=50000 SENDERS=8 bench/delivery.sh
#
# Settings (environment): EVENTS (20000), SENDERS (4), SAMPLES (200), RUST_LOG (warn).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
EVENTS="${EVENTS:-20000}"
SENDERS="${SENDERS:-4}"
SAMPLES="${SAMPLES:-200}"
export RUST_LOG="${RUST_LOG:-warn}"

(cd "$ROOT" && cargo build --release --quiet --example delivery_bench)
echo "leadrelay delivery benchmark: $(nproc) cores, $(uname -sr)"
"$ROOT/target/release/examples/delivery_bench" \
  --events "$EVENTS" --senders "$SENDERS" --samples "$SAMPLES"
