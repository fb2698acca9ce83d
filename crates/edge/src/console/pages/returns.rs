//! `/returns`: the review queue of DESIGN.md section 19 (pending returns, oldest first),
//! each with approve and deny forms (`console::actions` takes them).

use hyper::StatusCode;
use maud::html;

use crate::console::layout::{self, Zone};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;
use crate::lifecycle::returns::{self, ListFilter, ReturnStatus};

/// Most pending returns listed.
const LIMIT: i64 = 200;

pub(crate) async fn get(db: &Db, operator: &Session) -> Result<Response, Error> {
    let (zone, pending) = db
        .read(|conn| {
            let filter = ListFilter {
                workspace_id: None,
                status: Some(ReturnStatus::Pending),
                limit: LIMIT,
            };
            Ok::<_, DbError>((Zone::of(conn)?, returns::list(conn, &filter)?))
        })
        .await?;
    let body = html! {
        @if pending.is_empty() {
            (layout::none_yet("No return waits for a decision."))
        } @else {
            div class="scroll" {
                table class="list" id="returns" {
                    thead { tr {
                        th { "Transaction" } th { "Buyer" } th { "Reason" } th { "Requested" }
                        th { "Decide" }
                    } }
                    tbody {
                        @for item in &pending {
                            tr id={ "return-" (item.transaction_id) } {
                                td { (item.transaction_id) }
                                td { (item.buyer_id) }
                                td { (item.reason_code) " " span class="excerpt" { (item.reason.as_deref().unwrap_or("")) } }
                                td { (zone.when(item.requested_at)) }
                                td {
                                    (layout::action_form(operator, &format!("/returns/{}/approve", item.transaction_id), "Approve", html! {}))
                                    (layout::action_form(operator, &format!("/returns/{}/deny", item.transaction_id), "Deny", html! {
                                        input type="text" name="note" placeholder="why (told to the buyer)" required;
                                    }))
                                }
                            }
                        }
                    }
                }
            }
        }
        p class="note" {
            "Approving refunds the buyer as a cancellation does; denying puts the transaction "
            "back where it was. Admin and finance operators decide."
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        "Returns",
        "/returns",
        operator,
        &zone,
        body,
    ))
}
