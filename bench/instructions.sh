#!/usr/bin/env bash
# Instructions per lead of plain ingest under callgrind: independent of the machine's load,
# so that two builds can be compared on a busy machine. The server runs under valgrind
# (--separate-threads); after WARM requests the counters are zeroed, then REQUESTS requests
# (bench/send_leads.py, CONNECTIONS connections) are sent and the counts dumped. Prints the
# instructions per lead of the writer thread and of the whole server, and the groups the
# writer committed (their size changes the per-lead cost of a commit).
#
#   bench/instructions.sh single            # 1,000 single leads over 64 connections
#   bench/instructions.sh batch             # 30 batches of 100 over 16 connections
#   LEADRELAY_BIN=/path/to/leadrelay bench/instructions.sh single
#
# Settings (environment): REQUESTS, CONNECTIONS, WARM, LEADRELAY_BIN, ADDITIONAL (a JSON
# object added to every lead, bench/send_leads.py), KEEP=1 (keep the callgrind files:
# callgrind_annotate --inclusive=yes FILE).
set -euo pipefail
mode="${1:-single}"
case "$mode" in
  single) batch=1; REQUESTS="${REQUESTS:-1000}"; CONNECTIONS="${CONNECTIONS:-64}"; WARM="${WARM:-100}" ;;
  batch) batch=100; REQUESTS="${REQUESTS:-30}"; CONNECTIONS="${CONNECTIONS:-16}"; WARM="${WARM:-5}" ;;
  *) echo "usage: $0 single|batch" >&2; exit 2 ;;
esac

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" instructions valgrind

plain_setup "$BIN" "$LEADRELAY_DB"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
listener_flags "$BIN"
valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$WORK/cg.out" \
  "$BIN" --db "$LEADRELAY_DB" serve --listen "127.0.0.1:$port" --rate-limit 0 \
  "${LISTENER_FLAGS[@]}" >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do curl -fs "http://127.0.0.1:$port/api/health" >/dev/null && break; sleep 0.2; done
url="http://127.0.0.1:$port$LEADS_PATH"
groups() { curl -fs "http://127.0.0.1:$port/metrics" | awk '/^leadrelay_db_write_group_size_count/ {print $2}'; }
python3 "$BENCH_DIR/send_leads.py" "$url" "$WARM" "$CONNECTIONS" "$batch" warm >/dev/null
before="$(groups)"
callgrind_control -z "$SERVER_PID" >/dev/null
python3 "$BENCH_DIR/send_leads.py" "$url" "$REQUESTS" "$CONNECTIONS" "$batch" run >/dev/null
callgrind_control -d "$SERVER_PID" >/dev/null
after="$(groups)"
stop_server
leads=$((REQUESTS * batch))
total=0
writer=0
for f in "$WORK"/cg.out.1-*; do
  n="$(awk '/^(summary|totals):/ {print $2; exit}' "$f")"
  total=$((total + ${n:-0}))
  # The writer's thread names its entry function, first in an fn= or a cfn= line.
  if grep -q "fn=([0-9]*) leadrelay_store::db::writer::run$\|^fn=([0-9]*) leadrelay::db::writer::run$" "$f"; then
    writer=$((writer + ${n:-0}))
  fi
done
echo "$mode: $leads leads in $((${after%.*} - ${before%.*})) groups; instructions per lead: writer $((writer / leads)), server $((total / leads))"
