//! The features a delivered lead request was scored with, kept for training.
//!
//! Owns the `evaluation_features` table and its encoding. Auto-delivery writes one row per
//! lead request that got at least one transaction, in the ingest writer job that decided
//! it, with the features exactly as the evaluator computed and scored them then: a later
//! change of the feature code does not move old rows, and `evaluator train` learns from
//! what the scorer saw. Requests delivered by hand (`leadrelay deliver`) have none. The row
//! also names the lead's container, so training finds each row's threshold without
//! reading the (wide) leads table.
//!
//! The stored text is JSON `[1, [numeric values…], ["group:value"…]]`: the encoding's
//! version, the numeric features in the order of that version, and the category factors.
//! Version 1's order is [`V1_NUMERIC`], frozen; should the features change, a new version
//! gets its own list and [`decode`] keeps reading the old one by feature name (a feature
//! a row does not have reads as 0, as it weighed nothing for the scorer that wrote it).
//! Whole values are written without a fraction (`1`, not `1.0`): most are 0/1 flags, so
//! a row of a lead in three categories is some 100 bytes of text.

use crate::db::PrepareKept;
use std::borrow::Cow;

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::features::{FEATURES, Feature, Features};

/// The encoding written now.
const VERSION: u64 = 1;

/// The numeric features of version 1, in their stored order.
const V1_NUMERIC: [&str; 8] = [
    "validEmail",
    "validPhone",
    "names",
    "addressCompleteness",
    "consentGranted",
    "requiredFields",
    "softQualityFlags",
    "duplicatesSeen",
];

/// Records the features `lead_request_id` was scored with. Run in the writer job that
/// delivered it. A request decided again (`lead reroute`, after its sale was voided) keeps
/// the features of its latest decision: the one its live transaction was sold by.
pub(crate) fn record(
    conn: &Connection,
    lead_request_id: crate::ids::LeadRequestId,
    container_id: &str,
    features: &Features,
) -> rusqlite::Result<()> {
    conn.prepare_kept(
        "INSERT INTO evaluation_features (lead_request_id, container_id, features)
         VALUES (?1, ?2, ?3)
         ON CONFLICT (lead_request_id) DO UPDATE SET features = excluded.features",
    )?
    .execute(params![lead_request_id, container_id, encode(features)])?;
    Ok(())
}

/// The category groups an erasure removes from a lead's stored features: the interests'
/// answers and the postal region (stored by builds before the postal-prefix group was
/// dropped), which came from the person's own data. The numeric
/// features (flags and counts) and the source and hour stay, so training keeps the row.
const ERASED_GROUPS: [&str; 2] = ["answer:", "postalPrefix:"];

/// Removes the person's categories ([`ERASED_GROUPS`]) from the stored features of lead
/// `lead_id`'s requests (for `privacy`); returns how many rows changed. A row that does not
/// decode as expected loses all its categories rather than keep one by mistake.
pub(crate) fn erase_personal(
    conn: &Connection,
    lead_id: crate::ids::LeadId,
) -> rusqlite::Result<u64> {
    let rows: Vec<(crate::ids::LeadRequestId, String)> = {
        let mut stmt = conn.prepare_kept(
            "SELECT f.lead_request_id, f.features FROM evaluation_features f
             JOIN lead_requests r ON r.id = f.lead_request_id WHERE r.lead_id = ?1",
        )?;
        stmt.query_map([lead_id], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?
    };
    let mut changed = 0;
    for (request_id, text) in rows {
        let mut encoded: serde_json::Value =
            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        let kept = match encoded.get_mut(2).and_then(serde_json::Value::as_array_mut) {
            Some(categories) => {
                let before = categories.len();
                categories.retain(|c| {
                    c.as_str()
                        .is_some_and(|c| !ERASED_GROUPS.iter().any(|g| c.starts_with(g)))
                });
                (categories.len() != before).then(|| encoded.to_string())
            }
            None => Some(encode_parts(&[], &[])),
        };
        if let Some(kept) = kept {
            changed += conn
                .prepare_kept(
                    "UPDATE evaluation_features SET features = ?2 WHERE lead_request_id = ?1",
                )?
                .execute(params![request_id, kept])? as u64;
        }
    }
    Ok(changed)
}

/// The stored text of `features`.
pub(crate) fn encode(features: &Features) -> String {
    let numeric: Vec<Number> = V1_NUMERIC
        .iter()
        .map(|name| Feature::from_name(name).map_or(0.0, |f| features.get(f)))
        .map(|value| {
            // Features are small (flags, shares, counts up to a few), so a whole value
            // converts to an integer exactly; `decode` reads either form as the same f64.
            if value.fract() == 0.0 && value.abs() < 1e15 {
                Number::Whole(value as i64)
            } else {
                Number::Fraction(value)
            }
        })
        .collect();
    encode_parts(&numeric, &features.categories)
}

/// One numeric feature as stored: a whole value without a fraction.
#[derive(Serialize)]
#[serde(untagged)]
enum Number {
    Whole(i64),
    Fraction(f64),
}

/// The stored text `[VERSION, numeric, categories]`.
fn encode_parts(numeric: &[Number], categories: &[String]) -> String {
    serde_json::to_string(&(VERSION, numeric, categories))
        .expect("numbers and strings always serialise")
}

/// Why a stored row cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum DecodeError {
    #[error("stored features are not the expected JSON: {0}")]
    Shape(String),
    #[error("stored features of unknown version {0}")]
    Version(u64),
}

/// A stored row read without copying its category names where it can.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stored<'a> {
    /// Indexed by [`Feature::index`].
    pub values: [f64; FEATURES.len()],
    pub categories: Vec<Cow<'a, str>>,
}

impl Stored<'_> {
    #[cfg(test)]
    pub(crate) fn into_features(self) -> Features {
        Features {
            values: self.values,
            categories: self.categories.into_iter().map(Cow::into_owned).collect(),
        }
    }
}

#[derive(Deserialize)]
struct Encoded<'a>(u64, Vec<f64>, #[serde(borrow)] Vec<Cow<'a, str>>);

/// The features of a stored row, in the current [`Features`] layout.
pub(crate) fn decode(text: &str) -> Result<Stored<'_>, DecodeError> {
    let Encoded(version, numeric, categories) =
        serde_json::from_str(text).map_err(|e| DecodeError::Shape(e.to_string()))?;
    let names: &[&str] = match version {
        1 => &V1_NUMERIC,
        other => return Err(DecodeError::Version(other)),
    };
    if numeric.len() != names.len() {
        return Err(DecodeError::Shape(format!(
            "{} numeric values for version {version}, which has {}",
            numeric.len(),
            names.len()
        )));
    }
    let mut values = [0.0; FEATURES.len()];
    for (name, value) in names.iter().zip(numeric) {
        if let Some(feature) = Feature::from_name(name) {
            values[feature.index()] = value;
        }
    }
    Ok(Stored { values, categories })
}

/// The stored features of one request as JSON; `None` when none are stored.
#[cfg(test)]
pub(crate) fn find(
    conn: &Connection,
    lead_request_id: crate::ids::LeadRequestId,
) -> rusqlite::Result<Option<serde_json::Value>> {
    use rusqlite::OptionalExtension;
    let text: Option<String> = conn
        .query_row(
            "SELECT features FROM evaluation_features WHERE lead_request_id = ?1",
            [lead_request_id],
            |row| row.get(0),
        )
        .optional()?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Features {
        Features {
            values: [1.0, 0.0, 0.5, 0.6, 1.0, 0.3333, 1.0, 2.0],
            categories: vec!["source:web".into(), "answer:roof=flat;\"x\"".into()],
        }
    }

    #[test]
    fn features_round_trip_exactly() {
        let text = encode(&sample());
        assert_eq!(
            text,
            r#"[1,[1,0,0.5,0.6,1,0.3333,1,2],["source:web","answer:roof=flat;\"x\""]]"#
        );
        assert_eq!(decode(&text).unwrap().into_features(), sample());
    }

    #[test]
    fn version_one_keeps_its_order_whatever_the_code_does() {
        assert_eq!(
            V1_NUMERIC.len(),
            FEATURES.len(),
            "a new feature needs a new encoding version"
        );
        let old = r#"[1,[0,1,0,0,0,0,0,3],[]]"#;
        let features = decode(old).unwrap().into_features();
        assert_eq!(features.get(Feature::ValidPhone), 1.0);
        assert_eq!(features.get(Feature::DuplicatesSeen), 3.0);
    }

    #[test]
    fn unreadable_rows_are_errors() {
        assert!(matches!(decode("junk"), Err(DecodeError::Shape(_))));
        let escaped = r#"[1,[0,0,0,0,0,0,0,0],["answer:a=\u00e9"]]"#;
        assert_eq!(decode(escaped).unwrap().categories, ["answer:a=é"]);
        assert_eq!(decode(r#"[7,[],[]]"#), Err(DecodeError::Version(7)));
        assert!(matches!(
            decode(r#"[1,[1,2],[]]"#),
            Err(DecodeError::Shape(_))
        ));
    }

    #[test]
    fn a_recorded_row_is_found() {
        let conn = super::super::testing::database();
        record(
            &conn,
            crate::autodelivery::testing::request_id(),
            "web",
            &sample(),
        )
        .unwrap();
        let stored = find(&conn, crate::autodelivery::testing::request_id())
            .unwrap()
            .unwrap();
        assert_eq!(stored[2][0], "source:web");
        assert_eq!(
            find(&conn, crate::autodelivery::testing::old_request_id()).unwrap(),
            None
        );
    }

    #[test]
    fn an_erasure_keeps_the_numbers_and_drops_the_persons_categories() {
        let conn = super::super::testing::database();
        let mut features = sample();
        // As rows written before the postal-prefix group was dropped have it.
        features.categories.push("postalPrefix:DE-80".into());
        features.categories.push("hourOfDay:night".into());
        record(
            &conn,
            crate::autodelivery::testing::request_id(),
            "web",
            &features,
        )
        .unwrap();
        record(
            &conn,
            crate::autodelivery::testing::old_request_id(),
            "web",
            &Features::default(),
        )
        .unwrap();
        assert_eq!(
            erase_personal(&conn, crate::autodelivery::testing::lead_id()).unwrap(),
            1
        );
        let stored = find(&conn, crate::autodelivery::testing::request_id())
            .unwrap()
            .unwrap();
        assert_eq!(
            stored,
            serde_json::json!([
                1,
                [1, 0, 0.5, 0.6, 1, 0.3333, 1, 2],
                ["source:web", "hourOfDay:night"]
            ])
        );
        assert_eq!(
            erase_personal(&conn, crate::autodelivery::testing::lead_id()).unwrap(),
            0,
            "twice: nothing"
        );
    }
}
