//! Record identifiers: a type prefix and a ULID (`lead_01JD…`), so ids say what they name
//! and sort by creation time.
//!
//! Also owns the rule for operator-chosen ids of configuration objects.

/// A new id with the given prefix, e.g. `new("lead")` → `lead_01JD3…`.
pub fn new(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// The stored form of id `text` named with `prefix` (`"req"` for `req_01JD…`): the ULID's 16
/// bytes as a BLOB when `text` is exactly `{prefix}_` and a ULID in its canonical text (the
/// form [`new`] makes), else the text itself. [`expand`] gives the text back, byte for byte:
/// a text that would not come back exactly (a lower-case ULID, another prefix, a client's
/// own id) is kept as text. 16 bytes instead of 30 or more per stored id.
pub fn compact(prefix: &str, text: &str) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    let ulid = text
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .and_then(|rest| Some((rest, ulid::Ulid::from_string(rest).ok()?)));
    match ulid {
        Some((rest, ulid)) if ulid.to_string() == rest => Value::Blob(ulid.to_bytes().to_vec()),
        _ => Value::Text(text.to_string()),
    }
}

/// The text of an id stored by [`compact`] with the same `prefix`; `None` for NULL. A BLOB
/// that is not 16 bytes is an error, not a guess.
pub fn expand(
    prefix: &str,
    stored: rusqlite::types::ValueRef<'_>,
) -> rusqlite::types::FromSqlResult<Option<String>> {
    use rusqlite::types::{FromSqlError, ValueRef};
    match stored {
        ValueRef::Null => Ok(None),
        ValueRef::Text(text) => std::str::from_utf8(text)
            .map(|text| Some(text.to_string()))
            .map_err(|e| FromSqlError::Other(Box::new(e))),
        ValueRef::Blob(bytes) => {
            let bytes: [u8; 16] = bytes
                .try_into()
                .map_err(|_| FromSqlError::InvalidBlobSize {
                    expected_size: 16,
                    blob_size: bytes.len(),
                })?;
            Ok(Some(format!("{prefix}_{}", ulid::Ulid::from_bytes(bytes))))
        }
        _ => Err(FromSqlError::InvalidType),
    }
}

/// [`expand`] of column `index` of `row`, as a rusqlite error when it does not expand.
pub fn expand_at(
    row: &rusqlite::Row<'_>,
    index: usize,
    prefix: &str,
) -> rusqlite::Result<Option<String>> {
    let stored = row.get_ref(index)?;
    let kind = stored.data_type();
    expand(prefix, stored)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, kind, Box::new(e)))
}

/// The prefix of a lead's id (`lead_…`).
pub const LEAD: &str = "lead";
/// The prefix of a lead request's id (`lreq_…`).
pub const LEAD_REQUEST: &str = "lreq";

/// A lead or lead-request id as a statement binds it: its stored form ([`compact`]), so
/// `WHERE id = ?1` with `ids::lead(&id)` finds the row the text `id` names. Every column
/// that holds a lead's or lead request's id stores this form (migration 20): `leads.id`,
/// `lead_requests.id` and `.lead_id`, `transactions.lead_id` and `.lead_request_id`,
/// `evaluation_features.lead_request_id`, `pings.lead_id`, `bids.lead_request_id`,
/// `supplier_cancellations.lead_id`. A text that is not one of our ids (malformed, another
/// prefix, lower case) binds as itself and so finds nothing, as before.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    prefix: &'static str,
    text: &'a str,
}

/// Lead id `id` as bound in a statement.
pub fn lead(id: &str) -> Stored<'_> {
    Stored {
        prefix: LEAD,
        text: id,
    }
}

/// Lead-request id `id` as bound in a statement.
pub fn lead_request(id: &str) -> Stored<'_> {
    Stored {
        prefix: LEAD_REQUEST,
        text: id,
    }
}

impl Stored<'_> {
    /// The stored value, for a list of dynamic parameters.
    pub fn value(&self) -> rusqlite::types::Value {
        compact(self.prefix, self.text)
    }
}

impl rusqlite::types::ToSql for Stored<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::Owned(self.value()))
    }
}

/// Column `index` of `row`, a lead id as stored, as its text; NULL is an error.
pub fn lead_at(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<String> {
    required(row, index, LEAD)
}

/// Column `index` of `row`, a lead-request id as stored, as its text; NULL is an error.
pub fn lead_request_at(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<String> {
    required(row, index, LEAD_REQUEST)
}

fn required(row: &rusqlite::Row<'_>, index: usize, prefix: &str) -> rusqlite::Result<String> {
    expand_at(row, index, prefix)?.ok_or_else(|| {
        rusqlite::Error::InvalidColumnType(
            index,
            row.as_ref()
                .column_name(index)
                .map_or_else(|_| index.to_string(), str::to_string),
            rusqlite::types::Type::Null,
        )
    })
}

/// Whether `id` is acceptable as an operator-chosen id: 1 to 64 characters of ASCII letters,
/// digits, `-`, `_` and `.`. Keeping ids to this set means they never need escaping in a
/// URL path, and a percent-encoded or traversal trick in a path can never name a record.
pub fn is_valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && id != "."
        && id != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_prefixed_unique_and_sortable() {
        let a = new("lead");
        let b = new("lead");
        assert!(a.starts_with("lead_"));
        assert_eq!(a.len(), "lead_".len() + 26);
        assert_ne!(a, b);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(new("lead") > a);
    }

    #[test]
    fn compact_ids_are_16_bytes_and_come_back_exactly() {
        use rusqlite::types::{Value, ValueRef};
        let ours = new("req");
        let stored = compact("req", &ours);
        let Value::Blob(bytes) = &stored else {
            panic!("{stored:?}")
        };
        assert_eq!(bytes.len(), 16);
        assert_eq!(
            expand("req", ValueRef::Blob(bytes)).unwrap(),
            Some(ours.clone())
        );
        // Anything that would not come back byte for byte stays text.
        let lower = ours.to_lowercase();
        let other_prefix = ours.replacen("req_", "lead_", 1);
        for text in [
            "client-id-1",
            "req_",
            "req_x",
            &lower,
            &other_prefix,
            &ours[4..],
        ] {
            assert_eq!(
                compact("req", text),
                Value::Text(text.to_string()),
                "{text}"
            );
            assert_eq!(
                expand("req", ValueRef::Text(text.as_bytes()))
                    .unwrap()
                    .as_deref(),
                Some(text)
            );
        }
        assert_eq!(expand("req", ValueRef::Null).unwrap(), None);
        assert!(expand("req", ValueRef::Blob(&[1, 2, 3])).is_err());
    }

    #[test]
    fn operator_ids_are_restricted_to_a_safe_set() {
        for ok in ["acme", "src-1", "ws_2", "a.b", "X9"] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "%2e", "é", &"x".repeat(65)] {
            assert!(!is_valid(bad), "{bad}");
        }
    }
}
