#!/usr/bin/env bash
# Ingest with one third-party check step (DESIGN.md section 22): a release `leadrelay
# serve` on a fresh file whose workspace has one check step calling a real local service
# that answers every check after DELAY ms (bench/slow_receiver.rs), loaded by wrk at
# CONNECTIONS connections for DURATION with single leads (bench/plain.lua: unique email and
# phone each). A check waits on its socket, holding neither the writer nor a thread, so the
# goal is 0.9 of what CONNECTIONS waiting requests allow: 256 / 0.1 s * 0.9 = 2,300 leads/s.
# Prints the leads/s, wrk's latency figures, and the calls the service received.
#
#   bench/checks.sh
#   DURATION=3s bench/checks.sh                                   # a quick run
#   LEADRELAY_BIN=target/debug/leadrelay DURATION=3s bench/checks.sh   # no release build
#
# Settings (environment): CONNECTIONS (256), DURATION (8s), DELAY (100, ms), WRK_THREADS
# (2), SERVER_LOG (warn), LEADRELAY_BIN (another leadrelay binary to measure; the service is
# always this checkout's), KEEP=1 (keep the work directory).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" checks wrk
CONNECTIONS="${CONNECTIONS:-256}"
DURATION="${DURATION:-8s}"
DELAY="${DELAY:-100}"
WRK_THREADS="${WRK_THREADS:-2}"
GOAL=2300

(cd "$ROOT" && cargo build --release --quiet --example slow_receiver)
ulimit -n 65536 2>/dev/null || true

SERVICE_PID=""
trap '[ -n "$SERVICE_PID" ] && kill "$SERVICE_PID" 2>/dev/null; cleanup' EXIT
"$ROOT/target/release/examples/slow_receiver" --buyers 1 --delay "$DELAY" \
  >"$WORK/service.out" 2>"$WORK/service.err" &
SERVICE_PID=$!
SERVICE=""
for _ in $(seq 1 200); do
  SERVICE="$(grep -o 'http://[0-9.:]*/[a-z]*' "$WORK/service.out" | head -1 || true)"
  [ -n "$SERVICE" ] && break
  sleep 0.05
done
[ -n "$SERVICE" ] || { echo "the check service did not start" >&2; exit 1; }

bench_setup
"$BIN" source create --channel web --name Open --id open --no-secret >/dev/null
cat >"$WORK/step.json" <<JSON
{"url": "$SERVICE", "method": "POST", "format": "json",
 "body": {"email": {"from": "/email"}, "phone": {"from": "/phone"}},
 "pass": {"status": [200]},
 "onFail": "reject", "onError": "flag", "timeoutMs": 2000}
JSON
"$BIN" check-step set --workspace ws --name bench --file "$WORK/step.json" >/dev/null

start_server checks
wrk -t "$WRK_THREADS" -c "$CONNECTIONS" -d "$DURATION" --latency \
  -s "$BENCH_DIR/plain.lua" "$URL/api/webhooks/channels/web/sources/open/leads" >"$WORK/wrk.txt"
stop_server
cat "$WORK/wrk.txt"
rate="$(awk '/Requests\/sec/ { print $2 }' "$WORK/wrk.txt")"
kill "$SERVICE_PID" 2>/dev/null || true
echo "leads/s: ${rate} (goal ${GOAL}: 0.9 of ${CONNECTIONS} connections / ${DELAY} ms)"
