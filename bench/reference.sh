#!/usr/bin/env bash
# Plain ingest of this checkout against a fixed reference build, alternating, with the SQLite
# ceiling of the same disk measured in the same run, so that a change that slows plain ingest
# shows even when every ratio to the same build looks fine.
#
#   bench/reference.sh b9b882e                  # a commit: built in target/reference/
#   bench/reference.sh /path/to/leadrelay       # or a binary
#   RUNS=5 DURATION=8s bench/reference.sh b9b882e
#
# Each round runs, on a fresh file each, single leads (64 connections) and batches of 100
# (16 connections) against both builds, the two in alternating order (wrk, DURATION each),
# then the ceiling (bench/ceiling.rs: leads written straight into SQLite at 16 and at 100 per
# commit). It prints every run, then per build the median single-lead req/s with its p99, the
# median batch leads/s with its p99, the server's CPU time (user + system) per lead with its
# writer's and its checkpointer's share (a build that checkpoints inside its writer has none
# apart) and the whole machine's (the load generator, the kernel's writeback threads), their
# ratios to the ceilings and to the reference, with the commit of each build. The CPU time
# per lead is the figure to compare when something else shares the cores.
#
# Settings (environment): RUNS (3), DURATION (8s), SINGLE_CONNECTIONS (64),
# BATCH_CONNECTIONS (16), WRK_THREADS (2), LEADRELAY_BIN (this checkout's binary instead of
# building it), KEEP=1 (keep the work directory), KEYS=random (random emails in the load and
# the ceiling, as real traffic has, instead of sequential ones: a build whose email index
# orders by the text gains from sequential ones what no production load gives it).
set -euo pipefail

[ $# -eq 1 ] || { sed -n '2,22p' "$0" >&2; exit 2; }
REFERENCE="$1"
RUNS="${RUNS:-3}"
DURATION="${DURATION:-8s}"
SINGLE_CONNECTIONS="${SINGLE_CONNECTIONS:-64}"
BATCH_CONNECTIONS="${BATCH_CONNECTIONS:-16}"
WRK_THREADS="${WRK_THREADS:-2}"
KEYS="${KEYS:-sequential}"

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" reference wrk
NEW_BIN="$BIN"
NEW_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src crates Cargo.toml Cargo.lock || echo +changes)"

REF_BIN="$(reference_bin "$REFERENCE")"
if [ -x "$REFERENCE" ] && [ ! -d "$REFERENCE" ]; then
  REF_COMMIT="$(basename "$REFERENCE")"
else
  REF_COMMIT="$(git -C "$ROOT" rev-parse --short "$REFERENCE^{commit}")"
fi
(cd "$ROOT" && cargo build --release --quiet --example ceiling)
CEILING="$ROOT/target/release/examples/ceiling"

# The machine's busy CPU ticks so far (all cores, every process and the kernel's threads:
# what is neither idle nor waiting for the disk), from /proc/stat.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# Runs one load of build $1 (new|ref) with BENCH_BATCH=$2 on $3 connections; prints
# "build batch rate p99 cpu writer checkpointer machine" (rate: leads/s; the others µs of
# CPU per lead: the server's, its writer thread's, its checkpointer thread's, and the whole
# machine's with the load generator and the kernel's writeback threads).
run_one() {
  local which="$1" batch="$2" connections="$3" bin out
  bin="$NEW_BIN"; [ "$which" = ref ] && bin="$REF_BIN"
  plain_setup "$bin" "$WORK/run.db"
  # The previous load's and the ceiling's files leave dirty pages (and, with deleted files,
  # discards) that the kernel writes back during the next load, whichever build it is:
  # every load starts on a disk that has written them.
  sync
  start_build "$bin" "$WORK/run.db"
  out="$WORK/wrk.txt"
  local ticks_before ticks_after writer_before writer_after ckpt_before ckpt_after machine_before machine_after
  ticks_before="$(cpu_ticks "$SERVER_PID")"
  writer_before="$(thread_cpu_ticks "$SERVER_PID" db-writer)"
  ckpt_before="$(thread_cpu_ticks "$SERVER_PID" db-checkpoint)"
  machine_before="$(machine_ticks)"
  BENCH_BATCH="$batch" BENCH_KEYS="$KEYS" wrk -t "$WRK_THREADS" -c "$connections" -d "$DURATION" --latency \
    -s "$BENCH_DIR/plain.lua" "$URL$LEADS_PATH" >"$out"
  machine_after="$(machine_ticks)"
  ticks_after="$(cpu_ticks "$SERVER_PID")"
  writer_after="$(thread_cpu_ticks "$SERVER_PID" db-writer)"
  ckpt_after="$(thread_cpu_ticks "$SERVER_PID" db-checkpoint)"
  stop_server
  awk -v w="$which" -v b="$batch" -v hz="$(getconf CLK_TCK)" \
    -v ticks=$((ticks_after - ticks_before)) -v writer=$((writer_after - writer_before)) \
    -v ckpt=$((ckpt_after - ckpt_before)) -v machine=$((machine_after - machine_before)) \
    '/Requests\/sec/ {r = $2} $1 == "99%" {p = $2} /requests in/ {n = $1}
    END {us = 1e6 / hz / (n * b)
         printf "%s %s %.0f %s %.1f %.1f %.1f %.1f\n", w, b, r * b, p, ticks * us, writer * us,
           ckpt * us, machine * us}' "$out"
}

results="$WORK/results.txt"
: >"$results"
echo "plain ingest: this checkout $NEW_COMMIT against $REF_COMMIT; $RUNS rounds of $DURATION; $KEYS emails; $(nproc) cores, $(uname -sr)"
for round in $(seq "$RUNS"); do
  order="new ref"; [ $((round % 2)) -eq 0 ] && order="ref new"
  for which in $order; do
    line="$(run_one "$which" 1 "$SINGLE_CONNECTIONS")"; echo "round $round: $line"; echo "$line" >>"$results"
    line="$(run_one "$which" 100 "$BATCH_CONNECTIONS")"; echo "round $round: $line"; echo "$line" >>"$results"
  done
  "$CEILING" "$WORK" "$KEYS" | tee -a "$WORK/ceiling.txt" | sed "s/^/round $round: /"
done

python3 - "$results" "$WORK/ceiling.txt" "$NEW_COMMIT" "$REF_COMMIT" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
ceilings = {}
for line in open(sys.argv[2]):
    per_commit = line.split("per_commit=")[1].split(":")[0]
    ceilings.setdefault(per_commit, []).append(float(line.split()[-2]))
c16, c100 = statistics.median(ceilings["16"]), statistics.median(ceilings["100"])
print(f"ceiling (median): {c16:.0f} leads/s at 16 per commit, {c100:.0f} at 100 per commit")
median = {}
for which, name in (("new", sys.argv[3]), ("ref", sys.argv[4])):
    for batch, ceiling in (("1", c16), ("100", c100)):
        mine = [r for r in runs if r[0] == which and r[1] == batch]
        rate = statistics.median(float(r[2]) for r in mine)
        median[which, batch] = rate
        p99 = ", ".join(r[3] for r in mine)
        cpu, writer, checkpointer, machine = (
            statistics.median(float(r[i]) for r in mine) for i in (4, 5, 6, 7))
        median[which, batch, "cpu"] = cpu
        what = "single-lead" if batch == "1" else "batch-100"
        print(f"{name:>16} {what:>11}: {rate:8.0f} leads/s (median), p99 {p99}; "
              f"{cpu:.1f} µs CPU per lead (writer {writer:.1f}, checkpointer {checkpointer:.1f}; "
              f"the machine {machine:.1f}); ratio to the ceiling {rate / ceiling:.2f}")
for batch in ("1", "100"):
    what = "single-lead" if batch == "1" else "batch-100"
    print(f"{what}: {sys.argv[3]} / {sys.argv[4]} = {median['new', batch] / median['ref', batch]:.2f}"
          f" (CPU per lead {median['new', batch, 'cpu'] / median['ref', batch, 'cpu']:.2f})")
PY
