-- leadrelay schema, migration 2: the money ledger (DESIGN.md section 11).
--
-- Every money move is one append-only row: a buyer's `fund`, `charge` (a delivery),
-- `price_change`, `refund` (rejection, cancellation) and `adjustment` (the operator's
-- correction), a supplier's `supplier_cost` (a delivery that buys the lead) and
-- `supplier_reversal` (a confirmed clawback). `amount_cents` is signed and says what the row
-- does to its party's account: for a buyer the prepaid balance (a charge is negative, a
-- refund positive), for a supplier what is owed to it (a cost is positive, its reversal
-- negative). A buyer's balance is the sum of its rows; `buyers.balance_cents` is a cache of
-- that sum written in the same writer job as every row (`ledger::post`), and
-- `leadrelay check` compares the two.

CREATE TABLE ledger_entries (
    -- Rows are numbered in the order they were written.
    id             INTEGER PRIMARY KEY,
    at             INTEGER NOT NULL,
    workspace_id   TEXT NOT NULL REFERENCES workspaces(id),
    -- Exactly one party: a buyer or a supplier.
    buyer_id       TEXT REFERENCES buyers(id),
    supplier_id    TEXT REFERENCES suppliers(id),
    transaction_id TEXT REFERENCES transactions(id),
    -- OR, not IN: see the note on leads.quality_status in migration 1.
    kind           TEXT NOT NULL
                   CHECK (kind = 'fund' OR kind = 'charge' OR kind = 'price_change'
                          OR kind = 'refund' OR kind = 'supplier_cost'
                          OR kind = 'supplier_reversal' OR kind = 'adjustment'),
    amount_cents   INTEGER NOT NULL,
    reason         TEXT,
    -- Who moved the money: `operator`, `auto-delivery`, `buyer:<id>`, `supplier:<id>`,
    -- `migration`.
    actor          TEXT NOT NULL,
    CHECK ((buyer_id IS NULL) <> (supplier_id IS NULL))
);
CREATE INDEX ledger_buyer ON ledger_entries(buyer_id, at) WHERE buyer_id IS NOT NULL;
CREATE INDEX ledger_supplier ON ledger_entries(supplier_id, at) WHERE supplier_id IS NOT NULL;
CREATE INDEX ledger_transaction ON ledger_entries(transaction_id) WHERE transaction_id IS NOT NULL;
CREATE INDEX ledger_at ON ledger_entries(at);

-- Files written before the ledger: each buyer's balance becomes its opening row, an
-- `adjustment` by the actor `migration` (the balance was made of funds and charges that left
-- no rows; one row keeps the sum right without inventing their history).
INSERT INTO ledger_entries (at, workspace_id, buyer_id, kind, amount_cents, reason, actor)
SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER), workspace_id, id, 'adjustment',
       balance_cents, 'opening balance: the balance before the ledger', 'migration'
FROM buyers
WHERE balance_cents <> 0
ORDER BY created_at, id;

-- What the suppliers earned before the ledger: one `supplier_cost` row per lead request that
-- was bought, on the first transaction that carried the cost, at its time. A transaction that
-- took the cost over from a rejected or cancelled one bought nothing new; a confirmed
-- clawback already set the costs of its lead to 0, so a reversed lead has no row.
INSERT INTO ledger_entries (at, workspace_id, supplier_id, transaction_id, kind, amount_cents,
                            reason, actor)
SELECT t.created_at, t.workspace_id, s.supplier_id, t.id, 'supplier_cost', t.supplier_cost_cents,
       'supplier cost of a delivery before the ledger', 'migration'
FROM transactions t
JOIN leads l ON l.id = t.lead_id
JOIN sources s ON s.id = l.source_id
WHERE t.supplier_cost_cents > 0
  AND s.supplier_id IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM transactions e
      WHERE e.lead_request_id = t.lead_request_id AND e.supplier_cost_cents > 0
        AND (e.created_at < t.created_at OR (e.created_at = t.created_at AND e.id < t.id)))
ORDER BY t.created_at, t.id;

-- The margin is the buyer price less the supplier cost on every transaction.
UPDATE transactions SET margin_cents = buyer_price_cents - supplier_cost_cents
WHERE margin_cents <> buyer_price_cents - supplier_cost_cents;
