#!/usr/bin/env bash
# Soak test: a release build on a fresh database, a local webhook receiver, and a mixed load
# (single and 10-lead batch ingest with automated delivery, the buyer lifecycle walk on the
# delivered transactions, health). First the maximum rate of the mix is measured (closed
# loop); then the same mix runs at half that rate for DURATION seconds (open loop). Reports
# errors (target 0), latency percentiles per kind, the server's resident memory at start,
# end and over time (target: flat, under 150 MB), and that every event was delivered.
#
#   bench/soak.sh                          # 20 s measurement, then 600 s soak
#   DURATION=60 MEASURE=10 bench/soak.sh   # a short smoke run
#   RATE=800 bench/soak.sh                 # skip the measurement, soak at 800 ops/s
#
# Settings: DURATION (600), MEASURE (20), CLIENTS (32, for the measurement), RATE (unset),
# RUST_LOG (warn: no per-request log line). All traffic goes to 127.0.0.1; exits 1 when
# any operation failed.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-600}"
MEASURE="${MEASURE:-20}"
CLIENTS="${CLIENTS:-32}"
export RUST_LOG="${RUST_LOG:-warn}"

(cd "$ROOT" && cargo build --release --quiet --bin leadrelay --example soak)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "leadrelay soak: $(nproc) cores, $(uname -sr), measure ${MEASURE}s, soak ${DURATION}s"
args=(--bin "$ROOT/target/release/leadrelay" --work "$WORK" --measure "$MEASURE"
      --duration "$DURATION" --clients "$CLIENTS")
if [ -n "${RATE:-}" ]; then args+=(--rate "$RATE"); fi
"$ROOT/target/release/examples/soak" "${args[@]}"
