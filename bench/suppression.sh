#!/usr/bin/env bash
# Suppression list import: `leadrelay suppression import` of a CSV of ROWS rows (an email
# and a phone each, some 1 in 50 unusable), timed, with the command's peak memory (max RSS)
# to show it stays bounded whatever the file's size (the CSV is streamed and written in
# batches of 4,000 rows per writer job). Then a second import of the same file (every
# row already present) and one `suppression check`.
#
#   bench/suppression.sh                    # 1,000,000 rows
#   ROWS=100000 bench/suppression.sh        # a quick run
#   LEADRELAY_BIN=target/debug/leadrelay ROWS=100000 bench/suppression.sh   # no release build
set -euo pipefail

ROWS="${ROWS:-1000000}"
source "$(dirname "$0")/lib.sh" suppression python3

export LEADRELAY_DB="$WORK/suppression.db"
"$BIN" init >/dev/null
"$BIN" workspace create --name Bench --id bench >/dev/null

CSV="$WORK/dnc.csv"
python3 - "$ROWS" "$CSV" <<'PY'
import sys
rows, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write("email,phone\n")
    for n in range(rows):
        email = f"person{n}@example.org" if n % 50 else "not-an-email"
        f.write(f"{email},+49 151 {n:08d}\n")
PY
echo "rows: $ROWS ($(du -h "$CSV" | cut -f1) of CSV)"

timed() {
  local label="$1"; shift
  local out="$WORK/time.txt"
  /usr/bin/time -f "%e s, max RSS %M KiB" -o "$out" "$@" >"$WORK/out.json"
  echo "$label: $(cat "$out") $(tr -d "\n " <"$WORK/out.json")"
}

timed "import" "$BIN" --json suppression import --workspace bench --file "$CSV"
timed "import again" "$BIN" --json suppression import --workspace bench --file "$CSV"
timed "check" "$BIN" --json suppression check --workspace bench --phone "+49151$(printf %08d $((ROWS / 2)))"
echo "file: $(du -h "$LEADRELAY_DB" | cut -f1)"
