//! The shell every console page shares (head, navigation, sign-out), the stylesheet, and how times, amounts and rates are written.
//!
//! Times are shown in one zone: the workspaces' time zone when they all share one (the
//! usual single-business install), else UTC; the page says which.

use hyper::StatusCode;
use hyper::header::{CACHE_CONTROL, HeaderValue};
use jiff::tz::TimeZone;
use maud::{DOCTYPE, Markup, html};
use rusqlite::Connection;

use super::session::Session;
use crate::http::{Response, response};

const STYLESHEET: &str = include_str!("style.css");

/// The console's icon, so browsers that ask for one get an answer instead of an error.
const ICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\">\
<rect width=\"16\" height=\"16\" rx=\"3\" fill=\"#2a5bd7\"/>\
<path d=\"M4 3v10h8\" stroke=\"#fff\" stroke-width=\"2\" fill=\"none\"/></svg>";

/// `GET /style.css`.
pub(crate) fn stylesheet() -> Response {
    let mut response = response::text(
        StatusCode::OK,
        "text/css; charset=utf-8",
        STYLESHEET.as_bytes().to_vec(),
    );
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    response
}

/// `GET /favicon.svg` (and `/favicon.ico`, which browsers ask for unprompted).
pub(crate) fn icon() -> Response {
    let mut response = response::text(StatusCode::OK, "image/svg+xml", ICON.as_bytes().to_vec());
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=86400"));
    response
}

/// The `head` every page shares: charset, viewport, title, stylesheet, icon.
pub(crate) fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · leadrelay" }
            link rel="stylesheet" href="/style.css";
            link rel="icon" href="/favicon.svg" type="image/svg+xml";
        }
    }
}

/// A whole page without navigation (the login form, errors).
pub(crate) fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body { (body) }
        }
    }
}

/// The navigation's entries: path and label.
const NAV: &[(&str, &str)] = &[
    ("/", "Overview"),
    ("/leads", "Leads"),
    ("/buyers", "Buyers"),
    ("/sources", "Sources"),
    ("/outbox", "Outbox"),
    ("/reports", "Reports"),
    ("/returns", "Returns"),
    ("/audit", "Audit"),
];

/// A console page: navigation with `active` marked, the signed-in operator and the
/// sign-out button, then `body`; 200 unless `status` says otherwise.
pub(super) fn page(
    status: StatusCode,
    title: &str,
    active: &str,
    operator: &Session,
    zone: &Zone,
    body: Markup,
) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header class="top" {
                    a class="brand" href="/" { "leadrelay" }
                    nav {
                        @for (path, label) in NAV {
                            @if *path == active {
                                a href=(path) aria-current="page" { (label) }
                            } @else {
                                a href=(path) { (label) }
                            }
                        }
                    }
                    form class="signout" method="post" action="/logout" {
                        input type="hidden" name=(crate::web::CSRF_FIELD) value=(operator.csrf);
                        span class="who" { (operator.operator_name) }
                        button type="submit" { "Sign out" }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
                footer {
                    "Times in " (zone.name) ". Signed in as " (operator.role) ". "
                    "Configuration stays in the CLI."
                }
            }
        }
    };
    response::html(status, markup.into_string())
}

/// The zone the console shows times in.
pub(super) struct Zone {
    pub tz: TimeZone,
    pub name: String,
}

impl Zone {
    /// The workspaces' time zone when they all have the same one, else UTC.
    pub(super) fn of(conn: &Connection) -> rusqlite::Result<Zone> {
        let mut statement =
            conn.prepare_cached("SELECT DISTINCT timezone FROM workspaces LIMIT 2")?;
        let zones: Vec<String> = statement
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        let name = match zones.as_slice() {
            [one] => one.clone(),
            _ => "UTC".to_string(),
        };
        // A stored zone was checked when it was set; an unknown one (a newer tz database
        // wrote it) falls back to UTC, which the footer then names.
        Ok(match TimeZone::get(&name) {
            Ok(tz) => Zone { tz, name },
            Err(_) => Zone {
                tz: TimeZone::UTC,
                name: "UTC".into(),
            },
        })
    }

    /// `ms` as `2026-05-01 14:03:07` in this zone.
    pub(super) fn when(&self, ms: i64) -> String {
        match jiff::Timestamp::from_millisecond(ms) {
            Ok(at) => at
                .to_zoned(self.tz.clone())
                .strftime("%Y-%m-%d %H:%M:%S")
                .to_string(),
            Err(_) => ms.to_string(),
        }
    }

    /// The start of the local day `days_back` days before today's, in ms UTC.
    pub(super) fn day_start(&self, now_ms: i64, days_back: i64) -> i64 {
        let now = jiff::Timestamp::from_millisecond(now_ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let today = now.to_zoned(self.tz.clone()).date();
        let day = today
            .checked_sub(jiff::Span::new().days(days_back))
            .unwrap_or(today);
        day.to_zoned(self.tz.clone())
            .map(|z| z.timestamp().as_millisecond())
            // Only dates at the end of jiff's range fail; no stored time is there.
            .unwrap_or(0)
    }

    /// The local date of `ms`, as `05-01` (month and day), for chart labels.
    pub(super) fn month_day(&self, ms: i64) -> String {
        match jiff::Timestamp::from_millisecond(ms) {
            Ok(at) => at.to_zoned(self.tz.clone()).strftime("%m-%d").to_string(),
            Err(_) => String::new(),
        }
    }

    /// The local hour of `ms`, as `14`, for chart labels.
    pub(super) fn hour(&self, ms: i64) -> String {
        match jiff::Timestamp::from_millisecond(ms) {
            Ok(at) => at.to_zoned(self.tz.clone()).strftime("%H").to_string(),
            Err(_) => String::new(),
        }
    }
}

/// An amount in cents as `1234.50`.
pub(super) fn money(cents: i64) -> String {
    crate::money::display(cents)
}

/// `part` of `whole` as `12.5%`, or `–` when there is no whole.
pub(super) fn rate(part: i64, whole: i64) -> String {
    if whole == 0 {
        "–".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// A form that POSTs one console action to `action` with the session's CSRF token: `fields`
/// inside, then a button saying `label`.
pub(super) fn action_form(operator: &Session, action: &str, label: &str, fields: Markup) -> Markup {
    html! {
        form class="action" method="post" action=(action) {
            input type="hidden" name=(crate::web::CSRF_FIELD) value=(operator.csrf);
            (fields)
            button type="submit" { (label) }
        }
    }
}

/// A table cell that says there is nothing yet.
pub(super) fn none_yet(what: &str) -> Markup {
    html! { p class="empty" { (what) } }
}
