//! The stored form of auto-delivery's decision trace (`lead_requests.decision`): the JSON
//! text compressed against a fixed dictionary.
//!
//! A delivered lead's trace (outcome, the evaluation's factors, the deliveries, every
//! candidate) was about 1,100 to 1,400 bytes of JSON text per request, more than the rest
//! of the lead; most of it is the same key names and factor names on every lead. Stored
//! against a dictionary made of the trace's shape ([`STATIC_V1`]) it takes a seventh of
//! that. [`decode`] gives back the text byte for byte, so every reader sees the JSON it saw
//! before; every stored form carries a check.
//!
//! A trace starts with `{"requestId":"<its request's id>"`, which the reader knows: formats
//! 2 and 3 leave that start out, store four bytes of the id ([`check_v2`]) so that a trace
//! read under another request is refused, and compress the rest against one fixed
//! dictionary ([`dictionary_v2`]).
//!
//! - Format 3 (what this build writes): an LZ4 block, with the rest's length and CRC-32.
//!   The writer stores a trace for every routed lead inside its job, where zstd's frame
//!   (format 2) built its entropy tables anew for every trace: 57,000 of the 456,000
//!   instructions of an auto-delivered lead's writer job (callgrind of
//!   `examples/autodelivery_cost`, `ONLY=5 LEADS=1000`). The block takes a third of the
//!   time for about 25 bytes more (198 bytes for the test's 1,300-byte trace, 172 in format
//!   2).
//! - Format 2: a zstd frame against the prepared dictionary. Still read.
//! - Format 1: a zstd frame against [`dictionary`], which ends with the request's id, so
//!   every trace built the dictionary's tables anew. A trace that starts otherwise (a
//!   ping's) is still stored in format 1.
//!
//! A dictionary must be rebuilt identically for as long as a row exists, so each recipe
//! is frozen with its format (pinned by a test): a change is a new format byte, never an edit.
//! A trace that changes shape (new keys) still round-trips; it only compresses less. A
//! trace stored before format 1 (a TEXT value) is read as is.
//!
//! Owns the stored form of the trace; `status` writes it, `view` and `store` read it, and
//! `ping::store` stores a ping's trace in the same form (the ping's id as the request id).

use rusqlite::types::ValueRef;

/// The first byte of a stored trace: format 1 is a zstd frame against [`dictionary`] v1.
const FORMAT_V1: u8 = 1;

/// Format 2: the request id's [`check_v2`], then a zstd frame against [`DICTIONARY_V2`] of
/// the trace after its start ([`start_v2`]).
const FORMAT_V2: u8 = 2;

/// Format 3: the request id's [`check_v2`], then the trace after its start ([`start_v2`])
/// as an LZ4 block against [`dictionary_v2`], framed (`lz4_block`) with its length and
/// CRC-32 ([`crc_of`]).
const FORMAT_V3: u8 = 3;

/// The longest trace a frame may claim to hold.
const MAX_TRACE: usize = 4 * 1024 * 1024;

/// A trace's shape: the keys, the built-in model's factors and the usual values, in the
/// order `autodelivery::decision` writes them. Part of format 1: never edit.
const STATIC_V1: &str = concat!(
    r#"{"waterfall":[{"step":1,"refusedBy":"","transactionId":"txn_01","reason":"","at":"2026-"}],"#,
    r#""pingId":"png_01","reason":"buyer_paused","reason":"buyer_unhealthy","#,
    r#""reason":"filter_mismatch","reason":"schedule_closed","reason":"daily_cap_reached","#,
    r#""reason":"monthly_cap_reached","reason":"insufficient_balance","#,
    r#""reason":"already_delivered","reason":"no_bid","reason":"eligible","#,
    r#""reason":"delivery_refused","reason":"no_eligible_buyer","#,
    r#""reason":"score_below_threshold","eligible":false,"detail":{"field":""},"#,
    r#""outcome":"not_delivered","reason":"delivered","evaluation":{"model":"leadrelay-logistic-v1","score":0,"threshold":50,"passed":true,"factors":["#,
    r#"{"name":"intercept","value":1.0,"weight":-3.0,"contribution":-3.0},"#,
    r#"{"name":"validEmail","value":1.0,"weight":1.5,"contribution":1.5},"#,
    r#"{"name":"validPhone","value":1.0,"weight":1.5,"contribution":1.5},"#,
    r#"{"name":"names","value":1.0,"weight":1.0,"contribution":1.0},"#,
    r#"{"name":"addressCompleteness","value":1.0,"weight":1.0,"contribution":1.0},"#,
    r#"{"name":"consentGranted","value":0.5,"weight":1.5,"contribution":0.75},"#,
    r#"{"name":"requiredFields","value":1.0,"weight":1.0,"contribution":1.0},"#,
    r#"{"name":"softQualityFlags","value":0.0,"weight":-1.0,"contribution":0.0},"#,
    r#"{"name":"duplicatesSeen","value":0.0,"weight":0.0,"contribution":0.0}]},"#,
    r#""deliveries":[{"transactionId":"txn_01","buyerAccountId":"","buyerPrice":0.0,"deliveryMode":"exclusive"}],"#,
    r#""candidates":[{"buyerAccountId":"","eligible":true,"reason":"selected","buyerPrice":0.0,"priority":0,"lastServedAt":null},"#,
    r#"{"buyerAccountId":"","eligible":true,"reason":"not_selected","buyerPrice":0.0,"priority":0,"lastServedAt":"2026-"}],"#,
    r#""decidedAt":"2026-","version":"1.0"}"#,
);

/// The dictionary of format 1: [`STATIC_V1`], then `{"requestId":"<id>","outcome":"delivered"`
/// (how a trace starts). Frozen: see the module header.
fn dictionary(request_id: &str) -> Vec<u8> {
    let mut dict = Vec::with_capacity(STATIC_V1.len() + 64);
    dict.extend_from_slice(STATIC_V1.as_bytes());
    dict.extend_from_slice(b"{\"requestId\":\"");
    dict.extend_from_slice(request_id.as_bytes());
    dict.extend_from_slice(b"\",\"outcome\":\"delivered\"");
    dict
}

/// The dictionary of format 2: [`STATIC_V1`], then `","outcome":"delivered"` (how a trace
/// goes on after its start). Frozen: see the module header.
fn dictionary_v2() -> Vec<u8> {
    let mut dict = STATIC_V1.as_bytes().to_vec();
    dict.extend_from_slice(b"\",\"outcome\":\"delivered\"");
    dict
}

/// [`dictionary_v2`], prepared once per process for reading format 2.
static DICTIONARY_V2: std::sync::LazyLock<super::zframe::Prepared> =
    std::sync::LazyLock::new(|| super::zframe::Prepared::new(&dictionary_v2()));

/// [`dictionary_v2`] as format 3 compresses against it, made once per process.
static DICTIONARY_V3: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(dictionary_v2);

/// The start of request `request_id`'s trace, which format 2 leaves out.
fn start_v2(request_id: &str) -> String {
    format!("{{\"requestId\":\"{request_id}\"")
}

/// Four bytes of `request_id` (FNV-1a), stored before a format 2 frame and a format 3 block:
/// neither depends on the request, and a trace read under another request's id must still
/// be refused rather than shown with that id. Frozen with formats 2 and 3.
fn check_v2(request_id: &str) -> [u8; 4] {
    let hash = request_id.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    hash.to_le_bytes()
}

/// The stored form of the trace `json` of request `request_id`. Every format reads back at
/// most [`MAX_TRACE`] bytes: a trace a thousand times a twenty-candidate one's, which no
/// product's buyers make.
pub(crate) fn encode(json: &str, request_id: &str) -> Vec<u8> {
    let Some(rest) = json.strip_prefix(start_v2(request_id).as_str()) else {
        let frame = super::zframe::compress(&dictionary(request_id), json.as_bytes());
        let mut stored = Vec::with_capacity(frame.len() + 1);
        stored.push(FORMAT_V1);
        stored.extend_from_slice(&frame);
        return stored;
    };
    let rest = rest.as_bytes();
    let mut stored = vec![FORMAT_V3];
    stored.extend_from_slice(&check_v2(request_id));
    super::lz4_block::append(&mut stored, rest, crc_of(rest), &DICTIONARY_V3);
    stored
}

/// The CRC-32 (ISO-HDLC, as zlib's, little-endian) a format 3 trace carries of its text
/// after the start: a check against damage, not a secret.
fn crc_of(bytes: &[u8]) -> [u8; 4] {
    crc32fast::hash(bytes).to_le_bytes()
}

/// Why a stored trace could not be read back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TraceError {
    #[error("stored decision of request '{request_id}' has unknown format {format}")]
    UnknownFormat { request_id: String, format: u8 },
    #[error("stored decision of request '{request_id}' does not decode: {reason}")]
    Corrupt { request_id: String, reason: String },
}

impl From<TraceError> for rusqlite::Error {
    fn from(e: TraceError) -> Self {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(e))
    }
}

/// The trace's JSON text from its stored value and its request's id; `None` when the
/// request has none.
pub(crate) fn decode(stored: ValueRef<'_>, request_id: &str) -> Result<Option<String>, TraceError> {
    let corrupt = |reason: &str| TraceError::Corrupt {
        request_id: request_id.to_string(),
        reason: reason.to_string(),
    };
    let bytes = match stored {
        ValueRef::Null => return Ok(None),
        // A trace stored before format 1: the text itself.
        ValueRef::Text(text) => return Ok(Some(String::from_utf8_lossy(text).into_owned())),
        ValueRef::Blob(bytes) => bytes,
        ValueRef::Integer(_) | ValueRef::Real(_) => return Err(corrupt("a number")),
    };
    let Some((&format, frame)) = bytes.split_first() else {
        return Err(corrupt("empty"));
    };
    let (start, decoded) = match format {
        FORMAT_V1 => (
            String::new(),
            super::zframe::decompress(&dictionary(request_id), frame, MAX_TRACE),
        ),
        FORMAT_V2 => {
            let Some(frame) = frame.strip_prefix(&check_v2(request_id)) else {
                return Err(corrupt("stored for another request"));
            };
            (
                start_v2(request_id),
                super::zframe::decompress_prepared(&DICTIONARY_V2, frame, MAX_TRACE),
            )
        }
        FORMAT_V3 => {
            let Some(stored) = frame.strip_prefix(&check_v2(request_id)) else {
                return Err(corrupt("stored for another request"));
            };
            (
                start_v2(request_id),
                super::lz4_block::read(stored, &DICTIONARY_V3, MAX_TRACE, crc_of)
                    .map_err(std::io::Error::other),
            )
        }
        _ => {
            return Err(TraceError::UnknownFormat {
                request_id: request_id.to_string(),
                format,
            });
        }
    };
    let decoded = decoded.map_err(|e| corrupt(&e.to_string()))?;
    let rest = String::from_utf8(decoded).map_err(|_| corrupt("not UTF-8"))?;
    let mut trace = start;
    trace.push_str(&rest);
    Ok(Some(trace))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delivered lead's trace as `autodelivery::decision` stores it (three buyers).
    const TRACE: &str = r#"{"requestId":"lreq_01M843YKSZZH2WEGRD4S8224V2","outcome":"delivered","reason":"delivered","evaluation":{"model":"leadrelay-logistic-v1","score":98,"threshold":50,"passed":true,"factors":[{"name":"intercept","value":1.0,"weight":-3.0,"contribution":-3.0},{"name":"validEmail","value":1.0,"weight":1.5,"contribution":1.5},{"name":"validPhone","value":1.0,"weight":1.5,"contribution":1.5},{"name":"names","value":1.0,"weight":1.0,"contribution":1.0},{"name":"addressCompleteness","value":1.0,"weight":1.0,"contribution":1.0},{"name":"consentGranted","value":0.5,"weight":1.5,"contribution":0.75},{"name":"requiredFields","value":1.0,"weight":1.0,"contribution":1.0},{"name":"softQualityFlags","value":0.0,"weight":-1.0,"contribution":0.0},{"name":"duplicatesSeen","value":0.0,"weight":0.0,"contribution":0.0}]},"deliveries":[{"transactionId":"txn_01M843YKT3RZG5EZSC17WZ260E","buyerAccountId":"beta","buyerPrice":230365.0,"deliveryMode":"exclusive"}],"candidates":[{"buyerAccountId":"beta","eligible":true,"reason":"selected","buyerPrice":230365.0,"priority":0,"lastServedAt":null},{"buyerAccountId":"gamma","eligible":true,"reason":"not_selected","buyerPrice":225944.0,"priority":0,"lastServedAt":null},{"buyerAccountId":"alpha","eligible":true,"reason":"not_selected","buyerPrice":217693.0,"priority":0,"lastServedAt":null}],"decidedAt":"2026-11-23T11:51:36.511Z","version":"1.0"}"#;
    const ID: &str = "lreq_01M843YKSZZH2WEGRD4S8224V2";

    #[test]
    fn a_trace_comes_back_byte_for_byte_in_a_fraction_of_its_size() {
        let stored = encode(TRACE, ID);
        assert_eq!(stored[0], FORMAT_V3);
        assert!(
            stored.len() * 4 < TRACE.len(),
            "{} bytes for a trace of {}",
            stored.len(),
            TRACE.len()
        );
        // The LZ4 block finds the same matches as format 2's zstd frame but codes them
        // without entropy tables: some 25 bytes more, for a third of the time.
        let v2 = encode_v2(TRACE, ID).len();
        assert!(
            stored.len() <= v2 + 32,
            "{} bytes, format 2 took {v2}",
            stored.len()
        );
        let back = decode(ValueRef::Blob(&stored), ID).unwrap();
        assert_eq!(back.as_deref(), Some(TRACE));
    }

    /// A trace as format 1 stored it (older builds; still read).
    fn encode_v1(json: &str, request_id: &str) -> Vec<u8> {
        let mut stored = vec![FORMAT_V1];
        stored.extend(super::super::zframe::compress(
            &dictionary(request_id),
            json.as_bytes(),
        ));
        stored
    }

    /// A trace in format 2's layout: its frame made by the prefix compressor at level 3,
    /// where format 2's writer used the prepared dictionary at level -1; the reader takes
    /// both (`trace_format_2.json` holds a row that writer wrote).
    fn encode_v2(json: &str, request_id: &str) -> Vec<u8> {
        let rest = json.strip_prefix(start_v2(request_id).as_str()).unwrap();
        let mut stored = vec![FORMAT_V2];
        stored.extend_from_slice(&check_v2(request_id));
        stored.extend(super::super::zframe::compress(
            &dictionary_v2(),
            rest.as_bytes(),
        ));
        stored
    }

    #[test]
    fn format_2_rows_read_as_they_were_written() {
        let stored = encode_v2(TRACE, ID);
        assert_eq!(
            decode(ValueRef::Blob(&stored), ID).unwrap().as_deref(),
            Some(TRACE)
        );
        assert!(matches!(
            decode(ValueRef::Blob(&stored), "lreq_other"),
            Err(TraceError::Corrupt { .. })
        ));
    }

    /// A row format 2's writer stored (`trace_format_2.json`: its request, its stored bytes
    /// and the decision its build showed for it), read back by this one.
    #[test]
    fn a_row_that_format_2_wrote_reads_back_as_its_build_showed_it() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("trace_format_2.json")).unwrap();
        let id = fixture["requestId"].as_str().unwrap();
        let hex = fixture["stored"].as_str().unwrap();
        let stored: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
            .collect();
        assert_eq!(stored[0], FORMAT_V2);
        let text = decode(ValueRef::Blob(&stored), id).unwrap().unwrap();
        let shown: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(shown, fixture["decision"]);
        assert_eq!(shown["candidates"].as_array().unwrap().len(), 20);
    }

    /// The bytes of a format 3 trace before its block.
    const V3_HEADER: usize = 1 + 4 + 4 + 4;

    #[test]
    fn a_format_3_trace_that_does_not_match_its_check_is_refused() {
        let stored = encode(TRACE, ID);
        let corrupt = |bytes: &[u8]| {
            matches!(
                decode(ValueRef::Blob(bytes), ID),
                Err(TraceError::Corrupt { .. })
            )
        };
        // Every byte after the request's check, changed: the length, the CRC or the block.
        for at in 5..stored.len() {
            let mut changed = stored.clone();
            changed[at] ^= 0x20;
            assert!(corrupt(&changed), "a change at byte {at} was not seen");
        }
        assert!(corrupt(&stored[..stored.len() - 1]), "a truncated block");
        assert!(corrupt(&stored[..V3_HEADER - 1]), "a truncated header");
        let mut long = stored.clone();
        long[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(corrupt(&long), "a length past the limit");
    }

    #[test]
    fn format_1_rows_read_as_they_were_written_and_other_traces_are_still_written_so() {
        let stored = encode_v1(TRACE, ID);
        assert_eq!(
            decode(ValueRef::Blob(&stored), ID).unwrap().as_deref(),
            Some(TRACE)
        );
        let ping = r#"{"pingId":"png_01","outcome":"delivered"}"#;
        let stored = encode(ping, ID);
        assert_eq!(
            stored,
            encode_v1(ping, ID),
            "not a request's trace: format 1"
        );
        assert_eq!(
            decode(ValueRef::Blob(&stored), ID).unwrap().as_deref(),
            Some(ping)
        );
    }

    #[test]
    fn any_text_round_trips_and_older_forms_read_as_they_are() {
        let start = format!("{{\"requestId\":\"{ID}\"");
        for json in [
            "",
            "{}",
            r#"{"new":"shape","é":[1,2,3]}"#,
            &"x".repeat(70_000),
            &start,
            &format!("{start},\"new\":\"shape\"}}"),
            &format!("{start}{}", "y".repeat(70_000)),
        ] {
            let stored = encode(json, ID);
            assert_eq!(
                decode(ValueRef::Blob(&stored), ID).unwrap().as_deref(),
                Some(json)
            );
        }
        assert_eq!(
            decode(ValueRef::Text(TRACE.as_bytes()), ID)
                .unwrap()
                .as_deref(),
            Some(TRACE)
        );
        assert_eq!(decode(ValueRef::Null, ID).unwrap(), None);
    }

    #[test]
    fn a_trace_read_under_another_request_or_format_is_refused() {
        let stored = encode(TRACE, ID);
        assert!(matches!(
            decode(ValueRef::Blob(&stored), "lreq_other"),
            Err(TraceError::Corrupt { .. })
        ));
        assert!(matches!(
            decode(ValueRef::Blob(&encode_v1(TRACE, ID)), "lreq_other"),
            Err(TraceError::Corrupt { .. })
        ));
        let mut later = stored.clone();
        later[0] = 4;
        assert!(matches!(
            decode(ValueRef::Blob(&later), ID),
            Err(TraceError::UnknownFormat { format: 4, .. })
        ));
    }

    /// The recipe is frozen: rows written by format 1 must decode for ever.
    #[test]
    fn the_dictionary_of_format_1_is_pinned() {
        let dict = dictionary(ID);
        assert_eq!(dict.len(), STATIC_V1.len() + 68, "{}", dict.len());
        let digest = crate::secrets::hash(&String::from_utf8(dict).unwrap());
        assert_eq!(
            digest, "3863536dd7f0c10d912ef9b5a35685cf9e847dd53a69effc26009beb3d3b3176",
            "format 1's dictionary changed: make a new format"
        );
        let dict = dictionary_v2();
        assert_eq!(dict.len(), STATIC_V1.len() + 23, "{}", dict.len());
        let digest = crate::secrets::hash(&String::from_utf8(dict).unwrap());
        assert_eq!(
            digest, "5909872593ee9f7f83e6d4606c5f8b1000e0390b2485be989aca31023403a2e7",
            "formats 2 and 3's dictionary changed: make a new format"
        );
        assert_eq!(
            check_v2(ID),
            [90, 90, 98, 218],
            "formats 2 and 3's check changed"
        );
        assert_eq!(
            crc_of(b"123456789"),
            0xCBF4_3926_u32.to_le_bytes(),
            "format 3's CRC is CRC-32 (ISO-HDLC)"
        );
    }
}
