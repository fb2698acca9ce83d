#!/usr/bin/env bash
# Storage per lead: ingests LEADS leads shaped like the ingest benchmark's (bench/common.lua:
# 15 fields, one product interest with an answer, one additional property) through HTTP in
# batches of 100, stops the server (which checkpoints the WAL), and prints the file's size
# per lead and, from SQLite's dbstat table, the bytes per lead of every table and index.
#
#   bench/storage.sh                    # 100000 leads
#   LEADS=20000 bench/storage.sh
#
# Settings (environment): LEADS (100000), LEADRELAY_BIN (a leadrelay binary to measure
# instead of building this checkout, e.g. a baseline built from another commit), KEEP=1
# (keep the database and print its path). Needs wrk and the sqlite3 shell (Debian packages).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export BENCH_DIR="$ROOT/bench"
LEADS="${LEADS:-100000}"
export RUST_LOG=warn

for tool in wrk sqlite3; do
  if ! command -v "$tool" >/dev/null; then
    echo "installing $tool (Debian package)" >&2
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get install -y "$tool" >/dev/null || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y "$tool" >/dev/null; }
  fi
done

if [ -n "${LEADRELAY_BIN:-}" ]; then
  BIN="$LEADRELAY_BIN"
else
  (cd "$ROOT" && cargo build --release --quiet)
  BIN="$ROOT/target/release/leadrelay"
fi

WORK="$(mktemp -d)"
SERVER_PID=""
WRK_PID=""
cleanup() {
  if [ -n "$WRK_PID" ]; then kill "$WRK_PID" 2>/dev/null || true; fi
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

export LEADRELAY_DB="$WORK/storage.db"
"$BIN" init >/dev/null
"$BIN" workspace create --name Bench --id ws >/dev/null
"$BIN" channel create --workspace ws --name Web --id web >/dev/null
"$BIN" product create --workspace ws --slug solar --name Solar --id solar \
  --field 'roof:required=tile|flat|metal' >/dev/null
export BENCH_SECRET="bench-secret-0123456789abcdef"
"$BIN" source create --channel web --name Bench --id bench --secret "$BENCH_SECRET" >/dev/null

"$BIN" serve --listen 127.0.0.1:0 --console-listen off --rate-limit 0 >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVER_PID=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -o 'http://[0-9.:]*' "$WORK/serve.out" | head -1 || true)"
  [ -n "$url" ] && break
  sleep 0.05
done
[ -n "$url" ] || { echo "server did not start" >&2; cat "$WORK/serve.log" >&2; exit 1; }

# One thread, one connection: the thread stops right after the answer that completes
# its share, so exactly LEADS leads are sent; it then leaves the file BENCH_DONE, since wrk
# itself would wait out its duration.
export BENCH_DONE="$WORK/sent"
BENCH_SHARE="$LEADS" wrk -t 1 -c 1 -d 1h -s "$BENCH_DIR/storage.lua" \
  "$url/api/webhooks/channels/web/sources/bench/leads" >/dev/null &
WRK_PID=$!
while [ ! -e "$BENCH_DONE" ]; do
  kill -0 "$WRK_PID" 2>/dev/null || { echo "wrk ended before sending $LEADS leads" >&2; exit 1; }
  sleep 0.2
done
kill "$WRK_PID"; wait "$WRK_PID" 2>/dev/null || true
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""

db="$LEADRELAY_DB"
sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
leads="$(sqlite3 "$db" "SELECT count(*) FROM leads;")"
bytes="$(stat -c %s "$db")"
free_pages="$(sqlite3 "$db" "PRAGMA freelist_count;")"
page_size="$(sqlite3 "$db" "PRAGMA page_size;")"
echo "leadrelay storage per lead: $leads leads, file $bytes bytes ($free_pages free pages of $page_size), wal $(stat -c %s "$db-wal" 2>/dev/null || echo 0) bytes"
awk -v b="$bytes" -v n="$leads" 'BEGIN { printf "RESULT bytes_per_lead=%.0f\n", b / n }'
# Pages per table and index (a table's bytes include its pages' free space), per lead.
sqlite3 -separator ' ' "$db" "
  SELECT printf('%-36s %8.1f bytes/lead  (payload %6.1f, unused %6.1f)', name,
                sum(pgsize) * 1.0 / $leads, sum(payload) * 1.0 / $leads, sum(unused) * 1.0 / $leads)
  FROM dbstat GROUP BY name HAVING sum(pgsize) * 1.0 / $leads >= 0.5 ORDER BY sum(pgsize) DESC;"
if [ "${KEEP:-0}" = 1 ]; then echo "database: $db"; fi
