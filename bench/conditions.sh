#!/usr/bin/env bash
# Delivery under real conditions (DESIGN.md section 13): outbox throughput to 20 buyers that
# answer in 200 ms, 2 of them hanging, commit to arrival on an idle queue, speed to lead at
# 200 leads/s. Each figure with its baseline from the same run (buyers answering at once /
# none hanging). See bench/conditions_bench.rs for what runs.
#
#   bench/conditions.sh
#   PHASES=speed RATE=200 DURATION=30 bench/conditions.sh
#   PHASES=latency SAMPLES=500 bench/conditions.sh
#
# Settings (environment): PHASES (throughput,hanging,latency,speed), EVENTS (10000),
# DELAY_MS (200), RATE (200), DURATION (30 s), CONCURRENCY (256), PER_BUYER (16), SAMPLES
# (200), RUST_LOG (error).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export RUST_LOG="${RUST_LOG:-error}"

(cd "$ROOT" && cargo build --release --quiet --example conditions_bench)
echo "leadrelay conditions benchmark: $(nproc) cores, $(uname -sr), $(uptime)"
"$ROOT/target/release/examples/conditions_bench" \
  --phases "${PHASES:-throughput,hanging,latency,speed}" --events "${EVENTS:-10000}" \
  --delay "${DELAY_MS:-200}" --rate "${RATE:-200}" --seconds "${DURATION:-30}" \
  --concurrency "${CONCURRENCY:-256}" --per-buyer "${PER_BUYER:-16}" \
  --samples "${SAMPLES:-200}"
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
