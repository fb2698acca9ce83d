//! Record identifiers: a type prefix and a ULID (`lead_01JD…`), so ids say what they name
//! and sort by creation time.
//!
//! Owns one type per id of ours, each with one stored form. [`LeadId`] and
//! [`LeadRequestId`] are held as their ULID (`Copy`, made without formatting text) and
//! stored as its 16 bytes in every column that names one; they print, serialize and parse
//! as the text (`lead_01JD…`), and only that exact text names one, so anything else a
//! partner or operator types is an unknown id. [`TransactionId`] and [`EventId`] are stored
//! as their text, which names them whatever an older build made. Request ids
//! (`request_id`) are text too, a client's as sent. The ids of suppliers, sources and
//! buyers ([`SupplierId`], [`SourceId`], [`BuyerId`]) are stored as their text too: the
//! operator's choice, checked by the rule for operator-chosen ids ([`is_valid`]) when the
//! object is made ([`ConfigId`]), or generated; the other configuration objects' ids are
//! plain strings under the same rule.

/// A new id with the given prefix, e.g. `new("lead")` → `lead_01JD3…`.
pub fn new(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// The ULID of `text` when `text` is exactly `{prefix}_` and a ULID in the canonical text
/// this module prints (26 upper-case Crockford base32 characters); anything else (lower
/// case, another prefix, a client's own id) is `None`, so it names nothing.
fn canonical_ulid(prefix: &str, text: &str) -> Option<ulid::Ulid> {
    let rest = text.strip_prefix(prefix)?.strip_prefix('_')?;
    let ulid = ulid::Ulid::from_string(rest).ok()?;
    // `from_string` also reads lower case; only the text we print names an id.
    let mut canonical = [0; ulid::ULID_LEN];
    (ulid.array_to_str(&mut canonical) == rest).then_some(ulid)
}

/// The text given for an id that is not one of ours in its canonical form: an unknown id,
/// whatever the caller answers for one it never made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a {prefix} id: {text}")]
pub struct NotAnId {
    pub prefix: &'static str,
    pub text: String,
}

/// An id of ours: a type prefix and a ULID, held as the ULID (16 bytes, `Copy`) and stored as
/// its 16 bytes, a BLOB, in every column that names one (migration 20). Printed, serialized
/// and parsed as `{prefix}_` and the ULID's canonical text, exactly as the text ids were.
macro_rules! ulid_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(ulid::Ulid);

        impl $name {
            /// The prefix of the id's text.
            pub const PREFIX: &'static str = $prefix;

            /// A new id: the current time and random bits, so ids sort by creation.
            pub fn generate() -> Self {
                Self(ulid::Ulid::new())
            }

            /// The id `text` names, when it is exactly the text [`Display`](std::fmt::Display)
            /// prints; `None` for anything else, which therefore names no record.
            pub fn parse(text: &str) -> Option<Self> {
                canonical_ulid(Self::PREFIX, text).map(Self)
            }

            /// The stored form's 16 bytes (the ULID, big-endian).
            pub fn to_bytes(self) -> [u8; 16] {
                self.0.to_bytes()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut text = [0; ulid::ULID_LEN];
                write!(f, "{}_{}", Self::PREFIX, self.0.array_to_str(&mut text))
            }
        }

        impl std::str::FromStr for $name {
            type Err = NotAnId;

            fn from_str(text: &str) -> Result<Self, NotAnId> {
                Self::parse(text).ok_or_else(|| NotAnId {
                    prefix: Self::PREFIX,
                    text: text.to_string(),
                })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        /// Only the text [`Display`](std::fmt::Display) prints (ids inside stored JSON).
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::Owned(
                    rusqlite::types::Value::from(*self),
                ))
            }
        }

        /// The stored form, for a list of dynamic parameters.
        impl From<$name> for rusqlite::types::Value {
            fn from(id: $name) -> Self {
                rusqlite::types::Value::Blob(id.to_bytes().to_vec())
            }
        }

        /// Only the 16 bytes: any other stored value is an error, never a guess.
        impl rusqlite::types::FromSql for $name {
            fn column_result(
                stored: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                <[u8; 16]>::column_result(stored).map(|bytes| Self(ulid::Ulid::from_bytes(bytes)))
            }
        }
    };
}

ulid_id!(
    /// A lead's id, `lead_01JD…`.
    LeadId,
    "lead"
);

ulid_id!(
    /// A lead request's id (one product a lead asks for), `lreq_01JD…`.
    LeadRequestId,
    "lreq"
);

/// An id of ours stored as its text (TEXT): `{prefix}_` and a ULID when made here. Any text
/// read back or typed names one (a file may hold ids an older build made differently), so
/// an unknown one simply finds no row. Printed and serialized as the text itself.
macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The prefix of the ids made here.
            pub const PREFIX: &'static str = $prefix;

            /// A new id: the prefix, the current time and random bits, so ids sort by
            /// creation.
            pub fn generate() -> Self {
                Self(format!("{}_{}", Self::PREFIX, ulid::Ulid::new()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        /// The id `text` names (a lookup of one never made finds nothing).
        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                Self(text.to_string())
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                Self(text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                self.0.to_sql()
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(
                stored: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                String::column_result(stored).map(Self)
            }
        }

        /// The stored form, for a list of dynamic parameters.
        impl From<$name> for rusqlite::types::Value {
            fn from(id: $name) -> Self {
                rusqlite::types::Value::Text(id.0)
            }
        }
    };
}

text_id!(
    /// A transaction's id, `txn_01JD…`.
    TransactionId,
    "txn"
);

text_id!(
    /// An outbox event's id, `evt_01JD…`: also its `webhook-id`.
    EventId,
    "evt"
);

/// The text given for a new configuration object's id that [`is_valid`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid id '{0}': use 1 to 64 letters, digits, '-', '_' or '.'")]
pub struct InvalidId(pub String);

/// `text` as an operator-chosen id, when [`is_valid`] accepts it: the one check of every
/// configuration object's id, typed ([`ConfigId`]) or not.
pub fn chosen(text: &str) -> Result<String, InvalidId> {
    if is_valid(text) {
        Ok(text.to_string())
    } else {
        Err(InvalidId(text.to_string()))
    }
}

/// The id of a configuration object: the operator's choice (checked by [`is_valid`]) or,
/// when none is given, a generated one (`{prefix}_` and a ULID).
pub trait ConfigId: Sized {
    /// The operator's id, when [`is_valid`] accepts it.
    fn chosen(text: &str) -> Result<Self, InvalidId>;

    /// A new id with the type's prefix.
    fn generated() -> Self;
}

/// An id of a configuration object: a [`text_id!`], made by the operator ([`ConfigId`]).
/// Lookups take any text, so an unknown one finds no row and answers as before.
macro_rules! config_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        text_id!($(#[$doc])* $name, $prefix);

        impl ConfigId for $name {
            fn chosen(text: &str) -> Result<Self, InvalidId> {
                chosen(text).map(Self)
            }

            fn generated() -> Self {
                Self::generate()
            }
        }

    };
}

config_id!(
    /// A supplier's id: the operator's, or `sup_01JD…`.
    SupplierId,
    "sup"
);

config_id!(
    /// A source's id: the operator's, or `src_01JD…`.
    SourceId,
    "src"
);

config_id!(
    /// A buyer's id: the operator's, or `buyer_01JD…`.
    BuyerId,
    "buyer"
);

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
    fn lead_ids_print_parse_and_store_as_16_bytes() {
        use rusqlite::types::{FromSql, ToSql, ToSqlOutput, Value, ValueRef};
        let id = LeadId::generate();
        let text = id.to_string();
        assert!(text.starts_with("lead_"), "{text}");
        assert_eq!(text.len(), "lead_".len() + 26);
        assert_eq!(LeadId::parse(&text), Some(id));
        assert_eq!(text.parse::<LeadId>(), Ok(id));
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<LeadId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<LeadId>(&json.to_lowercase()).is_err());
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = LeadId::generate();
        assert!(later > id && later.to_string() > text);

        let ToSqlOutput::Owned(Value::Blob(bytes)) = id.to_sql().unwrap() else {
            panic!("not a BLOB")
        };
        assert_eq!(bytes.len(), 16);
        assert_eq!(LeadId::column_result(ValueRef::Blob(&bytes)), Ok(id));
        // Only the 16 bytes are a stored id.
        assert!(LeadId::column_result(ValueRef::Blob(&bytes[..15])).is_err());
        assert!(LeadId::column_result(ValueRef::Text(text.as_bytes())).is_err());
        assert!(LeadId::column_result(ValueRef::Null).is_err());

        // Anything but the text we print names no id.
        let request = LeadRequestId::parse(&text.replacen("lead_", "lreq_", 1)).unwrap();
        assert_eq!(request.to_string(), text.replacen("lead_", "lreq_", 1));
        for other in [
            text.to_lowercase(),
            text.replacen("lead_", "lreq_", 1),
            text["lead_".len()..].to_string(),
            format!("{text}x"),
            "lead_".to_string(),
            "lead_nope".to_string(),
            String::new(),
        ] {
            assert_eq!(LeadId::parse(&other), None, "{other}");
            assert!(other.parse::<LeadId>().is_err(), "{other}");
        }
    }

    #[test]
    fn transaction_ids_are_their_text_in_and_out() {
        use rusqlite::types::{FromSql, ToSql, ToSqlOutput, ValueRef};
        let id = TransactionId::generate();
        assert!(id.as_str().starts_with("txn_"), "{id}");
        assert_eq!(id.as_str().len(), "txn_".len() + 26);
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{id}\""));
        let ToSqlOutput::Borrowed(ValueRef::Text(text)) = id.to_sql().unwrap() else {
            panic!("not text")
        };
        assert_eq!(text, id.as_str().as_bytes());
        assert_eq!(TransactionId::column_result(ValueRef::Text(text)), Ok(id));
        // Any text names one (an older file's, a typed one); a BLOB is not a stored id.
        let older = TransactionId::column_result(ValueRef::Text(b"txn_1")).unwrap();
        assert_eq!(older, TransactionId::from("txn_1"));
        assert!(TransactionId::column_result(ValueRef::Blob(&[0; 16])).is_err());
        let event = EventId::generate();
        assert!(event.as_str().starts_with("evt_"), "{event}");
    }

    /// A configuration id: the operator's text in and out (Display, JSON, TEXT), refused
    /// when [`is_valid`] refuses it, and generated as `{prefix}_` and a ULID.
    fn config_id_is_its_text<Id>(prefix: &str)
    where
        Id: ConfigId
            + std::fmt::Debug
            + std::fmt::Display
            + PartialEq
            + serde::Serialize
            + serde::de::DeserializeOwned
            + rusqlite::types::ToSql
            + rusqlite::types::FromSql,
    {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        let chosen = Id::chosen("lead-farm.2").unwrap();
        assert_eq!(chosen.to_string(), "lead-farm.2");
        assert_eq!(serde_json::to_string(&chosen).unwrap(), "\"lead-farm.2\"");
        assert_eq!(
            serde_json::from_str::<Id>("\"lead-farm.2\"").unwrap(),
            chosen
        );
        let ToSqlOutput::Borrowed(ValueRef::Text(text)) = chosen.to_sql().unwrap() else {
            panic!("not text")
        };
        assert_eq!(text, b"lead-farm.2");
        assert_eq!(Id::column_result(ValueRef::Text(text)), Ok(chosen));
        assert!(Id::column_result(ValueRef::Blob(b"lead-farm.2")).is_err());
        for bad in ["", "..", "a/b", "lead farm"] {
            assert_eq!(Id::chosen(bad), Err(InvalidId(bad.to_string())), "{bad}");
        }
        let generated = Id::generated().to_string();
        assert!(generated.starts_with(&format!("{prefix}_")), "{generated}");
        assert_eq!(generated.len(), prefix.len() + 1 + 26);
        assert_eq!(Id::chosen(&generated).unwrap().to_string(), generated);
    }

    #[test]
    fn supplier_ids_are_their_text_in_and_out() {
        config_id_is_its_text::<SupplierId>("sup");
    }

    #[test]
    fn source_ids_are_their_text_in_and_out() {
        config_id_is_its_text::<SourceId>("src");
    }

    #[test]
    fn buyer_ids_are_their_text_in_and_out() {
        config_id_is_its_text::<BuyerId>("buyer");
    }

    #[test]
    fn operator_ids_are_restricted_to_a_safe_set() {
        for ok in ["acme", "src-1", "ws_2", "a.b", "X9"] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "%2e", "é", &"x".repeat(65)] {
            assert!(!is_valid(bad), "{bad}");
        }
        assert_eq!(
            InvalidId("a/b".into()).to_string(),
            "invalid id 'a/b': use 1 to 64 letters, digits, '-', '_' or '.'"
        );
    }
}
