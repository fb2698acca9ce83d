//! The raw body a lead came in, as stored in `leads.body`: compressed against the lead's own
//! columns.
//!
//! The raw body (the partner's text, or the batch item) repeats what the lead's columns
//! hold: names, email, phone, address, consent. It is stored compressed against a
//! dictionary made of those column values as JSON text ([`dictionary`]), so what the body
//! repeats costs a few bytes and what it adds (interest shortcuts, the partner's key order
//! and spacing) is kept exactly: [`decode`] gives back the body byte for byte. Each stored
//! form carries a check of the body, so a body decoded against columns that changed since
//! ingest is refused rather than returned wrong.
//!
//! Two formats, one dictionary, told apart by the first byte:
//! - format 2 (written): an LZ4 block against the dictionary, framed (`lz4_block`) with the
//!   body's length and the first 8 bytes of its SHA-256;
//! - format 1 (read only): a zstd frame with its checksum against the dictionary as raw
//!   content (the mechanism of `zstd --patch-from`). zstd builds its entropy and match tables
//!   for every frame, 2-5 µs of a 200-byte body on the request's task; the LZ4 block costs a
//!   third of that and is as small (BENCHMARKS.md).
//!
//! The dictionary must be rebuilt identically for as long as a row exists, so its recipe
//! is frozen (pinned by a test with each format's stored bytes): a change is a new format
//! byte, never an edit. The person columns it reads are written once by ingest and changed
//! only by an erasure, which removes the body in the same statement. A body stored before
//! format 1 (a TEXT value) is read as is.
//!
//! Owns the stored form of the body; `store` writes it, `view` reads it, `erase` clears it.

use rusqlite::types::ValueRef;

use super::model::LeadFields;

/// The first byte of a stored body: format 1 is a zstd frame against [`dictionary`].
const FORMAT_V1: u8 = 1;
/// Format 2: length, check and an LZ4 block against [`dictionary`].
const FORMAT_V2: u8 = 2;
/// The bytes of the body's SHA-256 a format 2 body keeps as its check.
const CHECK_LEN: usize = 8;

/// The longest body a frame may claim to hold (the ingest limit is 1 MiB).
const MAX_BODY: usize = 2 * 1024 * 1024;

/// What the dictionary always starts with: the interface's keys and the shapes of its
/// objects, which every body repeats whatever its values. Part of format 1: never edit.
const STATIC_V1: &str = concat!(
    r#"{"leads":[{"person":{"interests":[{"request":{"requests":[{"triggerAutoDelivery":true,"#,
    r#""productSlug":"","productId":"","routingReady":true,"fieldValues":{"":""}}],"#,
    r#""consent":{"status":"granted","legalBasis":"consent","capturedAt":"","textVersion":""},"#,
    r#""capture":{"capturedByExternalId":"","capturedByName":"","capturedByTeam":"","#,
    r#""capturedAt":"","captureMethod":"web_form","metadata":{}},"#,
    r#""consentStatus":"granted","legalBasis":"consent","consentCapturedAt":"","#,
    r#""consentTextVersion":"","externalId":"","firstName":"","lastName":"","email":"","#,
    r#""phone":"","street":"","houseNumber":"","postalCode":"","city":"","country":"DE"}"#,
);

/// The lead's columns that the dictionary is made of, as stored (TEXT values).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Columns<'a> {
    pub(crate) external_id: Option<&'a str>,
    pub(crate) first_name: &'a str,
    pub(crate) last_name: &'a str,
    pub(crate) email: Option<&'a str>,
    pub(crate) phone: Option<&'a str>,
    pub(crate) street: Option<&'a str>,
    pub(crate) house_number: Option<&'a str>,
    pub(crate) postal_code: Option<&'a str>,
    pub(crate) city: Option<&'a str>,
    pub(crate) country: Option<&'a str>,
    pub(crate) consent_status: Option<&'a str>,
    pub(crate) legal_basis: Option<&'a str>,
    pub(crate) consent_captured_at: Option<&'a str>,
    pub(crate) consent_text_version: Option<&'a str>,
    pub(crate) captured_by_external_id: Option<&'a str>,
    pub(crate) captured_by_name: Option<&'a str>,
    pub(crate) captured_by_team: Option<&'a str>,
    pub(crate) captured_at: Option<&'a str>,
    pub(crate) capture_method: Option<&'a str>,
    /// The `capture_metadata` column: a JSON object's text.
    pub(crate) capture_metadata: Option<&'a str>,
    /// The `additional` column: a JSON object's text.
    pub(crate) additional: &'a str,
}

/// The `leads` columns [`Columns::at`] reads, in its order, for a `SELECT`.
pub(crate) const COLUMN_NAMES: &str = "external_id, first_name, last_name, email, phone, \
    street, house_number, postal_code, city, country, consent_status, legal_basis, \
    consent_captured_at, consent_text_version, captured_by_external_id, captured_by_name, \
    captured_by_team, captured_at, capture_method, capture_metadata, additional";

impl<'a> Columns<'a> {
    /// The columns of a stored lead from `row`, whose values from index `first` on are
    /// [`COLUMN_NAMES`].
    pub(crate) fn at(row: &'a rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Columns<'a>> {
        let text = |i: usize| -> rusqlite::Result<Option<&'a str>> {
            match row.get_ref(first + i)? {
                ValueRef::Null => Ok(None),
                value => value.as_str().map(Some).map_err(Into::into),
            }
        };
        Ok(Columns {
            external_id: text(0)?,
            first_name: text(1)?.unwrap_or_default(),
            last_name: text(2)?.unwrap_or_default(),
            email: text(3)?,
            phone: text(4)?,
            street: text(5)?,
            house_number: text(6)?,
            postal_code: text(7)?,
            city: text(8)?,
            country: text(9)?,
            consent_status: text(10)?,
            legal_basis: text(11)?,
            consent_captured_at: text(12)?,
            consent_text_version: text(13)?,
            captured_by_external_id: text(14)?,
            captured_by_name: text(15)?,
            captured_by_team: text(16)?,
            captured_at: text(17)?,
            capture_method: text(18)?,
            capture_metadata: text(19)?,
            additional: text(20)?.unwrap_or_default(),
        })
    }

    /// The columns of a lead about to be stored: its fields and the text of its two JSON
    /// columns, exactly as `store` binds them.
    pub(crate) fn of(
        fields: &'a LeadFields,
        additional: &'a str,
        capture_metadata: Option<&'a str>,
    ) -> Columns<'a> {
        let (p, c, k) = (&fields.person, &fields.consent, &fields.capture);
        Columns {
            external_id: fields.external_id.as_deref(),
            first_name: &p.first_name,
            last_name: &p.last_name,
            email: p.email.as_deref(),
            phone: p.phone.as_deref(),
            street: p.street.as_deref(),
            house_number: p.house_number.as_deref(),
            postal_code: p.postal_code.as_deref(),
            city: p.city.as_deref(),
            country: p.country.as_deref(),
            consent_status: c.status.as_deref(),
            legal_basis: c.legal_basis.as_deref(),
            consent_captured_at: c.captured_at.as_deref(),
            consent_text_version: c.text_version.as_deref(),
            captured_by_external_id: k.captured_by_external_id.as_deref(),
            captured_by_name: k.captured_by_name.as_deref(),
            captured_by_team: k.captured_by_team.as_deref(),
            captured_at: k.captured_at.as_deref(),
            capture_method: k.capture_method.as_deref(),
            capture_metadata,
            additional,
        }
    }
}

/// The dictionary of format 1: [`STATIC_V1`], then each present column as `"key":"value",`
/// (the value's bytes as stored, not escaped: the recipe must not depend on a JSON
/// library's escaping), then the two JSON columns' text. Frozen: see the module header.
fn dictionary(columns: &Columns) -> Vec<u8> {
    let c = columns;
    let texts: [(&str, Option<&str>); 19] = [
        ("externalId", c.external_id),
        ("firstName", Some(c.first_name)),
        ("lastName", Some(c.last_name)),
        ("email", c.email),
        ("phone", c.phone),
        ("street", c.street),
        ("houseNumber", c.house_number),
        ("postalCode", c.postal_code),
        ("city", c.city),
        ("country", c.country),
        ("consentStatus", c.consent_status),
        ("legalBasis", c.legal_basis),
        ("consentCapturedAt", c.consent_captured_at),
        ("consentTextVersion", c.consent_text_version),
        ("capturedByExternalId", c.captured_by_external_id),
        ("capturedByName", c.captured_by_name),
        ("capturedByTeam", c.captured_by_team),
        ("capturedAt", c.captured_at),
        ("captureMethod", c.capture_method),
    ];
    let mut dict = Vec::with_capacity(STATIC_V1.len() + 512);
    dict.extend_from_slice(STATIC_V1.as_bytes());
    for (key, value) in texts {
        if let Some(value) = value {
            dict.push(b'"');
            dict.extend_from_slice(key.as_bytes());
            dict.extend_from_slice(b"\":\"");
            dict.extend_from_slice(value.as_bytes());
            dict.extend_from_slice(b"\",");
        }
    }
    if let Some(metadata) = c.capture_metadata {
        dict.extend_from_slice(b"\"capture\":{\"metadata\":");
        dict.extend_from_slice(metadata.as_bytes());
        dict.push(b'}');
    }
    dict.extend_from_slice(c.additional.as_bytes());
    dict
}

/// The stored form of `raw` for a lead with `columns` (format 2).
pub(crate) fn encode(raw: &str, columns: &Columns) -> Vec<u8> {
    let raw = raw.as_bytes();
    let mut stored = vec![FORMAT_V2];
    super::lz4_block::append(&mut stored, raw, check(raw), &dictionary(columns));
    stored
}

/// A format 2 body's check: the first bytes of its SHA-256.
fn check(raw: &[u8]) -> [u8; CHECK_LEN] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(raw);
    let mut check = [0; CHECK_LEN];
    check.copy_from_slice(&digest[..CHECK_LEN]);
    check
}

/// Why a stored body could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("stored body has unknown format {0}")]
    UnknownFormat(u8),
    #[error("stored body does not decode against the lead's columns: {0}")]
    Corrupt(String),
}

/// The raw body from its stored value (`leads.body`) and the lead's columns; `None` when
/// the lead has none (erased).
pub(crate) fn decode(stored: ValueRef<'_>, columns: &Columns) -> Result<Option<String>, BodyError> {
    let bytes = match stored {
        ValueRef::Null => return Ok(None),
        // A body stored before format 1: the text itself.
        ValueRef::Text(text) => return Ok(Some(String::from_utf8_lossy(text).into_owned())),
        ValueRef::Blob(bytes) => bytes,
        ValueRef::Integer(_) | ValueRef::Real(_) => {
            return Err(BodyError::Corrupt("a number is not a body".into()));
        }
    };
    let Some((&format, frame)) = bytes.split_first() else {
        return Err(BodyError::Corrupt("empty".into()));
    };
    let decoded = match format {
        FORMAT_V2 => super::lz4_block::read(frame, &dictionary(columns), MAX_BODY, check)
            .map_err(|why| BodyError::Corrupt(why.to_string()))?,
        FORMAT_V1 => super::zframe::decompress(&dictionary(columns), frame, MAX_BODY)
            .map_err(|e| BodyError::Corrupt(e.to_string()))?,
        other => return Err(BodyError::UnknownFormat(other)),
    };
    String::from_utf8(decoded)
        .map(Some)
        .map_err(|_| BodyError::Corrupt("not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: &str = r#"{"externalId":"t1-2001-247757062-101","firstName":"Jane","lastName":"Doe","email":"jane.t1-2001-247757062.101@example.com","phone":"+49 12001 0000101","street":"Hauptstr.","houseNumber":"1","postalCode":"10115","city":"Berlin","country":"DE","consentStatus":"granted","legalBasis":"consent","capturedAt":"2026-01-01T10:00:00Z","captureMethod":"web_form","productSlug":"solar","routingReady":true,"fieldValues":{"roof":"tile"},"utmSource":"bench"}"#;

    fn columns() -> Columns<'static> {
        Columns {
            external_id: Some("t1-2001-247757062-101"),
            first_name: "Jane",
            last_name: "Doe",
            email: Some("jane.t1-2001-247757062.101@example.com"),
            phone: Some("+49 12001 0000101"),
            street: Some("Hauptstr."),
            house_number: Some("1"),
            postal_code: Some("10115"),
            city: Some("Berlin"),
            country: Some("DE"),
            consent_status: Some("granted"),
            legal_basis: Some("consent"),
            captured_at: Some("2026-01-01T10:00:00Z"),
            capture_method: Some("web_form"),
            additional: r#"{"utmSource":"bench"}"#,
            ..Columns::default()
        }
    }

    fn blob(stored: &[u8]) -> ValueRef<'_> {
        ValueRef::Blob(stored)
    }

    #[test]
    fn a_body_comes_back_byte_for_byte_and_small() {
        let stored = encode(RAW, &columns());
        assert_eq!(stored[0], FORMAT_V2);
        assert!(
            stored.len() < 80,
            "{} bytes for a body of {}",
            stored.len(),
            RAW.len()
        );
        assert_eq!(
            decode(blob(&stored), &columns()).unwrap().as_deref(),
            Some(RAW)
        );
    }

    #[test]
    fn anything_the_columns_do_not_hold_is_kept_exactly() {
        for raw in [
            "",
            "{}",
            " {\n  \"firstName\" : \"Jane\",\t\"x\": [1, 2.50, null, \"\\u00e9\\\"\"] }",
            "{\"firstName\":\"Zoë 🙂\",\"email\":\"\\\"odd\\\"@example.com\"}",
            &"x".repeat(200_000),
        ] {
            let stored = encode(raw, &columns());
            assert_eq!(
                decode(blob(&stored), &columns()).unwrap().as_deref(),
                Some(raw)
            );
        }
    }

    #[test]
    fn columns_changed_since_ingest_are_refused_not_misread() {
        let stored = encode(RAW, &columns());
        let changed = Columns {
            email: Some("someone.else@example.com"),
            ..columns()
        };
        let error = decode(blob(&stored), &changed).unwrap_err();
        assert!(matches!(error, BodyError::Corrupt(_)), "{error}");
    }

    #[test]
    fn text_from_before_the_format_is_read_as_is_and_null_is_no_body() {
        assert_eq!(
            decode(ValueRef::Text(b"{\"a\":1}"), &columns())
                .unwrap()
                .as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(decode(ValueRef::Null, &columns()).unwrap(), None);
        assert!(matches!(
            decode(blob(&[9, 1, 2]), &columns()),
            Err(BodyError::UnknownFormat(9))
        ));
        assert!(decode(blob(&[]), &columns()).is_err());
    }

    /// Format 1 is frozen: a body stored by this version must decode in every later one.
    /// `STORED` was written by `encode` when format 1 was made; if this test fails, the
    /// dictionary's recipe changed, and every stored body with it.
    #[test]
    fn format_1_is_frozen() {
        let dict = dictionary(&columns());
        let text = String::from_utf8(dict).unwrap();
        assert!(text.starts_with(STATIC_V1));
        assert_eq!(
            &text[STATIC_V1.len()..],
            r#""externalId":"t1-2001-247757062-101","firstName":"Jane","lastName":"Doe","email":"jane.t1-2001-247757062.101@example.com","phone":"+49 12001 0000101","street":"Hauptstr.","houseNumber":"1","postalCode":"10115","city":"Berlin","country":"DE","consentStatus":"granted","legalBasis":"consent","capturedAt":"2026-01-01T10:00:00Z","captureMethod":"web_form",{"utmSource":"bench"}"#
        );
        const STORED: [u8; 55] = [
            1, 40, 181, 47, 253, 100, 190, 0, 69, 1, 0, 136, 123, 115, 111, 108, 97, 114, 114, 111,
            111, 102, 34, 58, 34, 116, 105, 108, 101, 6, 0, 193, 43, 193, 36, 57, 240, 201, 201,
            143, 186, 147, 93, 64, 233, 81, 21, 6, 200, 226, 10, 135, 185, 68, 207,
        ];
        assert_eq!(
            decode(blob(&STORED), &columns()).unwrap().as_deref(),
            Some(RAW)
        );
    }

    /// Format 2 is frozen as format 1 is: `STORED` was written by `encode` when format 2
    /// was made.
    #[test]
    fn format_2_is_frozen() {
        const STORED: [u8; 61] = [
            2, 190, 1, 0, 0, 131, 178, 28, 5, 207, 51, 163, 230, 26, 123, 0, 2, 13, 46, 1, 15, 119,
            1, 255, 48, 11, 235, 4, 95, 115, 111, 108, 97, 114, 225, 4, 19, 176, 114, 111, 111,
            102, 34, 58, 34, 116, 105, 108, 101, 144, 4, 9, 190, 1, 96, 101, 110, 99, 104, 34, 125,
        ];
        assert_eq!(
            decode(blob(&STORED), &columns()).unwrap().as_deref(),
            Some(RAW)
        );
        assert_eq!(encode(RAW, &columns()), STORED, "and is still written so");
    }

    /// Format 2's bytes before its block: the format, the length, the check.
    const V2_HEADER: usize = 1 + 4 + CHECK_LEN;

    #[test]
    fn a_damaged_body_is_refused_not_misread() {
        let stored = encode(RAW, &columns());
        let mut damaged = vec![
            stored[..V2_HEADER - 1].to_vec(),
            stored[..stored.len() - 3].to_vec(),
            [&[FORMAT_V2][..], &u32::MAX.to_le_bytes(), &stored[5..]].concat(),
        ];
        for at in [5, V2_HEADER, stored.len() - 1] {
            let mut flipped = stored.clone();
            flipped[at] ^= 0x20;
            damaged.push(flipped);
        }
        for value in damaged {
            let error = decode(blob(&value), &columns()).unwrap_err();
            assert!(matches!(error, BodyError::Corrupt(_)), "{error}");
        }
    }
}
