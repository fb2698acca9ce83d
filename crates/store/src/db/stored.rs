//! Stored states: the values of a status column as a Rust enum that reads and writes
//! itself with rusqlite.
//!
//! [`stored_enum!`] declares such an enum with the exact text of each value in the column.
//! Reading a value the enum does not know is an error ([`UnknownValue`] inside rusqlite's
//! `FromSqlConversionFailure`), never a default: a row that some other program or a
//! hand edit left in a state this binary does not know must stop the operation that reads
//! it, not be treated as a state it is not. `leadrelay check` lists such rows (`ops::check`
//! scans every status column against the enums' `NAMES`).
//!
//! Owns the macro and the error. The enums themselves live with the module that owns
//! their column (`delivery::transaction::Status`, `outbox::store::EventStatus`, …).

/// A stored value that the column's enum does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{value}' stored in the database (run leadrelay check)")]
pub struct UnknownValue {
    /// What the column holds, e.g. `transaction status`.
    pub what: &'static str,
    pub value: String,
}

/// Declares a stored enum: `stored_enum! { pub enum Status as "transaction status" {
/// Delivered = "delivered", … } }`. It gets `ALL`, `NAMES`, `as_str`, `parse` (`None` for
/// an unknown text), `Display`, and rusqlite's `ToSql` and `FromSql` (an unknown text is an
/// [`UnknownValue`] error). Attributes before `enum` (docs, more derives) are kept.
#[macro_export]
macro_rules! stored_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident as $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        #[allow(dead_code)]
        impl $name {
            /// Every value, in declaration order.
            $vis const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The stored text of every value, in declaration order.
            $vis const NAMES: &'static [&'static str] = &[$($text),+];

            /// The stored text.
            $vis fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value stored as `text`; `None` when there is none.
            $vis fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::Borrowed(
                    rusqlite::types::ValueRef::Text(self.as_str().as_bytes()),
                ))
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                let text = value.as_str()?;
                $name::parse(text).ok_or_else(|| {
                    rusqlite::types::FromSqlError::Other(Box::new(
                        $crate::db::stored::UnknownValue {
                            what: $what,
                            value: text.to_string(),
                        },
                    ))
                })
            }
        }
    };
}

pub use crate::stored_enum;

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    stored_enum! {
        /// A test enum.
        enum Colour as "colour" {
            Red = "red",
            /// With a doc.
            DarkBlue = "dark_blue",
        }
    }

    #[test]
    fn names_round_trip_and_unknown_text_is_none() {
        for (value, name) in Colour::ALL.iter().zip(Colour::NAMES) {
            assert_eq!(value.as_str(), *name);
            assert_eq!(Colour::parse(name), Some(*value));
            assert_eq!(value.to_string(), *name);
        }
        assert_eq!(Colour::parse("green"), None);
    }

    #[test]
    fn reads_and_writes_through_sqlite_and_refuses_an_unknown_value() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (c TEXT)").unwrap();
        conn.execute("INSERT INTO t VALUES (?1)", [Colour::DarkBlue])
            .unwrap();
        let read: Colour = conn.query_row("SELECT c FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(read, Colour::DarkBlue);

        conn.execute_batch("UPDATE t SET c = 'green'").unwrap();
        let err = conn
            .query_row("SELECT c FROM t", [], |r| r.get::<_, Colour>(0))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown colour 'green' stored in the database"),
            "{err}"
        );
        conn.execute_batch("UPDATE t SET c = 7").unwrap();
        assert!(
            conn.query_row("SELECT c FROM t", [], |r| r.get::<_, Colour>(0))
                .is_err(),
            "a number is not a colour"
        );
        let none: Option<Colour> = conn.query_row("SELECT NULL", [], |r| r.get(0)).unwrap();
        assert_eq!(none, None);
    }
}
