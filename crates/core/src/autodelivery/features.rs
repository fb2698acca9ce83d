//! The explainable features the evaluator scores: what a lead offers a buyer, each as a
//! number an operator can read.
//!
//! Numeric features, always present:
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
//! | `duplicatesSeen` | how many earlier leads of the workspace had the same email or phone (at most 3) |
//!
//! Category features: the categories the lead is in, each named `group:value` with value 1
//! (a category without a weight weighs 0; the trace lists those of the groups the
//! workspace's weights give any weight):
//!
//! | group | the lead's category |
//! |---|---|
//! | `source` | the source it came from: `source:landing` |
//! | `answer` | each answer to a product field with allowed values: `answer:homeowner=yes` |
//! | `hourOfDay` | when the lead was captured (its `capturedAt`, else its arrival), in the workspace's time zone: `night` (0–5 h), `morning` (6–11), `afternoon` (12–17), `evening` (18–23) |
//!
//! Only features that raised the holdout AUC of trained weights on realistic outcomes are
//! here (docs/delivery.md, "Which features, measured"); a postal-code prefix was tried and did not.
//!
//! Values are rounded to four decimals when extracted, so the value scored, the value shown
//! in the trace and the value stored for training (`stored_features`) are the same number.
//!
//! Owns turning a lead into these numbers and the names of features and groups; the
//! weights and the score are `evaluator`.

use crate::ingest::model::{Interest, StoredLead};
use crate::ingest::normalize::{is_valid_email, phone_digits};
use crate::ingest::quality::CONSENT_GRANTED;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    ValidEmail,
    ValidPhone,
    Names,
    AddressCompleteness,
    ConsentGranted,
    RequiredFields,
    SoftQualityFlags,
    DuplicatesSeen,
}

/// Every numeric feature, in the order factors are shown.
pub(crate) const FEATURES: [Feature; 8] = [
    Feature::ValidEmail,
    Feature::ValidPhone,
    Feature::Names,
    Feature::AddressCompleteness,
    Feature::ConsentGranted,
    Feature::RequiredFields,
    Feature::SoftQualityFlags,
    Feature::DuplicatesSeen,
];

/// `duplicatesSeen` counts up to this many earlier leads.
pub(crate) const DUPLICATES_SEEN_CAP: u32 = 3;

impl Feature {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feature::ValidEmail => "validEmail",
            Feature::ValidPhone => "validPhone",
            Feature::Names => "names",
            Feature::AddressCompleteness => "addressCompleteness",
            Feature::ConsentGranted => "consentGranted",
            Feature::RequiredFields => "requiredFields",
            Feature::SoftQualityFlags => "softQualityFlags",
            Feature::DuplicatesSeen => "duplicatesSeen",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Feature> {
        FEATURES.into_iter().find(|f| f.name() == name)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The group `evaluator train --features` selects it by: the original seven are
    /// `base`, later ones their own.
    pub(crate) fn group(self) -> Group {
        match self {
            Feature::DuplicatesSeen => Group::DuplicatesSeen,
            _ => Group::Base,
        }
    }
}

/// A family of categories: a category factor is named `group:value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    Source,
    Answer,
    HourOfDay,
}

pub(crate) const CATEGORIES: [Category; 3] =
    [Category::Source, Category::Answer, Category::HourOfDay];

/// The longest category value kept (longer ones are cut), so factor names stay short.
const MAX_CATEGORY_VALUE: usize = 64;

impl Category {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Category::Source => "source",
            Category::Answer => "answer",
            Category::HourOfDay => "hourOfDay",
        }
    }

    /// The factor name of `value` in this group.
    pub(crate) fn factor(self, value: &str) -> String {
        let value: String = value.trim().chars().take(MAX_CATEGORY_VALUE).collect();
        format!("{}:{value}", self.name())
    }

    /// The group of a factor name `group:value` (with a value); `None` for any other name.
    pub(crate) fn of_factor(name: &str) -> Option<Category> {
        let (group, value) = name.split_once(':')?;
        if value.is_empty() {
            return None;
        }
        CATEGORIES.into_iter().find(|c| c.name() == group)
    }
}

/// What `evaluator train --features` selects: the base features, one later numeric
/// feature, or a family of categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    Base,
    DuplicatesSeen,
    Source,
    Answer,
    HourOfDay,
}

pub const GROUPS: [Group; 5] = [
    Group::Base,
    Group::DuplicatesSeen,
    Group::Source,
    Group::Answer,
    Group::HourOfDay,
];

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Base => "base",
            Group::DuplicatesSeen => "duplicatesSeen",
            Group::Source => "source",
            Group::Answer => "answer",
            Group::HourOfDay => "hourOfDay",
        }
    }

    pub fn from_name(name: &str) -> Option<Group> {
        GROUPS.into_iter().find(|g| g.name() == name)
    }

    /// The group of a feature or category factor name; `None` for the intercept and
    /// unknown names.
    pub(crate) fn of_name(name: &str) -> Option<Group> {
        if let Some(feature) = Feature::from_name(name) {
            return Some(feature.group());
        }
        Category::of_factor(name).map(|category| match category {
            Category::Source => Group::Source,
            Category::Answer => Group::Answer,
            Category::HourOfDay => Group::HourOfDay,
        })
    }
}

/// A lead's features: the numeric values indexed by [`Feature::index`], and the factor
/// names of its categories in group order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Features {
    pub values: [f64; FEATURES.len()],
    pub categories: Vec<String>,
}

impl Features {
    pub(crate) fn get(&self, feature: Feature) -> f64 {
        self.values[feature.index()]
    }
}

/// What the features need besides the lead and its interest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub source_id: &'a str,
    /// The product's required fields.
    pub required_fields: &'a [&'a str],
    /// The product's fields with a list of allowed values, in definition order.
    pub choice_fields: &'a [&'a str],
    /// Earlier leads of the workspace with the same email or phone (counted up to
    /// [`DUPLICATES_SEEN_CAP`]).
    pub duplicates_seen: u32,
    /// The hour (0–23) the lead was captured, in the workspace's time zone.
    pub local_hour: u8,
}

/// The features of `lead` for `interest`. The lead's fields are read as buyers get them.
pub(crate) fn extract(stored: &StoredLead, interest: &Interest, context: &Context) -> Features {
    let lead = &stored.fields;
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
    let required = context.required_fields;
    values[Feature::RequiredFields.index()] = if required.is_empty() {
        1.0
    } else {
        let answered = required
            .iter()
            .filter(|name| interest.answer(name).is_some())
            .count();
        answered as f64 / required.len() as f64
    };
    values[Feature::SoftQualityFlags.index()] = stored.quality_reasons.len() as f64;
    values[Feature::DuplicatesSeen.index()] =
        context.duplicates_seen.min(DUPLICATES_SEEN_CAP) as f64;
    for value in &mut values {
        *value = rounded(*value);
    }

    let mut categories = vec![Category::Source.factor(context.source_id)];
    for field in context.choice_fields {
        if let Some(answer) = interest.answer(field) {
            categories.push(Category::Answer.factor(&format!("{field}={answer}")));
        }
    }
    let part_of_day = match context.local_hour {
        0..=5 => "night",
        6..=11 => "morning",
        12..=17 => "afternoon",
        _ => "evening",
    };
    categories.push(Category::HourOfDay.factor(part_of_day));
    Features { values, categories }
}

/// Four decimals, and never -0.
pub(crate) fn rounded(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0 + 0.0
}

fn is_real_name(name: &str) -> bool {
    name.chars().count() >= 2 && name.chars().any(char::is_alphabetic)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{interest, lead};
    use super::*;

    fn context<'a>(required: &'a [&'a str], choices: &'a [&'a str]) -> Context<'a> {
        Context {
            source_id: "landing",
            required_fields: required,
            choice_fields: choices,
            duplicates_seen: 0,
            local_hour: 9,
        }
    }

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
        let features = extract(
            &complete,
            &interest(&[("roof", "tile")]),
            &context(&["roof"], &["roof"]),
        );
        assert_eq!(features.values, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
        assert_eq!(
            features.categories,
            ["source:landing", "answer:roof=tile", "hourOfDay:morning"]
        );
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
        let answers = interest(&[("roof", "tile")]);
        let mut seen = context(&["roof", "size", "age"], &["size"]);
        seen.duplicates_seen = 7;
        seen.local_hour = 23;
        let features = extract(&sparse, &answers, &seen);
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
        assert_eq!(
            features.get(Feature::RequiredFields),
            0.3333,
            "rounded to four decimals"
        );
        assert_eq!(features.get(Feature::SoftQualityFlags), 2.0);
        assert_eq!(features.get(Feature::DuplicatesSeen), 3.0, "capped");
        assert_eq!(
            features.categories,
            ["source:landing", "hourOfDay:evening"],
            "no answer to the one choice field"
        );
        assert_eq!(
            extract(&sparse, &interest(&[]), &context(&[], &[])).get(Feature::RequiredFields),
            1.0,
            "a product without required fields"
        );
    }

    #[test]
    fn names_round_trip() {
        for feature in FEATURES {
            assert_eq!(Feature::from_name(feature.name()), Some(feature));
            assert_eq!(Group::of_name(feature.name()), Some(feature.group()));
        }
        assert_eq!(Feature::from_name("intercept"), None);
        for group in GROUPS {
            assert_eq!(Group::from_name(group.name()), Some(group));
        }
        assert_eq!(Category::of_factor("source:web"), Some(Category::Source));
        assert_eq!(Group::of_name("answer:roof=tile"), Some(Group::Answer));
        assert_eq!(Category::of_factor("source:"), None, "a value is needed");
        assert_eq!(Category::of_factor("colour:red"), None);
        assert_eq!(Group::of_name("intercept"), None);
        let long = "x".repeat(100);
        assert_eq!(Category::Source.factor(&long).len(), "source:".len() + 64);
    }
}
