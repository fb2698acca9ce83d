//! `/audit`: the newest entries of the audit log (DESIGN.md section 23), for admins only.
//! `?object=`, `?actor=` and `?action=` narrow it as `leadrelay audit list` does.

use hyper::StatusCode;
use maud::html;

use crate::audit::{self, Filter};
use crate::console::layout::{self, Zone};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;

/// Most entries shown.
const LIMIT: u32 = 500;

pub(crate) async fn get(db: &Db, operator: &Session, query: &str) -> Result<Response, Error> {
    let field = |name: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(key, value)| key == name && !value.trim().is_empty())
            .map(|(_, value)| value.trim().to_string())
    };
    let filter = Filter {
        object_id: field("object"),
        actor: field("actor"),
        action_prefix: field("action"),
        newest: Some(LIMIT),
        ..Filter::default()
    };
    let shown = filter.clone();
    let (zone, entries) = db
        .read(move |conn| Ok::<_, DbError>((Zone::of(conn)?, audit::list(conn, &filter)?)))
        .await?;
    let body = html! {
        form class="search" method="get" action="/audit" {
            input name="object" placeholder="object id" value=(shown.object_id.unwrap_or_default());
            input name="actor" placeholder="actor (operator:, cli:ana)" value=(shown.actor.unwrap_or_default());
            input name="action" placeholder="action prefix (buyer.)" value=(shown.action_prefix.unwrap_or_default());
            button type="submit" { "Filter" }
        }
        @if entries.is_empty() {
            (layout::none_yet("No entries."))
        } @else {
            div class="scroll" {
                table class="list" id="audit" {
                    thead { tr {
                        th { "#" } th { "When" } th { "Actor" } th { "Action" } th { "Object" }
                        th { "Changes" }
                    } }
                    tbody {
                        @for entry in &entries {
                            tr {
                                td { (entry.seq) }
                                td { (zone.when(entry.at)) }
                                td { (entry.actor) }
                                td { (entry.action) }
                                td { (entry.object_id) }
                                td class="excerpt" { (entry.changes.to_string()) }
                            }
                        }
                    }
                }
            }
        }
        p class="note" {
            "The newest " (LIMIT) " entries. Append-only, each entry chained to the one before "
            "by its hash; " code { "leadrelay check" } " verifies the chain."
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        "Audit log",
        "/audit",
        operator,
        &zone,
        body,
    ))
}
