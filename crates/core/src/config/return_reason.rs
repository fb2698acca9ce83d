//! A workspace's return reason codes (DESIGN.md section 19): the list a buyer's return
//! names its reason from, `leadrelay return-reason list|add|remove`.
//!
//! Owns the `return_reasons` table, the six codes every workspace starts with and the rule
//! that turns what a return says (`reasonCode`, or the free-text `reason`) into one code of
//! the list ([`resolve`]). It does not own returns themselves (`lifecycle::returns`).

use crate::db::PrepareKept;
use rusqlite::{Connection, params};
use serde::Serialize;
use serde_json::Value;

use super::{ConfigError, workspace};

/// The code a return falls back to; it cannot be removed.
pub(crate) const OTHER: &str = "other";

/// The codes (with labels) every workspace starts with.
pub(crate) const DEFAULTS: &[(&str, &str)] = &[
    ("wrong_contact", "Wrong contact details"),
    ("duplicate", "Duplicate lead"),
    ("not_interested", "Not interested"),
    ("fake", "Fake or test lead"),
    ("out_of_area", "Out of the service area"),
    (OTHER, "Other"),
];

/// The longest code and label kept.
const MAX_CODE_CHARS: usize = 40;
const MAX_LABEL_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnReason {
    pub code: String,
    pub label: String,
}

impl ReturnReason {
    pub fn view(&self) -> ReturnReasonView<'_> {
        ReturnReasonView {
            code: &self.code,
            label: &self.label,
        }
    }

    /// [`ReturnReason::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// A code as `return-reason list --json` shows it.
#[derive(Debug, Serialize)]
pub struct ReturnReasonView<'a> {
    code: &'a str,
    label: &'a str,
}

/// Writes the default codes for a new workspace (migration 23 wrote them for the
/// workspaces there were).
pub(crate) fn seed(conn: &Connection, workspace_id: &str, now: i64) -> rusqlite::Result<()> {
    let mut insert = conn.prepare_kept(
        "INSERT OR IGNORE INTO return_reasons (workspace_id, code, label, created_at)
         VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (code, label) in DEFAULTS {
        insert.execute(params![workspace_id, code, label, now])?;
    }
    Ok(())
}

/// A workspace's codes, by code.
pub fn list(conn: &Connection, workspace_id: &str) -> Result<Vec<ReturnReason>, ConfigError> {
    workspace::get(conn, workspace_id)?;
    Ok(codes(conn, workspace_id)?)
}

/// A workspace's codes, by code, without checking the workspace.
pub(crate) fn codes(conn: &Connection, workspace_id: &str) -> rusqlite::Result<Vec<ReturnReason>> {
    conn.prepare_kept(
        "SELECT code, label FROM return_reasons WHERE workspace_id = ?1 ORDER BY code",
    )?
    .query_map([workspace_id], |row| {
        Ok(ReturnReason {
            code: row.get(0)?,
            label: row.get(1)?,
        })
    })?
    .collect()
}

/// A code is 1 to 40 of `a-z`, `0-9` and `_`, starting with a letter: it travels in
/// bodies, reports and CSV columns as it is.
fn check_code(code: &str) -> Result<(), ConfigError> {
    let valid = code.len() <= MAX_CODE_CHARS
        && code.starts_with(|c: char| c.is_ascii_lowercase())
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(ConfigError::Invalid(format!(
            "invalid reason code '{code}': 1 to {MAX_CODE_CHARS} of a-z, 0-9 and _, starting with a letter"
        )));
    }
    Ok(())
}

/// Adds `code` with `label` to the workspace's list.
pub fn add(
    conn: &Connection,
    workspace_id: &str,
    code: &str,
    label: &str,
) -> Result<ReturnReason, ConfigError> {
    check_code(code)?;
    let label = label.trim();
    if label.is_empty() || label.chars().count() > MAX_LABEL_CHARS {
        return Err(ConfigError::Invalid(format!(
            "a label is 1 to {MAX_LABEL_CHARS} characters"
        )));
    }
    workspace::get_live(conn, workspace_id)?;
    conn.execute(
        "INSERT INTO return_reasons (workspace_id, code, label, created_at)
         VALUES (?1, ?2, ?3, ?4)",
        params![workspace_id, code, label, crate::clock::now_ms()],
    )
    .map_err(|e| super::insert_error(e, "reason code", code))?;
    Ok(ReturnReason {
        code: code.to_string(),
        label: label.to_string(),
    })
}

/// Removes `code` from the workspace's list. Returns already made with it keep it; `other`
/// stays, as every unmatched reason falls back to it.
pub fn remove(conn: &Connection, workspace_id: &str, code: &str) -> Result<(), ConfigError> {
    if code == OTHER {
        return Err(ConfigError::Invalid(format!(
            "'{OTHER}' cannot be removed: a reason that names no code is '{OTHER}'"
        )));
    }
    workspace::get_live(conn, workspace_id)?;
    let removed = conn.execute(
        "DELETE FROM return_reasons WHERE workspace_id = ?1 AND code = ?2",
        params![workspace_id, code],
    )?;
    if removed == 0 {
        return Err(ConfigError::NotFound {
            kind: "reason code",
            id: code.to_string(),
        });
    }
    Ok(())
}

/// A `reasonCode` that is not on the workspace's list; `valid` is the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownCode {
    pub given: String,
    pub valid: Vec<String>,
}

/// The rule "what a return's reason is": a given `code` must be on the workspace's list
/// (case-insensitive); without one, a `reason` equal to a code (case-insensitive, outer
/// spaces aside) is that code, and any other text is `other` (the text is kept by the
/// caller).
pub(crate) fn resolve(
    conn: &Connection,
    workspace_id: &str,
    code: Option<&str>,
    reason: Option<&str>,
) -> rusqlite::Result<Result<String, UnknownCode>> {
    let known = codes(conn, workspace_id)?;
    let matching = |text: &str| {
        known
            .iter()
            .find(|r| r.code.eq_ignore_ascii_case(text.trim()))
            .map(|r| r.code.clone())
    };
    Ok(match code {
        Some(given) => matching(given).ok_or_else(|| UnknownCode {
            given: given.to_string(),
            valid: known.iter().map(|r| r.code.clone()).collect(),
        }),
        None => Ok(reason
            .and_then(matching)
            .unwrap_or_else(|| OTHER.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_a_code_of_the_list_or_other_with_its_text() {
        let (_dir, conn) = crate::config::testing::migrated();
        crate::config::testing::workspace(&conn, "UTC");
        let resolved = |code: Option<&str>, reason: Option<&str>| {
            resolve(&conn, "ws", code, reason).expect("the list reads")
        };
        assert_eq!(resolved(Some("fake"), Some("x")), Ok("fake".into()));
        assert_eq!(resolved(Some("FAKE"), None), Ok("fake".into()));
        assert_eq!(
            resolved(None, Some(" Out_Of_Area ")),
            Ok("out_of_area".into())
        );
        assert_eq!(resolved(None, Some("he hung up")), Ok(OTHER.into()));
        assert_eq!(resolved(None, None), Ok(OTHER.into()));
        let unknown = resolved(Some("bogus"), Some("fake")).unwrap_err();
        assert_eq!(unknown.given, "bogus");
        assert_eq!(unknown.valid.len(), DEFAULTS.len());
        remove(&conn, "ws", "fake").expect("fake is on the list");
        assert_eq!(resolved(None, Some("fake")), Ok(OTHER.into()), "removed");
        assert!(resolved(Some("fake"), None).is_err());
    }

    #[test]
    fn codes_are_plain_identifiers() {
        for good in ["fake", "out_of_area", "a1", &"x".repeat(40)] {
            assert!(check_code(good).is_ok(), "{good}");
        }
        for bad in ["", "Fake", "1a", "_a", "a-b", "a b", &"x".repeat(41)] {
            assert!(check_code(bad).is_err(), "{bad}");
        }
    }
}
