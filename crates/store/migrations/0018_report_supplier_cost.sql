-- leadrelay schema, migration 18: the report's supplier cost is what the suppliers are owed
-- (issue 14), as the ledger has it.
--
-- Until now a transaction the buyer rejected or cancelled counted no supplier cost, on the
-- assumption that the supplier's confirmed cancellation would take the cost back. A
-- pending or disputed cancellation takes nothing back: the supplier's ledger still holds
-- the cost, and the report's margin was too high by it. Now the cost counts on the
-- transaction that bought the lead (the first of its request that carries one; one that
-- takes the cost over from a returned one buys nothing new, as `delivery::deliver` posts it
-- once), whatever its state, until a confirmed cancellation reverses it (which sets every
-- transaction's cost of the lead to 0). Existing files: the transaction rows' supplier
-- cost counted again under that rule.

UPDATE report_buckets SET supplier_cost_cents = 0 WHERE buyer_id <> '';

UPDATE report_buckets AS k SET supplier_cost_cents = c.cost
FROM (SELECT t.workspace_id, (t.created_at / 900000) * 900000 AS bucket, l.source_id,
             t.buyer_id, t.product_id,
             sum(CASE WHEN EXISTS (SELECT 1 FROM transactions e
                                   WHERE e.lead_request_id = t.lead_request_id
                                     AND e.supplier_cost_cents > 0
                                     AND (e.created_at, e.rowid) < (t.created_at, t.rowid))
                      THEN 0 ELSE t.supplier_cost_cents END) AS cost
      FROM transactions t JOIN leads l ON l.id = t.lead_id
      GROUP BY 1, 2, 3, 4, 5) AS c
WHERE k.workspace_id = c.workspace_id AND k.bucket = c.bucket AND k.source_id = c.source_id
  AND k.buyer_id = c.buyer_id AND k.product_id = c.product_id;
