#!/usr/bin/env bash
# Fuzzing: runs each cargo-fuzz target (fuzz/fuzz_targets/) for a fixed time with libFuzzer
# on nightly Rust, starting from a seed corpus of valid bodies and mappings, and prints one
# line per target: executions, corpus size, and whether it found a crash.
#
#   bench/fuzz.sh                  # 120 s per target
#   FUZZ_SECONDS=600 bench/fuzz.sh # longer
#   TARGETS=mapping bench/fuzz.sh  # one target
#
# Needs the nightly toolchain (rustup toolchain install nightly) and cargo-fuzz; installs
# cargo-fuzz with cargo when it is missing. A crash leaves its input in
# fuzz/artifacts/<target>/ and makes this script exit 1; reproduce it with
# `cd fuzz && cargo +nightly fuzz run <target> artifacts/<target>/<file>`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ_SECONDS="${FUZZ_SECONDS:-120}"
TARGETS="${TARGETS:-ingest_body mapping}"
JOBS="${JOBS:-1}"

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "the nightly toolchain is needed: rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked >&2
fi

cd "$ROOT/fuzz"
seed() {
  local dir="corpus/$1"; shift
  mkdir -p "$dir"
  local n=0
  for body in "$@"; do
    n=$((n + 1))
    printf '%s' "$body" >"$dir/seed-$n.json"
  done
}

LEAD='{"externalId":"e-1","firstName":"Ann","lastName":"Lee","email":"ann@example.com","phone":"+49 30 1234567","postalCode":"10115","country":"DE","consentStatus":"granted","capture":{"capturedAt":"2026-01-01T00:00:00Z","metadata":{"page":"/x"}},"request":{"productSlug":"solar","routingReady":true,"fieldValues":{"roof":"tile"}},"utm":"x"}'
seed ingest_body \
  "$LEAD" \
  "{\"person\":$LEAD,\"externalId\":\"e-1\",\"interests\":[{\"productId\":\"p\",\"triggerAutoDelivery\":true}],\"triggerAutoDelivery\":false}" \
  "{\"leads\":[$LEAD,{\"firstName\":\"\",\"lastName\":null},7]}" \
  '{"firstName":"A","lastName":"B","capturedAt":"x","capture":{"capturedAt":"y"},"requests":[{"productSlug":"solar"},{"fieldValues":{"a":1}}]}'

DOC='{"items":"/contacts","fields":{"externalId":{"from":"/ref"},"firstName":{"from":"/fullName","split":" ","part":0},"lastName":{"from":"/fullName","split":" ","part":-1},"email":{"from":"/mail","transform":["trim","lowercase"]},"consentStatus":{"from":"/optIn","map":{"true":"granted","false":"denied"}},"street":{"template":"{/address/street} {/address/no}"},"productSlug":{"const":"solar"},"fieldValues.roof":{"from":"/roof","default":"unknown"}}}'
BODY='{"contacts":[{"ref":"SP-1","fullName":"Ann Lee","mail":" Ann@Example.com ","optIn":true,"address":{"street":"Main","no":"1"},"roof":"tile"}]}'
seed mapping \
  "[$DOC,$BODY]" \
  "$BODY" \
  '{"first":"Ann","last":"Lee,x,y,z","auto":"yes","/odd":{"~x":"y"},"0":[1,"p"]}'

status=0
echo "leadrelay fuzzing: $(nproc) cores, ${FUZZ_SECONDS}s per target, $(cargo +nightly --version)"
for target in $TARGETS; do
  log="$(mktemp)"
  if cargo +nightly fuzz run "$target" "corpus/$target" -- \
      -max_total_time="$FUZZ_SECONDS" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -jobs="$JOBS" -workers="$JOBS" -print_final_stats=1 >"$log" 2>&1; then
    verdict="no crash"
  else
    verdict="CRASH (see fuzz/artifacts/$target/)"
    status=1
    tail -40 "$log" >&2
  fi
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')"
  speed="$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')"
  corpus="$(find "corpus/$target" -type f | wc -l)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo '?')"
  echo "$target: ${FUZZ_SECONDS}s, $runs executions ($speed/s), coverage $cov edges, corpus $corpus inputs: $verdict"
  rm -f "$log"
done
exit $status
