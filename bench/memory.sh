#!/usr/bin/env bash
# The server's resident memory as the file grows: plain ingest of batches of 100 new leads
# (bench/send_leads.py, 8 connections) into a fresh file, the server's RSS printed after each
# step. The resident size must not grow with the file (the page caches are bounded).
#
#   bench/memory.sh                     # RSS after 1 million leads
#   STEPS="1000000 5000000" bench/memory.sh
#
# Settings (environment): STEPS (cumulative lead counts, multiples of 100), LEADRELAY_BIN
# (a binary to measure instead of building this checkout), KEEP=1.
set -euo pipefail
STEPS="${STEPS:-1000000}"

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" memory

"$BIN" init >/dev/null
j() { python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
ws="$("$BIN" --json workspace create --name Bench | j)"
ch="$("$BIN" --json channel create --workspace "$ws" --name Web --auto-delivery off | j)"
src="$("$BIN" --json source create --channel "$ch" --name Load --no-secret | j)"
start_server memory
rss() { awk '/^VmRSS/ {printf "%.0f MB", $2 / 1024}' "/proc/$SERVER_PID/status"; }
echo "memory: $(git -C "$ROOT" rev-parse --short HEAD), RSS after start $(rss)"
sent=0
for step in $STEPS; do
  python3 "$BENCH_DIR/send_leads.py" "$URL/api/webhooks/channels/$ch/sources/$src/leads" \
    $(((step - sent) / 100)) 8 100 "to$step" >/dev/null
  sent=$step
  echo "after $sent leads: RSS $(rss), file $(du -m "$LEADRELAY_DB" | cut -f1) MB"
done
stop_server
