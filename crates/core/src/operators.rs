//! Operators of the console and their sessions (DESIGN.md section 15): the owner of the
//! `operators` and `operator_sessions` tables.
//!
//! An operator is a name and a console token (`lro_…`, 256 random bits) that `leadrelay
//! operator create` prints once; only its SHA-256 is stored, like every inbound secret
//! (`crate::secrets`). A login with a valid token opens a session: a second random value
//! that travels in the console's cookie, also stored only as its SHA-256, with a fixed
//! expiry. Revoking an operator deletes its sessions in the same job, so a revoked token's
//! browser is signed out at its next request.
//!
//! Each operator has a role ([`Role`]) that decides which console actions it may take
//! ([`Role::may`]); operators made before roles existed are `admin`.
//!
//! Owns the rules of tokens, roles and sessions and their writes ([`sign_in`] and [`sign_out`] are
//! the console's writer jobs: the console itself only reads). It does not own cookies, forms
//! or the login rate limit (the console's HTTP half, `crate::console`), nor the command line
//! (`cli`).

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use crate::db::{Db, DbError};

/// How long a session lasts after login; the operator signs in again after that.
pub const SESSION_TTL_MS: i64 = 12 * 60 * 60 * 1000;

/// Longest operator name, in characters.
const MAX_NAME_CHARS: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("unknown operator '{0}'")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for OperatorError {
    fn from(e: rusqlite::Error) -> Self {
        OperatorError::Db(DbError::Sqlite(e))
    }
}

/// What an operator may do in the console. Every role may look; the actions are allowed by
/// [`Role::may`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    Finance,
    Support,
    Viewer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Admin, Role::Finance, Role::Support, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Finance => "finance",
            Role::Support => "support",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == text)
    }

    /// Whether this role may take `action`.
    pub fn may(self, action: ConsoleAction) -> bool {
        action.roles().contains(&self)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl rusqlite::types::FromSql for Role {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = value.as_str()?;
        Role::parse(text).ok_or_else(|| {
            rusqlite::types::FromSqlError::Other(format!("unknown operator role '{text}'").into())
        })
    }
}

/// The console's state-changing actions (DESIGN.md section 23), each with the roles that may
/// take it: one table for every check and every 403 page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleAction {
    /// Approve or deny a pending return.
    DecideReturn,
    /// Pause or resume a buyer.
    PauseBuyer,
    /// Retry a failed outbox event.
    RetryEvent,
    /// Revoke a buyer's or supplier's portal user.
    RevokePortalUser,
    /// Read the audit log.
    ReadAudit,
}

impl ConsoleAction {
    /// The roles that may take this action.
    pub fn roles(self) -> &'static [Role] {
        match self {
            ConsoleAction::DecideReturn => &[Role::Admin, Role::Finance],
            ConsoleAction::PauseBuyer | ConsoleAction::RetryEvent => &[Role::Admin, Role::Support],
            ConsoleAction::RevokePortalUser | ConsoleAction::ReadAudit => &[Role::Admin],
        }
    }

    /// What the action is, for the page that refuses it.
    pub fn describe(self) -> &'static str {
        match self {
            ConsoleAction::DecideReturn => "approve or deny a return",
            ConsoleAction::PauseBuyer => "pause or resume a buyer",
            ConsoleAction::RetryEvent => "retry a failed event",
            ConsoleAction::RevokePortalUser => "revoke a portal user",
            ConsoleAction::ReadAudit => "read the audit log",
        }
    }
}

/// An operator as listed: never the token or its hash.
#[derive(Debug, Clone)]
pub struct Operator {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    pub last_login_at: Option<i64>,
}

impl Operator {
    pub fn view(&self) -> OperatorView<'_> {
        OperatorView {
            id: &self.id,
            name: &self.name,
            role: self.role.as_str(),
            created_at: crate::clock::iso(self.created_at),
            revoked_at: self.revoked_at.map(crate::clock::iso),
            last_login_at: self.last_login_at.map(crate::clock::iso),
        }
    }

    /// [`Operator::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// An operator as `operator list --json` shows it: never the token or its hash.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorView<'a> {
    id: &'a str,
    name: &'a str,
    role: &'static str,
    created_at: String,
    revoked_at: Option<String>,
    last_login_at: Option<String>,
}

/// A new operator with its token, which exists in clear only here.
#[derive(Debug)]
pub struct Created {
    pub operator: Operator,
    pub token: String,
}

/// Creates an operator named `name` and returns it with its token.
pub fn create(
    conn: &Connection,
    name: &str,
    role: Role,
    now: i64,
) -> Result<Created, OperatorError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(OperatorError::Invalid(format!(
            "an operator name has 1 to {MAX_NAME_CHARS} characters"
        )));
    }
    let id = crate::ids::new("opr");
    let token = crate::secrets::generate("lro_");
    conn.prepare_kept(
        "INSERT INTO operators (id, name, token_hash, created_at, role) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        id,
        name,
        crate::secrets::hash(&token),
        now,
        role.as_str()
    ])?;
    Ok(Created {
        operator: Operator {
            id,
            name: name.to_string(),
            role,
            created_at: now,
            revoked_at: None,
            last_login_at: None,
        },
        token,
    })
}

fn from_row(row: &rusqlite::Row) -> rusqlite::Result<Operator> {
    Ok(Operator {
        id: row.get(0)?,
        name: row.get(1)?,
        created_at: row.get(2)?,
        revoked_at: row.get(3)?,
        last_login_at: row.get(4)?,
        role: row.get(5)?,
    })
}

const COLUMNS: &str = "id, name, created_at, revoked_at, last_login_at, role";

/// Every operator, revoked ones included, oldest first.
pub fn list(conn: &Connection) -> rusqlite::Result<Vec<Operator>> {
    let mut statement =
        conn.prepare_cached(&format!("SELECT {COLUMNS} FROM operators ORDER BY id"))?;
    let rows = statement.query_map([], from_row)?;
    rows.collect()
}

pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<Operator>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM operators WHERE id = ?1"))?
        .query_row([id], from_row)
        .optional()
}

/// Revokes operator `id`: its token stops working and its sessions end now. Revoking a
/// revoked operator changes nothing.
pub fn revoke(conn: &Connection, id: &str, now: i64) -> Result<Operator, OperatorError> {
    let Some(operator) = find(conn, id)? else {
        return Err(OperatorError::NotFound(id.to_string()));
    };
    if operator.revoked_at.is_none() {
        conn.prepare_kept("UPDATE operators SET revoked_at = ?2 WHERE id = ?1")?
            .execute(params![id, now])?;
    }
    conn.prepare_kept("DELETE FROM operator_sessions WHERE operator_id = ?1")?
        .execute([id])?;
    Ok(find(conn, id)?.expect("the operator was found in this job"))
}

/// Gives operator `id` the role `role`; its open sessions take it from their next request.
pub fn set_role(conn: &Connection, id: &str, role: Role) -> Result<Operator, OperatorError> {
    if find(conn, id)?.is_none() {
        return Err(OperatorError::NotFound(id.to_string()));
    }
    conn.prepare_kept("UPDATE operators SET role = ?2 WHERE id = ?1")?
        .execute(params![id, role.as_str()])?;
    Ok(find(conn, id)?.expect("the operator was found in this job"))
}

/// A signed-in operator, as a console page sees it.
#[derive(Debug, Clone)]
pub struct Session {
    pub operator_name: String,
    pub role: Role,
}

/// A session just opened: its id exists in clear only here (for the cookie).
#[derive(Debug)]
pub struct Opened {
    pub session_id: String,
}

/// Opens a session for the operator whose token is `token`, or `None` when no operator
/// that is not revoked has it. Expired sessions are removed on the way, so the table
/// holds only live ones.
pub(crate) fn login(
    conn: &Connection,
    token: &str,
    now: i64,
) -> Result<Option<Opened>, OperatorError> {
    conn.prepare_kept("DELETE FROM operator_sessions WHERE expires_at <= ?1")?
        .execute([now])?;
    let token_hash = crate::secrets::hash(token);
    let found: Option<(String, String)> = conn
        .prepare_kept(
            "SELECT id, token_hash FROM operators \
             WHERE token_hash = ?1 AND revoked_at IS NULL",
        )?
        .query_row([&token_hash], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    // The index found the row by its hash; the comparison that decides is the constant-time
    // one, as everywhere a secret is checked.
    let Some((operator_id, stored)) = found else {
        return Ok(None);
    };
    if !crate::secrets::verify(token, &stored) {
        return Ok(None);
    }
    let session_id = crate::secrets::generate("");
    let expires_at = now + SESSION_TTL_MS;
    conn.prepare_kept(
        "INSERT INTO operator_sessions (id_hash, operator_id, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        crate::secrets::hash(&session_id),
        operator_id,
        now,
        expires_at
    ])?;
    conn.prepare_kept("UPDATE operators SET last_login_at = ?2 WHERE id = ?1")?
        .execute(params![operator_id, now])?;
    Ok(Some(Opened { session_id }))
}

/// The live session whose id is `session_id`: not expired, its operator not revoked.
pub fn session(conn: &Connection, session_id: &str, now: i64) -> rusqlite::Result<Option<Session>> {
    conn.prepare_kept(
        "SELECT o.name, o.role FROM operator_sessions s \
         JOIN operators o ON o.id = s.operator_id \
         WHERE s.id_hash = ?1 AND s.expires_at > ?2 AND o.revoked_at IS NULL",
    )?
    .query_row(params![crate::secrets::hash(session_id), now], |row| {
        Ok(Session {
            operator_name: row.get(0)?,
            role: row.get(1)?,
        })
    })
    .optional()
}

/// [`login`] as one writer job, for the console's login form.
pub async fn sign_in(db: &Db, token: String, now: i64) -> Result<Option<Opened>, OperatorError> {
    db.write(move |conn| login(conn, &token, now)).await
}

/// [`logout`] as one writer job, for the console's sign-out button.
pub async fn sign_out(db: &Db, session_id: String) -> Result<(), DbError> {
    db.write(move |conn| Ok::<_, DbError>(logout(conn, &session_id)?))
        .await
}

/// Ends the session `session_id` (nothing happens when there is none).
pub(crate) fn logout(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    conn.prepare_kept("DELETE FROM operator_sessions WHERE id_hash = ?1")?
        .execute([crate::secrets::hash(session_id)])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::apply_migrations(&mut conn).unwrap();
        conn
    }

    #[test]
    fn a_token_opens_a_session_until_it_expires_or_is_revoked() {
        let conn = conn();
        let created = create(&conn, "ana", Role::Admin, 1_000).unwrap();
        assert!(created.token.starts_with("lro_"));
        assert!(login(&conn, "lro_wrong", 2_000).unwrap().is_none());
        let opened = login(&conn, &created.token, 2_000).unwrap().unwrap();
        let id = &opened.session_id;
        assert_eq!(
            session(&conn, id, 3_000).unwrap().unwrap().operator_name,
            "ana"
        );
        assert!(session(&conn, id, 3_000).unwrap().is_some());
        assert!(
            session(&conn, id, 2_000 + SESSION_TTL_MS)
                .unwrap()
                .is_none(),
            "expired"
        );
        revoke(&conn, &created.operator.id, 4_000).unwrap();
        assert!(session(&conn, id, 4_001).unwrap().is_none(), "revoked");
        assert!(login(&conn, &created.token, 5_000).unwrap().is_none());
        let stored: String = conn
            .query_row("SELECT token_hash FROM operators", [], |r| r.get(0))
            .unwrap();
        assert_ne!(stored, created.token, "only the hash is stored");
    }

    #[test]
    fn logout_ends_only_that_session() {
        let conn = conn();
        let token = create(&conn, "ana", Role::Viewer, 1).unwrap().token;
        let a = login(&conn, &token, 2).unwrap().unwrap().session_id;
        let b = login(&conn, &token, 2).unwrap().unwrap().session_id;
        logout(&conn, &a).unwrap();
        assert!(session(&conn, &a, 3).unwrap().is_none());
        assert!(session(&conn, &b, 3).unwrap().is_some());
    }

    #[test]
    fn names_are_checked() {
        let conn = conn();
        assert!(matches!(
            create(&conn, "  ", Role::Admin, 1),
            Err(OperatorError::Invalid(_))
        ));
        assert!(matches!(
            revoke(&conn, "opr_nope", 1),
            Err(OperatorError::NotFound(_))
        ));
    }
}
