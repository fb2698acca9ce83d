#!/usr/bin/env bash
# Ingest benchmark: single-lead and 100-lead-batch throughput and latency of a release
# build on a fresh database, with wrk as the load generator.
#
#   bench/ingest.sh                 # build, then run both loads (10 s each)
#   DURATION=30s bench/ingest.sh    # longer runs
#
# Settings (environment): DURATION (10s), SINGLE_CONNECTIONS (64), BATCH_CONNECTIONS (4),
# WRK_THREADS (2), WARMUP (3s), RUST_LOG (warn: no per-request log line; set info to
# measure with the request log on), LEADRELAY_BIN (a leadrelay binary to measure instead of
# building this checkout, e.g. a baseline built from another commit).
#
# Every request carries new leads (unique externalId, email and phone), a product interest
# with a field answer, and the source's secret in a header, so each one takes the full
# path: source lookup, secret check, validation, product lookup, duplicate and idempotency
# checks and the durable insert (synchronous=FULL) before the answer.
set -euo pipefail

DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
SINGLE_CONNECTIONS="${SINGLE_CONNECTIONS:-64}"
BATCH_CONNECTIONS="${BATCH_CONNECTIONS:-4}"
WRK_THREADS="${WRK_THREADS:-2}"
# The server's log level (lib.sh's start_server); the set-up commands always run at warn.
SERVER_LOG="${RUST_LOG:-warn}"

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" ingest wrk


# Milliseconds one 4 KiB write + fdatasync takes in the work directory: the floor of a
# commit with synchronous=FULL.
fsync_ms() {
  local seconds
  seconds="$(dd if=/dev/zero of="$WORK/probe" bs=4k count=200 oflag=dsync 2>&1 | sed -n 's/.* copied, \([0-9.]*\) s.*/\1/p')"
  awk -v s="$seconds" 'BEGIN { printf "%.2f", s * 1000 / 200 }'
  rm -f "$WORK/probe"
}

# Runs one wrk load against a fresh database and prints its RESULT line.
run_load() {
  local name="$1" script="$2" connections="$3"
  export LEADRELAY_DB="$WORK/$name.db"
  bench_setup
  start_server "$name"

  wrk -t "$WRK_THREADS" -c "$connections" -d "$WARMUP" -s "$BENCH_DIR/$script" "$URL$PATH_" >/dev/null
  local load cpu_before cpu_after result leads
  load="$(cut -d' ' -f1 /proc/loadavg)"
  cpu_before="$(cpu_ticks "$SERVER_PID")"
  result="$(wrk -t "$WRK_THREADS" -c "$connections" -d "$DURATION" --latency -s "$BENCH_DIR/$script" "$URL$PATH_" | grep '^RESULT')"
  cpu_after="$(cpu_ticks "$SERVER_PID")"
  leads="$(echo "$result" | sed 's/.*leads_per_s=\([0-9]*\).*/\1/')"
  # Server CPU time (all threads) per lead, from the kernel's tick counters.
  local ticks_per_s cpu_us
  ticks_per_s="$(getconf CLK_TCK)"
  cpu_us="$(awk -v a="$cpu_before" -v b="$cpu_after" -v l="$leads" -v d="${DURATION%s}" -v t="$ticks_per_s" \
    'BEGIN { printf "%.1f", (b - a) / t * 1e6 / (l * d) }')"
  echo "$name (connections=$connections, duration=$DURATION, load before=$load): ${result#RESULT } server_cpu_us_per_lead=$cpu_us"

  stop_server
}

echo "leadrelay ingest benchmark: $(nproc) cores, $(uname -sr), wrk threads=$WRK_THREADS, server RUST_LOG=$SERVER_LOG, fsync $(fsync_ms) ms"
run_load single single.lua "$SINGLE_CONNECTIONS"
run_load batch100 batch.lua "$BATCH_CONNECTIONS"
