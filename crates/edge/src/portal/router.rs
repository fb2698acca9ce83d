//! The portal's routes: the login and logout, the stylesheet and icon, and the pages of
//! DESIGN.md section 20 for the session's side (a buyer's or a supplier's). Every page needs
//! a live session; without one it answers 303 to `/login` (unknown paths too). Every POST
//! but the login passes `session::form_allowed` (own `Origin` and the session's CSRF
//! token) before anything else is read or done.

use std::net::SocketAddr;

use hyper::Method;

use super::session::{self, Current, FORM_LIMIT};
use super::{Portal, pages};
use crate::console::router::not_allowed;
use crate::http::error::{Error, Form, HttpError, error_to_http_response};
use crate::http::{Request, Response};
use crate::partners::Party;

pub(super) async fn dispatch(portal: &Portal, request: Request, peer: SocketAddr) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let result = match (path.as_str(), &method) {
        ("/style.css", &Method::GET | &Method::HEAD) => Ok(crate::console::layout::stylesheet()),
        ("/favicon.svg" | "/favicon.ico", &Method::GET | &Method::HEAD) => {
            Ok(crate::console::layout::icon())
        }
        ("/login", &Method::GET | &Method::HEAD) => Ok(session::login_form()),
        ("/login", &Method::POST) => session::login(portal, request, peer).await,
        ("/style.css" | "/login", _) => Err(not_allowed(&method, &path, "GET, HEAD")),
        (other, &Method::GET | &Method::HEAD) if item(other, "/docs/").is_some() => {
            let token = item(other, "/docs/").expect("matched just above");
            pages::supplier::shared_docs(portal, token).await
        }
        _ => signed_in(portal, request, &method, &path).await,
    };
    result.unwrap_or_else(|e| error_to_http_response(e, Form::Html))
}

async fn signed_in(
    portal: &Portal,
    request: Request,
    method: &Method,
    path: &str,
) -> Result<Response, Error> {
    let Some(current) = session::current(portal, &request).await? else {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Ok(session::to_login());
    };
    if method == Method::POST {
        let origin_ok = session::origin_allowed(portal, &request, true);
        let form = crate::web::read_form(request, FORM_LIMIT).await?;
        if !session::form_allowed(origin_ok, &current, &form) {
            return Ok(session::forbidden());
        }
        if path == "/logout" {
            return session::logout(portal, &current).await;
        }
        return match current.session.party.clone() {
            Party::Buyer(buyer_id) => buyer_post(portal, &current, &buyer_id, path, &form).await,
            Party::Supplier(_) => Err(no_such_path(path)),
        };
    }
    if method != Method::GET && method != Method::HEAD {
        crate::http::body::discard(request.into_body(), FORM_LIMIT).await;
        return Err(not_allowed(method, path, "GET, HEAD, POST"));
    }
    let query = request.uri().query().unwrap_or("").to_string();
    let db = &portal.db;
    match current.session.party.clone() {
        Party::Buyer(id) => match path {
            "/" => pages::buyer::overview(db, &current, &id).await,
            "/leads" => pages::buyer::leads(db, &current, &id, &query).await,
            "/leads.csv" => pages::buyer::leads_csv(db, &id, &query).await,
            "/account" => pages::buyer::account(db, &current, &id, &query).await,
            "/statement.csv" => pages::buyer::statement_csv(db, &id, &query).await,
            "/delivery" => pages::buyer::delivery(portal, &current, &id, None).await,
            other => match item(other, "/leads/") {
                Some(txn) => pages::buyer::lead(db, &current, &id, txn, None).await,
                None => Err(no_such_path(other)),
            },
        },
        Party::Supplier(id) => match path {
            "/" => pages::supplier::overview(db, &current, &id).await,
            "/leads" => pages::supplier::leads(db, &current, &id).await,
            "/payouts" => pages::supplier::payouts(db, &current, &id, &query).await,
            "/statement.csv" => pages::supplier::statement_csv(db, &id, &query).await,
            "/sources" => pages::supplier::sources(db, &current, &id).await,
            other => {
                if let Some(lead) = item(other, "/leads/") {
                    pages::supplier::lead(db, &current, &id, lead).await
                } else if let Some(source) = other
                    .strip_suffix("/docs")
                    .and_then(|rest| item(rest, "/sources/"))
                {
                    pages::supplier::source_docs(portal, &current, &id, source).await
                } else {
                    Err(no_such_path(other))
                }
            }
        },
    }
}

async fn buyer_post(
    portal: &Portal,
    current: &Current,
    buyer_id: &crate::ids::BuyerId,
    path: &str,
    form: &crate::web::Form,
) -> Result<Response, Error> {
    match path {
        "/delivery/pause" => pages::buyer::set_paused(portal, current, buyer_id, true).await,
        "/delivery/resume" => pages::buyer::set_paused(portal, current, buyer_id, false).await,
        "/delivery/test" => pages::buyer::send_test(portal, current, buyer_id).await,
        other => match other
            .strip_suffix("/return")
            .and_then(|rest| item(rest, "/leads/"))
        {
            Some(txn) => pages::buyer::file_return(portal, current, buyer_id, txn, form).await,
            None => Err(no_such_path(other)),
        },
    }
}

/// The id after `prefix` in `path`, when it is one segment.
fn item(path: &str, prefix: &str) -> Option<String> {
    path.strip_prefix(prefix)
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .map(str::to_string)
}

fn no_such_path(path: &str) -> Error {
    HttpError::NoSuchPath {
        path: path.to_string(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_one_segment() {
        assert_eq!(item("/leads/txn_1", "/leads/").as_deref(), Some("txn_1"));
        for none in ["/leads/", "/leads/a/b", "/nope"] {
            assert_eq!(item(none, "/leads/"), None, "{none}");
        }
    }
}
