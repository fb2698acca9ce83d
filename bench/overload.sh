#!/usr/bin/env bash
# Overload benchmark: a release `leadrelay serve` on a fresh database is first measured at
# its sustainable rate (closed loop, 64 connections), then offered FACTORS times that rate
# (1x as the baseline, then 4x) in open loops (requests sent on schedule whether or not earlier ones were answered). It
# prints the answers by status and code, the latency of accepted requests (p50/p99/max, from
# each request's scheduled time), and compares the leads acknowledged with the rows in the
# file. See bench/overload_bench.rs.
#
#   bench/overload.sh                          # single leads, 1x then 4x, 10 s each
#   BATCH=100 bench/overload.sh                # 100-lead batches
#   FACTORS=1,2,4,8 bench/overload.sh          # more steps
#   SERVE_FLAGS="--max-connections 256" bench/overload.sh
#
# Settings (environment): FACTORS (1,4), BATCH (1), CALIBRATE_SECS (10), OVERLOAD_SECS (10),
# CONNECTIONS (2048, the client's most), SERVE_FLAGS (none), RUST_LOG (warn), LEADRELAY_BIN
# (a leadrelay binary to measure instead of this checkout's, e.g. a baseline built from
# another commit; the load generator is always this checkout's).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FACTORS="${FACTORS:-1,4}"
BATCH="${BATCH:-1}"
CALIBRATE_SECS="${CALIBRATE_SECS:-10}"
OVERLOAD_SECS="${OVERLOAD_SECS:-10}"
CONNECTIONS="${CONNECTIONS:-2048}"
SERVE_FLAGS="${SERVE_FLAGS:-}"
SERVER_LOG="${RUST_LOG:-warn}"
export RUST_LOG=warn

(cd "$ROOT" && cargo build --release --quiet && cargo build --release --quiet --example overload_bench)
BIN="${LEADRELAY_BIN:-$ROOT/target/release/leadrelay}"

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || true

export LEADRELAY_DB="$WORK/overload.db"
"$BIN" init >/dev/null
"$BIN" workspace create --name Bench --id ws >/dev/null
"$BIN" channel create --workspace ws --name Web --id web >/dev/null
"$BIN" product create --workspace ws --slug solar --name Solar --id solar \
  --field 'roof:required=tile|flat|metal' >/dev/null
SECRET="bench-secret-0123456789abcdef"
"$BIN" source create --channel web --name Bench --id bench --secret "$SECRET" \
  --dedupe-fields none >/dev/null

# shellcheck disable=SC2086 # SERVE_FLAGS is a list of flags
RUST_LOG="$SERVER_LOG" "$BIN" serve --listen 127.0.0.1:0 --console-listen off --portal-listen off --rate-limit 0 $SERVE_FLAGS \
  >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVER_PID=$!
URL=""
for _ in $(seq 1 100); do
  URL="$(grep -o 'http://[0-9.:]*' "$WORK/serve.out" || true)"
  [ -n "$URL" ] && break
  sleep 0.05
done
[ -n "$URL" ] || { echo "server did not start" >&2; cat "$WORK/serve.log" >&2; exit 1; }

echo "leadrelay overload benchmark: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1 /proc/loadavg), batch=$BATCH, serve flags: ${SERVE_FLAGS:-none}"
"$ROOT/target/release/examples/overload_bench" --url "$URL" --secret "$SECRET" \
  --db "$LEADRELAY_DB" --factors "$FACTORS" --batch "$BATCH" \
  --calibrate-secs "$CALIBRATE_SECS" --overload-secs "$OVERLOAD_SECS" --connections "$CONNECTIONS"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
