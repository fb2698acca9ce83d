#!/usr/bin/env bash
# Lifecycle benchmark: buyer calls per second and latency over HTTP against the real service
# on a fresh database file (synchronous=FULL). See bench/lifecycle_bench.rs for what runs.
#
#   bench/lifecycle.sh                        # 5000 transactions, 8 client threads
#   LEADS=20000 CLIENTS=16 bench/lifecycle.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LEADS="${LEADS:-5000}"
CLIENTS="${CLIENTS:-8}"
export RUST_LOG="${RUST_LOG:-warn}"
SECRET="bench-buyer-secret-0123456789"

(cd "$ROOT" && cargo build --release --quiet --bin leadrelay --example lifecycle_bench)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
DB="$WORK/bench.db"
cli() { "$ROOT/target/release/leadrelay" --db "$DB" --json "$@" >/dev/null; }
cli init
cli workspace create --name Bench --id ws
cli channel create --workspace ws --name Web --id web --auto-delivery off
cli product create --workspace ws --slug solar --name Solar --id solar
cli source create --channel web --name Src --id src --no-secret --dedupe-fields none
# The webhook URL is replaced by the benchmark with the service's own address.
cli buyer create --workspace ws --name B --id b --webhook-url http://127.0.0.1:9/ \
  --secret "$SECRET"
cli buyer subscribe b --product solar --price 25

echo "leadrelay lifecycle benchmark: $(nproc) cores, $(uname -sr)"
"$ROOT/target/release/examples/lifecycle_bench" \
  --db "$DB" --secret "$SECRET" --leads "$LEADS" --clients "$CLIENTS"
