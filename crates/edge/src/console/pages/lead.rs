//! `/leads/{leadId}`: one lead and everything that happened to it. The person, consent,
//! capture and additional properties as stored; each request with its full routing trace
//! (the evaluation's score, threshold and factors, every candidate buyer with its reason,
//! price and priority); each transaction with its history; each webhook event with its
//! attempts and the buyers' answer excerpts.
//!
//! Shows the records as `lead show`, `transaction show` and `outbox show` print them (their
//! owners' `to_json`), so the console and the CLI never disagree about a lead. Every value
//! is text escaped by maud: names, fields, properties and answer excerpts come from
//! partners and buyers.

use hyper::StatusCode;
use maud::{Markup, html};
use rusqlite::Connection;
use serde_json::Value;

use crate::console::layout::{self, Zone};
use crate::console::session::Session;
use crate::db::{Db, DbError};
use crate::http::Response;
use crate::http::error::Error;

/// A transaction with its history and its events, each event with its attempts.
struct Sale {
    transaction: Value,
    history: Vec<Value>,
    events: Vec<(Value, Vec<Value>)>,
}

struct LeadPage {
    lead: Value,
    /// When the person was erased (or the lead purged).
    erased_at: Option<i64>,
    sales: Vec<Sale>,
}

pub(crate) async fn get(db: &Db, operator: &Session, id: String) -> Result<Response, Error> {
    let (zone, found) = db
        .read(move |conn| Ok::<_, DbError>((Zone::of(conn)?, load(conn, &id)?)))
        .await?;
    let Some(page) = found else {
        let body = html! {
            p { "No lead has this id." }
            p { a href="/leads" { "Search leads" } }
        };
        return Ok(layout::page(
            StatusCode::NOT_FOUND,
            "Lead not found",
            "/leads",
            operator,
            &zone,
            body,
        ));
    };
    let title = format!("Lead {}", text(&page.lead["id"]));
    Ok(layout::page(
        StatusCode::OK,
        &title,
        "/leads",
        operator,
        &zone,
        render(&page, &zone),
    ))
}

fn load(conn: &Connection, id: &str) -> Result<Option<LeadPage>, DbError> {
    // Text that is not one of our lead ids names no lead.
    let Some(id) = crate::ids::LeadId::parse(id) else {
        return Ok(None);
    };
    let Some(lead) = crate::ingest::view::find(conn, id)? else {
        return Ok(None);
    };
    let mut sales = Vec::new();
    for request in &lead.requests {
        for transaction in crate::delivery::transaction::of_request(conn, request.id)? {
            let history = crate::delivery::transaction::history(conn, &transaction.id)?
                .iter()
                .map(|entry| entry.to_json())
                .collect();
            let mut events = Vec::new();
            for event in crate::outbox::store::of_transaction(conn, &transaction.id)? {
                let attempts = crate::outbox::store::attempts(conn, &event.id)?
                    .iter()
                    .map(|attempt| attempt.to_json())
                    .collect();
                events.push((event.to_json(), attempts));
            }
            sales.push(Sale {
                transaction: transaction.to_json(),
                history,
                events,
            });
        }
    }
    Ok(Some(LeadPage {
        lead: lead.to_json(),
        erased_at: lead.erased_at,
        sales,
    }))
}

/// A JSON value as one line of text: strings as they are, null as empty, the rest as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The keys whose numbers are amounts of money: shown with two decimals (`30.00`).
const MONEY_KEYS: &[&str] = &[
    "buyerPrice",
    "supplierCost",
    "marginAmount",
    "chargedAmount",
    "amount",
    "price",
];

/// A field's value as text: an amount with two decimals, the rest as [`text`].
fn value_text(key: &str, value: &Value) -> String {
    match value.as_f64() {
        Some(amount) if MONEY_KEYS.contains(&key) => format!("{amount:.2}"),
        _ => text(value),
    }
}

/// A JSON key as a label people read: `buyerPrice` → `Buyer price`, `transactionId` →
/// `Transaction id`. Keys a partner chose (additional properties, field values) are shown
/// as they are: they are the partner's names, not ours.
fn label(key: &str) -> String {
    let mut shown = String::with_capacity(key.len() + 4);
    for (at, c) in key.chars().enumerate() {
        if at == 0 {
            shown.extend(c.to_uppercase());
        } else if c.is_ascii_uppercase() {
            shown.push(' ');
            shown.push(c.to_ascii_lowercase());
        } else {
            shown.push(c);
        }
    }
    shown
}

/// An object's fields as a definition list with [`label`]s; nested objects as nested lists.
fn fields(value: &Value) -> Markup {
    fields_as(value, true)
}

/// [`fields`] with the keys as they are (`labelled` false): for the partner's own names.
fn fields_as(value: &Value, labelled: bool) -> Markup {
    html! {
        @match value {
            Value::Object(map) if !map.is_empty() => {
                dl class="fields" {
                    @for (key, value) in map {
                        dt { @if labelled { (label(key)) } @else { (key) } }
                        dd {
                            @if value.is_object() { (fields_as(value, labelled)) }
                            @else { (value_text(key, value)) }
                        }
                    }
                }
            }
            Value::Object(_) | Value::Null => { span class="empty" { "none" } }
            other => { (text(other)) }
        }
    }
}

fn render(page: &LeadPage, zone: &Zone) -> Markup {
    let lead = &page.lead;
    // An erased person's fields are blank by design: the cards say so instead.
    let erased = page.erased_at.map(|at| format!("Erased {}", zone.when(at)));
    let summary = [
        "id",
        "createdAt",
        "sourceId",
        "channelId",
        "tableId",
        "workspaceId",
        "externalId",
        "status",
        "qualityStatus",
        "qualityReasons",
        "duplicateStatus",
        "duplicateMatch",
    ];
    let empty = Vec::new();
    let requests = lead["requests"].as_array().unwrap_or(&empty);
    // What the erasure kept of a card (the country of the person): its fields that are
    // not blank, after the erasure's date.
    let person_card = |id: &str, title: &str, value: &Value| {
        let kept: serde_json::Map<String, Value> = value
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| !matches!(v, Value::Null) && v.as_str() != Some(""))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        html! {
            div class="card" id=(id) {
                h2 { (title) }
                @if let Some(erased) = &erased {
                    p class="erased" { (erased) }
                    @if !kept.is_empty() { (fields(&Value::Object(kept))) }
                } @else {
                    (fields(value))
                }
            }
        }
    };
    html! {
        @if let Some(erased) = &erased {
            p class="erased" id="erased" {
                (erased) ": the person's data was removed. Ids, times, products, statuses and "
                "money are kept, so reports and the ledger still add up."
            }
        }
        section class="cards" {
            div class="card" id="lead-summary" {
                h2 { "Lead" }
                dl class="fields" {
                    @for key in summary {
                        @if let Some(value) = lead.get(key) {
                            dt { (label(key)) }
                            dd {
                                @if key == "status" && erased.is_some() { "erased" }
                                @else if value.is_object() { (fields(value)) }
                                @else { (text(value)) }
                            }
                        }
                    }
                }
            }
            (person_card("person", "Person", &lead["person"]))
            div class="card" id="consent" { h2 { "Consent" } (fields(&lead["consent"])) }
            div class="card" id="capture" { h2 { "Capture" } (fields(&lead["capture"])) }
            div class="card" id="additional" {
                h2 { "Additional properties" }
                @if let Some(erased) = &erased {
                    p class="erased" { (erased) }
                } @else {
                    (fields_as(&lead["additionalProperties"], false))
                }
            }
        }
        h2 { "Requests and routing" }
        @if requests.is_empty() { (layout::none_yet("This lead has no requests.")) }
        @for request in requests { (request_section(request)) }
        h2 { "Transactions" }
        @if page.sales.is_empty() { (layout::none_yet("Not sold.")) }
        @for sale in &page.sales { (sale_section(sale)) }
    }
}

fn request_section(request: &Value) -> Markup {
    let decision = &request["decision"];
    let empty = Vec::new();
    let factors = decision["evaluation"]["factors"]
        .as_array()
        .unwrap_or(&empty);
    let candidates = decision["candidates"].as_array().unwrap_or(&empty);
    html! {
        section class="request" id={ "request-" (text(&request["id"])) } {
            h3 { (text(&request["productSlug"])) " · " (text(&request["id"])) }
            dl class="fields" {
                dt { "Status" } dd { (text(&request["status"])) }
                dt { "Routing ready" } dd { (text(&request["routingReady"])) }
                dt { "Trigger auto-delivery" } dd { (text(&request["triggerAutoDelivery"])) }
                dt { "Field values" } dd { (fields_as(&request["fieldValues"], false)) }
            }
            @if decision.is_null() {
                (layout::none_yet("No automated routing ran for this request."))
            } @else {
                p class="decision" {
                    "Routing: " strong { (text(&decision["outcome"])) }
                    " (" (text(&decision["reason"])) ")"
                    @if !decision["evaluation"].is_null() {
                        " · score " strong class="score" { (text(&decision["evaluation"]["score"])) }
                        " of threshold " (text(&decision["evaluation"]["threshold"]))
                        " (" (text(&decision["evaluation"]["model"])) ")"
                    }
                }
                @if !factors.is_empty() {
                    div class="scroll" {
                        table class="list factors" {
                            caption { "Evaluation factors" }
                            thead { tr {
                                th { "Factor" } th { "Value" } th { "Weight" } th { "Contribution" }
                            } }
                            tbody {
                                @for factor in factors {
                                    tr {
                                        td { (text(&factor["name"])) }
                                        td { (text(&factor["value"])) }
                                        td { (text(&factor["weight"])) }
                                        td { (text(&factor["contribution"])) }
                                    }
                                }
                            }
                        }
                    }
                }
                div class="scroll" {
                    table class="list candidates" {
                        caption { "Candidate buyers" }
                        thead { tr {
                            th { "Buyer" } th { "Eligible" } th { "Reason" } th { "Price" }
                            th { "Priority" } th { "Last served" } th { "Detail" }
                        } }
                        tbody {
                            @for candidate in candidates {
                                tr class="candidate" {
                                    td { (text(&candidate["buyerAccountId"])) }
                                    td { @if candidate["eligible"] == true { "yes" } @else { "no" } }
                                    td { (text(&candidate["reason"])) }
                                    td { (value_text("buyerPrice", &candidate["buyerPrice"])) }
                                    td { (text(&candidate["priority"])) }
                                    td { (text(&candidate["lastServedAt"])) }
                                    td { (text(&candidate["detail"])) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn sale_section(sale: &Sale) -> Markup {
    let t = &sale.transaction;
    html! {
        section class="transaction" id={ "txn-" (text(&t["transactionId"])) } {
            h3 { (text(&t["transactionId"])) " → " (text(&t["buyerAccountId"])) }
            (fields(t))
            div class="scroll" {
                table class="list history" {
                    caption { "History" }
                    thead { tr { th { "At" } th { "From" } th { "To" } th { "Actor" } th { "Reason" } } }
                    tbody {
                        @for entry in &sale.history {
                            tr {
                                td { (text(&entry["at"])) }
                                td { (text(&entry["from"])) }
                                td { (text(&entry["to"])) }
                                td { (text(&entry["actor"])) }
                                td { (text(&entry["reason"])) }
                            }
                        }
                    }
                }
            }
            @for (event, attempts) in &sale.events {
                div class="event" {
                    h4 { "Event " (text(&event["id"])) " · " (text(&event["status"])) }
                    (fields(event))
                    div class="scroll" {
                        table class="list attempts" {
                            caption { "Attempts" }
                            thead { tr {
                                th { "#" } th { "At" } th { "Outcome" } th { "HTTP" } th { "ms" }
                                th { "Error" } th { "Answer excerpt" }
                            } }
                            tbody {
                                @for attempt in attempts {
                                    tr {
                                        td { (text(&attempt["attempt"])) }
                                        td { (text(&attempt["at"])) }
                                        td { (text(&attempt["outcome"])) }
                                        td { (text(&attempt["httpStatus"])) }
                                        td { (text(&attempt["durationMs"])) }
                                        td { (text(&attempt["error"])) }
                                        td class="excerpt" { (text(&attempt["responseExcerpt"])) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
