#!/usr/bin/env bash
# Portal benchmark: every page of the buyer and supplier portal over HTTP, on the console
# benchmark's generated file of a million leads (bench/console_bench.rs, run with
# --portal 1): one supplier owning every source, the buyer of a recent sale. The file is made
# in a temporary directory and removed afterwards (about 1.5 GB); KEEP=PATH keeps it (and
# reuses it when it exists) for later runs.
#
#   bench/portal.sh                           # 1,000,000 leads over 120 days, 20 runs a page
#   LEADS=200000 RUNS=10 bench/portal.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LEADS="${LEADS:-1000000}"
DAYS="${DAYS:-120}"
RUNS="${RUNS:-20}"

(cd "$ROOT" && cargo build --release --quiet --bin leadrelay --example console_bench)
if [ -n "${KEEP:-}" ]; then
  DB="$KEEP"
else
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  DB="$WORK/portal.db"
fi
echo "leadrelay portal benchmark: $(nproc) cores, $(uname -sr)"
"$ROOT/target/release/examples/console_bench" --bin "$ROOT/target/release/leadrelay" \
  --db "$DB" --leads "$LEADS" --days "$DAYS" --runs "$RUNS" --portal 1
