#!/usr/bin/env bash
# Auto-delivery against plain ingest (bench/autodelivery.sh) for this checkout and a baseline
# build, alternating round by round on fresh files, so that the machine's speed, which drifts
# by a quarter within minutes on shared hosts, moves both builds alike. Prints every round,
# then per build the medians of plain ingest's and auto-delivery's req/s, auto-delivery's
# share of plain ingest and the writer thread's CPU per auto-delivered lead, which bounds it.
#
#   bench/autodelivery_ab.sh af07cb6               # a commit: built once in target/reference/
#   ROUNDS=5 bench/autodelivery_ab.sh /path/to/leadrelay
#
# Settings (environment): ROUNDS (3), LEADRELAY_BIN (this checkout's binary instead of
# building it), and bench/autodelivery.sh's DURATION, WARMUP and CONNECTIONS.
set -euo pipefail

[ $# -eq 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
ROUNDS="${ROUNDS:-3}"

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" autodelivery_ab wrk
NEW_BIN="$BIN"
NEW_NAME="$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src crates Cargo.toml Cargo.lock || echo +changes)"
BASE_BIN="$(reference_bin "$1")"
BASE_NAME="$(basename "$BASE_BIN")"
BASE_NAME="${BASE_NAME#leadrelay-}"
(cd "$ROOT" && cargo build --release --quiet --example slow_receiver)
export RECEIVER_BIN="$ROOT/target/release/examples/slow_receiver"

# The figure named $2 of the load whose line starts with $1 in bench/autodelivery.sh's output.
figure() {
  grep "^  $1" | sed -n "s/.* $2=\([0-9.]*\).*/\1/p" | head -1
}

echo "auto-delivery, $NEW_NAME against $BASE_NAME, alternating, $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
  for which in base new; do
    if [ "$which" = base ]; then bin="$BASE_BIN"; else bin="$NEW_BIN"; fi
    out="$(LEADRELAY_BIN="$bin" ROUNDS=1 "$BENCH_DIR/autodelivery.sh")"
    plain="$(echo "$out" | figure "plain ingest" requests_per_s)"
    auto="$(echo "$out" | figure "ingest+auto" requests_per_s)"
    writer="$(echo "$out" | figure "ingest+auto" writer_cpu_us_per_lead)"
    share="$(awk -v a="$auto" -v p="$plain" 'BEGIN { printf "%.2f", a / p }')"
    echo "round $round: $which plain=$plain auto=$auto share=$share writer_us=$writer" |
      tee -a "$WORK/rounds"
  done
done

# The median of the figure named $2 over build $1's rounds.
median() {
  grep " $1 " "$WORK/rounds" | sed -n "s/.* $2=\([0-9.]*\).*/\1/p" | sort -n |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for which in new base; do
  if [ "$which" = base ]; then name="$BASE_NAME"; else name="$NEW_NAME"; fi
  printf '%12s (%s): plain %s req/s, auto-delivery %s req/s, share %s, writer %s µs per auto-delivered lead (medians)\n' \
    "$name" "$which" "$(median "$which" plain)" "$(median "$which" auto)" \
    "$(median "$which" share)" "$(median "$which" writer_us)"
done
