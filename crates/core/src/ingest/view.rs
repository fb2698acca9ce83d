//! Reading stored leads back into [`StoredLead`]: one lead with its requests (also by one of
//! its requests, for the `deliver` command), or a list, and the operator's JSON of them
//! (`leadrelay lead show`, `lead list`, `lead export`).
//!
//! Owns the read SQL of leads and lead requests. Writing them is `store`'s; a lead that the
//! ingest writer job has just stored is handed on by that job, never read back here.

use crate::db::PrepareKept;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, params_from_iter};
use serde::Serialize;
use serde_json::{Map, Value};

use super::dedupe::DuplicateStatus;
use super::model::{Capture, Consent, Interest, LeadFields, Person, StoredLead, StoredRequest};
use super::quality::QualityStatus;
use super::status::LeadStatus;
use super::{body, normalize};
use crate::config::container::ContainerKind;
use crate::ids::{LeadId, LeadRequestId};

const LEAD_COLUMNS: &str = "l.id, l.source_id, l.container_id, c.kind, l.workspace_id, \
    l.external_id, l.first_name, l.last_name, l.email, l.phone, l.street, l.house_number, \
    l.postal_code, l.city, l.country, l.consent_status, l.legal_basis, l.consent_captured_at, \
    l.consent_text_version, l.captured_by_external_id, l.captured_by_name, l.captured_by_team, \
    l.captured_at, l.capture_method, l.capture_metadata, l.additional, l.quality_status, \
    l.quality_reasons, l.duplicate_status, l.duplicate_match, l.status, l.created_at, \
    l.erased_at, l.checks";

fn json_column<T: serde::de::DeserializeOwned>(text: Option<String>) -> Option<T> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

fn lead_from_row(row: &Row) -> rusqlite::Result<StoredLead> {
    Ok(StoredLead {
        id: row.get(0)?,
        source_id: row.get(1)?,
        container_id: row.get(2)?,
        container_kind: row.get(3)?,
        workspace_id: row.get(4)?,
        fields: LeadFields {
            external_id: row.get(5)?,
            person: Person {
                first_name: row.get(6)?,
                last_name: row.get(7)?,
                email: row.get(8)?,
                phone: row.get(9)?,
                street: row.get(10)?,
                house_number: row.get(11)?,
                postal_code: row.get(12)?,
                city: row.get(13)?,
                country: row.get(14)?,
            },
            consent: Consent {
                status: row.get(15)?,
                legal_basis: row.get(16)?,
                captured_at: row.get(17)?,
                text_version: row.get(18)?,
            },
            capture: Capture {
                captured_by_external_id: row.get(19)?,
                captured_by_name: row.get(20)?,
                captured_by_team: row.get(21)?,
                captured_at: row.get(22)?,
                capture_method: row.get(23)?,
                metadata: json_column(row.get(24)?),
            },
            additional: json_column(row.get(25)?).unwrap_or_default(),
        },
        quality_status: row.get(26)?,
        quality_reasons: json_column(row.get(27)?).unwrap_or_default(),
        duplicate_status: row.get(28)?,
        duplicate_match: json_column(row.get(29)?),
        status: row.get(30)?,
        created_at: row.get(31)?,
        erased_at: row.get(32)?,
        checks: json_column(row.get(33)?).unwrap_or_default(),
        requests: Vec::new(),
    })
}

/// Up to `limit` leads, not yet erased, whose email has duplicate key `key`
/// (`normalize::email_key`), oldest first: found by the key's hash on the `leads_email`
/// index, each confirmed against its stored email (an erased lead has no hash).
pub fn with_email(conn: &Connection, key: &str, limit: usize) -> rusqlite::Result<Vec<LeadId>> {
    let sql = "SELECT id, email FROM leads WHERE email_key = ?1 ORDER BY created_at";
    confirmed(conn, sql, key, limit, normalize::email_matches)
}

/// [`with_email`] by the phone's digits (`normalize::phone_key`).
pub fn with_phone(conn: &Connection, key: &str, limit: usize) -> rusqlite::Result<Vec<LeadId>> {
    let sql = "SELECT id, phone FROM leads WHERE phone_key = ?1 ORDER BY created_at";
    confirmed(conn, sql, key, limit, normalize::phone_matches)
}

/// The ids `sql` finds by `key`'s hash whose stored value (the second column) has `key`.
fn confirmed(
    conn: &Connection,
    sql: &str,
    key: &str,
    limit: usize,
    matches: fn(Option<&str>, &str) -> bool,
) -> rusqlite::Result<Vec<LeadId>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query([normalize::key_hash(key)])?;
    let mut ids = Vec::new();
    while ids.len() < limit
        && let Some(row) = rows.next()?
    {
        if matches(row.get_ref(1)?.as_str_or_null()?, key) {
            ids.push(row.get(0)?);
        }
    }
    Ok(ids)
}

/// The lead `id` with its requests, or `None`.
pub fn find(conn: &Connection, id: LeadId) -> rusqlite::Result<Option<StoredLead>> {
    let found = conn
        .prepare_cached(&format!(
            "SELECT {LEAD_COLUMNS} FROM leads l JOIN containers c ON c.id = l.container_id
             WHERE l.id = ?1"
        ))?
        .query_row([id], lead_from_row)
        .optional()?;
    with_requests(conn, found)
}

/// The lead that lead request `request_id` belongs to, with its requests, or `None`.
pub(crate) fn find_by_request(
    conn: &Connection,
    request_id: LeadRequestId,
) -> rusqlite::Result<Option<StoredLead>> {
    let found = conn
        .prepare_cached(&format!(
            "SELECT {LEAD_COLUMNS} FROM lead_requests r JOIN leads l ON l.id = r.lead_id
             JOIN containers c ON c.id = l.container_id WHERE r.id = ?1"
        ))?
        .query_row([request_id], lead_from_row)
        .optional()?;
    with_requests(conn, found)
}

fn with_requests(
    conn: &Connection,
    lead: Option<StoredLead>,
) -> rusqlite::Result<Option<StoredLead>> {
    let Some(mut lead) = lead else {
        return Ok(None);
    };
    lead.requests = requests_of(conn, lead.id)?;
    Ok(Some(lead))
}

/// The lead's requests with their products, in the order they were given.
fn requests_of(conn: &Connection, lead_id: LeadId) -> rusqlite::Result<Vec<StoredRequest>> {
    let mut stmt = conn.prepare_kept(
        "SELECT r.id, r.position, r.product_id, p.slug, p.name, r.routing_ready,
                r.trigger_auto_delivery, r.field_values, r.status, r.decision, r.created_at
         FROM lead_requests r JOIN products p ON p.id = r.product_id
         WHERE r.lead_id = ?1 ORDER BY r.position",
    )?;
    stmt.query_map([lead_id], |row| {
        let id: LeadRequestId = row.get(0)?;
        Ok(StoredRequest {
            position: row.get(1)?,
            interest: Interest {
                product_id: row.get(2)?,
                product_slug: row.get(3)?,
                product_name: row.get(4)?,
                routing_ready: row.get(5)?,
                trigger_auto_delivery: row.get(6)?,
                field_values: json_column(row.get(7)?).unwrap_or_default(),
            },
            status: row.get(8)?,
            decision: json_column(super::trace::decode(row.get_ref(9)?, &id.to_string())?),
            created_at: row.get(10)?,
            id,
        })
    })?
    .collect()
}

/// The raw body the lead came in (the batch item for a batch), as received; `None` for an
/// unknown lead or one without a body (erased).
pub fn raw_body(conn: &Connection, id: LeadId) -> Result<Option<String>, ViewError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT body, {} FROM leads WHERE id = ?1",
        body::COLUMN_NAMES
    ))?;
    let mut rows = stmt.query([id])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let columns = body::Columns::at(row, 1)?;
    body::decode(row.get_ref(0)?, &columns).map_err(|e| ViewError::Body {
        lead_id: id,
        error: e,
    })
}

/// Why a stored lead could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("the raw body of lead '{lead_id}' cannot be read: {error}")]
    Body {
        lead_id: LeadId,
        error: body::BodyError,
    },
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
}

impl From<rusqlite::Error> for ViewError {
    fn from(e: rusqlite::Error) -> Self {
        ViewError::Db(crate::db::DbError::Sqlite(e))
    }
}

/// What `lead list` and `lead export` narrow by; `None` means any. Times are `[from, to)`
/// in ms.
#[derive(Debug, Clone, Default)]
pub struct LeadFilter {
    pub source_id: Option<crate::ids::SourceId>,
    /// Only leads that have a transaction of this buyer.
    pub buyer_id: Option<crate::ids::BuyerId>,
    pub status: Option<LeadStatus>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    /// Only the leads after this one in the list's order (newest first: older ones), for
    /// paging with the last id of the previous page.
    pub after_id: Option<LeadId>,
}

/// The order leads are read in: by creation time, then rowid (rows are inserted by the one
/// writer in creation order, so the rowid breaks ties of the same millisecond; the indexes
/// on the time, `leads_created` and `leads_source_mix`, end in it).
#[derive(Debug, Clone, Copy)]
enum Order {
    NewestFirst,
    OldestFirst,
}

/// The rows a filtered read is driven by: one index search each, never a walk of every
/// lead (checked with EXPLAIN QUERY PLAN in this module's tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// A status other than `active`: every such lead has its one supplier cancellation
    /// (`lifecycle::clawback` opens it when it moves the lead off `active`), so the
    /// cancellations are the few rows to start from.
    Cancellations,
    /// A buyer: its transactions (`transactions_buyer_created`, from `from` on, since a
    /// lead is sold after it is received).
    Buyer,
    /// A source: its six ranges of `leads_source_mix` (one per [`stored_statuses`] pair,
    /// each in creation order), merged.
    Source,
    /// Nothing narrower than the time: `leads_created`, stopping at the limit.
    Time,
}

impl LeadFilter {
    fn driver(&self) -> Driver {
        if self.status.is_some_and(|s| s != LeadStatus::Active) {
            Driver::Cancellations
        } else if self.buyer_id.is_some() {
            Driver::Buyer
        } else if self.source_id.is_some() {
            Driver::Source
        } else {
            Driver::Time
        }
    }

    /// The WHERE conditions every matching lead `l` meets (each a constant of this
    /// function, so the SQL holds no input) and their values in order. With `indexed`
    /// false, the columns are written `+l.…` so SQLite takes no index for them: the read
    /// is then driven by the driver's rows, not by the source's or the time's index.
    fn conditions(&self, indexed: bool) -> (String, Vec<SqlValue>) {
        let pick = |with_index: &'static str, without: &'static str| {
            if indexed { with_index } else { without }
        };
        let mut sql = vec!["1"];
        let mut values: Vec<SqlValue> = Vec::new();
        if let Some(source_id) = &self.source_id {
            sql.push(pick("l.source_id = ?", "+l.source_id = ?"));
            values.push(source_id.clone().into());
        }
        if let Some(buyer_id) = &self.buyer_id {
            sql.push(
                "EXISTS (SELECT 1 FROM transactions t WHERE t.lead_id = l.id AND t.buyer_id = ?)",
            );
            values.push(buyer_id.clone().into());
        }
        if let Some(status) = self.status {
            sql.push("l.status = ?");
            values.push(status.as_str().to_string().into());
        }
        if let Some(from) = self.from_ms {
            sql.push(pick("l.created_at >= ?", "+l.created_at >= ?"));
            values.push(from.into());
        }
        if let Some(to) = self.to_ms {
            sql.push(pick("l.created_at < ?", "+l.created_at < ?"));
            values.push(to.into());
        }
        if let Some(after) = self.after_id {
            // The time bound is the index range; the row value then orders the leads of
            // that same millisecond by rowid.
            sql.push(pick(
                "l.created_at <= (SELECT created_at FROM leads WHERE id = ?) \
                 AND (l.created_at, l.rowid) < (SELECT created_at, rowid FROM leads WHERE id = ?)",
                "+l.created_at <= (SELECT created_at FROM leads WHERE id = ?) \
                 AND (l.created_at, l.rowid) < (SELECT created_at, rowid FROM leads WHERE id = ?)",
            ));
            values.push(rusqlite::types::Value::from(after));
            values.push(rusqlite::types::Value::from(after));
        }
        (sql.join(" AND "), values)
    }

    /// The statement reading the matching leads (with [`LEAD_COLUMNS`] first) in `order`,
    /// at most `limit` of them, and its values.
    fn query(&self, order: Order, limit: Option<usize>) -> (String, Vec<SqlValue>) {
        let direction = match order {
            Order::NewestFirst => "DESC",
            Order::OldestFirst => "ASC",
        };
        let limit_clause = if limit.is_some() { " LIMIT ?" } else { "" };
        let driver = self.driver();
        let (conditions, condition_values) =
            self.conditions(matches!(driver, Driver::Source | Driver::Time));
        let mut values: Vec<SqlValue> = Vec::new();
        let sql = match driver {
            Driver::Cancellations | Driver::Buyer => {
                let rows = if driver == Driver::Cancellations {
                    "SELECT d.rowid FROM supplier_cancellations s JOIN leads d ON d.id = s.lead_id"
                } else {
                    values.push(self.buyer_id.clone().into());
                    values.push(self.from_ms.unwrap_or(i64::MIN).into());
                    "SELECT d.rowid FROM transactions t JOIN leads d ON d.id = t.lead_id \
                     WHERE t.buyer_id = ? AND t.created_at >= ?"
                };
                values.extend(condition_values);
                format!(
                    "SELECT {LEAD_COLUMNS} FROM leads l JOIN containers c ON c.id = l.container_id
                     WHERE l.rowid IN ({rows}) AND {conditions}
                     ORDER BY l.created_at {direction}, l.rowid {direction}{limit_clause}"
                )
            }
            Driver::Source => {
                // A compound SELECT ordered by its result columns is merged from its
                // arms as they come, each in its index's order: no sort, and a limit stops
                // the walk.
                let arms: Vec<String> = stored_statuses()
                    .map(|(quality, duplicate)| {
                        values.extend(condition_values.iter().cloned());
                        format!(
                            "SELECT {LEAD_COLUMNS}, l.created_at AS k_at, l.rowid AS k_row \
                             FROM leads l JOIN containers c ON c.id = l.container_id \
                             WHERE l.quality_status = '{}' AND l.duplicate_status = '{}' \
                             AND {conditions}",
                            quality.as_str(),
                            duplicate.as_str()
                        )
                    })
                    .collect();
                let arms = arms.join(" UNION ALL ");
                format!("{arms} ORDER BY k_at {direction}, k_row {direction}{limit_clause}")
            }
            Driver::Time => {
                values.extend(condition_values);
                format!(
                    "SELECT {LEAD_COLUMNS} FROM leads l JOIN containers c ON c.id = l.container_id
                     WHERE {conditions}
                     ORDER BY l.created_at {direction}, l.rowid {direction}{limit_clause}"
                )
            }
        };
        if let Some(limit) = limit {
            values.push(i64::try_from(limit).unwrap_or(i64::MAX).into());
        }
        (sql, values)
    }
}

/// The statuses a stored lead can have, (quality, duplicate) pairs (a duplicate the rule
/// rejects is not stored; both are written once, at ingest). The `leads_source_mix` index
/// `(source_id, quality_status, duplicate_status, created_at)` holds one range of a
/// source's leads in creation order per pair: how a source's leads are walked by time
/// (`lead list --source`, a purge) without an index of their own.
pub(crate) fn stored_statuses() -> impl Iterator<Item = (QualityStatus, DuplicateStatus)> {
    QualityStatus::ALL.iter().flat_map(|&quality| {
        [DuplicateStatus::Unique, DuplicateStatus::Review]
            .map(move |duplicate| (quality, duplicate))
    })
}

/// When the newest lead of `source_id` was received, if any: one seek per status pair on
/// `leads_source_mix` (`source_silent` asks it every few seconds, whatever the leads' count).
pub fn last_lead_at(
    conn: &Connection,
    source_id: &crate::ids::SourceId,
) -> rusqlite::Result<Option<i64>> {
    let mut stmt = conn.prepare_kept(
        "SELECT max(created_at) FROM leads
         WHERE source_id = ?1 AND quality_status = ?2 AND duplicate_status = ?3",
    )?;
    let mut last: Option<i64> = None;
    for (quality, duplicate) in stored_statuses() {
        let at: Option<i64> = stmt
            .query_row(rusqlite::params![source_id, quality, duplicate], |row| {
                row.get(0)
            })?;
        last = last.max(at);
    }
    Ok(last)
}

/// Newest leads first that match `filter`, at most `limit`.
pub fn list(
    conn: &Connection,
    filter: &LeadFilter,
    limit: usize,
) -> rusqlite::Result<Vec<StoredLead>> {
    let (sql, values) = filter.query(Order::NewestFirst, Some(limit));
    let mut stmt = conn.prepare(&sql)?;
    let mut leads: Vec<StoredLead> = stmt
        .query_map(params_from_iter(values), lead_from_row)?
        .collect::<Result<_, _>>()?;
    for lead in &mut leads {
        lead.requests = requests_of(conn, lead.id)?;
    }
    Ok(leads)
}

/// Every lead matching `filter`, oldest first, each with its requests handed to `each` as
/// it is read: one statement over the file, so memory stays what one lead takes, however
/// many match (`lead export`). `each` may stop the walk with its error.
pub fn for_each<E: From<rusqlite::Error>>(
    conn: &Connection,
    filter: &LeadFilter,
    mut each: impl FnMut(&StoredLead) -> Result<(), E>,
) -> Result<(), E> {
    let (sql, values) = filter.query(Order::OldestFirst, None);
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(params_from_iter(values))?;
    while let Some(row) = rows.next()? {
        let mut lead = lead_from_row(row)?;
        lead.requests = requests_of(conn, lead.id)?;
        each(&lead)?;
    }
    Ok(())
}

impl StoredLead {
    /// Everything stored about the lead, for `leadrelay lead show`.
    pub fn view(&self) -> StoredLeadView<'_> {
        let fields = &self.fields;
        StoredLeadView {
            id: self.id,
            source_id: &self.source_id,
            container: ContainerId(self.container_kind, &self.container_id),
            workspace_id: &self.workspace_id,
            external_id: fields.external_id.as_deref(),
            status: self.status.as_str(),
            person: PersonView {
                first_name: &fields.person.first_name,
                last_name: &fields.person.last_name,
                rest: Pairs(fields.person_pairs()),
            },
            consent: Pairs(fields.consent_pairs()),
            capture: CaptureView {
                pairs: Pairs(fields.capture_pairs()),
                metadata: fields.capture.metadata.as_ref(),
            },
            additional_properties: &fields.additional,
            quality_status: self.quality_status.as_str(),
            quality_reasons: &self.quality_reasons,
            duplicate_status: self.duplicate_status.as_str(),
            duplicate_match: self.duplicate_match.as_ref(),
            requests: self.requests.iter().map(request_view).collect(),
            checks: &self.checks,
            created_at: crate::clock::iso(self.created_at),
            erased: self.erased_at.is_some(),
            erased_at: self.erased_at.map(crate::clock::iso),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view()).expect("a stored lead always serialises")
    }

    /// One line's worth of the lead, for `leadrelay lead list`.
    pub fn summary(&self) -> LeadSummaryView<'_> {
        let person = &self.fields.person;
        LeadSummaryView {
            id: self.id,
            source_id: &self.source_id,
            container: ContainerId(self.container_kind, &self.container_id),
            external_id: self.fields.external_id.as_deref(),
            first_name: &person.first_name,
            last_name: &person.last_name,
            email: person.email.as_deref(),
            phone: person.phone.as_deref(),
            quality_status: self.quality_status.as_str(),
            duplicate_status: self.duplicate_status.as_str(),
            status: self.status.as_str(),
            products: self
                .requests
                .iter()
                .map(|r| r.interest.product_slug.as_str())
                .collect(),
            request_ids: self.requests.iter().map(|r| r.id).collect(),
            created_at: crate::clock::iso(self.created_at),
            erased: self.erased_at.is_some(),
        }
    }

    pub fn summary_json(&self) -> Value {
        serde_json::to_value(self.summary()).expect("a lead's summary always serialises")
    }
}

/// A container's id under its kind's key (`channelId` or `tableId`), flattened into a view.
#[derive(Debug)]
pub(crate) struct ContainerId<S>(pub(crate) ContainerKind, pub(crate) S);

impl<S: AsRef<str>> Serialize for ContainerId<S> {
    fn serialize<T: serde::Serializer>(&self, serializer: T) -> Result<T::Ok, T::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0.id_key(), self.1.as_ref())?;
        map.end()
    }
}

/// A [`StoredLead`] as `lead show` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredLeadView<'a> {
    id: LeadId,
    source_id: &'a crate::ids::SourceId,
    #[serde(flatten)]
    container: ContainerId<&'a str>,
    workspace_id: &'a str,
    external_id: Option<&'a str>,
    status: &'static str,
    person: PersonView<'a>,
    consent: Pairs<'a, 4>,
    capture: CaptureView<'a>,
    /// The partner's additional properties (free-form).
    additional_properties: &'a Map<String, Value>,
    quality_status: &'static str,
    quality_reasons: &'a [String],
    duplicate_status: &'static str,
    duplicate_match: Option<&'a Value>,
    requests: Vec<RequestView<'a>>,
    checks: &'a [crate::checks::CheckRecord],
    created_at: String,
    erased: bool,
    erased_at: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PersonView<'a> {
    first_name: &'a str,
    last_name: &'a str,
    #[serde(flatten)]
    rest: Pairs<'a, 7>,
}

#[derive(Serialize)]
struct CaptureView<'a> {
    #[serde(flatten)]
    pairs: Pairs<'a, 5>,
    /// The partner's capture metadata (free-form).
    metadata: Option<&'a Map<String, Value>>,
}

/// Named texts as one object, every key present (`null` when absent), in their order.
struct Pairs<'a, const N: usize>([(&'static str, &'a Option<String>); N]);

impl<const N: usize> Serialize for Pairs<'_, N> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(key, value)| (key, value)))
    }
}

/// A lead request as `lead show` prints it, with its decision when one was made.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestView<'a> {
    id: LeadRequestId,
    position: i64,
    product_id: &'a str,
    product_slug: &'a str,
    product_name: &'a str,
    routing_ready: Option<bool>,
    trigger_auto_delivery: bool,
    /// The interest's answers (free-form).
    field_values: &'a Map<String, Value>,
    status: &'static str,
    created_at: String,
    /// The operator's view of the decision, as stored (free-form).
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'a Value>,
}

fn request_view(request: &StoredRequest) -> RequestView<'_> {
    let interest = &request.interest;
    RequestView {
        id: request.id,
        position: request.position,
        product_id: &interest.product_id,
        product_slug: &interest.product_slug,
        product_name: &interest.product_name,
        routing_ready: interest.routing_ready,
        trigger_auto_delivery: interest.trigger_auto_delivery,
        field_values: &interest.field_values,
        status: request.status.as_str(),
        created_at: crate::clock::iso(request.created_at),
        decision: request.decision.as_ref(),
    }
}

/// A [`StoredLead`] as one line of `lead list`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeadSummaryView<'a> {
    id: LeadId,
    source_id: &'a crate::ids::SourceId,
    #[serde(flatten)]
    container: ContainerId<&'a str>,
    external_id: Option<&'a str>,
    first_name: &'a str,
    last_name: &'a str,
    email: Option<&'a str>,
    phone: Option<&'a str>,
    quality_status: &'static str,
    duplicate_status: &'static str,
    status: &'static str,
    products: Vec<&'a str>,
    request_ids: Vec<LeadRequestId>,
    created_at: String,
    erased: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps of the plan of `sql`.
    fn plan(conn: &Connection, sql: &str, values: Vec<SqlValue>) -> Vec<String> {
        crate::db::query_plan(conn, sql, params_from_iter(values))
    }

    #[test]
    fn every_filter_is_an_index_search_never_a_walk_of_every_lead() {
        let dir = tempfile::tempdir().expect("a temp dir can be made");
        let path = dir.path().join("plans.db");
        crate::db::Db::open(&path)
            .expect("the database opens")
            .close();
        let conn = Connection::open(&path).expect("the file opens");
        let cases = [
            (
                "source and time",
                LeadFilter {
                    source_id: Some("src".into()),
                    from_ms: Some(1),
                    to_ms: Some(2),
                    ..LeadFilter::default()
                },
            ),
            (
                "source, status active and a page",
                LeadFilter {
                    source_id: Some("src".into()),
                    status: Some(LeadStatus::Active),
                    after_id: Some(crate::ids::LeadId::generate()),
                    ..LeadFilter::default()
                },
            ),
            (
                "buyer",
                LeadFilter {
                    buyer_id: Some("buyer".into()),
                    ..LeadFilter::default()
                },
            ),
            (
                "buyer and source",
                LeadFilter {
                    buyer_id: Some("buyer".into()),
                    source_id: Some("src".into()),
                    from_ms: Some(1),
                    ..LeadFilter::default()
                },
            ),
            (
                "status cancelled and source",
                LeadFilter {
                    status: Some(LeadStatus::Cancelled),
                    source_id: Some("src".into()),
                    ..LeadFilter::default()
                },
            ),
            (
                "time and a page",
                LeadFilter {
                    from_ms: Some(1),
                    after_id: Some(crate::ids::LeadId::generate()),
                    ..LeadFilter::default()
                },
            ),
        ];
        for (name, filter) in cases {
            for (order, limit) in [(Order::NewestFirst, Some(50)), (Order::OldestFirst, None)] {
                let (sql, values) = filter.query(order, limit);
                let steps = plan(&conn, &sql, values);
                let on_leads: Vec<&String> = steps
                    .iter()
                    // `l` and `d` are the leads; `s`, the supplier cancellations, are the
                    // few rows a cancelled status starts from.
                    .filter(|s| s.contains(" l ") || s.contains(" d "))
                    .collect();
                assert!(!on_leads.is_empty(), "{name}: {steps:?}");
                assert!(
                    on_leads.iter().all(|s| s.starts_with("SEARCH")),
                    "{name} ({order:?}): every read of the leads is an index search: {steps:?}"
                );
                if filter.driver() == Driver::Source {
                    assert!(
                        steps.iter().any(|s| s.starts_with("MERGE"))
                            && !steps.iter().any(|s| s.contains("TEMP B-TREE")),
                        "{name}: the source's ranges are merged, not sorted: {steps:?}"
                    );
                }
            }
        }
    }
}
