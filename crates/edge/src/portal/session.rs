//! Signing in and out of the portal, and the checks every state-changing form passes: the
//! session cookie, the limit on failed logins, the `Origin` check and the CSRF token.
//!
//! The cookie carries the session id that `crate::partners::login` opened; it is
//! `HttpOnly`, `SameSite=Strict`, `Path=/`, and `Secure` with `serve
//! --portal-secure-cookie`. Every POST but the login must come from the portal's own
//! origin (a request without `Origin` is refused) and carry the session's CSRF token, a
//! keyed digest of the session id: a page of another site can neither read it nor make
//! it. Whether a token or a session is valid is `crate::partners`' to say.

use std::net::SocketAddr;

use hyper::StatusCode;
use hyper::header::SET_COOKIE;
use maud::{Markup, html};

use super::{Portal, layout};
use crate::db::DbError;
use crate::http::error::Error;
use crate::http::{Request, Response, response};
use crate::partners::{self, Session};

/// The cookie's name.
const COOKIE_NAME: &str = "leadrelay_portal";

/// The largest form accepted: a return's note is at most some kilobytes.
pub(super) const FORM_LIMIT: usize = 16 * 1024;

/// A signed-in user with the CSRF token its forms carry.
pub(super) struct Current {
    pub session: Session,
    pub csrf: String,
    session_id: String,
}

/// 303 to `/login`: what every page answers without a live session.
pub(super) fn to_login() -> Response {
    see_other("/login".to_string())
}

pub(super) fn see_other(location: String) -> Response {
    crate::web::see_other(&location)
}

/// The session id the request's cookie carries, if any.
fn cookie_session(request: &Request) -> Option<String> {
    crate::web::cookie(request, COOKIE_NAME)
}

/// The user signed in on this request, or `None` without a live session.
pub(super) async fn current(portal: &Portal, request: &Request) -> Result<Option<Current>, Error> {
    let Some(session_id) = cookie_session(request) else {
        return Ok(None);
    };
    let now = crate::clock::now_ms();
    let csrf = crate::web::csrf_token(&session_id);
    let id = session_id.clone();
    let session = portal
        .db
        .read(move |conn| Ok::<_, DbError>(partners::session(conn, &id, now)?))
        .await?;
    Ok(session.map(|session| Current {
        session,
        csrf,
        session_id,
    }))
}

/// Whether a state-changing form may act: it comes from the portal's own origin and carries
/// the session's CSRF token.
pub(super) fn form_allowed(origin_ok: bool, current: &Current, form: &crate::web::Form) -> bool {
    origin_ok && crate::web::csrf_valid(&current.session_id, form.csrf())
}

/// `GET /login`: the form.
pub(super) fn login_form() -> Response {
    response::html(StatusCode::OK, form_page(None).into_string())
}

fn form_page(problem: Option<&str>) -> Markup {
    let body = html! {
        main class="login" {
            h1 { "leadrelay partner portal" }
            @if let Some(problem) = problem {
                p class="problem" role="alert" { (problem) }
            }
            form method="post" action="/login" {
                input type="text" name="username" autocomplete="username" value="partner"
                    hidden;
                label for="token" { "Access token" }
                input id="token" name="token" type="password" autocomplete="current-password"
                    required autofocus;
                button type="submit" { "Sign in" }
            }
            p class="hint" { "Your account manager sends you an access token." }
        }
    };
    layout::bare("Sign in", body)
}

/// `POST /login`: a valid token gets a session cookie and 303 to `/`; a wrong one 401 with
/// the form again. A client address that failed too often is refused with 429 before its
/// token is looked at.
pub(super) async fn login(
    portal: &Portal,
    request: Request,
    peer: SocketAddr,
) -> Result<Response, Error> {
    if let Err(limited) = portal.login_failures.peek(peer.ip()) {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Ok(too_many_failures(limited.retry_after_secs));
    }
    if !origin_allowed(portal, &request, false) {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Ok(forbidden());
    }
    let form = crate::web::read_form(request, FORM_LIMIT).await?;
    let token = form.get("token").unwrap_or_default().to_string();
    let now = crate::clock::now_ms();
    let opened = if token.is_empty() {
        None
    } else {
        partners::sign_in(&portal.db, token, now).await?
    };
    let Some(opened) = opened else {
        // Only failures are counted: a user who signs in often is never limited.
        let _ = portal.login_failures.check(peer.ip());
        let page = form_page(Some("That token is not valid (or was revoked)."));
        return Ok(response::html(StatusCode::UNAUTHORIZED, page.into_string()));
    };
    let mut response = see_other("/".to_string());
    response.headers_mut().insert(
        SET_COOKIE,
        crate::web::session_cookie(
            COOKIE_NAME,
            &opened.session_id,
            partners::SESSION_TTL_MS,
            portal.config.secure_cookie,
        ),
    );
    Ok(response)
}

fn too_many_failures(retry_after_secs: u64) -> Response {
    let message = crate::web::too_many_failures_message(retry_after_secs);
    crate::web::too_many_failures(form_page(Some(&message)).into_string(), retry_after_secs)
}

/// 403: the form did not come from the portal's own page (another site's `Origin`, or no
/// CSRF token of this session).
pub(super) fn forbidden() -> Response {
    let page = layout::bare(
        "Refused",
        html! {
            main class="error" {
                h1 { "403 Forbidden" }
                p { "The form was not sent from this portal's own page. Reload the page and try again." }
                p { a href="/" { "Back to the overview" } }
            }
        },
    );
    response::html(StatusCode::FORBIDDEN, page.into_string())
}

/// `POST /logout` (its `Origin` and CSRF token checked by the router): the session ends
/// and the cookie is cleared.
pub(super) async fn logout(portal: &Portal, current: &Current) -> Result<Response, Error> {
    partners::sign_out(&portal.db, current.session_id.clone()).await?;
    let mut response = to_login();
    response.headers_mut().insert(
        SET_COOKIE,
        crate::web::cleared_cookie(COOKIE_NAME, portal.config.secure_cookie),
    );
    Ok(response)
}

/// Whether the request's `Origin` is the portal's own (`https` with a secure cookie, else
/// `http`, and the `Host` asked for). Without an `Origin`, `required` decides.
pub(super) fn origin_allowed(portal: &Portal, request: &Request, required: bool) -> bool {
    crate::web::origin_allowed(request, portal.config.secure_cookie, required)
}
