//! The built-in evaluator: a logistic model over the explainable features of `features`,
//! with weights kept per workspace.
//!
//! `score = round(100 / (1 + e^-z))` with `z = intercept + Σ weight × value`, so the score
//! runs from 0 to 100, and each factor's `contribution` (weight × value) shows how much it
//! moved the lead towards or away from delivery; the intercept is listed as a factor with
//! value 1, so the contributions add up to `z`. The lead's categories are listed for the
//! groups the weights give any weight (a category of such a group without one shows 0);
//! the others would only add zeros. The same lead and weights always give the
//! same score: the sum runs in a fixed order over the same numbers.
//!
//! Weights are a JSON object (`{"intercept": -3, "validEmail": 1.5, …, "source:web": 0.4}`):
//! the intercept, one weight per numeric feature, and weights for those categories that
//! have one (a category without a weight weighs 0, so a new source or answer starts
//! neutral). They are stored per workspace with their versions by `weights`. Owns the model, its defaults and the
//! weights' JSON; the threshold belongs to the container.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::features::{CATEGORIES, Category, FEATURES, Feature, Features, rounded};

/// The model's name in every evaluation, so a stored decision says what produced it.
pub const MODEL: &str = "leadrelay-logistic-v1";

/// The name of the constant term among the weights and factors.
pub(crate) const INTERCEPT: &str = "intercept";

/// The largest weight (in size) accepted; beyond it one factor alone saturates the score.
const MAX_WEIGHT: f64 = 100.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    pub intercept: f64,
    /// Indexed by [`Feature::index`].
    pub features: [f64; FEATURES.len()],
    /// By category factor name (`source:web`); none is 0.
    pub categories: BTreeMap<String, f64>,
}

/// The defaults put a lead with a valid contact, real names and nothing else just above the
/// default threshold of 50 (score 62), the same lead with one soft quality flag below it
/// (38), and a complete lead near 99. Leads without a usable contact never get here: their
/// quality is `invalid`, which ends auto-delivery before the evaluation. Features added
/// later (`duplicatesSeen`) and the categories start at 0, so they change no score until
/// an operator sets or trains them.
pub const DEFAULT_WEIGHTS: Weights = Weights {
    intercept: -3.0,
    features: [1.5, 1.5, 1.0, 1.0, 1.5, 1.0, -1.0, 0.0],
    categories: BTreeMap::new(),
};

impl Default for Weights {
    fn default() -> Weights {
        DEFAULT_WEIGHTS
    }
}

impl Weights {
    pub(crate) fn get(&self, feature: Feature) -> f64 {
        self.features[feature.index()]
    }

    /// `z = intercept + Σ weight × value` over the features, then the categories, in that
    /// fixed order.
    pub(crate) fn linear(&self, features: &Features) -> f64 {
        self.linear_of(
            &features.values,
            features.categories.iter().map(String::as_str),
        )
    }

    /// [`linear`](Self::linear) of numeric `values` (indexed by [`Feature::index`]) and
    /// category factor names.
    pub(crate) fn linear_of<'a>(
        &self,
        values: &[f64; FEATURES.len()],
        categories: impl Iterator<Item = &'a str>,
    ) -> f64 {
        let mut z = self.intercept;
        for feature in FEATURES {
            z += values[feature.index()] * self.get(feature);
        }
        for name in categories {
            z += self.category(name);
        }
        z
    }

    /// Whether any category of `name`'s group (the part before `:`) has a weight: the trace
    /// shows a lead's categories of such groups only, so a group nobody weighs (as none
    /// does with the defaults) adds no line of zeros to every decision.
    pub(crate) fn weighs_group_of(&self, name: &str) -> bool {
        let Some((group, _)) = name.split_once(':') else {
            return false;
        };
        let prefix = format!("{group}:");
        self.categories
            .range::<str, _>((
                std::ops::Bound::Included(prefix.as_str()),
                std::ops::Bound::Unbounded,
            ))
            .next()
            .is_some_and(|(key, _)| key.starts_with(&prefix))
    }

    /// The weight of a category factor (0 when it has none).
    pub(crate) fn category(&self, name: &str) -> f64 {
        self.categories.get(name).copied().unwrap_or(0.0)
    }

    /// Sets one weight by name: `intercept`, a feature name or a category factor
    /// (`source:web`; 0 removes its weight).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), String> {
        if !value.is_finite() || value.abs() > MAX_WEIGHT {
            return Err(format!(
                "weight {name} must be a number from -{MAX_WEIGHT} to {MAX_WEIGHT}"
            ));
        }
        if name == INTERCEPT {
            self.intercept = value;
            return Ok(());
        }
        if Category::of_factor(name).is_some() {
            if value == 0.0 {
                self.categories.remove(name);
            } else {
                self.categories.insert(name.to_string(), value);
            }
            return Ok(());
        }
        let feature = Feature::from_name(name).ok_or_else(|| {
            let known: Vec<String> = std::iter::once(INTERCEPT.to_string())
                .chain(FEATURES.iter().map(|f| f.name().to_string()))
                .chain(CATEGORIES.iter().map(|c| format!("{}:VALUE", c.name())))
                .collect();
            format!("unknown weight '{name}': use one of {}", known.join(", "))
        })?;
        self.features[feature.index()] = value;
        Ok(())
    }

    /// Applies every weight of a JSON object on top of `self`; names it does not give keep
    /// their value.
    pub fn merge_json(&mut self, object: &Value) -> Result<(), String> {
        let map = object
            .as_object()
            .ok_or("weights are a JSON object of name to number")?;
        for (name, value) in map {
            let number = value
                .as_f64()
                .ok_or_else(|| format!("weight {name} must be a number"))?;
            self.set(name, number)?;
        }
        Ok(())
    }

    /// `{"intercept": …, "validEmail": …, …, "source:web": …}`: the intercept, the
    /// features in their fixed order, then the categories by name.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert(INTERCEPT.into(), Value::from(self.intercept));
        for feature in FEATURES {
            map.insert(feature.name().into(), Value::from(self.get(feature)));
        }
        for (name, weight) in &self.categories {
            map.insert(name.clone(), Value::from(*weight));
        }
        Value::Object(map)
    }
}

/// One line of the explanation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Factor {
    pub name: Cow<'static, str>,
    pub value: f64,
    pub weight: f64,
    pub contribution: f64,
}

/// The `evaluation` object of a Delivery 1.0 request result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    pub model: &'static str,
    pub score: i64,
    pub threshold: i64,
    pub passed: bool,
    pub factors: Vec<Factor>,
}

/// Scores `features` with `weights` against `threshold` (0 to 100, reached when the score
/// is at least the threshold).
pub(crate) fn evaluate(features: &Features, weights: &Weights, threshold: i64) -> Evaluation {
    let mut factors = Vec::with_capacity(FEATURES.len() + 1 + features.categories.len());
    factors.push(Factor {
        name: Cow::Borrowed(INTERCEPT),
        value: 1.0,
        weight: weights.intercept,
        contribution: weights.intercept,
    });
    for feature in FEATURES {
        let (value, weight) = (features.get(feature), weights.get(feature));
        factors.push(Factor {
            name: Cow::Borrowed(feature.name()),
            value: rounded(value),
            weight,
            contribution: rounded(value * weight),
        });
    }
    for name in &features.categories {
        let weight = weights.category(name);
        if weight == 0.0 && !weights.weighs_group_of(name) {
            continue;
        }
        factors.push(Factor {
            name: Cow::Owned(name.clone()),
            value: 1.0,
            weight,
            contribution: rounded(weight),
        });
    }
    let score = score(weights.linear(features));
    Evaluation {
        model: MODEL,
        score,
        threshold,
        passed: score >= threshold,
        factors,
    }
}

/// The score of `z`: `round(100 / (1 + e^-z))`, 0 to 100. The one rule, also for the
/// comparison `evaluator train` prints.
pub(crate) fn score(z: f64) -> i64 {
    (100.0 / (1.0 + (-z).exp())).round().clamp(0.0, 100.0) as i64
}

/// Reads the column's value: NULL means the defaults. Weights were checked when set; should
/// the column have been edited by hand into something unreadable, the defaults apply (and
/// the log says so) rather than every lead of the workspace failing to ingest. The flag
/// says whether the workspace has weights of its own.
pub(crate) fn from_stored(workspace_id: &str, stored: Option<&str>) -> (Weights, bool) {
    let Some(text) = stored else {
        return (DEFAULT_WEIGHTS, false);
    };
    let mut weights = DEFAULT_WEIGHTS;
    let merged = serde_json::from_str::<Value>(text)
        .map_err(|e| e.to_string())
        .and_then(|value| weights.merge_json(&value));
    match merged {
        Ok(()) => (weights, true),
        Err(why) => {
            log::warn!(
                "workspace {workspace_id}: stored evaluator weights unusable ({why}); using the defaults"
            );
            (DEFAULT_WEIGHTS, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The features of a lead with the original seven values, no duplicates seen and no
    /// categories.
    fn features(values: [f64; 7]) -> Features {
        let mut all = [0.0; FEATURES.len()];
        all[..7].copy_from_slice(&values);
        Features {
            values: all,
            categories: Vec::new(),
        }
    }

    #[test]
    fn defaults_separate_good_from_poor_leads() {
        let cases = [
            ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0], 99),
            ([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0], 62),
            ([1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0], 97),
            ([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0], 38),
            ([0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0], 82),
            ([0.0, 0.0, 0.5, 0.0, 0.0, 1.0, 2.0], 3),
        ];
        for (values, score) in cases {
            let evaluation = evaluate(&features(values), &DEFAULT_WEIGHTS, 50);
            assert_eq!(evaluation.score, score, "{values:?}");
            assert_eq!(evaluation.passed, score >= 50);
        }
    }

    #[test]
    fn factors_explain_the_score() {
        let evaluation = evaluate(
            &features([1.0, 0.0, 1.0, 0.4, 0.5, 1.0, 1.0]),
            &DEFAULT_WEIGHTS,
            60,
        );
        let names: Vec<&str> = evaluation.factors.iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "intercept",
                "validEmail",
                "validPhone",
                "names",
                "addressCompleteness",
                "consentGranted",
                "requiredFields",
                "softQualityFlags",
                "duplicatesSeen"
            ]
        );
        let z: f64 = evaluation.factors.iter().map(|f| f.contribution).sum();
        assert_eq!(
            evaluation.score,
            (100.0 / (1.0 + (-z).exp())).round() as i64,
            "contributions add up to the score"
        );
        let phone = &evaluation.factors[2];
        assert_eq!((phone.value, phone.contribution), (0.0, 0.0));
        assert!(
            phone.contribution.is_sign_positive(),
            "no -0 in explanations"
        );
        assert_eq!(evaluation.factors[7].contribution, -1.0);
        assert_eq!(evaluation.model, MODEL);
        assert_eq!(evaluation.threshold, 60);
    }

    #[test]
    fn categories_are_factors_with_their_weight_or_zero() {
        let mut lead = features([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
        lead.categories = vec![
            "source:web".into(),
            "answer:homeowner=no".into(),
            "hourOfDay:night".into(),
        ];
        let mut weights = DEFAULT_WEIGHTS;
        weights.set("answer:homeowner=no", -2.5).unwrap();
        weights.set("source:other", 9.0).unwrap();
        let evaluation = evaluate(&lead, &weights, 50);
        let shown: Vec<(&str, f64, f64)> = evaluation.factors[9..]
            .iter()
            .map(|f| (f.name.as_ref(), f.value, f.contribution))
            .collect();
        assert_eq!(
            shown,
            [("source:web", 1.0, 0.0), ("answer:homeowner=no", 1.0, -2.5)],
            "only the lead's categories, of the groups with weights; one without a weight adds 0"
        );
        assert!(weights.weighs_group_of("source:x") && !weights.weighs_group_of("hourOfDay:x"));
        assert!(!weights.weighs_group_of("sourc:x") && !weights.weighs_group_of("intercept"));
        let z: f64 = evaluation.factors.iter().map(|f| f.contribution).sum();
        assert_eq!(
            evaluation.score,
            (100.0 / (1.0 + (-z).exp())).round() as i64
        );
        assert_eq!(evaluation.score, 88, "z = 4.5 - 2.5");
    }

    #[test]
    fn the_same_lead_and_weights_give_the_same_score() {
        let values = features([1.0, 1.0, 0.5, 0.6, 0.5, 0.3333333333, 1.0]);
        let mut weights = DEFAULT_WEIGHTS;
        weights.set("names", 0.123456789).unwrap();
        let first = evaluate(&values, &weights, 50);
        for _ in 0..100 {
            assert_eq!(evaluate(&values, &weights, 50), first);
        }
    }

    #[test]
    fn thresholds_at_the_edges() {
        let always = evaluate(&features([0.0; 7]), &DEFAULT_WEIGHTS, 0);
        assert!(always.passed, "threshold 0 lets everything through");
        let mut saturated = DEFAULT_WEIGHTS;
        saturated.set("intercept", 100.0).unwrap();
        let top = evaluate(&features([0.0; 7]), &saturated, 100);
        assert_eq!(top.score, 100);
        assert!(top.passed);
        saturated.set("intercept", -100.0).unwrap();
        assert_eq!(evaluate(&features([0.0; 7]), &saturated, 1).score, 0);
    }

    #[test]
    fn weights_are_set_by_name_and_checked() {
        let mut weights = DEFAULT_WEIGHTS;
        weights.set("validPhone", 2.5).unwrap();
        weights
            .merge_json(&serde_json::json!({"intercept": -1, "softQualityFlags": -0.5}))
            .unwrap();
        assert_eq!(weights.get(Feature::ValidPhone), 2.5);
        assert_eq!(weights.intercept, -1.0);
        assert_eq!(weights.get(Feature::SoftQualityFlags), -0.5);
        assert_eq!(weights.get(Feature::ValidEmail), 1.5, "untouched");
        assert!(
            weights
                .set("shoeSize", 1.0)
                .unwrap_err()
                .contains("validEmail")
        );
        assert!(weights.set("names", f64::NAN).is_err());
        assert!(weights.set("names", 101.0).is_err());
        assert!(
            weights
                .merge_json(&serde_json::json!({"names": "high"}))
                .is_err()
        );
        assert!(weights.merge_json(&serde_json::json!([1])).is_err());
        weights.set("source:web", 0.75).unwrap();
        assert!(
            weights
                .set("source:", 1.0)
                .unwrap_err()
                .contains("source:VALUE")
        );
        assert!(weights.set("colour:red", 1.0).is_err());
        assert_eq!(weights.category("source:web"), 0.75);
        let mut round_trip = DEFAULT_WEIGHTS;
        round_trip.merge_json(&weights.to_json()).unwrap();
        assert_eq!(round_trip, weights);
        assert_eq!(
            weights
                .to_json()
                .as_object()
                .unwrap()
                .keys()
                .next_back()
                .unwrap(),
            "source:web",
            "categories after the features"
        );
        weights.set("source:web", 0.0).unwrap();
        assert!(
            weights.categories.is_empty(),
            "0 removes a category's weight"
        );
    }

    #[test]
    fn unreadable_stored_weights_fall_back_to_the_defaults() {
        let mut custom = DEFAULT_WEIGHTS;
        custom.set("names", 3.0).unwrap();
        let text = custom.to_json().to_string();
        assert_eq!(from_stored("ws", Some(&text)), (custom, true));
        assert_eq!(from_stored("ws", None), (DEFAULT_WEIGHTS, false));
        assert_eq!(from_stored("ws", Some("junk")), (DEFAULT_WEIGHTS, true));
    }
}
