//! The ping's body (DESIGN.md section 14): what a partner may tell about a lead before its
//! personal data leaves the partner, checked without the database.
//!
//! Owns the body's rules: the product by `productSlug` or `productId`, `fieldValues`,
//! `postalCode`, `city`, `country`, `externalId`, `emailSha256` and `phoneSha256` (64 hex
//! digits: the SHA-256 of the value normalised as the duplicate rule does), additional
//! non-personal properties kept; names, email, phone, street and house number refused as
//! personal data. Resolving the product and checking its fields is ingest's validation
//! (`ingest::validate::complete`), the same as for a lead.

use serde_json::{Map, Value};

use crate::ingest::problem::{Problem, child, type_name};
use crate::ingest::validate::{self, InterestDraft, LeadDraft};

/// Properties that would carry the person: refused in a ping, named by path.
pub(crate) const PERSONAL: &[&str] = &[
    "firstName",
    "lastName",
    "name",
    "fullName",
    "email",
    "phone",
    "street",
    "houseNumber",
    "person",
];

/// A ping body whose own fields are checked; its product is not resolved yet.
#[derive(Debug, Clone)]
pub(crate) struct PingDraft {
    /// The ping as a lead draft with one interest, so that ingest's validation resolves
    /// the product and checks its fields, and the filters read the same fields.
    pub(crate) lead: LeadDraft,
    pub(crate) email_sha256: Option<String>,
    pub(crate) phone_sha256: Option<String>,
}

/// What is wrong with a ping body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// Personal data: the paths of the properties that carry it.
    PersonalData(Vec<Problem>),
    Invalid(Vec<Problem>),
}

/// Checks a ping body.
pub(crate) fn parse(body: Value) -> Result<PingDraft, Refusal> {
    let map = match body {
        Value::Object(map) => map,
        other => {
            return Err(Refusal::Invalid(vec![Problem::new(
                "",
                "invalid_type",
                format!("a ping must be a JSON object, not {}", type_name(&other)),
            )]));
        }
    };
    let personal: Vec<Problem> = map
        .iter()
        .filter(|(key, value)| PERSONAL.contains(&key.as_str()) && !value.is_null())
        .map(|(key, _)| {
            Problem::new(
                child("", key),
                "personal_data",
                format!("a ping carries no personal data: '{key}' belongs in the post"),
            )
        })
        .collect();
    if !personal.is_empty() {
        return Err(Refusal::PersonalData(personal));
    }
    let mut problems = Vec::new();
    let mut lead = LeadDraft::default();
    let mut interest = InterestDraft {
        path: String::new(),
        product_slug: None,
        product_id: None,
        routing_ready: None,
        trigger_auto_delivery: None,
        field_values: Map::new(),
    };
    let (mut email_sha256, mut phone_sha256) = (None, None);
    for (key, value) in map {
        let p = &mut problems;
        match key.as_str() {
            "productSlug" => interest.product_slug = validate::string(value, "", &key, p),
            "productId" => interest.product_id = validate::string(value, "", &key, p),
            "fieldValues" => {
                if let Some(values) = validate::object(value, "", &key, p) {
                    interest.field_values = validate::field_values(values, &child("", &key), p);
                }
            }
            "postalCode" => lead.fields.person.postal_code = validate::string(value, "", &key, p),
            "city" => lead.fields.person.city = validate::string(value, "", &key, p),
            "country" => lead.fields.person.country = validate::string(value, "", &key, p),
            "externalId" => {
                lead.fields.external_id = validate::string(value, "", &key, p);
                if let Some(id) = &lead.fields.external_id {
                    validate::check_external_id(id, &child("", &key), p);
                }
            }
            "emailSha256" => email_sha256 = hash(value, &key, p),
            "phoneSha256" => phone_sha256 = hash(value, &key, p),
            _ => {
                lead.fields.additional.insert(key, value);
            }
        }
    }
    if interest.product_slug.is_none() && interest.product_id.is_none() {
        problems.push(Problem::new(
            "/productSlug",
            "required",
            "a ping names its product by productSlug or productId",
        ));
    }
    if !problems.is_empty() {
        return Err(Refusal::Invalid(problems));
    }
    lead.interests.push(interest);
    Ok(PingDraft {
        lead,
        email_sha256,
        phone_sha256,
    })
}

/// A hex SHA-256 (64 hex digits), lower-cased.
fn hash(value: Value, key: &str, problems: &mut Vec<Problem>) -> Option<String> {
    let text = validate::string(value, "", key, problems)?;
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Some(text.to_ascii_lowercase())
    } else {
        problems.push(Problem::new(
            child("", key),
            "invalid_format",
            format!("{key} must be the hex SHA-256 (64 hex digits) of the normalised value"),
        ));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn personal_fields_are_refused_by_path() {
        let refused = parse(
            json!({"productSlug": "solar", "email": "a@b.de", "lastName": "X",
            "postalCode": "80331"}),
        )
        .unwrap_err();
        let Refusal::PersonalData(problems) = refused else {
            panic!("personal data expected")
        };
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/email", "/lastName"]);
    }

    #[test]
    fn a_ping_keeps_its_fields_and_checks_hashes() {
        // A ping carries `secrets::hash` (lower-case hex SHA-256) of the normalised key.
        let hash = crate::secrets::hash("a@b.de");
        let draft = parse(json!({"productSlug": "solar", "postalCode": "80331",
            "emailSha256": hash.to_uppercase(), "utm": "x", "fieldValues": {"roof": "tile"}}))
        .unwrap();
        assert_eq!(draft.email_sha256.as_deref(), Some(hash.as_str()));
        assert_eq!(
            draft.lead.fields.person.postal_code.as_deref(),
            Some("80331")
        );
        assert_eq!(draft.lead.fields.additional["utm"], "x");
        assert_eq!(draft.lead.interests[0].field_values["roof"], "tile");
        let Refusal::Invalid(problems) =
            parse(json!({"phoneSha256": "abc", "fieldValues": {"roof": 1}})).unwrap_err()
        else {
            panic!("invalid expected")
        };
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/phoneSha256", "/fieldValues/roof", "/productSlug"]);
    }
}
