//! The console's routes: the login and logout, the stylesheet and icon, the pages of DESIGN.md
//! section 15, and the actions of section 23 (`POST`, see `actions`). Every page needs a live session; without one it answers 303 to `/login`
//! (unknown paths too, so the console shows nothing of itself to a stranger).

use std::net::SocketAddr;

use hyper::Method;

use super::{Console, actions, pages, session};
use crate::http::error::{Error, Form, HttpError, error_to_http_response};
use crate::http::{Request, Response};
use crate::operators::ConsoleAction;

/// The pages, by path; `/leads/{leadId}` is matched apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    Overview,
    Leads,
    Lead,
    Buyers,
    Sources,
    Outbox,
    Reports,
    ReportsCsv,
    Returns,
    Audit,
}

fn page_of(path: &str) -> Option<Page> {
    Some(match path {
        "/" => Page::Overview,
        "/leads" => Page::Leads,
        "/buyers" => Page::Buyers,
        "/sources" => Page::Sources,
        "/outbox" => Page::Outbox,
        "/reports" => Page::Reports,
        "/reports.csv" => Page::ReportsCsv,
        "/returns" => Page::Returns,
        "/audit" => Page::Audit,
        other => match other.strip_prefix("/leads/") {
            Some(id) if !id.is_empty() && !id.contains('/') => Page::Lead,
            _ => return None,
        },
    })
}

pub(super) async fn dispatch(console: &Console, request: Request, peer: SocketAddr) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let result = match (path.as_str(), &method) {
        ("/style.css", &Method::GET | &Method::HEAD) => Ok(super::layout::stylesheet()),
        ("/favicon.svg" | "/favicon.ico", &Method::GET | &Method::HEAD) => {
            Ok(super::layout::icon())
        }
        ("/login", &Method::GET | &Method::HEAD) => Ok(session::login_form(console, &request)),
        ("/login", &Method::POST) => session::login(console, request, peer).await,
        ("/logout", &Method::POST) => session::logout(console, request).await,
        ("/style.css" | "/login", _) => Err(not_allowed(&method, &path, "GET, HEAD")),
        ("/logout", _) => Err(not_allowed(&method, &path, "POST")),
        _ => page(console, request, &method, &path).await,
    };
    result.unwrap_or_else(|e| error_to_http_response(e, Form::Html))
}

async fn page(
    console: &Console,
    request: Request,
    method: &Method,
    path: &str,
) -> Result<Response, Error> {
    let Some(operator) = session::current(console, &request).await? else {
        crate::http::body::discard(request.into_body(), 64 * 1024).await;
        return Ok(session::to_login());
    };
    if method == Method::POST
        && let Some(action) = actions::Action::of(path)
    {
        return actions::post(console, request, &operator, action).await;
    }
    let Some(page) = page_of(path) else {
        return Err(HttpError::NoSuchPath {
            path: path.to_string(),
        }
        .into());
    };
    if method != Method::GET && method != Method::HEAD {
        crate::http::body::discard(request.into_body(), 64 * 1024).await;
        return Err(not_allowed(method, path, "GET, HEAD"));
    }
    let query = request.uri().query().unwrap_or("").to_string();
    let db = &console.db;
    match page {
        Page::Overview => pages::overview::get(db, &operator).await,
        Page::Leads => pages::leads::get(db, &operator, &query).await,
        Page::Lead => {
            let id = path.trim_start_matches("/leads/").to_string();
            pages::lead::get(db, &operator, id).await
        }
        Page::Buyers => pages::buyers::get(db, &operator).await,
        Page::Sources => pages::sources::get(db, &operator).await,
        Page::Outbox => pages::outbox::get(db, &operator).await,
        Page::Reports => pages::reports::get(db, &operator, &query).await,
        Page::ReportsCsv => pages::reports::csv(db, &operator, &query).await,
        Page::Returns => pages::returns::get(db, &operator).await,
        Page::Audit if !operator.role.may(ConsoleAction::ReadAudit) => {
            Ok(actions::forbidden_role(&operator, ConsoleAction::ReadAudit))
        }
        Page::Audit => pages::audit::get(db, &operator, &query).await,
    }
}

pub(crate) fn not_allowed(method: &Method, path: &str, allow: &str) -> Error {
    HttpError::MethodNotAllowed {
        method: method.clone(),
        path: path.to_string(),
        allow: allow.to_string(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_matched_by_their_paths() {
        assert_eq!(page_of("/"), Some(Page::Overview));
        assert_eq!(page_of("/leads/lead_01"), Some(Page::Lead));
        assert_eq!(page_of("/reports.csv"), Some(Page::ReportsCsv));
        for none in ["/leads/", "/leads/a/b", "/nope", "/buyers/x"] {
            assert_eq!(page_of(none), None, "{none}");
        }
    }
}
