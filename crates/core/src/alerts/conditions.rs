//! What holds now, rule by rule: one read of the stored figures per rule and workspace,
//! on a read connection. Each read is an index seek or a walk of a small table (buyers,
//! sources, the breaker, cap counters, the report's quarter hours of the last 7 days), so
//! an evaluation costs the same with a million leads in the file as with none.

use crate::db::PrepareKept;
use std::path::Path;

use rusqlite::{Connection, params};

use super::{Rule, RuleSetting};
use crate::caps::{self, Limits, Windows};

/// A rule's condition holding for one subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub workspace_id: String,
    pub rule: Rule,
    pub subject: String,
    pub detail: String,
    /// When it started, as far as the figures tell (else when it was seen).
    pub since: i64,
}

/// How far back `return_rate_high` looks.
const RETURN_WINDOW_MS: i64 = 7 * 86_400_000;

/// Every condition of `settings` that holds at `now`; `database` is the file whose file
/// system `disk_low` watches.
pub fn holding(
    conn: &Connection,
    settings: &[RuleSetting],
    database: &Path,
    now: i64,
) -> rusqlite::Result<Vec<Condition>> {
    let mut found = Vec::new();
    for setting in settings {
        let mut add = |subject: String, detail: String, since: i64| {
            found.push(Condition {
                workspace_id: setting.workspace_id.clone(),
                rule: setting.rule,
                subject,
                detail,
                since,
            });
        };
        let ws = setting.workspace_id.as_str();
        let for_ms = setting
            .for_ms
            .or(setting.rule.default_for_ms())
            .unwrap_or(0);
        let threshold = setting.threshold.or(setting.rule.default_threshold());
        match setting.rule {
            Rule::BuyerEndpointDown => {
                let mut stmt = conn.prepare_kept(
                    "SELECT b.id, h.unhealthy_since, h.last_error FROM buyers b
                     JOIN buyer_health h ON h.buyer_id = b.id
                     WHERE b.workspace_id = ?1 AND b.archived_at IS NULL
                       AND h.state = 'unhealthy' AND h.unhealthy_since <= ?2",
                )?;
                let rows = stmt.query_map(params![ws, now - for_ms], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, Option<String>>(2)?,
                    ))
                })?;
                for row in rows {
                    let (buyer, since, error) = row?;
                    let detail = format!(
                        "buyer {buyer}'s endpoint has not answered since {} (circuit breaker \
                         open): {}",
                        crate::clock::iso(since),
                        error.as_deref().unwrap_or("no answer")
                    );
                    add(format!("buyer:{buyer}"), detail, since);
                }
            }
            Rule::CapReached => {
                let windows = Windows::at(now, &caps::timezone_of(conn, ws)?);
                let mut stmt = conn.prepare_kept(
                    "SELECT s.buyer_id, s.product_id, s.daily_cap FROM subscriptions s
                     JOIN buyers b ON b.id = s.buyer_id
                     WHERE b.workspace_id = ?1 AND b.archived_at IS NULL
                       AND s.daily_cap IS NOT NULL",
                )?;
                let rows = stmt.query_map([ws], |row| {
                    Ok((
                        row.get::<_, crate::ids::BuyerId>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })?;
                for row in rows {
                    let (buyer, product, cap) = row?;
                    let usage = caps::usage_now(conn, &buyer, &product, &windows)?;
                    let limits = Limits {
                        daily: Some(cap),
                        monthly: None,
                    };
                    if let Some(reached) = limits.reached(&usage) {
                        let detail = format!(
                            "buyer {buyer}'s daily cap for product {product} is full ({} of {})",
                            reached.count, reached.cap
                        );
                        add(format!("buyer:{buyer} product:{product}"), detail, now);
                    }
                }
            }
            Rule::BalanceLow => {
                let Some(threshold) = threshold else { continue };
                let mut stmt = conn.prepare_kept(
                    "SELECT id, balance_cents FROM buyers
                     WHERE workspace_id = ?1 AND archived_at IS NULL AND plan = 'prepaid'
                       AND balance_cents < ?2",
                )?;
                let rows = stmt.query_map(params![ws, threshold], |row| {
                    Ok((
                        row.get::<_, crate::ids::SourceId>(0)?,
                        row.get::<_, i64>(1)?,
                    ))
                })?;
                for row in rows {
                    let (buyer, balance) = row?;
                    let detail = format!(
                        "buyer {buyer}'s prepaid balance is {}, under {}",
                        crate::money::display(balance),
                        crate::money::display(threshold)
                    );
                    add(format!("buyer:{buyer}"), detail, now);
                }
            }
            Rule::SourceSilent => {
                let mut stmt = conn.prepare_kept(
                    "SELECT s.id, s.created_at FROM sources s
                     JOIN containers c ON c.id = s.container_id
                     WHERE c.workspace_id = ?1 AND s.enabled = 1 AND s.archived_at IS NULL",
                )?;
                let sources = stmt
                    .query_map([ws], |row| {
                        Ok((
                            row.get::<_, crate::ids::SourceId>(0)?,
                            row.get::<_, i64>(1)?,
                        ))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                for (source, created_at) in sources {
                    let last = crate::ingest::view::last_lead_at(conn, &source)?;
                    let since = last.unwrap_or(created_at);
                    if now - since >= for_ms {
                        let detail = match last {
                            Some(last) => format!(
                                "no lead from source {source} since {}",
                                crate::clock::iso(last)
                            ),
                            None => format!("no lead from source {source} since it was created"),
                        };
                        add(format!("source:{source}"), detail, since);
                    }
                }
            }
            Rule::OutboxBacklog => {
                let oldest: Option<i64> = conn
                    .prepare_kept(
                        "SELECT min(e.created_at) FROM outbox_events e
                         JOIN buyers b ON b.id = e.buyer_id
                         WHERE e.status = 'pending' AND b.workspace_id = ?1",
                    )?
                    .query_row([ws], |row| row.get(0))?;
                if let Some(oldest) = oldest.filter(|oldest| now - oldest >= for_ms) {
                    let detail = format!(
                        "the oldest pending event was written at {}",
                        crate::clock::iso(oldest)
                    );
                    add("outbox".to_string(), detail, oldest);
                }
            }
            Rule::DiskLow => {
                let Some(threshold) = threshold else { continue };
                let space = crate::db::files::space(database).ok().flatten();
                if let Some(space) = space.filter(|s| s.total_bytes > 0) {
                    let free_bp = i64::try_from(
                        u128::from(space.available_bytes) * 10_000 / u128::from(space.total_bytes),
                    )
                    .unwrap_or(i64::MAX);
                    if free_bp < threshold {
                        let detail = format!(
                            "{} of {} bytes free ({}%) on the database's file system, under {}%",
                            space.available_bytes,
                            space.total_bytes,
                            super::threshold_text(Rule::DiskLow, free_bp),
                            super::threshold_text(Rule::DiskLow, threshold)
                        );
                        add("disk".to_string(), detail, now);
                    }
                }
            }
            Rule::ReturnRateHigh => {
                let Some(threshold) = threshold else { continue };
                let from = crate::report::buckets::bucket_of(now - RETURN_WINDOW_MS);
                for (kind, sql) in [("buyer", RETURNS_BY_BUYER), ("source", RETURNS_BY_SOURCE)] {
                    let mut stmt = conn.prepare_kept(sql)?;
                    let rows = stmt.query_map(params![ws, from], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, i64>(1)?,
                            row.get::<_, i64>(2)?,
                        ))
                    })?;
                    for row in rows {
                        let (id, sold, returned) = row?;
                        // Over X percent: returned / sold > threshold / 10,000.
                        if sold > 0 && returned * 10_000 > threshold * sold {
                            let detail = format!(
                                "{kind} {id}: {returned} of {sold} sales of the last 7 days \
                                 returned, over {}%",
                                super::threshold_text(Rule::ReturnRateHigh, threshold)
                            );
                            add(format!("{kind}:{id}"), detail, now);
                        }
                    }
                }
            }
        }
    }
    Ok(found)
}

/// Sales and returns of the last 7 days per buyer, from the report's quarter hours.
const RETURNS_BY_BUYER: &str = "SELECT buyer_id, sum(sold), sum(returned) FROM report_buckets
     WHERE workspace_id = ?1 AND bucket >= ?2 AND buyer_id <> ''
     GROUP BY buyer_id HAVING sum(sold) > 0";

/// The same per source.
const RETURNS_BY_SOURCE: &str = "SELECT source_id, sum(sold), sum(returned) FROM report_buckets
     WHERE workspace_id = ?1 AND bucket >= ?2
     GROUP BY source_id HAVING sum(sold) > 0";
