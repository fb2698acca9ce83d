#!/usr/bin/env bash
# Console benchmark: every page of the operator console over HTTP, on a generated file of a
# million leads (see bench/console_bench.rs for the data). The file is made in a temporary
# directory and removed afterwards (about 1.5 GB); KEEP=PATH keeps it (and reuses it when
# it exists) for later runs.
#
#   bench/console.sh                          # 1,000,000 leads over 120 days, 20 runs a page
#   LEADS=200000 RUNS=10 bench/console.sh
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
  DB="$WORK/console.db"
fi
echo "leadrelay console benchmark: $(nproc) cores, $(uname -sr)"
"$ROOT/target/release/examples/console_bench" --bin "$ROOT/target/release/leadrelay" \
  --db "$DB" --leads "$LEADS" --days "$DAYS" --runs "$RUNS"
