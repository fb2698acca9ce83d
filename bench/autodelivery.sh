#!/usr/bin/env bash
# Auto-delivery against plain ingest over HTTP (issue 16, DESIGN.md section 13 "Routing
# speed"): single-lead ingest with wrk where every lead asks for automated delivery to one of
# 20 buyers (prices, daily and monthly caps, filters: 15 of them match the lead), against
# the same ingest without it, in the same run and on the same file; first on a fresh file,
# then on one holding PREFILL delivered leads (bench/prefill_delivered.py: bulk SQL in one
# transaction, spread over past months), which must be no more than 5% slower. Each load
# prints the server's CPU per lead and the writer thread's, which bounds auto-delivery.
#
#   bench/autodelivery.sh
#   PREFILL=1000000 ROUNDS=2 DURATION=10s bench/autodelivery.sh
#
# Settings (environment): ROUNDS (2: plain then auto, per file), DURATION (10s), WARMUP
# (3s), CONNECTIONS (64), WRK_THREADS (2), PREFILL (0: the fresh file only), SERVER_LOG
# (warn), LEADRELAY_BIN (another leadrelay binary to measure), RECEIVER_BIN (a built
# slow_receiver example, else built here), KEEP=1, PROFILE=1 (sample the writer thread
# with perf during each auto-delivery load, DURATION in seconds, and print where its time
# went: bench/writer_profile.py), PAGE_SIZE (bench/lib.sh), RECEIVER_DELAY (0: the buyers'
# endpoints, bench/slow_receiver.rs, answer at once; milliseconds before they answer, e.g.
# 200 for buyers as they are, or one longer than the run, which keeps every place of the
# outbox in flight so that it neither records nor claims: an upper bound of what the
# outbox costs), SETUP_SQL (SQL run on the file after the setup, before `serve`: for
# experiments such as an index left out, never for figures of the product as built). The
# file is deleted at the end.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" autodelivery wrk
if [ "${PROFILE:-0}" = 1 ] && ! command -v perf >/dev/null; then
  echo "installing perf (Debian package linux-perf)" >&2
  apt-get install -y linux-perf >/dev/null
fi
ROUNDS="${ROUNDS:-2}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
CONNECTIONS="${CONNECTIONS:-64}"
WRK_THREADS="${WRK_THREADS:-2}"
PREFILL="${PREFILL:-0}"

if [ -z "${RECEIVER_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --release --quiet --example slow_receiver)
  RECEIVER_BIN="$ROOT/target/release/examples/slow_receiver"
fi
RECEIVER=""
trap '[ -n "$RECEIVER" ] && kill "$RECEIVER" 2>/dev/null; cleanup' EXIT
ulimit -n 65536 2>/dev/null || true


# One wrk load against the running server: prints its figures with the server's CPU per lead.
load() {
  local name="$1" auto="$2" before after writer_before writer_after wal_before wal_after
  local result requests
  BENCH_AUTO="$auto" wrk -t "$WRK_THREADS" -c "$CONNECTIONS" -d "$WARMUP" \
    -s "$BENCH_DIR/single.lua" "$URL$PATH_" >/dev/null
  before="$(cpu_ticks "$SERVER_PID")"
  writer_before="$(thread_cpu_ticks "$SERVER_PID" db-writer)"
  wal_before="$(thread_write_bytes "$SERVER_PID" db-writer)"
  local profiler=""
  if [ "${PROFILE:-0}" = 1 ] && [ "$auto" = 1 ]; then
    perf record -q -F 499 --call-graph dwarf,32768 -o "$WORK/writer.perf" \
      -t "$(thread_id "$SERVER_PID" db-writer)" -- sleep "${DURATION%s}" 2>/dev/null &
    profiler=$!
  fi
  result="$(BENCH_AUTO="$auto" wrk -t "$WRK_THREADS" -c "$CONNECTIONS" -d "$DURATION" \
    --latency -s "$BENCH_DIR/single.lua" "$URL$PATH_" | grep '^RESULT')"
  after="$(cpu_ticks "$SERVER_PID")"
  writer_after="$(thread_cpu_ticks "$SERVER_PID" db-writer)"
  wal_after="$(thread_write_bytes "$SERVER_PID" db-writer)"
  requests="$(echo "$result" | sed 's/.*requests=\([0-9]*\).*/\1/')"
  per_lead() {
    awk -v a="$1" -v b="$2" -v n="$requests" -v t="$(getconf CLK_TCK)" \
      'BEGIN { printf "%.0f", (b - a) / t * 1e6 / n }'
  }
  echo "  $name (load $(cut -d' ' -f1 /proc/loadavg)): ${result#RESULT }" \
    "server_cpu_us_per_lead=$(per_lead "$before" "$after")" \
    "writer_cpu_us_per_lead=$(per_lead "$writer_before" "$writer_after")" \
    "writer_wal_kb_per_lead=$(awk -v a="$wal_before" -v b="$wal_after" -v n="$requests" \
      'BEGIN { printf "%.1f", (b - a) / 1024 / n }')"
  if [ -n "$profiler" ]; then
    wait "$profiler"
    echo "  the writer thread during auto-delivery (perf, dwarf call graphs):"
    perf script -i "$WORK/writer.perf" -F ip,sym 2>/dev/null |
      python3 "$BENCH_DIR/writer_profile.py" 30 | sed 's/^/    /'
  fi
}

# ROUNDS of plain ingest then ingest with auto-delivery on the current file.
rounds() {
  local round
  start_server serve
  for round in $(seq 1 "$ROUNDS"); do
    load "plain ingest        " 0
    load "ingest+auto-delivery" 1
  done
  stop_server
}

echo "leadrelay auto-delivery benchmark: $(nproc) cores, $(uname -sr), connections=$CONNECTIONS, $DURATION per load"
"$RECEIVER_BIN" --buyers 20 --delay "${RECEIVER_DELAY:-0}" >"$WORK/hooks" 2>"$WORK/hooks.err" &
RECEIVER=$!
for _ in $(seq 1 200); do
  [ "$(grep -c '^buyer ' "$WORK/hooks" 2>/dev/null || true)" -ge 20 ] && break
  sleep 0.05
done

bench_setup
for n in $(seq 0 19); do
  url="$(sed -n "s/^buyer $n //p" "$WORK/hooks")"
  "$BIN" buyer create --workspace ws --name "Buyer $n" --id "b$n" --webhook-url "$url" >/dev/null
  case $((n % 4)) in
    0) filters=(--filter country=AT) ;;
    1) filters=(--filter country=DE --filter 'postalCode=1*') ;;
    2) filters=(--filter 'fieldValues.roof=tile|flat') ;;
    *) filters=(--filter country=DE --filter city=Berlin) ;;
  esac
  "$BIN" buyer subscribe "b$n" --product solar --price "$((20 + n % 3))" \
    --daily-cap 1000000 --monthly-cap 10000000 --priority "$((n % 2))" "${filters[@]}" >/dev/null
done

if [ -n "${SETUP_SQL:-}" ]; then
  echo "SETUP_SQL: $SETUP_SQL"
  sql_on_file "$LEADRELAY_DB" "$SETUP_SQL"
fi
echo "fresh file"
rounds
if [ "$PREFILL" -gt 0 ]; then
  python3 "$BENCH_DIR/prefill_delivered.py" "$LEADRELAY_DB" "$PREFILL"
  echo "after $PREFILL delivered leads ($(du -h "$LEADRELAY_DB" | cut -f1))"
  rounds
fi
