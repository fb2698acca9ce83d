//! [`deliver`]: one delivery of one lead request to one buyer, checked and written as a
//! whole inside the caller's write job.

use crate::db::PrepareKept;
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::DeliveryError;
use super::transaction::{self, NewTransaction, SaleView};
use crate::config::buyer::{self, Plan};
use crate::config::container::DeliveryMode;
use crate::ids::{LeadId, LeadRequestId};
use crate::ingest::model::{StoredLead, StoredRequest};
use crate::ingest::status::LeadStatus;
use crate::ingest::view;
use crate::ledger;

/// What to deliver to whom, the request named by its id (the `deliver` command).
#[derive(Debug, Clone)]
pub struct DeliveryOrder<'a> {
    pub lead_request_id: LeadRequestId,
    pub buyer_id: &'a crate::ids::BuyerId,
    /// The operator's price; `None` takes the buyer's subscription price.
    pub price_cents: Option<i64>,
    /// Who delivers, for the transaction history (`operator`, `auto-delivery`).
    pub actor: &'a str,
}

/// A delivery that was written (and commits with the caller's write job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub transaction_id: crate::ids::TransactionId,
    pub event_id: crate::ids::EventId,
    pub lead_request_id: LeadRequestId,
    pub lead_id: LeadId,
    pub buyer_id: crate::ids::BuyerId,
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
    pub fn view(&self) -> DeliveredView<'_> {
        DeliveredView {
            transaction_id: &self.transaction_id,
            event_id: &self.event_id,
            sale: SaleView {
                lead_request_id: self.lead_request_id,
                lead_id: self.lead_id,
                buyer_account_id: self.buyer_id.as_str(),
                product_id: &self.product_id,
                delivery_mode: self.delivery_mode.as_str(),
                buyer_price: crate::money::as_f64(self.buyer_price_cents),
                supplier_cost: crate::money::as_f64(self.supplier_cost_cents),
                margin_amount: crate::money::as_f64(self.margin_cents),
            },
        }
    }

    /// [`Delivered::view`] as a JSON value, for callers that assemble one.
    pub fn to_json(&self) -> serde_json::Value {
        crate::to_value(self.view())
    }
}

/// A delivery as `deliver --json` and auto-delivery's `deliveries` show it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveredView<'a> {
    transaction_id: &'a crate::ids::TransactionId,
    event_id: &'a crate::ids::EventId,
    #[serde(flatten)]
    sale: SaleView<'a>,
}

/// How a request is delivered, from the lead's container (mode, maximum buyers) and its
/// source or product (the supplier cost): what a delivery needs besides the lead itself.
/// Auto-delivery has these at hand for every buyer it tries; the `deliver` command reads
/// them with the lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeliveryTerms {
    pub(crate) mode: DeliveryMode,
    pub(crate) max_buyers: i64,
    /// The source's supplier cost, else the product's default, else 0.
    pub(crate) supplier_cost_cents: i64,
    /// The workspace's cap windows now, when the caller has them (auto-delivery).
    pub(crate) cap_windows: Option<crate::caps::Windows>,
}

/// One delivery of a request of a lead the caller holds as stored: auto-delivery hands over
/// the lead its ingest job has just written, the `deliver` command the one it read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeadDelivery<'a> {
    pub(crate) lead: &'a StoredLead,
    pub(crate) request: &'a StoredRequest,
    pub(crate) terms: DeliveryTerms,
    pub(crate) buyer_id: &'a crate::ids::BuyerId,
    /// The operator's price; `None` takes the buyer's subscription price.
    pub(crate) price_cents: Option<i64>,
    /// Who delivers, for the transaction history (`operator`, `auto-delivery`).
    pub(crate) actor: &'a str,
    /// The winning bid that set `price_cents`, if a bid did.
    pub(crate) bid: Option<&'a super::transaction::BidRef>,
}

/// The terms of delivering `product_id` of a lead from `source_id` in `container_id`;
/// `None` when one of them is missing.
pub(super) fn load_terms(
    conn: &Connection,
    container_id: &str,
    source_id: &crate::ids::SourceId,
    product_id: &str,
) -> rusqlite::Result<Option<DeliveryTerms>> {
    conn.prepare_kept(
        "SELECT c.delivery_mode, c.max_buyers,
                coalesce(s.supplier_cost_cents, p.default_supplier_cost_cents, 0)
         FROM containers c, sources s, products p
         WHERE c.id = ?1 AND s.id = ?2 AND p.id = ?3",
    )?
    .query_row(
        rusqlite::params![container_id, source_id, product_id],
        |row| {
            Ok(DeliveryTerms {
                mode: row.get(0)?,
                max_buyers: row.get(1)?,
                supplier_cost_cents: row.get(2)?,
                cap_windows: None,
            })
        },
    )
    .optional()
}

/// Delivers a stored lead request to a buyer, as [`deliver_lead`] does, for a caller that
/// names the request by id (the `deliver` command): reads the lead once, then takes the
/// same path as auto-delivery.
pub fn deliver(conn: &Connection, order: &DeliveryOrder) -> Result<Delivered, DeliveryError> {
    let not_found = || DeliveryError::RequestNotFound(order.lead_request_id.to_string());
    let lead = view::find_by_request(conn, order.lead_request_id)?.ok_or_else(not_found)?;
    let request = lead.request(order.lead_request_id).ok_or_else(not_found)?;
    let terms = load_terms(
        conn,
        &lead.container_id,
        &lead.source_id,
        &request.interest.product_id,
    )?
    .ok_or_else(not_found)?;
    deliver_lead(
        conn,
        &LeadDelivery {
            bid: None,
            lead: &lead,
            request,
            terms,
            buyer_id: order.buyer_id,
            price_cents: order.price_cents,
            actor: order.actor,
        },
    )
}

/// Delivers a lead request to a buyer: checks every rule, writes the transaction with its
/// first history entry, charges a prepaid balance and pays the supplier (ledger), marks the
/// request delivered, records when the buyer was served and writes the `lead.delivered`
/// event (built from the lead as handed over, not read back) to the outbox.
///
/// Runs inside the caller's write job and never begins or commits: the caller's job (and
/// so the delivery) commits or rolls back as a whole. Every rule is checked before the
/// first write ([`decide`] reads and decides, [`write`] only writes), so a refusal has
/// written nothing and a caller that goes on after one (auto-delivery trying the next
/// buyer) needs no savepoint. An error from the writes is a database error
/// ([`DeliveryError::Db`]), after which the caller must fail its job: the writer then rolls
/// back the job's writes (its savepoint, or an ingest job's group transaction), and with them
/// the half-written delivery. Callers in the server process poke the outbox's
/// [`Notifier`](crate::outbox::Notifier) after the job returns so that the event goes out
/// at once.
pub(crate) fn deliver_lead(
    conn: &Connection,
    order: &LeadDelivery,
) -> Result<Delivered, DeliveryError> {
    deliver_known(conn, order, Known::default())
}

/// What the caller knows of the request, which spares a delivery a read or a write on the
/// writer thread (auto-delivery's, where every statement of a routed lead counts).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Known {
    /// No transaction of the request exists: the request was stored in this same job and
    /// nothing of it was delivered yet. The rules then need no read of its transactions.
    pub(crate) unsold: bool,
    /// The caller stores the request's decision in this same job, which sets the request's
    /// status (`ingest::status::record_decision`): the delivery does not set it first.
    pub(crate) status_by_caller: bool,
}

/// [`deliver_lead`] with what the caller knows of the request (`known`).
pub(crate) fn deliver_known(
    conn: &Connection,
    order: &LeadDelivery,
    known: Known,
) -> Result<Delivered, DeliveryError> {
    let decided = decide(conn, order, known)?;
    Ok(write(
        conn,
        decided,
        order.actor,
        order.terms.cap_windows,
        order.bid,
        known,
    )?)
}

/// A delivery that passed every rule, with what writing it needs.
struct Decided {
    delivered: Delivered,
    workspace_id: String,
    /// The lead's source.
    source_id: crate::ids::SourceId,
    webhook_url: String,
    /// The `lead.delivered` event's body as the outbox stores it.
    body: String,
    /// The supplier this delivery buys the lead from: set when the transaction carries a
    /// supplier cost, the source has a supplier, and no earlier transaction of the request
    /// bought the lead already.
    supplier_id: Option<crate::ids::SupplierId>,
}

/// Reads what a delivery needs and checks every rule; writes nothing.
fn decide(conn: &Connection, order: &LeadDelivery, known: Known) -> Result<Decided, DeliveryError> {
    let (lead, request, terms) = (order.lead, order.request, &order.terms);
    let product = &request.interest;
    // An archived buyer takes no deliveries: it is as unknown as one that never was.
    let buyer = buyer::find_recipient(conn, order.buyer_id)?
        .filter(|buyer| !buyer.archived)
        .ok_or_else(|| DeliveryError::BuyerNotFound(order.buyer_id.clone()))?;
    if buyer.workspace_id != lead.workspace_id {
        return Err(DeliveryError::OtherWorkspace {
            buyer_id: buyer.id,
            workspace_id: lead.workspace_id.clone(),
        });
    }
    if lead.erased_at.is_some() {
        return Err(DeliveryError::LeadErased(lead.id));
    }
    if lead
        .quality_reasons
        .iter()
        .any(|r| r == crate::suppression::SUPPRESSED)
    {
        return Err(DeliveryError::LeadSuppressed(lead.id));
    }
    if lead.status != LeadStatus::Active {
        return Err(DeliveryError::LeadNotActive {
            lead_id: lead.id,
            status: lead.status.as_str().replace('_', " "),
        });
    }
    if buyer.paused {
        return Err(DeliveryError::BuyerPaused(buyer.id));
    }
    let price_cents = match order.price_cents {
        Some(price) => price,
        None => {
            buyer::find_subscription(conn, &buyer.id, &product.product_id)?
                .ok_or_else(|| DeliveryError::NotSubscribed {
                    buyer_id: buyer.id.clone(),
                    product_id: product.product_id.clone(),
                })?
                .price_cents
        }
    };
    if price_cents < 0 {
        return Err(DeliveryError::InvalidPrice(price_cents));
    }

    let earlier = if known.unsold {
        Vec::new()
    } else {
        transaction::of_request(conn, request.id)?
    };
    if let Some(had) = earlier.iter().find(|t| t.buyer_id == buyer.id) {
        return Err(DeliveryError::AlreadyDeliveredToBuyer {
            lead_request_id: request.id,
            buyer_id: buyer.id,
            transaction_id: had.id.clone(),
        });
    }
    let live: Vec<_> = earlier.iter().filter(|t| t.status.is_live()).collect();
    match terms.mode {
        DeliveryMode::Exclusive => {
            if let Some(holder) = live.first() {
                return Err(DeliveryError::AlreadyDelivered {
                    lead_request_id: request.id,
                    transaction_id: holder.id.clone(),
                });
            }
        }
        DeliveryMode::Multi => {
            if live.len() as i64 >= terms.max_buyers {
                return Err(DeliveryError::MaxBuyersReached {
                    lead_request_id: request.id,
                    max_buyers: terms.max_buyers,
                });
            }
        }
    }
    let charged_cents = match buyer.plan {
        Plan::Postpaid => 0,
        Plan::Prepaid => {
            // What ping reservations hold of the balance is not available (a ping being
            // posted gives its hold back before it delivers).
            let held_cents = ledger::held(conn, &buyer.id)?;
            if let Err(short) = ledger::covers_unheld(
                buyer.balance_cents,
                held_cents,
                buyer.credit_limit_cents,
                price_cents,
            ) {
                return Err(DeliveryError::InsufficientBalance {
                    buyer_id: buyer.id,
                    available_cents: short.available_cents,
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
        terms.supplier_cost_cents
    };
    let margin_cents = price_cents - supplier_cost_cents;

    let delivered = Delivered {
        transaction_id: crate::ids::TransactionId::generate(),
        // Set when the event is written (`write`).
        event_id: crate::ids::EventId::from(String::new()),
        lead_request_id: request.id,
        lead_id: lead.id,
        buyer_id: buyer.id.clone(),
        product_id: product.product_id.clone(),
        delivery_mode: terms.mode,
        buyer_price_cents: price_cents,
        supplier_cost_cents,
        margin_cents,
        charged_cents,
    };
    let body = super::event::lead_delivered(
        &delivered.transaction_id,
        lead,
        request,
        super::event::Party {
            id: buyer.id.as_str(),
            name: &buyer.name,
        },
        super::event::Sale {
            delivery_mode: terms.mode,
            buyer_price_cents: price_cents,
            supplier_cost_cents,
            bid: order.bid,
        },
    )
    .to_text();

    // The supplier is paid once per request: a transaction that takes the cost over from
    // a rejected or cancelled one buys nothing new.
    let buys_the_lead =
        supplier_cost_cents > 0 && !earlier.iter().any(|t| t.supplier_cost_cents > 0);
    let supplier_id = if buys_the_lead {
        crate::config::source::supplier_of(conn, &lead.source_id)?
    } else {
        None
    };
    Ok(Decided {
        delivered,
        workspace_id: lead.workspace_id.clone(),
        source_id: lead.source_id.clone(),
        webhook_url: buyer.webhook_url,
        body,
        supplier_id,
    })
}

/// Writes a decided delivery: the transaction and its first history entry, the money
/// (the prepaid charge, the supplier's cost), the buyer's and the request's state and the
/// outbox event. Each table through its owner.
fn write(
    conn: &Connection,
    decided: Decided,
    actor: &str,
    cap_windows: Option<crate::caps::Windows>,
    bid: Option<&transaction::BidRef>,
    known: Known,
) -> rusqlite::Result<Delivered> {
    let Decided {
        mut delivered,
        workspace_id,
        source_id,
        webhook_url,
        body,
        supplier_id,
    } = decided;
    let now = crate::clock::now_ms();
    transaction::create(
        conn,
        &NewTransaction {
            id: &delivered.transaction_id,
            lead_request_id: delivered.lead_request_id,
            lead_id: delivered.lead_id,
            buyer_id: &delivered.buyer_id,
            product_id: &delivered.product_id,
            workspace_id: &workspace_id,
            source_id: &source_id,
            delivery_mode: delivered.delivery_mode,
            buyer_price_cents: delivered.buyer_price_cents,
            supplier_cost_cents: delivered.supplier_cost_cents,
            margin_cents: delivered.margin_cents,
            charged_cents: delivered.charged_cents,
            cap_windows,
            bid,
            first_of_request: known.unsold,
        },
        actor,
        now,
    )?;
    let posting = |party, kind, amount_cents| ledger::Posting {
        workspace_id: &workspace_id,
        party,
        transaction_id: Some(&delivered.transaction_id),
        kind,
        amount_cents,
        reason: None,
        actor,
        at: now,
    };
    if delivered.charged_cents > 0 {
        ledger::post(
            conn,
            &posting(
                ledger::Party::Buyer(&delivered.buyer_id),
                ledger::Kind::Charge,
                -delivered.charged_cents,
            ),
        )?;
    }
    if let Some(supplier_id) = &supplier_id {
        ledger::post(
            conn,
            &posting(
                ledger::Party::Supplier(supplier_id),
                ledger::Kind::SupplierCost,
                delivered.supplier_cost_cents,
            ),
        )?;
    }
    buyer::mark_served(conn, &delivered.buyer_id, now)?;
    if !known.status_by_caller {
        crate::ingest::status::mark_request_delivered(conn, delivered.lead_request_id)?;
    }
    delivered.event_id = crate::outbox::store::insert(
        conn,
        &crate::outbox::store::NewEvent {
            transaction_id: &delivered.transaction_id,
            buyer_id: &delivered.buyer_id,
            url: &webhook_url,
            payload: &body,
            created_at: now,
        },
    )?;
    Ok(delivered)
}
