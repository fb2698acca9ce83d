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

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export BENCH_DIR="$ROOT/bench"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
SINGLE_CONNECTIONS="${SINGLE_CONNECTIONS:-64}"
BATCH_CONNECTIONS="${BATCH_CONNECTIONS:-4}"
WRK_THREADS="${WRK_THREADS:-2}"
# The server's log level; the set-up commands always run at warn.
SERVER_LOG="${RUST_LOG:-warn}"
export RUST_LOG=warn

if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)" >&2
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get install -y wrk >/dev/null || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y wrk >/dev/null; }
fi

if [ -n "${LEADRELAY_BIN:-}" ]; then
  BIN="$LEADRELAY_BIN"
else
  (cd "$ROOT" && cargo build --release --quiet)
  BIN="$ROOT/target/release/leadrelay"
fi

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

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
  local db="$WORK/$name.db"
  export LEADRELAY_DB="$db"
  "$BIN" init >/dev/null
  "$BIN" workspace create --name Bench --id ws >/dev/null
  "$BIN" channel create --workspace ws --name Web --id web >/dev/null
  "$BIN" product create --workspace ws --slug solar --name Solar --id solar \
    --field 'roof:required=tile|flat|metal' >/dev/null
  export BENCH_SECRET="bench-secret-0123456789abcdef"
  "$BIN" source create --channel web --name Bench --id bench --secret "$BENCH_SECRET" >/dev/null

  RUST_LOG="$SERVER_LOG" "$BIN" serve --listen 127.0.0.1:0 --console-listen off --rate-limit 0 >"$WORK/$name.out" 2>"$WORK/$name.log" &
  SERVER_PID=$!
  local url=""
  for _ in $(seq 1 100); do
    url="$(grep -o 'http://[0-9.:]*' "$WORK/$name.out" || true)"
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || { echo "server did not start" >&2; cat "$WORK/$name.log" >&2; exit 1; }
  local path="/api/webhooks/channels/web/sources/bench/leads"

  wrk -t "$WRK_THREADS" -c "$connections" -d "$WARMUP" -s "$BENCH_DIR/$script" "$url$path" >/dev/null
  local load cpu_before cpu_after result leads
  load="$(cut -d' ' -f1 /proc/loadavg)"
  cpu_before="$(cpu_ticks "$SERVER_PID")"
  result="$(wrk -t "$WRK_THREADS" -c "$connections" -d "$DURATION" --latency -s "$BENCH_DIR/$script" "$url$path" | grep '^RESULT')"
  cpu_after="$(cpu_ticks "$SERVER_PID")"
  leads="$(echo "$result" | sed 's/.*leads_per_s=\([0-9]*\).*/\1/')"
  # Server CPU time (all threads) per lead, from the kernel's tick counters.
  local ticks_per_s cpu_us
  ticks_per_s="$(getconf CLK_TCK)"
  cpu_us="$(awk -v a="$cpu_before" -v b="$cpu_after" -v l="$leads" -v d="${DURATION%s}" -v t="$ticks_per_s" \
    'BEGIN { printf "%.1f", (b - a) / t * 1e6 / (l * d) }')"
  echo "$name (connections=$connections, duration=$DURATION, load before=$load): ${result#RESULT } server_cpu_us_per_lead=$cpu_us"

  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
}

echo "leadrelay ingest benchmark: $(nproc) cores, $(uname -sr), wrk threads=$WRK_THREADS, server RUST_LOG=$SERVER_LOG, fsync $(fsync_ms) ms"
run_load single single.lua "$SINGLE_CONNECTIONS"
run_load batch100 batch.lua "$BATCH_CONNECTIONS"
