#!/usr/bin/env bash
# Plain ingest with every alert rule on against none, alternating, on the same build: what
# evaluating the rules costs ingest (DESIGN.md section 23: within 3%).
#
#   bench/alerts.sh
#   RUNS=5 DURATION=8s ALERT_INTERVAL=1s bench/alerts.sh
#   LEADRELAY_BIN=target/release/leadrelay bench/alerts.sh   # a binary built already
#
# Each round runs, on a fresh file each, single leads (64 connections) and batches of 100
# (16 connections) with the seven rules on and with none, the two in alternating order (wrk,
# DURATION each; bench/plain.lua's leads: no auto-delivery). The file with rules also has a
# webhook target (a closed local port), three buyers (prepaid, capped, with a breaker row)
# and a second source, so each rule has subjects to read. The server evaluates every
# ALERT_INTERVAL (default 1s, five times as often as `serve`'s default). It prints every run,
# then per mode the median leads/s with the p99s, and the ratio of on to off.
#
# Settings (environment): RUNS (3), DURATION (8s), SINGLE_CONNECTIONS (64),
# BATCH_CONNECTIONS (16), WRK_THREADS (2), ALERT_INTERVAL (1s), LEADRELAY_BIN, KEEP=1.
set -euo pipefail

RUNS="${RUNS:-3}"
DURATION="${DURATION:-8s}"
SINGLE_CONNECTIONS="${SINGLE_CONNECTIONS:-64}"
BATCH_CONNECTIONS="${BATCH_CONNECTIONS:-16}"
WRK_THREADS="${WRK_THREADS:-2}"
ALERT_INTERVAL="${ALERT_INTERVAL:-1s}"

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" alerts wrk

# A fresh file: one workspace, a channel without auto-delivery, two sources without a
# secret; with $1 = on, buyers and every rule too.
setup() {
  local mode="$1"
  rm -f "$LEADRELAY_DB" "$LEADRELAY_DB-wal" "$LEADRELAY_DB-shm"
  "$BIN" init >/dev/null
  "$BIN" workspace create --name Bench --id ws >/dev/null
  "$BIN" channel create --workspace ws --name Web --id web --auto-delivery off >/dev/null
  "$BIN" product create --workspace ws --slug solar --name Solar --id solar >/dev/null
  "$BIN" source create --channel web --name Load --id load --no-secret >/dev/null
  "$BIN" source create --channel web --name Quiet --id quiet --no-secret >/dev/null
  [ "$mode" = on ] || return 0
  for b in pre capped plain; do
    "$BIN" buyer create --workspace ws --name "$b" --id "$b" \
      --webhook-url "http://127.0.0.1:9/$b" >/dev/null
  done
  "$BIN" buyer update pre --plan prepaid >/dev/null
  "$BIN" buyer fund pre --amount 500 >/dev/null
  "$BIN" buyer subscribe capped --product solar --price 10 --daily-cap 100 >/dev/null
  "$BIN" buyer subscribe pre --product solar --price 10 >/dev/null
  "$BIN" alert target add --workspace ws --webhook http://127.0.0.1:9/alerts >/dev/null
  "$BIN" alert rule set --workspace ws buyer_endpoint_down --for 1m >/dev/null
  "$BIN" alert rule set --workspace ws cap_reached >/dev/null
  "$BIN" alert rule set --workspace ws balance_low --threshold 100 >/dev/null
  "$BIN" alert rule set --workspace ws source_silent --for 1h >/dev/null
  "$BIN" alert rule set --workspace ws outbox_backlog --for 15m >/dev/null
  "$BIN" alert rule set --workspace ws disk_low --threshold 1 >/dev/null
  "$BIN" alert rule set --workspace ws return_rate_high --threshold 20 >/dev/null
}

# One load with rules $1 (on|off), BENCH_BATCH=$2, on $3 connections: "mode batch rate p99".
run_one() {
  local mode="$1" batch="$2" connections="$3" out="$WORK/wrk.txt"
  setup "$mode"
  start_server serve --alert-interval "$ALERT_INTERVAL"
  BENCH_BATCH="$batch" wrk -t "$WRK_THREADS" -c "$connections" -d "$DURATION" --latency \
    -s "$BENCH_DIR/plain.lua" "$URL/api/webhooks/channels/web/sources/load/leads" >"$out"
  stop_server
  awk -v m="$mode" -v b="$batch" '/Requests\/sec/ {r = $2} $1 == "99%" {p = $2}
    END {printf "%s %s %.0f %s\n", m, b, r * b, p}' "$out"
}

results="$WORK/results.txt"
: >"$results"
echo "plain ingest with every alert rule on and with none ($(git -C "$ROOT" rev-parse --short HEAD)); $RUNS rounds of $DURATION; evaluation every $ALERT_INTERVAL; $(nproc) cores"
for round in $(seq "$RUNS"); do
  order="off on"; [ $((round % 2)) -eq 0 ] && order="on off"
  for mode in $order; do
    line="$(run_one "$mode" 1 "$SINGLE_CONNECTIONS")"; echo "round $round: $line"; echo "$line" >>"$results"
    line="$(run_one "$mode" 100 "$BATCH_CONNECTIONS")"; echo "round $round: $line"; echo "$line" >>"$results"
  done
done

python3 - "$results" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
for batch, what in (("1", "single-lead"), ("100", "batch-100")):
    median = {}
    for mode in ("off", "on"):
        mine = [r for r in runs if r[0] == mode and r[1] == batch]
        median[mode] = statistics.median(float(r[2]) for r in mine)
        print(f"rules {mode:>3} {what:>11}: {median[mode]:8.0f} leads/s (median), "
              f"p99 {', '.join(r[3] for r in mine)}")
    print(f"{what}: on/off = {median['on'] / median['off']:.3f}")
PY
