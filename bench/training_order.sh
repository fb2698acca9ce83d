#!/usr/bin/env bash
# The evaluator's training read (crates/core/src/training/dataset.rs, IN_TIME_ORDER) with and without
# migration 13's index `transactions_workspace_created`: its query plan and the time
# sqlite3 takes to read every row in order, alternating, on one file of synthetic rows.
#
#   bench/training_order.sh                  # 500,000 transactions, 3 runs each
#   TRANSACTIONS=1000000 RUNS=5 bench/training_order.sh
#   LEADRELAY_BIN=target/release/leadrelay bench/training_order.sh
#
# The rows are written with sqlite3 straight into a file `leadrelay init` made (three
# transactions per request, one request in three with stored features of 300 bytes, one
# workspace in ten other), not through the interface: this measures the read's plan, not
# how the rows came to be (bench/evaluator.sh times the whole command on realistic data).
# The "before" file is the same file with the index dropped. Needs sqlite3 (Debian).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${LEADRELAY_BIN:-$ROOT/target/debug/leadrelay}"
TRANSACTIONS="${TRANSACTIONS:-500000}"
RUNS="${RUNS:-3}"
command -v sqlite3 >/dev/null || { echo "needs sqlite3" >&2; exit 1; }
[ -x "$BIN" ] || { echo "no binary at $BIN (cargo build, or LEADRELAY_BIN)" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$BIN" --db "$WORK/after.db" init >/dev/null
sqlite3 "$WORK/after.db" <<SQL
PRAGMA foreign_keys = OFF;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $TRANSACTIONS - 1)
INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id, product_id, workspace_id,
    delivery_mode, buyer_price_cents, margin_cents, status, created_at, updated_at)
SELECT printf('tx_%09d', i), printf('req_%09d', i / 3), printf('lead_%09d', i / 3),
    'buyer_' || (i % 3), 'prod_' || (i % 2), CASE WHEN i % 10 = 0 THEN 'other' ELSE 'ws' END,
    'multi', 1000, 200,
    CASE i % 4 WHEN 0 THEN 'delivered' WHEN 1 THEN 'acknowledged' WHEN 2 THEN 'rejected'
        ELSE 'paid' END,
    1700000000000 + (i / 3) * 1000, 1700000000000 + (i / 3) * 1000
FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 3 FROM n WHERE i < $TRANSACTIONS / 3 - 3)
INSERT INTO evaluation_features
SELECT printf('req_%09d', i), 'container', printf('{"v":1,"f":"%0290d"}', i) FROM n;
SQL
cp "$WORK/after.db" "$WORK/before.db"
sqlite3 "$WORK/before.db" "DROP INDEX transactions_workspace_created"

READ="SELECT t.status, t.created_at, t.id, f.container_id, f.features
     FROM transactions t
     LEFT JOIN evaluation_features f ON f.lead_request_id = t.lead_request_id
     WHERE t.workspace_id = 'ws' AND t.created_at >= 0 AND (NULL IS NULL OR t.product_id = NULL)
     ORDER BY t.created_at"
for file in before after; do
    echo "$file: plan"
    sqlite3 "$WORK/$file.db" "EXPLAIN QUERY PLAN $READ" | sed 's/^/  /'
done
for run in $(seq "$RUNS"); do
    for file in before after; do
        /usr/bin/time -f "$file run $run: %e s wall, %U + %S s cpu, %M KiB peak" \
            sqlite3 "$WORK/$file.db" "$READ" >/dev/null
    done
done
