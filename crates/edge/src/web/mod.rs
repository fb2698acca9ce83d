//! What every browser-facing listener (the operator console, the buyer and supplier
//! portals) needs to take a form safely: reading a cookie ([`cookie`]), the CSRF token of a
//! session ([`csrf_token`], [`csrf_valid`]), the `Origin` check ([`origin_allowed`]) and the
//! fields of a URL-encoded form ([`read_form`], [`Form::get`]); and, in [`listener`], the
//! accept loop, headers, log line, login limit and sign-in answers both listeners share.
//!
//! Owns these checks only: which sessions exist and who may do what belong to the
//! listener and to the owners of its sessions (`crate::operators` for the console).
//!
//! The CSRF token is derived, not stored: HMAC-SHA-256 keyed by the session id over a fixed
//! label, in hex. The session id is a secret that travels only in an `HttpOnly`,
//! `SameSite=Strict` cookie, so a page of another site can neither read the cookie nor
//! compute the token, and a token is worthless without its session. Compared in constant
//! time.

mod listener;

pub(crate) use listener::{
    cleared_cookie, login_limiter, see_other, serve, session_cookie, too_many_failures,
    too_many_failures_message,
};

use hmac::{Hmac, Mac};
use hyper::header::{COOKIE, HOST, ORIGIN};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::http::Request;
use crate::http::error::HttpError;

/// The form field that carries the CSRF token.
pub(crate) const CSRF_FIELD: &str = "csrf";

/// What the token's HMAC is computed over: fixed, so one session has one token.
const CSRF_LABEL: &[u8] = b"leadrelay form token v1";

/// The value of cookie `name` on the request, if it has a non-empty one.
pub(crate) fn cookie(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|header| header.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value.to_string())
        .filter(|value| !value.is_empty())
}

/// The CSRF token of the session whose id is `session_id` (64 hex digits).
pub(crate) fn csrf_token(session_id: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(session_id.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(CSRF_LABEL);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Whether `presented` is the CSRF token of session `session_id`, compared in constant time.
pub(crate) fn csrf_valid(session_id: &str, presented: Option<&str>) -> bool {
    let Some(presented) = presented else {
        return false;
    };
    csrf_token(session_id)
        .as_bytes()
        .ct_eq(presented.as_bytes())
        .into()
}

/// Whether the request's `Origin` is the listener's own: `https` when it is reached over
/// TLS (`secure`), else `http`, and the `Host` the browser asked for. A request without an
/// `Origin` passes only when it is not `required`.
pub(crate) fn origin_allowed(request: &Request, secure: bool, required: bool) -> bool {
    let Some(origin) = request.headers().get(ORIGIN) else {
        return !required;
    };
    let Some(host) = request.headers().get(HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let scheme = if secure { "https" } else { "http" };
    origin.to_str().is_ok_and(|origin| {
        origin
            .strip_prefix(scheme)
            .and_then(|rest| rest.strip_prefix("://"))
            .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
    })
}

/// The fields of a URL-encoded form, in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Form(Vec<(String, String)>);

impl Form {
    /// The first value of field `name`, trimmed.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(found, _)| found == name)
            .map(|(_, value)| value.trim())
    }

    /// The form's CSRF token field.
    pub(crate) fn csrf(&self) -> Option<&str> {
        self.get(CSRF_FIELD)
    }
}

/// Reads a URL-encoded form body of at most `limit` bytes.
pub(crate) async fn read_form(request: Request, limit: usize) -> Result<Form, HttpError> {
    let body = crate::http::body::read_form(request, limit).await?;
    Ok(Form(
        form_urlencoded::parse(&body)
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_belongs_to_its_session_only() {
        let token = csrf_token("session-a");
        assert_eq!(token.len(), 64);
        assert!(csrf_valid("session-a", Some(&token)));
        assert!(!csrf_valid("session-b", Some(&token)));
        assert!(!csrf_valid("session-a", Some("")));
        assert!(!csrf_valid("session-a", None));
    }
}
