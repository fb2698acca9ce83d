//! Reading lifecycle request bodies into typed calls, naming every problem with a JSON
//! pointer (SPEC.md sections 4.4 to 4.8).
//!
//! Owns the shape rules only (required fields, types, allowed values). Whether the call may
//! act on the transaction or lead it names is decided later, in `lookup` and `apply`.
//! Properties the interface does not name are ignored, as the interface does not forbid
//! them.

use serde_json::{Map, Value};

use super::error::{LifecycleError, Problem};
use super::state::Move;

/// The longest `reason` kept. A reason is a note for people; this bounds what one call can
/// add to a transaction's history.
pub(crate) const MAX_REASON_CHARS: usize = 2000;

/// How a buyer call names its transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub transaction_id: Option<crate::ids::TransactionId>,
    /// `externalId` or its alias `partnerExternalId`.
    pub external_id: Option<String>,
    pub buyer_account_id: Option<String>,
}

/// A buyer lifecycle call: which transaction, what move, and its optional details.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BuyerCall {
    pub address: Address,
    pub requested: Move,
    pub reason: Option<String>,
    /// `buyerPrice` of a confirmation, in cents; applied on acknowledge only.
    pub buyer_price_cents: Option<i64>,
    /// `reasonCode` of a cancellation (a return, DESIGN.md section 19).
    pub reason_code: Option<String>,
}

/// A supplier's answer to a lead cancellation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SupplierAnswer {
    /// As sent: text that is not one of our lead ids names no lead (`supplier::answer`).
    pub lead_id: String,
    /// `acknowledged` (true) or `rejected` (false).
    pub acknowledged: bool,
    pub reason: Option<String>,
}

fn object(body: &Value) -> Result<&Map<String, Value>, LifecycleError> {
    body.as_object().ok_or_else(|| {
        LifecycleError::Validation(vec![Problem::new(
            "",
            "type",
            "the request body must be a JSON object",
        )])
    })
}

/// A string property: `None` when absent or null; a problem when of another type or empty.
fn string(fields: &Map<String, Value>, key: &str, problems: &mut Vec<Problem>) -> Option<String> {
    match fields.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => {
            problems.push(Problem::new(
                format!("/{key}"),
                "min_length",
                format!("{key} must not be empty"),
            ));
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            problems.push(Problem::new(
                format!("/{key}"),
                "type",
                format!("{key} must be a string"),
            ));
            None
        }
    }
}

fn reason(fields: &Map<String, Value>, problems: &mut Vec<Problem>) -> Option<String> {
    let reason = string(fields, "reason", problems)?;
    if reason.chars().count() > MAX_REASON_CHARS {
        problems.push(Problem::new(
            "/reason",
            "max_length",
            format!("reason must be at most {MAX_REASON_CHARS} characters"),
        ));
        return None;
    }
    Some(reason)
}

fn required(value: Option<String>, key: &str, problems: &mut Vec<Problem>) -> Option<String> {
    if value.is_none() && !problems.iter().any(|p| p.path == format!("/{key}")) {
        problems.push(Problem::new(
            format!("/{key}"),
            "required",
            format!("{key} is required"),
        ));
    }
    value
}

/// `status` of a confirmation: `acknowledged` or `rejected`.
fn confirmation_status(fields: &Map<String, Value>, problems: &mut Vec<Problem>) -> Option<bool> {
    let status = required(string(fields, "status", problems), "status", problems)?;
    match status.as_str() {
        "acknowledged" => Some(true),
        "rejected" => Some(false),
        other => {
            problems.push(Problem::new(
                "/status",
                "enum",
                format!("status must be 'acknowledged' or 'rejected', not '{other}'"),
            ));
            None
        }
    }
}

/// `buyerPrice` as it was sent (the JSON text of its value), when the body is an object
/// that has it: the number is then read from its digits rather than from the float the
/// JSON parser made of it. `None` otherwise (the parsed value's text is used instead).
pub fn buyer_price_text(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Price<'a> {
        #[serde(rename = "buyerPrice", borrow, default)]
        buyer_price: Option<&'a serde_json::value::RawValue>,
    }
    let price: Price = serde_json::from_slice(body).ok()?;
    price.buyer_price.map(|raw| raw.get().to_string())
}

/// `buyerPrice`, read from the number's text (never through a float), rounded half away
/// from zero to cents and bounded (DESIGN.md section 11).
fn buyer_price(
    fields: &Map<String, Value>,
    text: Option<&str>,
    problems: &mut Vec<Problem>,
) -> Option<i64> {
    use crate::money::AmountError;
    match fields.get("buyerPrice") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match crate::money::cents_from_json_text(
            text.map_or_else(|| n.to_string(), str::to_string).trim(),
        ) {
            Ok(cents) if cents >= 0 => Some(cents),
            Ok(_) => {
                problems.push(Problem::new(
                    "/buyerPrice",
                    "minimum",
                    "buyerPrice must not be negative",
                ));
                None
            }
            Err(AmountError::OutOfRange(_)) => {
                problems.push(Problem::new(
                    "/buyerPrice",
                    "maximum",
                    format!(
                        "buyerPrice {n} is out of range: amounts are bounded to ±{}",
                        crate::money::BOUND_TEXT
                    ),
                ));
                None
            }
            Err(other) => {
                problems.push(Problem::new("/buyerPrice", "type", other.to_string()));
                None
            }
        },
        Some(_) => {
            problems.push(Problem::new(
                "/buyerPrice",
                "type",
                "buyerPrice must be a number",
            ));
            None
        }
    }
}

fn finish<T>(problems: Vec<Problem>, value: Option<T>) -> Result<T, LifecycleError> {
    match value {
        Some(value) if problems.is_empty() => Ok(value),
        _ => Err(LifecycleError::Validation(problems)),
    }
}

/// The body of partner-confirmation (SPEC.md section 4.4).
pub(crate) fn confirmation(
    body: &Value,
    price_text: Option<&str>,
) -> Result<BuyerCall, LifecycleError> {
    let fields = object(body)?;
    let mut problems = Vec::new();
    let transaction_id = string(fields, "transactionId", &mut problems);
    let external_id = string(fields, "externalId", &mut problems);
    let partner_external_id = string(fields, "partnerExternalId", &mut problems);
    let buyer_account_id = string(fields, "buyerAccountId", &mut problems);
    let acknowledged = confirmation_status(fields, &mut problems);
    let reason = reason(fields, &mut problems);
    let buyer_price_cents = buyer_price(fields, price_text, &mut problems);

    let external_id = match (external_id, partner_external_id) {
        (Some(a), Some(b)) if a != b => {
            problems.push(Problem::new(
                "/partnerExternalId",
                "conflict",
                "externalId and partnerExternalId are aliases and must not differ",
            ));
            None
        }
        (a, b) => a.or(b),
    };
    let id_problem = ["/transactionId", "/externalId", "/partnerExternalId"]
        .iter()
        .any(|path| problems.iter().any(|p| p.path == *path));
    if transaction_id.is_none() && external_id.is_none() && !id_problem {
        problems.push(Problem::new(
            "/transactionId",
            "required",
            "one of transactionId, externalId or partnerExternalId is required",
        ));
    }
    let call = acknowledged.map(|acknowledged| BuyerCall {
        address: Address {
            transaction_id: transaction_id.map(crate::ids::TransactionId::from),
            external_id,
            buyer_account_id,
        },
        requested: if acknowledged {
            Move::Acknowledge
        } else {
            Move::Reject
        },
        reason,
        buyer_price_cents,
        reason_code: None,
    });
    finish(problems, call)
}

/// The body of partner-payout-pending, partner-payout or partner-cancellation (SPEC.md
/// sections 4.5 to 4.7): `transactionId` is required; the cancellation also requires a
/// `reason` of at least one character.
pub(crate) fn transaction_move(body: &Value, requested: Move) -> Result<BuyerCall, LifecycleError> {
    let fields = object(body)?;
    let mut problems = Vec::new();
    let transaction_id = string(fields, "transactionId", &mut problems);
    let transaction_id = required(transaction_id, "transactionId", &mut problems);
    let reason = reason(fields, &mut problems);
    let (reason, reason_code) = if requested == Move::Cancel {
        (
            required(reason, "reason", &mut problems),
            string(fields, "reasonCode", &mut problems),
        )
    } else {
        (reason, None)
    };
    let call = transaction_id.map(|id| BuyerCall {
        address: Address {
            transaction_id: Some(id.into()),
            external_id: None,
            buyer_account_id: None,
        },
        requested,
        reason,
        buyer_price_cents: None,
        reason_code,
    });
    finish(problems, call)
}

/// The body of supplier-cancellation-confirmation (SPEC.md section 4.8).
pub(crate) fn supplier_answer(body: &Value) -> Result<SupplierAnswer, LifecycleError> {
    let fields = object(body)?;
    let mut problems = Vec::new();
    let lead_id = string(fields, "leadId", &mut problems);
    let lead_id = required(lead_id, "leadId", &mut problems);
    let acknowledged = confirmation_status(fields, &mut problems);
    let reason = reason(fields, &mut problems);
    let answer = match (lead_id, acknowledged) {
        (Some(lead_id), Some(acknowledged)) => Some(SupplierAnswer {
            lead_id,
            acknowledged,
            reason,
        }),
        _ => None,
    };
    finish(problems, answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(result: Result<impl std::fmt::Debug, LifecycleError>) -> Vec<(String, String)> {
        match result {
            Err(LifecycleError::Validation(problems)) => problems
                .into_iter()
                .map(|p| (p.path, p.code.to_string()))
                .collect(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    /// A confirmation without the body's text (its numbers read from the parsed value).
    fn parsed(body: &Value) -> Result<BuyerCall, LifecycleError> {
        confirmation(body, None)
    }

    #[test]
    fn the_price_is_read_from_the_text_sent() {
        let body = br#"{"transactionId": "t", "status": "acknowledged", "buyerPrice": 2.675}"#;
        let text = buyer_price_text(body);
        assert_eq!(text.as_deref(), Some("2.675"));
        let value: Value = serde_json::from_slice(body).unwrap();
        let call = confirmation(&value, text.as_deref()).unwrap();
        assert_eq!(call.buyer_price_cents, Some(268));
        assert_eq!(buyer_price_text(br#"{"status": "x"}"#), None);
    }

    fn pair(path: &str, code: &str) -> (String, String) {
        (path.to_string(), code.to_string())
    }

    #[test]
    fn confirmation_takes_any_id_field_and_the_aliases_must_agree() {
        let call = parsed(&json!({"externalId": "x1", "status": "rejected"})).unwrap();
        assert_eq!(call.address.external_id.as_deref(), Some("x1"));
        assert_eq!(call.requested, Move::Reject);
        let call = parsed(&json!({
            "partnerExternalId": "x1", "externalId": "x1", "buyerAccountId": "b",
            "status": "acknowledged", "buyerPrice": 12.5, "reason": "ok"
        }))
        .unwrap();
        assert_eq!(call.address.buyer_account_id.as_deref(), Some("b"));
        assert_eq!(call.buyer_price_cents, Some(1250));
        assert_eq!(call.requested, Move::Acknowledge);
        assert_eq!(
            problems(parsed(&json!({
                "externalId": "a", "partnerExternalId": "b", "status": "acknowledged"
            }))),
            vec![pair("/partnerExternalId", "conflict")]
        );
    }

    #[test]
    fn confirmation_names_every_problem() {
        assert_eq!(
            problems(parsed(&json!({"status": "maybe", "buyerPrice": -1}))),
            vec![
                pair("/status", "enum"),
                pair("/buyerPrice", "minimum"),
                pair("/transactionId", "required"),
            ]
        );
        assert_eq!(
            problems(parsed(&json!({"transactionId": 5, "buyerPrice": "9"}))),
            vec![
                pair("/transactionId", "type"),
                pair("/status", "required"),
                pair("/buyerPrice", "type"),
            ]
        );
        assert_eq!(problems(parsed(&json!([1]))), vec![pair("", "type")]);
    }

    #[test]
    fn cancellation_needs_a_reason_of_at_least_one_character() {
        assert_eq!(
            problems(transaction_move(
                &json!({"transactionId": "t"}),
                Move::Cancel
            )),
            vec![pair("/reason", "required")]
        );
        assert_eq!(
            problems(transaction_move(
                &json!({"transactionId": "t", "reason": ""}),
                Move::Cancel
            )),
            vec![pair("/reason", "min_length")]
        );
        let call =
            transaction_move(&json!({"transactionId": "t", "reason": "x"}), Move::Cancel).unwrap();
        assert_eq!(call.reason.as_deref(), Some("x"));
        let call = transaction_move(&json!({"transactionId": "t"}), Move::CompletePayout).unwrap();
        assert_eq!(call.reason, None);
        assert_eq!(
            problems(transaction_move(&json!({}), Move::MarkPayoutPending)),
            vec![pair("/transactionId", "required")]
        );
        let long = "x".repeat(MAX_REASON_CHARS + 1);
        assert_eq!(
            problems(transaction_move(
                &json!({"transactionId": "t", "reason": long}),
                Move::CompletePayout
            )),
            vec![pair("/reason", "max_length")]
        );
    }

    #[test]
    fn supplier_answers() {
        let answer =
            supplier_answer(&json!({"leadId": "lead_1", "status": "acknowledged"})).unwrap();
        assert!(answer.acknowledged);
        assert_eq!(
            problems(supplier_answer(&json!({"status": "no"}))),
            vec![pair("/leadId", "required"), pair("/status", "enum")]
        );
    }
}
