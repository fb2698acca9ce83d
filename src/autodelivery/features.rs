//! The explainable features the evaluator scores: what a lead offers a buyer, each as a
//! number an operator can read.
//!
//! | feature | value |
//! |---|---|
//! | `validEmail` | 1 when the email is a plausible address (ingest's check), else 0 |
//! | `validPhone` | 1 when the phone is a plausible number (ingest's check), else 0 |
//! | `names` | 1 when first and last name each have two or more characters with a letter, 0.5 when one does |
//! | `addressCompleteness` | share of street, house number, postal code, city, country given (0 to 1) |
//! | `consentGranted` | 1 when consent is granted (`granted`, `yes`, `opt-in`, … as ingest reads it) with a capture time, 0.5 granted without one, else 0 |
//! | `requiredFields` | share of the product's required fields answered (1 when it has none) |
//! | `softQualityFlags` | how many soft quality checks failed (ingest's `qualityReasons`) |
//!
//! Owns turning a lead into these numbers; the weights and the score are `evaluator`.

use crate::ingest::model::{Interest, StoredLead};
use crate::ingest::normalize::{is_valid_email, phone_digits};
use crate::ingest::quality::CONSENT_GRANTED;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    ValidEmail,
    ValidPhone,
    Names,
    AddressCompleteness,
    ConsentGranted,
    RequiredFields,
    SoftQualityFlags,
}

/// Every feature, in the order factors are shown.
pub const FEATURES: [Feature; 7] = [
    Feature::ValidEmail,
    Feature::ValidPhone,
    Feature::Names,
    Feature::AddressCompleteness,
    Feature::ConsentGranted,
    Feature::RequiredFields,
    Feature::SoftQualityFlags,
];

impl Feature {
    pub fn name(self) -> &'static str {
        match self {
            Feature::ValidEmail => "validEmail",
            Feature::ValidPhone => "validPhone",
            Feature::Names => "names",
            Feature::AddressCompleteness => "addressCompleteness",
            Feature::ConsentGranted => "consentGranted",
            Feature::RequiredFields => "requiredFields",
            Feature::SoftQualityFlags => "softQualityFlags",
        }
    }

    pub fn from_name(name: &str) -> Option<Feature> {
        FEATURES.into_iter().find(|f| f.name() == name)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A lead's feature values, indexed by [`Feature::index`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Features(pub [f64; FEATURES.len()]);

impl Features {
    pub fn get(&self, feature: Feature) -> f64 {
        self.0[feature.index()]
    }
}

/// The features of `lead` for `interest` of a product whose required fields are
/// `required_fields`. The lead's fields are read as buyers get them.
pub(crate) fn extract(
    lead: &StoredLead,
    interest: &Interest,
    required_fields: &[&str],
) -> Features {
    let quality_reasons = lead.quality_reasons.len();
    let lead = &lead.fields;
    let mut values = [0.0; FEATURES.len()];
    let flag = |yes: bool| if yes { 1.0 } else { 0.0 };
    values[Feature::ValidEmail.index()] =
        flag(lead.text("email").is_some_and(|e| is_valid_email(&e)));
    values[Feature::ValidPhone.index()] = flag(
        lead.text("phone")
            .is_some_and(|p| phone_digits(&p).is_some()),
    );
    let named = ["firstName", "lastName"]
        .iter()
        .filter(|field| lead.text(field).is_some_and(|n| is_real_name(&n)))
        .count();
    values[Feature::Names.index()] = named as f64 / 2.0;
    let address = ["street", "houseNumber", "postalCode", "city", "country"];
    let given = address.iter().filter(|f| lead.text(f).is_some()).count();
    values[Feature::AddressCompleteness.index()] = given as f64 / address.len() as f64;
    let granted = lead
        .text("consentStatus")
        .is_some_and(|s| CONSENT_GRANTED.iter().any(|g| s.eq_ignore_ascii_case(g)));
    values[Feature::ConsentGranted.index()] = match (granted, lead.text("consentCapturedAt")) {
        (true, Some(_)) => 1.0,
        (true, None) => 0.5,
        (false, _) => 0.0,
    };
    values[Feature::RequiredFields.index()] = if required_fields.is_empty() {
        1.0
    } else {
        let answered = required_fields
            .iter()
            .filter(|name| interest.answer(name).is_some())
            .count();
        answered as f64 / required_fields.len() as f64
    };
    values[Feature::SoftQualityFlags.index()] = quality_reasons as f64;
    Features(values)
}

fn is_real_name(name: &str) -> bool {
    name.chars().count() >= 2 && name.chars().any(char::is_alphabetic)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{interest, lead};
    use super::*;

    #[test]
    fn a_complete_lead_has_every_positive_feature() {
        let complete = lead(&[
            ("firstName", "Ann"),
            ("lastName", "Lee"),
            ("email", "ann@example.com"),
            ("phone", "+49 30 1234567"),
            ("street", "Main St"),
            ("houseNumber", "1"),
            ("postalCode", "10115"),
            ("city", "Berlin"),
            ("country", "DE"),
            ("consentStatus", "granted"),
            ("consentCapturedAt", "2025-01-01T10:00:00Z"),
        ]);
        let features = extract(&complete, &interest(&[("roof", "tile")]), &["roof"]);
        assert_eq!(features.0, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn partial_leads_get_partial_values() {
        let mut sparse = lead(&[
            ("firstName", "A"),
            ("lastName", "Lee"),
            ("email", "not-an-email"),
            ("postalCode", "10115"),
            ("city", " "),
            ("consentStatus", "GRANTED"),
        ]);
        sparse.quality_reasons = vec!["placeholder_name".into(), "disposable_email".into()];
        let features = extract(&sparse, &interest(&[("roof", "tile")]), &["roof", "size"]);
        assert_eq!(features.get(Feature::ValidEmail), 0.0);
        assert_eq!(features.get(Feature::ValidPhone), 0.0);
        assert_eq!(
            features.get(Feature::Names),
            0.5,
            "a one-letter name does not count"
        );
        assert_eq!(
            features.get(Feature::AddressCompleteness),
            0.2,
            "blank city"
        );
        assert_eq!(
            features.get(Feature::ConsentGranted),
            0.5,
            "no capture time"
        );
        assert_eq!(features.get(Feature::RequiredFields), 0.5);
        assert_eq!(features.get(Feature::SoftQualityFlags), 2.0);
        assert_eq!(
            extract(&sparse, &interest(&[]), &[]).get(Feature::RequiredFields),
            1.0,
            "a product without required fields"
        );
    }

    #[test]
    fn names_round_trip() {
        for feature in FEATURES {
            assert_eq!(Feature::from_name(feature.name()), Some(feature));
        }
        assert_eq!(Feature::from_name("intercept"), None);
    }
}
