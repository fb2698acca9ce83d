#!/usr/bin/env bash
# Purge while ingesting: does `serve`'s retention purge of LEADS old leads move the latency
# of ingest running at half its maximum? (DESIGN.md section 12; goal: p99 moves < 5 ms.)
#
#   bench/purge.sh                    # 1,000,000 leads
#   LEADS=200000 bench/purge.sh
#
# 1. LEADS leads like the ingest benchmark's are ingested in batches of 100 (storage.lua).
# 2. The maximum single-lead ingest rate on that file is measured (single.lua, 64
#    connections, MAX_DURATION), and the paced load is half of it (paced.lua).
# 3. Baseline: the server restarted without retention, the paced load for WINDOWS windows
#    of WINDOW each; p99 per window.
# 4. Purge: the workspace's retention set to 1s (every lead of step 1 is older), the server
#    restarted (its retention run starts at once), and the paced load run in windows of
#    WINDOW until the server logs the end of the run; p99 per window, and the run's time.
# Then the file's size before and after (the run gives free pages back), and the same
# paced load after the purge.
#
# Settings (environment): LEADS (1000000), WINDOW (20s), WINDOWS (3), MAX_DURATION (10s),
# CONNECTIONS (16, the paced load's), LEADRELAY_BIN (a binary instead of building this
# checkout), KEEP=1 (keep the work directory). Needs wrk and sqlite3 (Debian packages).
set -euo pipefail

LEADS="${LEADS:-1000000}"
WINDOW="${WINDOW:-20s}"
WINDOWS="${WINDOWS:-3}"
MAX_DURATION="${MAX_DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-16}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" purge wrk sqlite3
# The retention run's log line ends the purge phase.
SERVER_LOG="warn,leadrelay::privacy=info"

bench_setup
file_bytes() { echo $(( $(stat -c %s "$LEADRELAY_DB") + $(stat -c %s "$LEADRELAY_DB-wal" 2>/dev/null || echo 0) )); }
# One window of the paced load; prints its RESULT fields.
paced_window() {
  BENCH_RATE="$RATE" BENCH_CONNECTIONS="$CONNECTIONS" wrk -t 2 -c "$CONNECTIONS" -d "$WINDOW" \
    --latency -s "$BENCH_DIR/paced.lua" "$URL$PATH_" | grep '^RESULT' | sed 's/^RESULT //'
}

echo "leadrelay purge-while-ingesting benchmark: $(nproc) cores, $(uname -sr), $LEADS leads, load $(cut -d' ' -f1 /proc/loadavg)"

# 1. The leads to purge.
start_server fill
started=$(date +%s.%N)
export BENCH_DONE="$WORK/sent"
BENCH_SHARE="$((LEADS / 2))" wrk -t 2 -c 2 -d 1h -s "$BENCH_DIR/storage.lua" "$URL$PATH_" >/dev/null &
WRK_PID=$!
# Each of the two threads stops after its half; wrk itself would wait out its duration.
until [ "$(sqlite3 "$LEADRELAY_DB" 'SELECT count(*) FROM leads' 2>/dev/null || echo 0)" -ge "$LEADS" ]; do
  kill -0 "$WRK_PID" 2>/dev/null || { echo "wrk ended before sending $LEADS leads" >&2; exit 1; }
  sleep 1
done
kill "$WRK_PID" 2>/dev/null || true; wait "$WRK_PID" 2>/dev/null || true; WRK_PID=""
stop_server
leads="$(sqlite3 "$LEADRELAY_DB" 'SELECT count(*) FROM leads')"
echo "filled: $leads leads in $(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }') s, file $(file_bytes) bytes"

# 2. The maximum, and half of it.
start_server max
max="$(wrk -t 2 -c 64 -d "$MAX_DURATION" --latency -s "$BENCH_DIR/single.lua" "$URL$PATH_" | grep '^RESULT')"
echo "maximum: ${max#RESULT }"
RATE="$(echo "$max" | sed 's/.*requests_per_s=\([0-9]*\).*/\1/')"
RATE=$((RATE / 2))
echo "paced load: $RATE requests/s over $CONNECTIONS connections, windows of $WINDOW"

# 3. Baseline: the same file and load, no purge.
for i in $(seq 1 "$WINDOWS"); do echo "baseline window $i: $(paced_window)"; done
stop_server

# 4. The purge, run by serve at start.
"$BIN" workspace update ws --retention 1s >/dev/null
sleep 1.1
before="$(file_bytes)"
start_server purge
purge_started=$(date +%s.%N)
i=0
while ! grep -q 'retention purged' "$WORK/purge.log"; do
  i=$((i + 1))
  echo "purge window $i: $(paced_window)"
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then echo "server ended" >&2; cat "$WORK/purge.log" >&2; exit 1; fi
done
echo "purge run: $(grep 'retention purged' "$WORK/purge.log" | sed 's/.*\] //'), finished within $(awk -v s="$purge_started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }') s"
"$BIN" workspace update ws --retention none >/dev/null
echo "after the purge window: $(paced_window)"
stop_server
sqlite3 "$LEADRELAY_DB" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
echo "file: $before bytes before the purge, $(file_bytes) after ($(sqlite3 "$LEADRELAY_DB" 'SELECT count(*) FROM leads WHERE erased_at IS NOT NULL') tombstones)"
