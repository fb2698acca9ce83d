//! The shell every portal page shares (head, the side's navigation, sign-out), and how
//! times and amounts are written. The headers every answer carries and the stylesheet are
//! the console's (`console::layout`): the same policy, no script, no inline style.

use hyper::StatusCode;
use jiff::tz::TimeZone;
use maud::{DOCTYPE, Markup, html};

use super::session::Current;
use crate::http::{Response, response};
use crate::partners::Party;

use crate::console::layout::head;

/// A whole page without navigation (the login form, refusals): the console's.
pub(super) fn bare(title: &str, body: Markup) -> Markup {
    crate::console::layout::bare(title, body)
}

const BUYER_NAV: &[(&str, &str)] = &[
    ("/", "Overview"),
    ("/leads", "Leads"),
    ("/account", "Account"),
    ("/delivery", "Delivery"),
];

const SUPPLIER_NAV: &[(&str, &str)] = &[
    ("/", "Overview"),
    ("/leads", "Leads"),
    ("/payouts", "Payouts"),
    ("/sources", "Sources"),
];

/// A portal page: the side's navigation with `active` marked, the user and the sign-out
/// button, then `body`.
pub(super) fn page(
    status: StatusCode,
    title: &str,
    active: &str,
    current: &Current,
    tz: &TimeZone,
    body: Markup,
) -> Response {
    let nav = match current.session.party {
        Party::Buyer(_) => BUYER_NAV,
        Party::Supplier(_) => SUPPLIER_NAV,
    };
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header class="top" {
                    a class="brand" href="/" { (current.session.party_name) }
                    nav {
                        @for (path, label) in nav {
                            @if *path == active {
                                a href=(path) aria-current="page" { (label) }
                            } @else {
                                a href=(path) { (label) }
                            }
                        }
                    }
                    form class="signout" method="post" action="/logout" {
                        input type="hidden" name=(crate::web::CSRF_FIELD) value=(current.csrf);
                        span class="who" { (current.session.user_name) }
                        button type="submit" { "Sign out" }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
                footer { "Times in " (tz.iana_name().unwrap_or("UTC")) "." }
            }
        }
    };
    response::html(status, markup.into_string())
}

/// The page of an id that is not the user's (another party's, or none at all): one body
/// for both, so nothing tells them apart.
pub(super) fn not_found(current: &Current, tz: &TimeZone, active: &str) -> Response {
    let body = html! {
        p { "Nothing has this id." }
        p { a href=(active) { "Back to the list" } }
    };
    page(
        StatusCode::NOT_FOUND,
        "Not found",
        active,
        current,
        tz,
        body,
    )
}

/// `ms` as `2026-05-01 14:03:07` in `tz`.
pub(super) fn when(tz: &TimeZone, ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(at) => at
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%d %H:%M:%S")
            .to_string(),
        Err(_) => ms.to_string(),
    }
}

/// An amount in cents as `1234.50`.
pub(super) fn money(cents: i64) -> String {
    crate::money::display(cents)
}

/// A hidden field with the session's CSRF token, in every state-changing form.
pub(super) fn csrf_field(current: &Current) -> Markup {
    html! { input type="hidden" name=(crate::web::CSRF_FIELD) value=(current.csrf); }
}
