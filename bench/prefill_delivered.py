#!/usr/bin/env python3
"""Fills a leadrelay file with COUNT delivered leads in one SQL transaction (bench/autodelivery.sh).

    bench/prefill_delivered.py FILE COUNT

Copies the newest lead that holds a transaction, with everything that hangs off it (its
requests and their decisions, transactions, history, outbox events and attempts, ledger
rows, stored features), COUNT times by INSERT ... SELECT over a counter: every id and
every unique key (external id, email, phone) gets the suffix `-pN` (an id stored as 16
bytes, migration 20, gets N in its last four bytes instead), so each copy is a lead
of its own for the duplicate rule and the indexes, and the copies' times are spread over
the days 400 to 40 before now, so none falls in the current day or month of a cap. Meant
for a file the server is not running on; a benchmark's history, not real data (the
console's counters are not moved).
"""

import sqlite3
import sys
import time

# Columns that name a row of the copied lead (suffixed per copy).
KEYS = {
    "id", "lead_id", "lead_request_id", "transaction_id", "event_id", "external_id",
    "email", "email_key", "phone", "phone_key", "partner_external_id",
}
# Integer times in milliseconds (moved to the copy's moment).
TIMES = {
    "created_at", "updated_at", "at", "next_attempt_at", "delivered_at", "started_at",
    "resolved_at", "lease_until",
}
# Each copied table with the condition that picks the template's rows.
TABLES = [
    ("leads", "id = :lead"),
    ("lead_requests", "lead_id = :lead"),
    ("transactions", "lead_id = :lead"),
    ("transaction_history",
     "transaction_id IN (SELECT id FROM transactions WHERE lead_id = :lead)"),
    ("outbox_events", "transaction_id IN (SELECT id FROM transactions WHERE lead_id = :lead)"),
    ("outbox_attempts", "event_id IN (SELECT e.id FROM outbox_events e JOIN transactions t "
                        "ON t.id = e.transaction_id WHERE t.lead_id = :lead)"),
    ("ledger_entries",
     "transaction_id IN (SELECT id FROM transactions WHERE lead_id = :lead)"),
    ("evaluation_features",
     "lead_request_id IN (SELECT id FROM lead_requests WHERE lead_id = :lead)"),
]


def copy_key(stored, i):
    """Copy i's id stored as 16 bytes: the first 12 kept, i in the last 4 (unique per copy,
    the same for every column that names the row, and still a ULID)."""
    return bytes(stored[:12]) + i.to_bytes(4, "big")


def main():
    path, count = sys.argv[1], int(sys.argv[2])
    db = sqlite3.connect(path, isolation_level=None)
    db.create_function("copy_key", 2, copy_key, deterministic=True)
    # A bulk load: a rollback journal (only the few pages that existed are journaled, where
    # the WAL would hold every new page once more) and a page cache that holds the indexes
    # being filled; the file goes back to WAL, as the server keeps it, at the end.
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("PRAGMA cache_size=-1000000")
    row = db.execute(
        "SELECT l.id, l.created_at FROM leads l JOIN transactions t ON t.lead_id = l.id "
        "ORDER BY l.created_at DESC LIMIT 1").fetchone()
    if row is None:
        sys.exit("no delivered lead to copy")
    lead, born = row
    day = 86_400_000
    now = int(time.time() * 1000)
    first, span = now - 400 * day, 360 * day
    started = time.time()
    db.execute("BEGIN")
    for table, where in TABLES:
        columns = db.execute(f"PRAGMA table_info({table})").fetchall()
        names, exprs = [], []
        for _, name, kind, _, _, pk in columns:
            if pk and kind.upper() == "INTEGER":
                continue  # a rowid: the copy gets its own
            names.append(name)
            if name in KEYS:
                exprs.append(f"CASE WHEN {name} IS NULL THEN NULL "
                             f"WHEN typeof({name}) = 'blob' THEN copy_key({name}, n.i) "
                             f"ELSE {name} || '-p' || n.i END")
            elif name in TIMES and kind.upper() == "INTEGER":
                exprs.append(f"{name} - :born + :first + n.i * :span / :count")
            else:
                exprs.append(name)
        db.execute(
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count) "
            f"INSERT INTO {table} ({', '.join(names)}) "
            f"SELECT {', '.join(exprs)} FROM {table}, n WHERE {where}",
            {"lead": lead, "born": born, "first": first, "span": span, "count": count})
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode=WAL")
    delivered = db.execute("SELECT count(*) FROM transactions").fetchone()[0]
    print(f"prefilled {count} copies of lead {lead} in {time.time() - started:.0f} s: "
          f"{delivered} transactions in the file", flush=True)


if __name__ == "__main__":
    main()
