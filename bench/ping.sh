#!/usr/bin/env bash
# Ping/post benchmark (DESIGN.md section 14, issue 17): a release `leadrelay serve` on a
# fresh database, configured with the CLI as an operator would, measured by
# bench/ping_bench.rs in open loops, each scenario after its baselines in the same round
# (plain ingest of the same lead at the same rate, and for fixed and pairs ingest with
# auto-delivery):
#
#   fixed  pings answered from 20 fixed-price subscriptions (prices, daily and monthly
#          caps, country/postal-code/roof filters) at RATE pings/s (target p99 < 5 ms);
#   bid    pings to 5 bid-priced buyers whose real local endpoints answer in 50 ms
#          (bench/slow_receiver.rs --bid), BID_TIMEOUT ms timeout, at BID_RATE pings/s
#          (target p99 < BID_TIMEOUT + 10 ms);
#   autobid  ordinary leads of the bid buyers' product with triggerAutoDelivery (no ping),
#          bid on before their writer job, at BID_RATE leads/s (target p99 < BID_TIMEOUT +
#          10 ms);
#   pairs  ping, then post with its pingId, at RATE pairs/s: the pair's latency, and from
#          the file: every reservation of a posted ping honoured (a transaction with the
#          reserved buyer at the reserved price), every acknowledged post stored, every
#          delivery sent to the buyers' endpoints (bench/slow_receiver.rs, answering at once).
#
# Each round starts from a fresh file and fresh processes; ROUNDS (2) rounds, as the
# machine is shared and the figures are noisy.
#
#   bench/ping.sh
#   ROUNDS=1 PHASES=fixed RATE=500 SECONDS_PER_PHASE=5 bench/ping.sh
#
# Settings (environment): ROUNDS (2), PHASES (fixed,bid,autobid,pairs), RATE (1000), BID_RATE
# (200), BID_TIMEOUT (100, ms), BID_DELAY (50, ms), SECONDS_PER_PHASE (10), SERVER_LOG
# (warn), LEADRELAY_BIN (another leadrelay binary to measure; the load generator and the
# receivers are always this checkout's), KEEP=1 (keep the work directory).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh" ping
ROUNDS="${ROUNDS:-2}"
PHASES="${PHASES:-fixed,bid,autobid,pairs}"
RATE="${RATE:-1000}"
BID_RATE="${BID_RATE:-200}"
BID_TIMEOUT="${BID_TIMEOUT:-100}"
BID_DELAY="${BID_DELAY:-50}"
SECONDS_PER_PHASE="${SECONDS_PER_PHASE:-10}"

(cd "$ROOT" && cargo build --release --quiet --example ping_bench --example slow_receiver)
EXAMPLES="$ROOT/target/release/examples"

RECEIVERS=()
stop_receivers() {
  for pid in "${RECEIVERS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  RECEIVERS=()
}
trap 'stop_receivers; cleanup' EXIT
ulimit -n 65536 2>/dev/null || true

# Waits until FILE has LINES lines matching PATTERN (a started receiver printing its
# addresses).
wait_for() {
  local file="$1" pattern="$2" lines="$3"
  for _ in $(seq 1 200); do
    [ "$(grep -c "$pattern" "$file" 2>/dev/null || true)" -ge "$lines" ] && return 0
    sleep 0.05
  done
  echo "no '$pattern' in $file" >&2
  cat "$file" "$file.err" >&2 2>/dev/null || true
  exit 1
}

REGIONS=(0 1 2 3 4 5 6 7 8 9)

# The market, as an operator sets it up: bench_setup's channel `web` (automated delivery,
# exclusive), source `bench` (the default duplicate rule; here with a supplier cost of 4)
# and product `solar`, and a product `heat`; 20 fixed-price buyers of solar, two per postal
# region (filter on the first digit of the postal code and the country; half also on the
# roof), the dearer one with a small daily cap so that the cheaper one takes over; 5
# bid-priced buyers of heat.
configure() {
  local hooks="$1" bidders="$2" lr=("$BIN")
  bench_setup
  "${lr[@]}" source update bench --supplier-cost 4 >/dev/null
  "${lr[@]}" product create --workspace ws --slug heat --name Heat --id heat \
    --field 'roof:required=tile|flat|metal' >/dev/null
  local n url region
  for n in $(seq 0 19); do
    url="$(sed -n "s/^buyer $n //p" "$hooks")"
    region="${REGIONS[$((n % 10))]}"
    "${lr[@]}" buyer create --workspace ws --name "Solar $n" --id "s$n" --webhook-url "$url" >/dev/null
    if [ "$n" -lt 10 ]; then
      "${lr[@]}" buyer subscribe "s$n" --product solar --price "$((30 + n))" \
        --daily-cap 300 --monthly-cap 9000 --filter country=DE \
        --filter "postalCode=$region*" --filter 'fieldValues.roof=tile|flat' >/dev/null
    else
      "${lr[@]}" buyer subscribe "s$n" --product solar --price "$((10 + n))" \
        --daily-cap 20000 --monthly-cap 400000 --filter country=DE \
        --filter "postalCode=$region*" --priority 1 >/dev/null
    fi
  done
  for n in $(seq 0 4); do
    url="$(sed -n "s/^buyer $((20 + n)) //p" "$hooks")"
    "${lr[@]}" buyer create --workspace ws --name "Heat $n" --id "h$n" --webhook-url "$url" >/dev/null
    "${lr[@]}" buyer subscribe "h$n" --product heat --pricing bid \
      --bid-url "$(sed -n "s/^buyer $n //p" "$bidders")" --bid-timeout "${BID_TIMEOUT}ms" \
      --min-price 10 --max-price 100 --daily-cap 100000 --filter country=DE >/dev/null
  done
}

echo "leadrelay ping/post benchmark: $(nproc) cores, $(uname -sr), rate=$RATE/s, bid rate=$BID_RATE/s, bid timeout=${BID_TIMEOUT}ms, bid answer after ${BID_DELAY}ms, ${SECONDS_PER_PHASE}s per step"
for round in $(seq 1 "$ROUNDS"); do
  rm -f "$LEADRELAY_DB" "$LEADRELAY_DB-wal" "$LEADRELAY_DB-shm"
  # The buyers' webhook endpoints (answer at once) and the bid endpoints (bid after
  # BID_DELAY ms: buyer N bids 30 + N).
  "$EXAMPLES/slow_receiver" --buyers 25 --delay 0 >"$WORK/hooks" 2>"$WORK/hooks.err" &
  RECEIVERS+=($!)
  "$EXAMPLES/slow_receiver" --buyers 5 --delay "$BID_DELAY" --bid 30 >"$WORK/bidders" 2>"$WORK/bidders.err" &
  RECEIVERS+=($!)
  wait_for "$WORK/hooks" '^buyer ' 25
  wait_for "$WORK/bidders" '^buyer ' 5
  configure "$WORK/hooks" "$WORK/bidders"
  start_server serve

  echo "round $round of $ROUNDS: uptime: $(uptime)"
  "$EXAMPLES/ping_bench" --url "$URL" --secret "$BENCH_SECRET" --db "$LEADRELAY_DB" \
    --phases "$PHASES" --rate "$RATE" --bid-rate "$BID_RATE" --bid-timeout "$BID_TIMEOUT" \
    --seconds "$SECONDS_PER_PHASE"
  echo "  after round $round: uptime: $(uptime)"
  stop_server
  stop_receivers
done
