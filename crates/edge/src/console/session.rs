//! Signing in and out of the console: the login form, the session cookie, the limit on
//! failed logins and the `Origin` check of the logout; the signed-in operator of a request
//! ([`Session`]: name, role and the session's CSRF token, `crate::web`).
//!
//! The cookie carries the session id that `crate::operators::login` opened; it is
//! `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends it),
//! `Path=/`, and `Secure` with `serve --console-secure-cookie`. Whether a token or a
//! session is valid is `crate::operators`' to say; this module only carries them.

use std::net::SocketAddr;

use hyper::StatusCode;
use hyper::header::SET_COOKIE;
use maud::{Markup, html};

use super::Console;
use super::layout;
use crate::db::DbError;
use crate::http::error::Error;
use crate::http::{Request, Response, response};
use crate::operators::{self, Role};

/// The cookie's name.
const COOKIE_NAME: &str = "leadrelay_console";

/// The largest login form accepted; a token is some 50 characters.
const FORM_LIMIT: usize = 4 * 1024;

/// 303 to `/login`: what every page answers without a live session.
pub(super) fn to_login() -> Response {
    see_other("/login")
}

fn see_other(location: &str) -> Response {
    crate::web::see_other(location)
}

/// The operator signed in on a request.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) operator_name: String,
    pub(crate) role: Role,
    /// The session's CSRF token, for the forms of its pages.
    pub(crate) csrf: String,
    /// The session id, to check a presented token against.
    session_id: String,
}

impl Session {
    /// Whether `presented` is this session's CSRF token.
    pub(crate) fn csrf_valid(&self, presented: Option<&str>) -> bool {
        crate::web::csrf_valid(&self.session_id, presented)
    }
}

/// The session id the request's cookie carries, if any.
fn cookie_session(request: &Request) -> Option<String> {
    crate::web::cookie(request, COOKIE_NAME)
}

/// The operator signed in on this request, or `None` without a live session.
pub(super) async fn current(
    console: &Console,
    request: &Request,
) -> Result<Option<Session>, Error> {
    let Some(session_id) = cookie_session(request) else {
        return Ok(None);
    };
    let now = crate::clock::now_ms();
    let id = session_id.clone();
    let found = console
        .db
        .read(move |conn| Ok::<_, DbError>(operators::session(conn, &id, now)?))
        .await?;
    Ok(found.map(|session| Session {
        operator_name: session.operator_name,
        role: session.role,
        csrf: crate::web::csrf_token(&session_id),
        session_id,
    }))
}

/// `GET /login`: the form.
pub(super) fn login_form(_console: &Console, _request: &Request) -> Response {
    response::html(StatusCode::OK, form_page(None).into_string())
}

fn form_page(problem: Option<&str>) -> Markup {
    let body = html! {
        main class="login" {
            h1 { "leadrelay console" }
            @if let Some(problem) = problem {
                p class="problem" role="alert" { (problem) }
            }
            form method="post" action="/login" {
                // Browsers and password managers expect a user name beside a password
                // field; the token alone identifies the operator.
                input type="text" name="username" autocomplete="username" value="operator"
                    hidden;
                label for="token" { "Operator token" }
                input id="token" name="token" type="password" autocomplete="current-password"
                    required autofocus;
                button type="submit" { "Sign in" }
            }
            p class="hint" {
                "A token is made with " code { "leadrelay operator create --name NAME" } "."
            }
        }
    };
    layout::bare("Sign in", body)
}

/// `POST /login`: a valid token gets a session cookie and 303 to `/`; a wrong one 401 with
/// the form again. A client address that failed too often is refused with 429 before its
/// token is looked at.
pub(super) async fn login(
    console: &Console,
    request: Request,
    peer: SocketAddr,
) -> Result<Response, Error> {
    if let Err(limited) = console.login_failures.peek(peer.ip()) {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Ok(too_many_failures(limited.retry_after_secs));
    }
    if !origin_allowed(console, &request, false) {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Ok(forbidden_origin());
    }
    let form = crate::web::read_form(request, FORM_LIMIT).await?;
    let token = form.get("token").unwrap_or_default().to_string();
    let now = crate::clock::now_ms();
    let opened = if token.is_empty() {
        None
    } else {
        operators::sign_in(&console.db, token, now).await?
    };
    let Some(opened) = opened else {
        // Only failures are counted: an operator who signs in often is never limited.
        let _ = console.login_failures.check(peer.ip());
        let page = form_page(Some("That token is not valid (or was revoked)."));
        return Ok(response::html(StatusCode::UNAUTHORIZED, page.into_string()));
    };
    let mut response = see_other("/");
    response.headers_mut().insert(
        SET_COOKIE,
        crate::web::session_cookie(
            COOKIE_NAME,
            &opened.session_id,
            operators::SESSION_TTL_MS,
            console.config.secure_cookie,
        ),
    );
    Ok(response)
}

fn too_many_failures(retry_after_secs: u64) -> Response {
    let message = crate::web::too_many_failures_message(retry_after_secs);
    crate::web::too_many_failures(form_page(Some(&message)).into_string(), retry_after_secs)
}

pub(super) fn forbidden_origin() -> Response {
    let page = layout::bare(
        "Refused",
        html! {
            main class="error" {
                h1 { "403 Forbidden" }
                p { "The form was sent from another site's page (its Origin is not this console's)." }
                p { a href="/" { "Back to the console" } }
            }
        },
    );
    response::html(StatusCode::FORBIDDEN, page.into_string())
}

/// `POST /logout`: only from the console's own pages (the `Origin` must be the console's
/// origin; a request without one is refused too), then the session ends and the cookie is
/// cleared.
pub(super) async fn logout(console: &Console, request: Request) -> Result<Response, Error> {
    if !origin_allowed(console, &request, true) {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Ok(forbidden_origin());
    }
    let session_id = cookie_session(&request);
    crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
    if let Some(session_id) = session_id {
        operators::sign_out(&console.db, session_id).await?;
    }
    let mut response = to_login();
    response.headers_mut().insert(
        SET_COOKIE,
        crate::web::cleared_cookie(COOKIE_NAME, console.config.secure_cookie),
    );
    Ok(response)
}

/// Whether the request's `Origin` is the console's own (`crate::web::origin_allowed`; the
/// console is reached over HTTPS when its cookie is `Secure`). Without an `Origin`,
/// `required` decides.
pub(super) fn origin_allowed(console: &Console, request: &Request, required: bool) -> bool {
    crate::web::origin_allowed(request, console.config.secure_cookie, required)
}
