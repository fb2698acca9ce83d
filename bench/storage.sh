#!/usr/bin/env bash
# Storage per lead: ingests LEADS leads shaped like the ingest benchmark's (bench/common.lua:
# 15 fields, one product interest with an answer, one additional property) through HTTP in
# batches of 100, stops the server (which checkpoints the WAL), and prints the file's size
# per lead and, from SQLite's dbstat table, the bytes per lead of every table and index.
#
#   bench/storage.sh                    # 100000 leads
#   LEADS=20000 bench/storage.sh
#   DELIVERED=1 bench/storage.sh        # each lead auto-delivered: three buyers bid by price
#
# Settings (environment): LEADS (100000), LEADRELAY_BIN (a leadrelay binary to measure
# instead of building this checkout, e.g. a baseline built from another commit), KEEP=1
# (keep the database and print its path), DELIVERED=1 (three buyers subscribe to the product and
# every lead asks for automated delivery, so its request stores the decision trace; their
# webhook URL refuses connections, so each event stays pending after its first attempt).
# Needs wrk and the sqlite3 shell (Debian packages).
set -euo pipefail

LEADS="${LEADS:-100000}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" storage wrk sqlite3

bench_setup
if [ "${DELIVERED:-0}" = 1 ]; then
  export DELIVERED
  for buyer in alpha beta gamma; do
    "$BIN" buyer create --workspace ws --name "$buyer" --id "$buyer" \
      --webhook-url "http://127.0.0.1:9/$buyer" >/dev/null
  done
  "$BIN" buyer subscribe alpha --product solar --price 21 >/dev/null
  "$BIN" buyer subscribe beta --product solar --price 23 >/dev/null
  "$BIN" buyer subscribe gamma --product solar --price 22 >/dev/null
fi
start_server serve

# One thread, one connection: the thread stops right after the answer that completes
# its share, so exactly LEADS leads are sent; it then leaves the file BENCH_DONE, since wrk
# itself would wait out its duration.
export BENCH_DONE="$WORK/sent"
BENCH_SHARE="$LEADS" wrk -t 1 -c 1 -d 1h -s "$BENCH_DIR/storage.lua" \
  "$URL$PATH_" >/dev/null &
WRK_PID=$!
while [ ! -e "$BENCH_DONE" ]; do
  kill -0 "$WRK_PID" 2>/dev/null || { echo "wrk ended before sending $LEADS leads" >&2; exit 1; }
  sleep 0.2
done
kill "$WRK_PID"; wait "$WRK_PID" 2>/dev/null || true
stop_server

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
