//! The alert tables' one writer: `alert_targets` (add, list, remove), `alert_rules` (set,
//! list, remove) and `alerts` ([`apply`]: the evaluation's writer job, and the reads of
//! `alert list` and the console).

use crate::db::PrepareKept;
use std::collections::HashSet;

use rusqlite::{Connection, params};

use super::conditions::Condition;
use super::{Alert, AlertError, Rule, RuleSetting, State, Target, TargetKind};
use crate::config::workspace;

/// Adds a target to a live workspace; a webhook's URL must pass `outbound_url::check` and
/// gets a new signing secret (returned once, in the target).
pub fn add_target(
    conn: &Connection,
    workspace_id: &str,
    kind: TargetKind,
    address: &str,
    now: i64,
) -> Result<Target, AlertError> {
    workspace::get_live(conn, workspace_id)?;
    let address = address.trim();
    let signing_secret = match kind {
        TargetKind::Webhook => {
            crate::outbound_url::check(address)
                .map_err(|e| AlertError::Invalid(format!("webhook URL: {e}")))?;
            Some(crate::secrets::generate_signing_secret())
        }
        TargetKind::Email => {
            if !is_email_address(address) {
                return Err(AlertError::Invalid(format!(
                    "'{address}' is not an email address"
                )));
            }
            None
        }
    };
    let target = Target {
        id: crate::ids::new("alt"),
        workspace_id: workspace_id.to_string(),
        kind,
        address: address.to_string(),
        signing_secret,
        created_at: now,
    };
    conn.execute(
        "INSERT INTO alert_targets (id, workspace_id, kind, address, signing_secret, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            target.id,
            target.workspace_id,
            target.kind,
            target.address,
            target.signing_secret,
            target.created_at
        ],
    )?;
    Ok(target)
}

/// `local@domain` with no space, one `@` and a dot-free-or-not domain: what a mail relay
/// takes; anything subtler is the relay's to refuse.
fn is_email_address(address: &str) -> bool {
    match address.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !address.chars().any(|c| c.is_whitespace() || c.is_control())
                && address.len() <= 254
        }
        None => false,
    }
}

/// Removes a target; `false` when there was none with that id.
pub fn remove_target(conn: &Connection, id: &str) -> Result<(), AlertError> {
    match conn.execute("DELETE FROM alert_targets WHERE id = ?1", [id])? {
        0 => Err(AlertError::UnknownTarget(id.to_string())),
        _ => Ok(()),
    }
}

/// The targets of one workspace, or of all, oldest first (with their signing secrets: the
/// sender needs them; listings print [`Target::to_json`], which leaves them out).
pub fn targets(conn: &Connection, workspace_id: Option<&str>) -> Result<Vec<Target>, AlertError> {
    let mut stmt = conn.prepare_kept(
        "SELECT id, workspace_id, kind, address, signing_secret, created_at FROM alert_targets
         WHERE ?1 IS NULL OR workspace_id = ?1 ORDER BY created_at, id",
    )?;
    let rows = stmt.query_map([workspace_id], |row| {
        Ok(Target {
            id: row.get(0)?,
            workspace_id: row.get(1)?,
            kind: row.get(2)?,
            address: row.get(3)?,
            signing_secret: row.get(4)?,
            created_at: row.get(5)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Switches a rule on for a workspace, or changes its threshold and duration.
pub fn set_rule(conn: &Connection, setting: &RuleSetting, now: i64) -> Result<(), AlertError> {
    workspace::get_live(conn, &setting.workspace_id)?;
    conn.execute(
        "INSERT INTO alert_rules (workspace_id, rule, threshold, for_ms, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (workspace_id, rule) DO UPDATE SET
            threshold = excluded.threshold, for_ms = excluded.for_ms,
            updated_at = excluded.updated_at",
        params![
            setting.workspace_id,
            setting.rule,
            setting.threshold,
            setting.for_ms,
            now
        ],
    )?;
    Ok(())
}

/// Switches a rule off; its open alerts are resolved by the next evaluation. `false` when
/// it was not on.
pub fn remove_rule(conn: &Connection, workspace_id: &str, rule: Rule) -> Result<bool, AlertError> {
    Ok(conn.execute(
        "DELETE FROM alert_rules WHERE workspace_id = ?1 AND rule = ?2",
        params![workspace_id, rule],
    )? > 0)
}

/// The rules switched on, of one workspace or of all.
pub fn rules(
    conn: &Connection,
    workspace_id: Option<&str>,
) -> Result<Vec<RuleSetting>, AlertError> {
    let mut stmt = conn.prepare_kept(
        "SELECT workspace_id, rule, threshold, for_ms FROM alert_rules
         WHERE ?1 IS NULL OR workspace_id = ?1 ORDER BY workspace_id, rule",
    )?;
    let rows = stmt.query_map([workspace_id], |row| {
        Ok(RuleSetting {
            workspace_id: row.get(0)?,
            rule: row.get(1)?,
            threshold: row.get(2)?,
            for_ms: row.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

const ALERT_COLUMNS: &str = "id, workspace_id, rule, subject, state, detail, since, resolved_at";

fn alert_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Alert> {
    Ok(Alert {
        id: row.get(0)?,
        workspace_id: row.get(1)?,
        rule: row.get(2)?,
        subject: row.get(3)?,
        state: row.get(4)?,
        detail: row.get(5)?,
        since: row.get(6)?,
        resolved_at: row.get(7)?,
    })
}

/// The open (firing) alerts, of one workspace or of all, oldest first.
pub fn open(conn: &Connection, workspace_id: Option<&str>) -> rusqlite::Result<Vec<Alert>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ALERT_COLUMNS} FROM alerts
         WHERE state = 'firing' AND (?1 IS NULL OR workspace_id = ?1) ORDER BY since, id"
    ))?;
    let rows = stmt.query_map([workspace_id], alert_from_row)?;
    rows.collect()
}

/// The newest alerts first, open or resolved, at most `limit`.
pub fn list(
    conn: &Connection,
    workspace_id: Option<&str>,
    limit: usize,
) -> Result<Vec<Alert>, AlertError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ALERT_COLUMNS} FROM alerts
         WHERE ?1 IS NULL OR workspace_id = ?1 ORDER BY since DESC, id DESC"
    ))?;
    let rows = stmt.query_map([workspace_id], alert_from_row)?;
    Ok(rows.take(limit).collect::<rusqlite::Result<_>>()?)
}

/// The evaluation's writer job: `holding` is every condition true now (over all rules
/// switched on). An open alert whose condition is not among them is resolved at `now`
/// (its rule may have been switched off); a condition without an open alert fires. Returns
/// the alerts whose state changed, in their new state: the messages to send. Read again
/// inside the job, so two evaluations cannot fire one condition twice.
pub fn apply(conn: &Connection, holding: &[Condition], now: i64) -> Result<Vec<Alert>, AlertError> {
    let open = open(conn, None)?;
    let key = |workspace: &str, rule: Rule, subject: &str| {
        (workspace.to_string(), rule, subject.to_string())
    };
    let held: HashSet<_> = holding
        .iter()
        .map(|c| key(&c.workspace_id, c.rule, &c.subject))
        .collect();
    let already: HashSet<_> = open
        .iter()
        .map(|a| key(&a.workspace_id, a.rule, &a.subject))
        .collect();
    let mut changed = Vec::new();
    for mut alert in open {
        if !held.contains(&key(&alert.workspace_id, alert.rule, &alert.subject)) {
            conn.prepare_kept(
                "UPDATE alerts SET state = 'resolved', resolved_at = ?2 WHERE id = ?1",
            )?
            .execute(params![alert.id, now])?;
            alert.state = State::Resolved;
            alert.resolved_at = Some(now);
            changed.push(alert);
        }
    }
    for condition in holding {
        if already.contains(&key(
            &condition.workspace_id,
            condition.rule,
            &condition.subject,
        )) {
            continue;
        }
        let alert = Alert {
            id: crate::ids::new("alert"),
            workspace_id: condition.workspace_id.clone(),
            rule: condition.rule,
            subject: condition.subject.clone(),
            state: State::Firing,
            detail: condition.detail.clone(),
            since: condition.since.min(now),
            resolved_at: None,
        };
        conn.prepare_kept(
            "INSERT INTO alerts (id, workspace_id, rule, subject, state, detail, since)
             VALUES (?1, ?2, ?3, ?4, 'firing', ?5, ?6)",
        )?
        .execute(params![
            alert.id,
            alert.workspace_id,
            alert.rule,
            alert.subject,
            alert.detail,
            alert.since
        ])?;
        changed.push(alert);
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing;

    fn condition(subject: &str, since: i64) -> Condition {
        Condition {
            workspace_id: "ws".into(),
            rule: Rule::BalanceLow,
            subject: subject.into(),
            detail: format!("{subject} is low"),
            since,
        }
    }

    fn states(changed: &[Alert]) -> Vec<(&str, State)> {
        changed
            .iter()
            .map(|a| (a.subject.as_str(), a.state))
            .collect()
    }

    /// The rule "once when it starts, once when it ends": a condition that goes on holding
    /// changes nothing, and one that ends is resolved once.
    #[test]
    fn a_condition_fires_once_while_it_holds_and_resolves_once() {
        let (_dir, conn) = testing::migrated();
        testing::workspace(&conn, "UTC");
        let a = condition("buyer:a", 50);
        let b = condition("buyer:b", 90);
        let fired = apply(&conn, std::slice::from_ref(&a), 100).unwrap();
        assert_eq!(states(&fired), [("buyer:a", State::Firing)]);
        assert_eq!(fired[0].since, 50, "since the condition started");
        assert!(
            apply(&conn, std::slice::from_ref(&a), 200)
                .unwrap()
                .is_empty()
        );
        let changed = apply(&conn, &[a, b.clone()], 300).unwrap();
        assert_eq!(states(&changed), [("buyer:b", State::Firing)]);
        let changed = apply(&conn, std::slice::from_ref(&b), 400).unwrap();
        assert_eq!(states(&changed), [("buyer:a", State::Resolved)]);
        assert_eq!(changed[0].resolved_at, Some(400));
        assert_eq!(changed[0].state_since(), 400);
        assert!(apply(&conn, &[b], 500).unwrap().is_empty());
        assert_eq!(apply(&conn, &[], 600).unwrap().len(), 1);
        assert!(apply(&conn, &[], 700).unwrap().is_empty());
        assert!(open(&conn, None).unwrap().is_empty());
        assert_eq!(list(&conn, Some("ws"), 10).unwrap().len(), 2);
    }
}
