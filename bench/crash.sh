#!/usr/bin/env bash
# Crash test, long version: the harness of tests/crash.rs (clients sending single leads and
# batches, automated and CLI delivery to a local receiver, the server SIGKILLed at random
# moments and restarted) for many cycles on a release build. Prints the seed and one line
# of figures: leads acknowledged, leads found, duplicates, transactions, events delivered.
#
#   bench/crash.sh                                # 50 cycles, 8 clients
#   CYCLES=200 CLIENTS=16 bench/crash.sh
#   SEED=1795287848221466937 bench/crash.sh       # repeat a mix
#
# It exits non-zero when any guarantee is broken (a lost or doubled lead, a refused lead
# stored, an event never delivered, `leadrelay check` failing after a crash).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export LEADRELAY_CRASH_CYCLES="${CYCLES:-50}"
export LEADRELAY_CRASH_CLIENTS="${CLIENTS:-8}"
if [ -n "${SEED:-}" ]; then export LEADRELAY_CRASH_SEED="$SEED"; fi

cd "$ROOT"
echo "leadrelay crash test: $(nproc) cores, $(uname -sr), cycles=$LEADRELAY_CRASH_CYCLES clients=$LEADRELAY_CRASH_CLIENTS (release build)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if cargo test --release --quiet --test tests crash:: -- --nocapture --test-threads=1 >"$log" 2>&1; then
  grep -E '^crash test' "$log"
  echo "verdict: every guarantee held"
else
  cat "$log" >&2
  echo "verdict: FAILED" >&2
  exit 1
fi
