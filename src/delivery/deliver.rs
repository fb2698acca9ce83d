//! [`deliver`]: one delivery of one lead request to one buyer, checked and written as a
//! whole inside the caller's write job.

use rusqlite::{Connection, OptionalExtension, params};

use super::DeliveryError;
use super::event::{self, LeadDelivered, Party, ProductRef};
use super::transaction::{self, Status};
use crate::config::buyer::{self, Plan};
use crate::config::container::DeliveryMode;
use crate::ingest::status::LeadStatus;

/// What to deliver to whom.
#[derive(Debug, Clone)]
pub struct DeliveryOrder<'a> {
    pub lead_request_id: &'a str,
    pub buyer_id: &'a str,
    /// The operator's price; `None` takes the buyer's subscription price.
    pub price_cents: Option<i64>,
    /// Who delivers, for the transaction history (`operator`, `auto-delivery`).
    pub actor: &'a str,
}

/// A delivery that was written (and commits with the caller's write job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub transaction_id: String,
    pub event_id: String,
    pub lead_request_id: String,
    pub lead_id: String,
    pub buyer_id: String,
    pub product_id: String,
    pub delivery_mode: DeliveryMode,
    pub buyer_price_cents: i64,
    pub supplier_cost_cents: i64,
    pub margin_cents: i64,
    /// What a prepaid balance was charged (0 for postpaid buyers).
    pub charged_cents: i64,
}

impl Delivered {
    /// The `deliver` command's output keys (DESIGN.md section 8) and the auto-delivery
    /// result's `deliveries` entries share these names.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "transactionId": self.transaction_id,
            "eventId": self.event_id,
            "leadRequestId": self.lead_request_id,
            "leadId": self.lead_id,
            "buyerAccountId": self.buyer_id,
            "productId": self.product_id,
            "deliveryMode": self.delivery_mode.as_str(),
            "buyerPrice": crate::money::to_json(self.buyer_price_cents),
            "supplierCost": crate::money::to_json(self.supplier_cost_cents),
            "marginAmount": crate::money::to_json(self.margin_cents),
        })
    }
}

/// The lead request with what a delivery needs from its lead, container, source and
/// product.
struct RequestContext {
    lead_id: String,
    product_id: String,
    field_values: String,
    workspace_id: String,
    lead_status: LeadStatus,
    delivery_mode: DeliveryMode,
    max_buyers: i64,
    source_cost_cents: Option<i64>,
    product_cost_cents: Option<i64>,
    product_name: String,
    product_slug: String,
}

fn load_request(conn: &Connection, id: &str) -> rusqlite::Result<Option<RequestContext>> {
    conn.prepare_cached(
        "SELECT r.lead_id, r.product_id, r.field_values, l.workspace_id, l.status,
                c.delivery_mode, c.max_buyers, s.supplier_cost_cents,
                p.default_supplier_cost_cents, p.name, p.slug
         FROM lead_requests r
         JOIN leads l ON l.id = r.lead_id
         JOIN containers c ON c.id = l.container_id
         JOIN sources s ON s.id = l.source_id
         JOIN products p ON p.id = r.product_id
         WHERE r.id = ?1",
    )?
    .query_row([id], |row| {
        Ok(RequestContext {
            lead_id: row.get(0)?,
            product_id: row.get(1)?,
            field_values: row.get(2)?,
            workspace_id: row.get(3)?,
            lead_status: row.get(4)?,
            delivery_mode: row.get(5)?,
            max_buyers: row.get(6)?,
            source_cost_cents: row.get(7)?,
            product_cost_cents: row.get(8)?,
            product_name: row.get(9)?,
            product_slug: row.get(10)?,
        })
    })
    .optional()
}

/// Delivers a lead request to a buyer: checks every rule, writes the transaction, charges a
/// prepaid balance, marks the request delivered, records when the buyer was served, starts
/// the history and writes the `lead.delivered` event to the outbox.
///
/// Runs inside the caller's write job and never begins or commits: the caller's job (and
/// so the delivery) commits or rolls back as a whole. On `Err` nothing was written, so a
/// caller that goes on after a refusal (auto-delivery trying the next buyer) needs no
/// savepoint of its own. Callers in the server process poke the outbox's
/// [`Notifier`](crate::outbox::Notifier) after the job returns so that the event goes out
/// at once.
pub fn deliver(conn: &Connection, order: &DeliveryOrder) -> Result<Delivered, DeliveryError> {
    let request = load_request(conn, order.lead_request_id)?
        .ok_or_else(|| DeliveryError::RequestNotFound(order.lead_request_id.to_string()))?;
    let buyer = buyer::find(conn, order.buyer_id)?
        .ok_or_else(|| DeliveryError::BuyerNotFound(order.buyer_id.to_string()))?;
    if buyer.workspace_id != request.workspace_id {
        return Err(DeliveryError::OtherWorkspace {
            buyer_id: buyer.id,
            workspace_id: request.workspace_id,
        });
    }
    if request.lead_status != LeadStatus::Active {
        return Err(DeliveryError::LeadNotActive {
            lead_id: request.lead_id,
            status: request.lead_status.as_str().replace('_', " "),
        });
    }
    if buyer.paused {
        return Err(DeliveryError::BuyerPaused(buyer.id));
    }
    let price_cents = match order.price_cents {
        Some(price) => price,
        None => {
            buyer::find_subscription(conn, &buyer.id, &request.product_id)?
                .ok_or_else(|| DeliveryError::NotSubscribed {
                    buyer_id: buyer.id.clone(),
                    product_id: request.product_id.clone(),
                })?
                .price_cents
        }
    };
    if price_cents < 0 {
        return Err(DeliveryError::InvalidPrice(price_cents));
    }

    let earlier = transaction::of_request(conn, order.lead_request_id)?;
    if let Some(had) = earlier.iter().find(|t| t.buyer_id == buyer.id) {
        return Err(DeliveryError::AlreadyDeliveredToBuyer {
            lead_request_id: order.lead_request_id.to_string(),
            buyer_id: buyer.id,
            transaction_id: had.id.clone(),
        });
    }
    let live: Vec<_> = earlier.iter().filter(|t| t.status.is_live()).collect();
    match request.delivery_mode {
        DeliveryMode::Exclusive => {
            if let Some(holder) = live.first() {
                return Err(DeliveryError::AlreadyDelivered {
                    lead_request_id: order.lead_request_id.to_string(),
                    transaction_id: holder.id.clone(),
                });
            }
        }
        DeliveryMode::Multi => {
            if live.len() as i64 >= request.max_buyers {
                return Err(DeliveryError::MaxBuyersReached {
                    lead_request_id: order.lead_request_id.to_string(),
                    max_buyers: request.max_buyers,
                });
            }
        }
    }
    let charged_cents = match buyer.plan {
        Plan::Postpaid => 0,
        Plan::Prepaid => {
            let available_cents = buyer.balance_cents + buyer.credit_limit_cents;
            if price_cents > available_cents {
                return Err(DeliveryError::InsufficientBalance {
                    buyer_id: buyer.id,
                    available_cents,
                    price_cents,
                });
            }
            price_cents
        }
    };
    // The lead is bought once: only one live transaction of a request carries the supplier
    // cost (in multi mode the first; after that one is rejected or cancelled, the next).
    let supplier_cost_cents = if live.iter().any(|t| t.supplier_cost_cents > 0) {
        0
    } else {
        request
            .source_cost_cents
            .or(request.product_cost_cents)
            .unwrap_or(0)
    };
    let margin_cents = price_cents - supplier_cost_cents;
    let lead = event::lead_object(conn, &request.lead_id)?
        .ok_or_else(|| DeliveryError::RequestNotFound(order.lead_request_id.to_string()))?;

    let delivered = Delivered {
        transaction_id: crate::ids::new("txn"),
        event_id: String::new(),
        lead_request_id: order.lead_request_id.to_string(),
        lead_id: request.lead_id.clone(),
        buyer_id: buyer.id.clone(),
        product_id: request.product_id.clone(),
        delivery_mode: request.delivery_mode,
        buyer_price_cents: price_cents,
        supplier_cost_cents,
        margin_cents,
        charged_cents,
    };
    let body = LeadDelivered {
        transaction_id: &delivered.transaction_id,
        lead_request_id: order.lead_request_id,
        lead_id: &request.lead_id,
        delivery_mode: request.delivery_mode,
        sent_at_ms: crate::clock::now_ms(),
        buyer: Party {
            id: &buyer.id,
            name: &buyer.name,
        },
        product: ProductRef {
            id: &request.product_id,
            name: &request.product_name,
            slug: &request.product_slug,
        },
        buyer_price_cents: price_cents,
        supplier_cost_cents,
        margin_cents,
        lead,
        field_values: event::field_values(&request.field_values),
    }
    .to_json();

    // The writes go in a savepoint of their own so that even a database error half-way
    // leaves nothing behind, and a caller that goes on after an error (auto-delivery trying
    // the next buyer) keeps a consistent job.
    conn.execute_batch("SAVEPOINT deliver")?;
    match write(
        conn,
        delivered,
        &request.workspace_id,
        &buyer.webhook_url,
        &body,
        order.actor,
    ) {
        Ok(delivered) => {
            conn.execute_batch("RELEASE deliver")?;
            Ok(delivered)
        }
        Err(e) => {
            if let Err(rollback) = conn.execute_batch("ROLLBACK TO deliver; RELEASE deliver") {
                log::error!("rolling back a failed delivery failed: {rollback}");
            }
            Err(e.into())
        }
    }
}

/// Writes a checked delivery: the transaction, the prepaid charge, the request's and the
/// buyer's state, the first history entry and the outbox event.
fn write(
    conn: &Connection,
    mut delivered: Delivered,
    workspace_id: &str,
    webhook_url: &str,
    body: &serde_json::Value,
    actor: &str,
) -> rusqlite::Result<Delivered> {
    let now = crate::clock::now_ms();
    conn.prepare_cached(
        "INSERT INTO transactions (id, lead_request_id, lead_id, buyer_id, product_id,
            workspace_id, delivery_mode, buyer_price_cents, supplier_cost_cents, margin_cents,
            charged_cents, status, delivery_status, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'delivered', 'pending', ?12, ?12)",
    )?
    .execute(params![
        delivered.transaction_id,
        delivered.lead_request_id,
        delivered.lead_id,
        delivered.buyer_id,
        delivered.product_id,
        workspace_id,
        delivered.delivery_mode.as_str(),
        delivered.buyer_price_cents,
        delivered.supplier_cost_cents,
        delivered.margin_cents,
        delivered.charged_cents,
        now
    ])?;
    conn.prepare_cached(
        "UPDATE buyers SET balance_cents = balance_cents - ?2, last_served_at = ?3 WHERE id = ?1",
    )?
    .execute(params![delivered.buyer_id, delivered.charged_cents, now])?;
    crate::ingest::status::mark_request_delivered(conn, &delivered.lead_request_id)?;
    transaction::append_history(
        conn,
        &delivered.transaction_id,
        None,
        Status::Delivered,
        actor,
        None,
    )?;
    delivered.event_id = crate::outbox::store::insert(
        conn,
        &crate::outbox::store::NewEvent {
            transaction_id: &delivered.transaction_id,
            buyer_id: &delivered.buyer_id,
            url: webhook_url,
            payload: &body.to_string(),
            created_at: now,
        },
    )?;
    Ok(delivered)
}
