#!/usr/bin/env bash
# Plain single-lead ingest on a file that already holds LEADS leads, against a fresh file,
# alternating: fresh, big, fresh (wrk, 64 connections, DURATION each). The big file is
# filled through the server itself (bench/send_leads.py, batches of 100 over 8 connections)
# before its run, so it holds what ingest writes: the leads, their indexes and roll-ups.
# The big file is measured twice: right after the fill, while the fill's last pages are
# still being checkpointed and written back by the kernel, and again after a restart (the
# server checkpoints on its way out) and a `sync`, the way a file of that size is met on a
# day after it was filled. Every other run starts with WARMUP of load, unmeasured.
#
#   bench/big_file.sh                       # LEADS=1000000
#   LEADS=5000000 DURATION=20s bench/big_file.sh
#
# Settings (environment): LEADS (1000000, a multiple of 100), DURATION (10s), WARMUP (3s),
# LEADRELAY_BIN, KEEP=1.
set -euo pipefail
LEADS="${LEADS:-1000000}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" big_file wrk
load() {
  BENCH_DIR="$BENCH_DIR" wrk -t2 -c64 -d"$1" -s "$BENCH_DIR/plain.lua" "$2" |
    awk '/Requests\/sec/ {print $2}'
}
run() {
  local name="$1" fill="$2"
  rm -f "$LEADRELAY_DB" "$LEADRELAY_DB-wal" "$LEADRELAY_DB-shm"
  bench_setup
  "$BIN" source create --channel web --name Open --id open --no-secret >/dev/null
  start_server "$name"
  local url="$URL/api/webhooks/channels/web/sources/open/leads"
  if [ "$fill" -gt 0 ]; then
    python3 "$BENCH_DIR/send_leads.py" "$url" $((fill / 100)) 8 100 fill >/dev/null
    echo "$name, right after the fill: $(load "$DURATION" "$url") req/s"
    stop_server
    sync
    start_server "$name"
    url="$URL/api/webhooks/channels/web/sources/open/leads"
    name="$name, restarted"
  fi
  load "$WARMUP" "$url" >/dev/null
  local rate
  rate="$(load "$DURATION" "$url")"
  stop_server
  echo "$name: $rate req/s"
}
run fresh 0
run "big ($LEADS leads)" "$LEADS"
run fresh 0
