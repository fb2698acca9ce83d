//! `/reports` and `/reports.csv`: the report of DESIGN.md section 11, shown and downloaded.
//!
//! The report is the `report` module's (the aggregate the writer keeps); this page only
//! shows it. Until that module is in this build, the page says so and the CSV is 404.

use hyper::StatusCode;
use maud::html;

use crate::console::layout::{self, Zone};
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::{Error, HttpError};
use crate::operators::Session;

pub(crate) async fn get(db: &Db, operator: &Session, _query: &str) -> Result<Response, Error> {
    let zone = db.read(|conn| Ok::<_, DbError>(Zone::of(conn)?)).await?;
    let body = html! {
        p class="empty" id="report-missing" {
            "Reports come with " code { "leadrelay report" } ", which this build does not have yet."
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        "Reports",
        "/reports",
        operator,
        &zone,
        body,
    ))
}

pub(crate) async fn csv(_db: &Db, _query: &str) -> Result<Response, Error> {
    Err(HttpError::NoSuchPath {
        path: "/reports.csv".into(),
    }
    .into())
}
