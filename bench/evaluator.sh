#!/usr/bin/env bash
# Evaluator benchmark: `leadrelay evaluator train` on a file of realistic synthetic
# outcomes, and the comparison of feature groups (holdout AUC) written in docs/delivery.md.
#
#   bench/evaluator.sh                      # 400,000 leads to 3 buyers (multi mode): some
#                                           # 1.05 million labelled transactions; generated
#                                           # once, then training is timed
#   LEADS=100000 BUYERS=1 bench/evaluator.sh   # 100,000 leads, one buyer
#   COMPARE=1 bench/evaluator.sh            # also train on each feature-group selection
#   RUNS=5 bench/evaluator.sh               # more timed runs
#   BEFORE_BIN=/tmp/old/leadrelay bench/evaluator.sh   # also time another build (a change's
#                                           # before), alternating with this one
#
# The data file is made through the real interface only (bench/evaluator_data.rs: leads
# posted over HTTP to `leadrelay serve`, auto-delivered, answered by the buyer over HTTP;
# its header lists the assumptions of the simulated world) and kept in
# target/bench-evaluator/ (DATA_DIR), so later runs only train. Generating a million leads
# takes a while (tens of minutes on 2 shared cores) and some GB of disk.
#
# Training is timed as a whole command (open, read every labelled row with its stored
# features, fit, compare, print), three runs; the baseline in the same run is the same
# command restricted to the base features (no category columns), and the read alone is
# in the command's own info log line. Wall time on a shared machine mostly measures the
# queue for a core, so the CPU time the command used (user + system) is printed too.
#
# The comparison measured a postal-code prefix group too (docs/delivery.md, "Which features,
# measured"); it did not raise the AUC and was removed, so it is no longer a selection.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LEADS="${LEADS:-400000}"
BUYERS="${BUYERS:-3}"
CLIENTS="${CLIENTS:-4}"
SEED="${SEED:-20}"
RUNS="${RUNS:-3}"
COMPARE="${COMPARE:-0}"
BEFORE_BIN="${BEFORE_BIN:-}"
DATA_DIR="${DATA_DIR:-$ROOT/target/bench-evaluator}"
SECRET="bench-buyer-secret-0123456789"
export RUST_LOG=warn

(cd "$ROOT" && cargo build --release --quiet --bin leadrelay --example evaluator_data)
BIN="$ROOT/target/release/leadrelay"
mkdir -p "$DATA_DIR"
DB="$DATA_DIR/outcomes-$LEADS-buyers$BUYERS-seed$SEED.db"

SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

generate() {
  local db="$1.partial"
  rm -f "$db" "$db-wal" "$db-shm" "$db.lock"
  cli() { "$BIN" --db "$db" --json "$@" >/dev/null; }
  "$BIN" --db "$db" init >/dev/null
  cli workspace create --name Solar --id ws --timezone Europe/Berlin
  cli product create --workspace ws --slug solar --name Solar --id solar \
    --field 'homeowner:required=yes|no' --field 'timeframe=now|3months|12months|researching'
  local mode="--delivery-mode exclusive"
  [ "$BUYERS" -gt 1 ] && mode="--delivery-mode multi --max-buyers $BUYERS"
  # shellcheck disable=SC2086
  for channel in web partners social; do cli channel create --workspace ws --name "$channel" --id "$channel" $mode; done
  for source in landing:web calculator:web partner-a:partners partner-b:partners \
    affiliate-x:partners affiliate-y:partners fb-ads:social coreg:social; do
    cli source create --channel "${source#*:}" --name "${source%%:*}" --id "${source%%:*}" --no-secret
  done
  # A free port for the server, so the buyer's webhook URL can name it: the service's own
  # health path, which answers POST with 405, so each event is attempted once and the
  # outbox stays quiet while the buyer answers.
  local port
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  for k in $(seq 1 "$BUYERS"); do
    cli buyer create --workspace ws --name "Installer $k" --id "b$k" \
      --webhook-url "http://127.0.0.1:$port/api/health" --secret "$SECRET-$k"
    cli buyer subscribe "b$k" --product solar --price 30
  done
  "$BIN" --db "$db" serve --listen "127.0.0.1:$port" --rate-limit 0 >"$DATA_DIR/serve.out" 2>"$DATA_DIR/serve.log" &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    grep -q 'http://' "$DATA_DIR/serve.out" 2>/dev/null && break
    sleep 0.05
  done
  "$ROOT/target/release/examples/evaluator_data" --url "http://127.0.0.1:$port" \
    --secret "$SECRET" --leads "$LEADS" --buyers "$BUYERS" --clients "$CLIENTS" --seed "$SEED"
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  mv "$db" "$1"
  rm -f "$db-wal" "$db-shm" "$db.lock"
}

if [ ! -f "$DB" ]; then
  echo "generating $DB ($LEADS leads, $BUYERS buyers)"
  generate "$DB"
fi
echo "leadrelay evaluator benchmark: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1 /proc/loadavg), $(du -h "$DB" | cut -f1) file"

# One timed `evaluator train`: wall seconds, peak memory, and the JSON answer.
train() {
  local out="$DATA_DIR/train.json" err="$DATA_DIR/train.log"
  local started ended
  started="$(date +%s.%N)"
  RUST_LOG=info /usr/bin/time -f '%M %U %S' "${TRAIN_BIN:-$BIN}" --db "$DB" --json evaluator train --workspace ws \
    --since 3650d "$@" >"$out" 2>"$err"
  ended="$(date +%s.%N)"
  python3 - "$out" "$err" "$started" "$ended" "$*" <<'PY'
import json, os, sys
out, err, started, ended, flags = sys.argv[1:6]
r = json.load(open(out))
lines = open(err).read().strip().splitlines()
peak_kb, user, system = lines[-1].split()
peak_kb, cpu = int(peak_kb), float(user) + float(system)
read = next((l.split("training: ", 1)[1] for l in lines if "training: " in l), "")
print(f"{(os.environ.get('LABEL', '') + ' ' + (flags or 'all features')).strip():<34} {float(ended) - float(started):6.2f} s  cpu {cpu:5.2f} s  peak {peak_kb / 1024:5.0f} MiB  "
      f"rows {r['rows']:>7}  holdout {r['holdout']:>6}  AUC current {r['current']['auc']:.4f} trained {r['trained']['auc']:.4f}  "
      f"log loss {r['current']['logLoss']:.4f} -> {r['trained']['logLoss']:.4f}  ({read})")
PY
}

echo "timed runs (whole command):"
for _ in $(seq 1 "$RUNS"); do
  train
  train --features base
  if [ -n "$BEFORE_BIN" ]; then
    TRAIN_BIN="$BEFORE_BIN" LABEL=before train
    TRAIN_BIN="$BEFORE_BIN" LABEL=before train --features base
  fi
done

if [ "$COMPARE" = "1" ]; then
  echo "feature groups (holdout AUC of the trained weights):"
  for features in base base,duplicatesSeen base,source base,answer base,hourOfDay \
    base,duplicatesSeen,source,answer base,duplicatesSeen,source,answer,hourOfDay; do
    train --features "$features"
  done
fi
