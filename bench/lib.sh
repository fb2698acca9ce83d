# Shared by the shell benchmarks that run `serve` on a file of their own (bench/ingest.sh,
# bench/storage.sh, bench/purge.sh, bench/ping.sh, bench/alerts.sh): sourced, not run. Sets
# ROOT, BENCH_DIR, BIN, WORK and LEADRELAY_DB ($WORK/$1.db), installs the trap that stops the
# server and wrk and removes WORK (kept with KEEP=1), and defines reference_bin, sql_on_file,
# bench_setup, start_server, stop_server and cpu_ticks, and for comparing any two builds
# plain_setup, listener_flags and start_build.
#
#   source "$(dirname "$0")/lib.sh" NAME TOOL…   # NAME: the database's name; TOOLs to have
#
# Settings (environment): LEADRELAY_BIN (a leadrelay binary to measure instead of building
# this checkout, e.g. a baseline built from another commit), KEEP=1 (keep the work
# directory and print its path).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BENCH_DIR="$ROOT/bench"
export RUST_LOG=warn

for tool in "${@:2}"; do
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

# The leadrelay binary of build $1, a binary's path or a commit, on stdout; a commit is
# built once into target/reference/ (its source in a worktree, its artifacts in a target
# directory of its own: two checkouts of this workspace hash their crates alike, so sharing
# one directory lets a build link the other checkout's crates).
reference_bin() {
  local reference="$1" commit bin tree
  if [ -x "$reference" ] && [ ! -d "$reference" ]; then
    echo "$(cd "$(dirname "$reference")" && pwd)/$(basename "$reference")"
    return
  fi
  commit="$(git -C "$ROOT" rev-parse --short "$reference^{commit}")"
  bin="$ROOT/target/reference/leadrelay-$commit"
  if [ ! -x "$bin" ]; then
    tree="$ROOT/target/reference/tree-$commit"
    [ -d "$tree" ] || git -C "$ROOT" worktree add --detach "$tree" "$commit" >&2
    echo "building the reference $commit in $tree" >&2
    (cd "$tree" && CARGO_TARGET_DIR="$ROOT/target/reference/target-$commit" \
      cargo build --release --quiet --bin leadrelay) >&2
    cp "$ROOT/target/reference/target-$commit/release/leadrelay" "$bin"
  fi
  echo "$bin"
}

WORK="$(mktemp -d)"
SERVER_PID=""
WRK_PID=""
cleanup() {
  if [ -n "$WRK_PID" ]; then kill "$WRK_PID" 2>/dev/null || true; fi
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

export LEADRELAY_DB="$WORK/$1.db"
export BENCH_SECRET="bench-secret-0123456789abcdef"
# The ingest path of the source bench_setup creates.
PATH_="/api/webhooks/channels/web/sources/bench/leads"

# A new file with the ingest benchmark's workspace, channel, product and source.
# Runs the SQL statements $2 on the database file $1 (Python's sqlite3, so that no sqlite3
# command-line tool is needed): for experiments on a benchmark's file before `serve`.
sql_on_file() {
  python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()' "$1" "$2"
}

bench_setup() {
  # PAGE_SIZE (bytes): the new file made with that page size before `init` (an experiment:
  # leadrelay's files take SQLite's default of 4096).
  if [ -n "${PAGE_SIZE:-}" ]; then
    sql_on_file "$LEADRELAY_DB" "PRAGMA page_size = $((PAGE_SIZE));
      CREATE TABLE page_size_probe (x); DROP TABLE page_size_probe;"
  fi
  "$BIN" init >/dev/null
  "$BIN" workspace create --name Bench --id ws >/dev/null
  "$BIN" channel create --workspace ws --name Web --id web >/dev/null
  "$BIN" product create --workspace ws --slug solar --name Solar --id solar \
    --field 'roof:required=tile|flat|metal' >/dev/null
  "$BIN" source create --channel web --name Bench --id bench --secret "$BENCH_SECRET" >/dev/null
}

# Starts `serve` on a free port (stdout and log in $WORK/NAME.out, .log), with the flags
# after NAME; sets SERVER_PID and URL. The server's log level is SERVER_LOG (warn).
start_server() {
  local name="$1"
  RUST_LOG="${SERVER_LOG:-warn}" "$BIN" serve --listen 127.0.0.1:0 --console-listen off \
    --portal-listen off --rate-limit 0 "${@:2}" >"$WORK/$name.out" 2>"$WORK/$name.log" &
  SERVER_PID=$!
  URL=""
  for _ in $(seq 1 200); do
    URL="$(grep -o 'http://[0-9.:]*' "$WORK/$name.out" | head -1 || true)"
    [ -n "$URL" ] && break
    sleep 0.05
  done
  [ -n "$URL" ] || { echo "server did not start" >&2; cat "$WORK/$name.log" >&2; exit 1; }
}

# A fresh file $2 for build $1 (a binary) with one workspace, a channel without
# auto-delivery and a source without a secret, for plain ingest; sets LEADS_PATH. Only
# commands and flags every build since the first has, so that any two builds compare.
plain_setup() {
  local bin="$1" db="$2" ws ch src
  rm -f "$db" "$db-wal" "$db-shm"
  id() { python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
  "$bin" --db "$db" init >/dev/null
  ws="$("$bin" --db "$db" --json workspace create --name Bench | id)"
  ch="$("$bin" --db "$db" --json channel create --workspace "$ws" --name Web --auto-delivery off | id)"
  src="$("$bin" --db "$db" --json source create --channel "$ch" --name Load --no-secret | id)"
  LEADS_PATH="/api/webhooks/channels/$ch/sources/$src/leads"
}

# Sets LISTENER_FLAGS to the `serve` flags that turn off build $1's console and portal
# listeners, where the build has them (older builds have neither).
listener_flags() {
  LISTENER_FLAGS=()
  "$1" serve --help | grep -q -- --console-listen && LISTENER_FLAGS=(--console-listen off)
  "$1" serve --help | grep -q -- --portal-listen && LISTENER_FLAGS+=(--portal-listen off)
  return 0
}

# Starts build $1's `serve` on file $2 and a free port, with flags every build has (stdout
# and log in $WORK/serve.out, .log); waits for its health answer; sets SERVER_PID and URL.
start_build() {
  local bin="$1" db="$2" port
  listener_flags "$bin"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  RUST_LOG="${SERVER_LOG:-warn}" "$bin" --db "$db" serve --listen "127.0.0.1:$port" --rate-limit 0 \
    "${LISTENER_FLAGS[@]}" >"$WORK/serve.out" 2>"$WORK/serve.log" &
  SERVER_PID=$!
  URL="http://127.0.0.1:$port"
  for _ in $(seq 200); do curl -fs "$URL/api/health" >/dev/null && break; sleep 0.05; done
}

# Stops the server (it checkpoints the WAL on the way out).
stop_server() {
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
}

# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# CPU ticks (user + system) of process $1's threads named $2 (`db-writer`, the writer).
thread_cpu_ticks() {
  local task ticks=0
  for task in /proc/"$1"/task/*; do
    [ "$(cat "$task/comm" 2>/dev/null)" = "$2" ] || continue
    ticks=$((ticks + $(sed 's/.*) //' "$task/stat" | awk '{ print $12 + $13 }')))
  done
  echo "$ticks"
}

# The id of the first thread of process $1 named $2.
thread_id() {
  local task
  for task in /proc/"$1"/task/*; do
    if [ "$(cat "$task/comm" 2>/dev/null)" = "$2" ]; then
      basename "$task"
      return
    fi
  done
}

# Bytes the threads of process $1 named $2 have passed to write(2) and pwrite(2) so far
# (their `wchar`): for the writer, the WAL frames its commits append.
thread_write_bytes() {
  local task bytes=0
  for task in /proc/"$1"/task/*; do
    [ "$(cat "$task/comm" 2>/dev/null)" = "$2" ] || continue
    bytes=$((bytes + $(awk '$1 == "wchar:" { print $2 }' "$task/io")))
  done
  echo "$bytes"
}
