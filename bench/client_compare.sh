#!/usr/bin/env bash
# Threads with blocking ureq against tasks with hyper-util's async client, for the outbox's
# sends (ARCHITECTURE.md, "the outbox"): the same requests to 20 buyers that answer in
# 200 ms (bench/slow_receiver.rs, its own process), REQUESTS per run with CONCURRENCY in
# flight, the two clients alternating ROUNDS times. Prints per run: requests per second,
# the client process's CPU time per request, its peak resident memory.
#
#   bench/client_compare.sh
#   REQUESTS=20000 CONCURRENCY=256 ROUNDS=3 bench/client_compare.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REQUESTS="${REQUESTS:-6000}"
CONCURRENCY="${CONCURRENCY:-256}"
ROUNDS="${ROUNDS:-2}"
BUYERS="${BUYERS:-20}"
DELAY_MS="${DELAY_MS:-200}"

(cd "$ROOT" && cargo build --release --quiet --example slow_receiver --example client_compare)
BIN="$ROOT/target/release/examples"
echo "client comparison: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1 /proc/loadavg)"
echo "$BUYERS buyers answering in $DELAY_MS ms, $REQUESTS requests per run, $CONCURRENCY in flight"

urls="$(mktemp)"
"$BIN/slow_receiver" --buyers "$BUYERS" --delay "$DELAY_MS" >"$urls" 2>/dev/null &
receiver=$!
trap 'kill $receiver 2>/dev/null; rm -f "$urls"' EXIT
for _ in $(seq 50); do
  [ "$(wc -l <"$urls")" -ge "$BUYERS" ] && break
  sleep 0.1
done
mapfile -t list < <(awk '{print $3}' "$urls")

for round in $(seq "$ROUNDS"); do
  for mode in threads threads-per-buyer async; do
    "$BIN/client_compare" --mode "$mode" --requests "$REQUESTS" --concurrency "$CONCURRENCY" "${list[@]}"
  done
done
