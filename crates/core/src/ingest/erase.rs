//! Erasing a person from the leads they are in: the lead becomes a tombstone.
//!
//! A tombstone keeps what reports, the ledger and the lifecycle need and nothing that
//! names, locates or reaches the person: its ids (lead, source, container, workspace,
//! `externalId`, request ids), times, products, statuses, quality and duplicate facts,
//! the country, and the consent and capture facts (status, legal basis, text version,
//! times, method, and who captured it: the partner's agent, not the person). Gone: the
//! names (empty), email, phone, street, house number, postal code, city, the capture
//! metadata (free-form, may hold an IP address or a device), the additional properties,
//! the normalised contact keys, the raw body and the interests' answers.
//!
//! Owns these writes to `leads` and `lead_requests` (ingest's tables), the lookup of the
//! leads an erasure or a purge takes, and the tombstone of the lead as buyers get it
//! ([`erased_lead_json`]), so an event sent after an erasure carries the same fields the
//! tombstone holds. `privacy` decides when; this module does it.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};

use super::dedupe::DuplicateStatus;
use super::quality::QualityStatus;
pub(crate) use super::view::stored_statuses;
use super::{normalize, view};
use leadrelay_rules::fields::FIELD_NAMES;

/// The leads, not erased, an erasure by email or phone takes (found by the key's hash and
/// confirmed against the stored value).
pub(crate) use super::view::{with_email, with_phone};

/// The fields of the lead as buyers get it that an erasure empties: sent as `null` in an
/// event after the erasure, so a buyer's system overwrites what it stored.
const ERASED_FIELDS: [&str; 8] = [
    "firstName",
    "lastName",
    "email",
    "phone",
    "street",
    "houseNumber",
    "postalCode",
    "city",
];

/// The lead object of a `lead.delivered` event (SPEC.md section 6) after its person was
/// erased: `"erased": true`, the kept fields it had (every interface field not in
/// [`ERASED_FIELDS`]: the columns the erasure leaves), and every erased field as `null`.
/// The capture metadata and the additional properties are left out.
pub(crate) fn erased_lead_json(lead: &Map<String, Value>) -> Map<String, Value> {
    let mut erased = Map::new();
    if let Some(external_id) = lead.get("externalId") {
        erased.insert("externalId".into(), external_id.clone());
    }
    erased.insert("erased".into(), Value::Bool(true));
    for key in ERASED_FIELDS {
        erased.insert(key.into(), Value::Null);
    }
    let kept = FIELD_NAMES
        .iter()
        .filter(|key| **key != "externalId" && !ERASED_FIELDS.contains(key));
    for key in kept {
        if let Some(value) = lead.get(*key) {
            erased.insert((*key).into(), value.clone());
        }
    }
    erased
}

const TOMBSTONE_LEAD: &str = "UPDATE leads SET first_name = '', last_name = '', email = NULL, \
    phone = NULL, street = NULL, house_number = NULL, postal_code = NULL, city = NULL, \
    capture_metadata = NULL, additional = '{}', email_key = NULL, phone_key = NULL, \
    body = NULL, checks = NULL, erased_at = ?2 \
    WHERE id = ?1 AND erased_at IS NULL";

const TOMBSTONE_REQUESTS: &str =
    "UPDATE lead_requests SET field_values = '{}' WHERE lead_id = ?1 AND field_values <> '{}'";

/// What making a lead a tombstone changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tombstoned {
    /// 1 when the lead was not a tombstone yet, else 0.
    pub(crate) leads: u64,
    /// Requests whose answers were removed.
    pub(crate) requests: u64,
}

/// Makes lead `id` a tombstone erased at `now`; an erased lead is left as it is.
pub(crate) fn tombstone(
    conn: &Connection,
    id: crate::ids::LeadId,
    now: i64,
) -> rusqlite::Result<Tombstoned> {
    let leads = conn
        .prepare_kept(TOMBSTONE_LEAD)?
        .execute(params![id, now])?;
    if leads == 0 {
        return Ok(Tombstoned::default());
    }
    let requests = conn.prepare_kept(TOMBSTONE_REQUESTS)?.execute([id])?;
    Ok(Tombstoned {
        leads: leads as u64,
        requests: requests as u64,
    })
}

/// How many leads, not erased, have email key `key`.
pub(crate) fn count_with_email(conn: &Connection, key: &str) -> rusqlite::Result<u64> {
    view::with_email(conn, key, usize::MAX).map(|ids| ids.len() as u64)
}

/// How many leads, not erased, have phone key `key`.
pub(crate) fn count_with_phone(conn: &Connection, key: &str) -> rusqlite::Result<u64> {
    view::with_phone(conn, key, usize::MAX).map(|ids| ids.len() as u64)
}

/// Whether lead `id` exists, and when it was erased (`Some(None)`: not erased).
pub(crate) fn erased_at(
    conn: &Connection,
    id: crate::ids::LeadId,
) -> rusqlite::Result<Option<Option<i64>>> {
    conn.prepare_kept("SELECT erased_at FROM leads WHERE id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()
}

/// How many other leads, not erased, share lead `id`'s email or phone (to tell the
/// operator who erased one lead of a person that more are there).
pub(crate) fn others_with_same_contact(
    conn: &Connection,
    id: crate::ids::LeadId,
) -> rusqlite::Result<u64> {
    let contact: Option<(Option<String>, Option<String>)> = conn
        .prepare_kept("SELECT email, phone FROM leads WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let Some((email, phone)) = contact else {
        return Ok(0);
    };
    let mut others = std::collections::BTreeSet::new();
    if let Some(key) = email.as_deref().and_then(normalize::email_key) {
        others.extend(view::with_email(conn, &key, usize::MAX)?);
    }
    if let Some(key) = phone.as_deref().and_then(normalize::phone_key) {
        others.extend(view::with_phone(conn, &key, usize::MAX)?);
    }
    others.remove(&id);
    Ok(others.len() as u64)
}

/// The next leads of a purge: up to `limit` leads of `source_id` with `statuses` (one of
/// [`stored_statuses`]) created before `cutoff`, after the position `after` (created_at,
/// rowid) in that order, on that range of the `leads_source_mix` index. Erased ones are
/// included (the caller skips them) so the position moves past them: a purge walks each
/// lead once.
pub(crate) fn older_than(
    conn: &Connection,
    source_id: &crate::ids::SourceId,
    statuses: (QualityStatus, DuplicateStatus),
    after: (i64, i64),
    cutoff: i64,
    limit: usize,
) -> rusqlite::Result<Vec<PurgeCandidate>> {
    // No `LIMIT ?`: SQLite plans a bound LIMIT by its value, so the cached statement would
    // be compiled again for every job. The rows come in index order, so reading only
    // `limit` of them costs the same.
    let mut stmt = conn.prepare_kept(
        "SELECT id, created_at, rowid, erased_at IS NOT NULL FROM leads
         WHERE source_id = ?1 AND quality_status = ?2 AND duplicate_status = ?3
           AND (created_at, rowid) > (?4, ?5) AND created_at < ?6
         ORDER BY created_at, rowid",
    )?;
    let (quality, duplicate) = statuses;
    let rows = stmt.query_map(
        params![source_id, quality, duplicate, after.0, after.1, cutoff],
        |row| {
            Ok(PurgeCandidate {
                id: row.get(0)?,
                position: (row.get(1)?, row.get(2)?),
                erased: row.get(3)?,
            })
        },
    )?;
    rows.take(limit).collect()
}

/// A lead a purge passes: its id, its position on the index, whether it is a tombstone.
#[derive(Debug, Clone)]
pub(crate) struct PurgeCandidate {
    pub(crate) id: crate::ids::LeadId,
    pub(crate) position: (i64, i64),
    pub(crate) erased: bool,
}

/// How many leads of `source_id` created before `cutoff` (and at or after `from`) are not
/// erased: what a purge would take (`purge --dry-run`). Counted over the ranges of
/// `leads_source_mix`, as the purge walks them.
pub(crate) fn count_older_than(
    conn: &Connection,
    source_id: &crate::ids::SourceId,
    from: i64,
    cutoff: i64,
) -> rusqlite::Result<u64> {
    let mut stmt = conn.prepare_kept(
        "SELECT count(*) FROM leads
         WHERE source_id = ?1 AND quality_status = ?2 AND duplicate_status = ?3
           AND created_at >= ?4 AND created_at < ?5 AND erased_at IS NULL",
    )?;
    let mut total = 0;
    for (quality, duplicate) in stored_statuses() {
        let n: i64 = stmt.query_row(
            params![source_id, quality, duplicate, from, cutoff],
            |row| row.get(0),
        )?;
        total += n.max(0) as u64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ingest::model::LeadFields;

    /// Every field of the lead as buyers get it is an interface field (`FIELD_NAMES`), so
    /// it is either erased or kept; every erased field is one of them.
    #[test]
    fn every_interface_field_is_erased_or_kept() {
        let mut fields = LeadFields {
            external_id: Some("x".into()),
            ..LeadFields::default()
        };
        let p = &mut fields.person;
        for slot in [
            &mut p.email,
            &mut p.phone,
            &mut p.street,
            &mut p.house_number,
            &mut p.postal_code,
            &mut p.city,
            &mut p.country,
        ] {
            *slot = Some("v".into());
        }
        p.first_name = "v".into();
        p.last_name = "v".into();
        let c = &mut fields.consent;
        for slot in [
            &mut c.status,
            &mut c.legal_basis,
            &mut c.captured_at,
            &mut c.text_version,
        ] {
            *slot = Some("v".into());
        }
        let k = &mut fields.capture;
        for slot in [
            &mut k.captured_by_external_id,
            &mut k.captured_by_name,
            &mut k.captured_by_team,
            &mut k.captured_at,
            &mut k.capture_method,
        ] {
            *slot = Some("v".into());
        }
        let shown = serde_json::to_value(&fields).unwrap();
        let mut names: Vec<&str> = shown
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        names.sort_unstable();
        let mut listed = FIELD_NAMES.to_vec();
        listed.sort_unstable();
        assert_eq!(names, listed);
        assert!(ERASED_FIELDS.iter().all(|f| FIELD_NAMES.contains(f)));
    }

    #[test]
    fn the_erased_lead_has_nulls_for_the_person_and_keeps_the_rest() {
        let lead = json!({
            "externalId": "x1", "firstName": "Ada", "lastName": "Lovelace",
            "email": "ada@example.org", "phone": "+44 20 7946 0958", "city": "London",
            "country": "GB", "consentStatus": "granted", "capturedAt": "2026-01-01T10:00:00Z",
            "capture": {"metadata": {"ip": "203.0.113.9"}}, "utmSource": "ads",
        });
        let erased = erased_lead_json(lead.as_object().unwrap());
        assert_eq!(
            Value::Object(erased),
            json!({
                "externalId": "x1", "erased": true, "firstName": null, "lastName": null,
                "email": null, "phone": null, "street": null, "houseNumber": null,
                "postalCode": null, "city": null, "country": "GB", "consentStatus": "granted",
                "capturedAt": "2026-01-01T10:00:00Z",
            })
        );
    }
}
