#!/usr/bin/env bash
# Report and export benchmark (bench/report_bench.rs has the data and what is measured):
#   1. a 30-day report by day and by buyer with the real `leadrelay report` on a generated
#      file of 10,000,000 leads and 2,000,000 transactions over 180 days, against the same
#      figures recounted from the rows;
#   2. the peak RSS of `lead export` and `transaction export` of 100,000 leads (20,000
#      transactions), against the exports of their first day only.
# Each file is made in a temporary directory and removed afterwards; the big one needs
# about 6 GB free (`df -h` is printed first).
#
#   bench/report.sh                      # both
#   LEADS=1000000 TRANSACTIONS=200000 bench/report.sh
#   ONLY=export bench/report.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LEADS="${LEADS:-10000000}"
TRANSACTIONS="${TRANSACTIONS:-2000000}"
DAYS="${DAYS:-180}"
RUNS="${RUNS:-5}"
EXPORT_LEADS="${EXPORT_LEADS:-100000}"

(cd "$ROOT" && cargo build --release --quiet --bin leadrelay --example report_bench)
WORK="$(mktemp -d "${TMPDIR:-/tmp}/report-bench.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "leadrelay report benchmark: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)"
df -h "$WORK" | tail -1
BENCH="$ROOT/target/release/examples/report_bench"
BIN="$ROOT/target/release/leadrelay"
if [ "${ONLY:-report}" != export ]; then
  "$BENCH" --bin "$BIN" --db "$WORK/report.db" --mode report \
    --leads "$LEADS" --transactions "$TRANSACTIONS" --days "$DAYS" --runs "$RUNS"
  rm -f "$WORK"/report.db*
fi
if [ "${ONLY:-export}" != report ]; then
  "$BENCH" --bin "$BIN" --db "$WORK/export.db" --mode export \
    --leads "$EXPORT_LEADS" --transactions "$((EXPORT_LEADS / 5))" --days 30
fi
