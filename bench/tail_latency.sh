#!/usr/bin/env bash
# Where plain single-lead ingest's p99 goes: the issue's load (single leads, 64 connections,
# sequential emails, no auto-delivery) against each build given, alternating, with what the
# server's storage did meanwhile, so that a change to checkpoints or syncs is judged by the
# latency clients see and by its cause together.
#
#   bench/tail_latency.sh target/release/leadrelay /tmp/leadrelay-variant
#   ROUNDS=5 bench/tail_latency.sh b9b882e target/release/leadrelay
#
# Each argument is a binary or a commit (a commit is built once into target/reference/, as
# bench/reference.sh does). Every run starts a fresh file. Per run it prints the build, req/s,
# wrk's p99, the WAL checkpoints of the checkpointer thread and of the writer (count and
# seconds, from /metrics), the WAL's restarts, the CPU seconds of the checkpointer thread; when
# perf can trace system calls here, the p50, p99 and max of the writer's commit syncs (fsync or
# fdatasync, whichever this SQLite calls) in ms; and the group commits' mean time and share
# over 1 ms (`leadrelay_db_commit_seconds`, where the build has it). Then per build the median
# req/s and p99.
#
# Settings (environment): ROUNDS (3), DURATION (8s), CONNECTIONS (64), KEEP=1.
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-8s}"
CONNECTIONS="${CONNECTIONS:-64}"

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" tail wrk
BINS=()
for build in "$@"; do BINS+=("$(reference_bin "$build")"); done

TRACE=0
if command -v perf >/dev/null && { [ -d /sys/kernel/tracing/events/syscalls/sys_enter_fsync ] ||
  [ -d /sys/kernel/debug/tracing/events/syscalls/sys_enter_fsync ]; }; then
  TRACE=1
fi

# One load of binary $1: prints "name rate p99 ckpt_n ckpt_s writer_n writer_s restarts cpu syncs".
run_one() {
  local bin="$1" before after tracer=""
  plain_setup "$bin" "$WORK/tail.db"
  sync
  start_build "$bin" "$WORK/tail.db"
  before="$(thread_cpu_ticks "$SERVER_PID" db-checkpoint)"
  if [ "$TRACE" = 1 ]; then
    perf record -q -e 'syscalls:sys_enter_f*sync' -e 'syscalls:sys_exit_f*sync' \
      -p "$SERVER_PID" -o "$WORK/syncs.data" -- sleep "${DURATION%s}" >/dev/null 2>&1 &
    tracer=$!
  fi
  BENCH_BATCH=1 BENCH_KEYS=sequential wrk -t 2 -c "$CONNECTIONS" -d "$DURATION" --latency \
    -s "$BENCH_DIR/plain.lua" "$URL$LEADS_PATH" >"$WORK/wrk.txt"
  after="$(thread_cpu_ticks "$SERVER_PID" db-checkpoint)"
  curl -fs "$URL/metrics" >"$WORK/metrics.txt"
  [ -z "$tracer" ] || wait "$tracer" 2>/dev/null || true
  stop_server
  local syncs="-"
  if [ "$TRACE" = 1 ]; then
    syncs="$(perf script -i "$WORK/syncs.data" -F comm,tid,time,event 2>/dev/null | python3 -c '
import sys
start, took = {}, []
for line in sys.stdin:
    comm, tid, at, event = line.split()[:4]
    if comm != "db-writer":
        continue
    at = float(at.rstrip(":"))
    if "enter" in event:
        start[tid] = at
    elif tid in start:
        took.append((at - start.pop(tid)) * 1000)
took.sort()
n = len(took)
print(f"{took[n // 2]:.2f}/{took[int(n * 0.99)]:.2f}/{took[-1]:.2f}" if n else "-")
')"
  fi
  python3 - "$WORK/wrk.txt" "$WORK/metrics.txt" "$(basename "$bin")" $((after - before)) \
    "$(getconf CLK_TCK)" "$syncs" <<'PY'
import re, sys
wrk, metrics, name, ticks, hz, syncs = sys.argv[1:]
text = open(wrk).read()
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p99 = re.search(r"\s99%\s+(\S+)", text).group(1)
m = open(metrics).read()
def metric(name):
    """A sample of /metrics by its name and labels; 0 for a build without it."""
    for line in m.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0
def commits():
    """The group commits' mean time in ms and the share over 1 ms, from the server's own
    histogram (`-` for a build without it)."""
    count = metric("leadrelay_db_commit_seconds_count")
    if not count:
        return "-"
    mean = metric("leadrelay_db_commit_seconds_sum") / count * 1000
    over = 1 - metric('leadrelay_db_commit_seconds_bucket{le="0.001"}') / count
    return f"{mean:.2f}/{over:.1%}"
checkpoints = "leadrelay_db_wal_checkpoints_total"
seconds = "leadrelay_db_wal_checkpoint_seconds_total"
print(name, f"{rate:.0f}", p99,
      "%.0f,%.2f" % (metric(checkpoints + '{by="checkpointer"}'), metric(seconds + '{by="checkpointer"}')),
      "%.0f,%.2f" % (metric(checkpoints + '{by="writer"}'), metric(seconds + '{by="writer"}')),
      "%.0f" % metric("leadrelay_db_wal_restarts_total"),
      "%.2f" % (int(ticks) / int(hz)), syncs, commits())
PY
}

echo "single leads, $CONNECTIONS connections, $DURATION, $ROUNDS rounds; $(nproc) cores, $(uname -sr)"
echo "build req/s p99 checkpointer(n,s) writer(n,s) restarts checkpointer-cpu-s writer-syncs-ms(p50/p99/max) commits(mean-ms/over-1-ms)"
results="$WORK/results.txt"
: >"$results"
for round in $(seq "$ROUNDS"); do
  order=("${BINS[@]}")
  # Alternate the order from round to round, so that no build always runs first.
  if [ $((round % 2)) -eq 0 ]; then
    order=()
    for ((i = ${#BINS[@]} - 1; i >= 0; i--)); do order+=("${BINS[$i]}"); done
  fi
  for bin in "${order[@]}"; do
    line="$(run_one "$bin")"
    echo "round $round: $line"
    echo "$line" >>"$results"
  done
done
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    fields = line.split()
    runs.setdefault(fields[0], []).append(fields)
def ms(text):
    """wrk's latency text (950.00us, 6.54ms, 1.08s) in ms."""
    for unit, scale in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)
for name, rows in runs.items():
    rate = statistics.median(float(r[1]) for r in rows)
    p99 = statistics.median(ms(r[2]) for r in rows)
    print(f"{name:>28}: {rate:8.0f} req/s (median), p99 {p99:.2f} ms (median; runs: {', '.join(r[2] for r in rows)})")
PY
