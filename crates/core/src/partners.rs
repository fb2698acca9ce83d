//! Users of the buyer and supplier portal and their sessions (DESIGN.md section 20): the
//! owner of the `partner_users` and `partner_sessions` tables.
//!
//! A partner user belongs to exactly one buyer or one supplier (its [`Party`]) and signs in
//! with a token (`lrp_…`, 256 random bits) that `leadrelay buyer user create` or `supplier
//! user create` prints once; only its SHA-256 is stored. A login opens a session whose id
//! travels in the portal's cookie, also stored only as its SHA-256, with a fixed expiry.
//! Revoking a user deletes its sessions in the same job, so its browser is signed out at
//! its next request; a user whose buyer or supplier is archived cannot sign in either.
//!
//! Owns the rules of tokens and sessions and their writes. It does not own cookies, forms,
//! CSRF tokens or the login rate limit (the portal's HTTP half, `edge::portal`), nor what a
//! signed-in user may read (`crate::portal`).

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use crate::db::{Db, DbError};

/// How long a session lasts after login.
pub const SESSION_TTL_MS: i64 = 12 * 60 * 60 * 1000;

/// Longest user name, in characters.
const MAX_NAME_CHARS: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum PartnerUserError {
    #[error("unknown user '{0}'")]
    NotFound(String),
    #[error("unknown buyer '{0}'")]
    BuyerNotFound(crate::ids::BuyerId),
    #[error("unknown supplier '{0}'")]
    SupplierNotFound(crate::ids::SupplierId),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<rusqlite::Error> for PartnerUserError {
    fn from(e: rusqlite::Error) -> Self {
        PartnerUserError::Db(DbError::Sqlite(e))
    }
}

/// Whose data a user sees: one buyer's or one supplier's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Party {
    Buyer(crate::ids::BuyerId),
    Supplier(crate::ids::SupplierId),
}

impl Party {
    /// `buyer:<id>` or `supplier:<id>`, as the audit log names it.
    pub fn label(&self) -> String {
        match self {
            Party::Buyer(id) => format!("buyer:{id}"),
            Party::Supplier(id) => format!("supplier:{id}"),
        }
    }

    fn columns(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Party::Buyer(id) => (Some(id.as_str()), None),
            Party::Supplier(id) => (None, Some(id.as_str())),
        }
    }
}

/// A user as listed: never the token or its hash.
#[derive(Debug, Clone)]
pub struct PartnerUser {
    pub id: String,
    pub party: Party,
    pub name: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    pub last_login_at: Option<i64>,
}

impl PartnerUser {
    pub fn view(&self) -> PartnerUserView<'_> {
        let (buyer_id, supplier_id) = self.party.columns();
        PartnerUserView {
            id: &self.id,
            name: &self.name,
            created_at: crate::clock::iso(self.created_at),
            revoked_at: self.revoked_at.map(crate::clock::iso),
            last_login_at: self.last_login_at.map(crate::clock::iso),
            buyer_id,
            supplier_id,
        }
    }

    /// [`PartnerUser::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// A user as `buyer user list --json` and `supplier user list --json` show it: the party's
/// id under its own key, the other key left out.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartnerUserView<'a> {
    id: &'a str,
    name: &'a str,
    created_at: String,
    revoked_at: Option<String>,
    last_login_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    buyer_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    supplier_id: Option<&'a str>,
}

/// A new user with its token, which exists in clear only here.
#[derive(Debug)]
pub struct Created {
    pub user: PartnerUser,
    pub token: String,
}

impl Created {
    /// `buyer user create --json`: `id`, `name`, `token`.
    pub fn view(&self) -> CreatedView<'_> {
        CreatedView {
            id: &self.user.id,
            name: &self.user.name,
            token: &self.token,
        }
    }

    /// [`Created::view`] as a JSON value, for callers that print one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// `buyer user create --json`: the only output that shows the token.
#[derive(Debug, Serialize)]
pub struct CreatedView<'a> {
    id: &'a str,
    name: &'a str,
    token: &'a str,
}

/// Creates a user of `party` named `name` and returns it with its token.
pub fn create(
    conn: &Connection,
    party: &Party,
    name: &str,
    now: i64,
) -> Result<Created, PartnerUserError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(PartnerUserError::Invalid(format!(
            "a user name has 1 to {MAX_NAME_CHARS} characters"
        )));
    }
    match party {
        Party::Buyer(id) => {
            if crate::config::buyer::find(conn, id)?.is_none() {
                return Err(PartnerUserError::BuyerNotFound(id.clone()));
            }
        }
        Party::Supplier(id) => {
            if crate::config::supplier::find(conn, id)?.is_none() {
                return Err(PartnerUserError::SupplierNotFound(id.clone()));
            }
        }
    }
    let id = crate::ids::new("pu");
    let token = crate::secrets::generate("lrp_");
    let (buyer_id, supplier_id) = party.columns();
    conn.prepare_kept(
        "INSERT INTO partner_users (id, buyer_id, supplier_id, name, token_hash, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        id,
        buyer_id,
        supplier_id,
        name,
        crate::secrets::hash(&token),
        now
    ])?;
    Ok(Created {
        user: PartnerUser {
            id,
            party: party.clone(),
            name: name.to_string(),
            created_at: now,
            revoked_at: None,
            last_login_at: None,
        },
        token,
    })
}

const COLUMNS: &str = "id, buyer_id, supplier_id, name, created_at, revoked_at, last_login_at";

fn from_row(row: &rusqlite::Row) -> rusqlite::Result<PartnerUser> {
    let buyer_id: Option<crate::ids::BuyerId> = row.get(1)?;
    let supplier_id: Option<crate::ids::SupplierId> = row.get(2)?;
    let party = match (buyer_id, supplier_id) {
        (Some(id), _) => Party::Buyer(id),
        (None, Some(id)) => Party::Supplier(id),
        (None, None) => {
            return Err(rusqlite::Error::InvalidColumnType(
                1,
                "buyer_id".into(),
                rusqlite::types::Type::Null,
            ));
        }
    };
    Ok(PartnerUser {
        id: row.get(0)?,
        party,
        name: row.get(3)?,
        created_at: row.get(4)?,
        revoked_at: row.get(5)?,
        last_login_at: row.get(6)?,
    })
}

/// The users of `party`, revoked ones included, oldest first.
pub fn list(conn: &Connection, party: &Party) -> rusqlite::Result<Vec<PartnerUser>> {
    let (buyer_id, supplier_id) = party.columns();
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM partner_users \
         WHERE buyer_id IS ?1 AND supplier_id IS ?2 ORDER BY created_at, id"
    ))?;
    let rows = statement.query_map(params![buyer_id, supplier_id], from_row)?;
    rows.collect()
}

/// The users not revoked, of every buyer and supplier, oldest first (the console's list).
pub fn list_active(conn: &Connection) -> rusqlite::Result<Vec<PartnerUser>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM partner_users WHERE revoked_at IS NULL ORDER BY created_at, id"
    ))?;
    let rows = statement.query_map([], from_row)?;
    rows.collect()
}

/// User `id`, revoked or not.
pub fn find(conn: &Connection, id: &str) -> rusqlite::Result<Option<PartnerUser>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM partner_users WHERE id = ?1"
    ))?
    .query_row([id], from_row)
    .optional()
}

/// Revokes user `id` of a buyer (`buyer_side`) or a supplier: its token stops working and
/// its sessions end now. A user of the other side is not found. Revoking a revoked user
/// changes nothing.
pub fn revoke(
    conn: &Connection,
    id: &str,
    buyer_side: bool,
    now: i64,
) -> Result<PartnerUser, PartnerUserError> {
    let user = find(conn, id)?
        .filter(|user| matches!(user.party, Party::Buyer(_)) == buyer_side)
        .ok_or_else(|| PartnerUserError::NotFound(id.to_string()))?;
    if user.revoked_at.is_none() {
        conn.prepare_kept("UPDATE partner_users SET revoked_at = ?2 WHERE id = ?1")?
            .execute(params![id, now])?;
    }
    conn.prepare_kept("DELETE FROM partner_sessions WHERE user_id = ?1")?
        .execute([id])?;
    Ok(find(conn, id)?.expect("the user was found in this job"))
}

/// A signed-in user, as a portal page sees it.
#[derive(Debug, Clone)]
pub struct Session {
    pub user_id: String,
    pub user_name: String,
    pub party: Party,
    /// The party's name (the buyer's or supplier's own name, shown in the page's header).
    pub party_name: String,
}

/// A session just opened: its id exists in clear only here (for the cookie).
#[derive(Debug)]
pub struct Opened {
    pub session_id: String,
}

/// Opens a session for the user whose token is `token`, or `None` when no user that is not
/// revoked has it. Expired sessions are removed on the way.
pub(crate) fn login(
    conn: &Connection,
    token: &str,
    now: i64,
) -> Result<Option<Opened>, PartnerUserError> {
    conn.prepare_kept("DELETE FROM partner_sessions WHERE expires_at <= ?1")?
        .execute([now])?;
    let token_hash = crate::secrets::hash(token);
    let found: Option<(String, String)> = conn
        .prepare_kept(
            "SELECT id, token_hash FROM partner_users \
             WHERE token_hash = ?1 AND revoked_at IS NULL",
        )?
        .query_row([&token_hash], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    // The index found the row by its hash; the comparison that decides is constant-time.
    let Some((user_id, stored)) = found else {
        return Ok(None);
    };
    if !crate::secrets::verify(token, &stored) {
        return Ok(None);
    }
    let session_id = crate::secrets::generate("");
    conn.prepare_kept(
        "INSERT INTO partner_sessions (id_hash, user_id, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        crate::secrets::hash(&session_id),
        user_id,
        now,
        now + SESSION_TTL_MS
    ])?;
    conn.prepare_kept("UPDATE partner_users SET last_login_at = ?2 WHERE id = ?1")?
        .execute(params![user_id, now])?;
    Ok(Some(Opened { session_id }))
}

/// The live session whose id is `session_id`: not expired, its user not revoked, its buyer
/// or supplier not archived.
pub fn session(conn: &Connection, session_id: &str, now: i64) -> rusqlite::Result<Option<Session>> {
    conn.prepare_kept(
        "SELECT u.id, u.name, u.buyer_id, u.supplier_id, coalesce(b.name, p.name) \
         FROM partner_sessions s \
         JOIN partner_users u ON u.id = s.user_id \
         LEFT JOIN buyers b ON b.id = u.buyer_id \
         LEFT JOIN suppliers p ON p.id = u.supplier_id \
         WHERE s.id_hash = ?1 AND s.expires_at > ?2 AND u.revoked_at IS NULL \
           AND coalesce(b.archived_at, p.archived_at) IS NULL \
           AND coalesce(b.id, p.id) IS NOT NULL",
    )?
    .query_row(params![crate::secrets::hash(session_id), now], |row| {
        let buyer_id: Option<crate::ids::BuyerId> = row.get(2)?;
        let supplier_id: Option<crate::ids::SupplierId> = row.get(3)?;
        Ok((row.get(0)?, row.get(1)?, buyer_id, supplier_id, row.get(4)?))
    })
    .optional()
    .map(|found| {
        found.and_then(|(user_id, user_name, buyer_id, supplier_id, party_name)| {
            let party = match (buyer_id, supplier_id) {
                (Some(id), _) => Party::Buyer(id),
                (None, Some(id)) => Party::Supplier(id),
                (None, None) => return None,
            };
            Some(Session {
                user_id,
                user_name,
                party,
                party_name,
            })
        })
    })
}

/// [`login`] as one writer job, for the portal's login form.
pub async fn sign_in(db: &Db, token: String, now: i64) -> Result<Option<Opened>, PartnerUserError> {
    db.write(move |conn| login(conn, &token, now)).await
}

/// [`logout`] as one writer job, for the portal's sign-out button.
pub async fn sign_out(db: &Db, session_id: String) -> Result<(), DbError> {
    db.write(move |conn| Ok::<_, DbError>(logout(conn, &session_id)?))
        .await
}

/// Ends the session `session_id` (nothing happens when there is none).
pub(crate) fn logout(conn: &Connection, session_id: &str) -> rusqlite::Result<()> {
    conn.prepare_kept("DELETE FROM partner_sessions WHERE id_hash = ?1")?
        .execute([crate::secrets::hash(session_id)])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::apply_migrations(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO workspaces (id, name, created_at) VALUES ('ws', 'ws', 0);
             INSERT INTO suppliers (id, workspace_id, name, key_hash, created_at)
                 VALUES ('sup', 'ws', 'Sup', 'k', 0);",
        )
        .unwrap();
        conn
    }

    #[test]
    fn a_token_opens_a_session_until_it_is_revoked() {
        let conn = conn();
        let party = Party::Supplier("sup".into());
        let created = create(&conn, &party, "ana", 1_000).unwrap();
        assert!(created.token.starts_with("lrp_"));
        assert!(login(&conn, "lrp_wrong", 2_000).unwrap().is_none());
        let id = login(&conn, &created.token, 2_000)
            .unwrap()
            .unwrap()
            .session_id;
        let session = session(&conn, &id, 3_000).unwrap().unwrap();
        assert_eq!(session.party, party);
        assert_eq!(session.party_name, "Sup");
        assert!(
            super::session(&conn, &id, 2_000 + SESSION_TTL_MS)
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            revoke(&conn, &created.user.id, true, 4_000),
            Err(PartnerUserError::NotFound(_))
        ));
        revoke(&conn, &created.user.id, false, 4_000).unwrap();
        assert!(super::session(&conn, &id, 4_001).unwrap().is_none());
        assert!(login(&conn, &created.token, 5_000).unwrap().is_none());
        assert_eq!(list(&conn, &party).unwrap().len(), 1);
        assert!(matches!(
            create(&conn, &Party::Buyer("nope".into()), "x", 1),
            Err(PartnerUserError::BuyerNotFound(_))
        ));
    }
}
