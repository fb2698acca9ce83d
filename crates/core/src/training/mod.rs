//! Training the evaluator on buyers' outcomes (DESIGN.md section 17): `leadrelay evaluator
//! train`.
//!
//! Reads a workspace's labelled transactions with the features their requests were scored
//! with (`dataset`), holds out the latest 20% in time, fits L2-regularised logistic
//! weights on the rest (`fit`), and compares the weights in use with the trained ones on
//! the holdout (`metrics`): AUC, log loss, and the share of good and of bad leads whose
//! score reaches their container's threshold now. Applying the trained weights is the
//! caller's choice (`autodelivery::weights::change` with origin `train`).
//!
//! Deterministic: the same rows in the same order give bit-identical weights. Owns the
//! procedure and its report; it writes nothing.

pub mod dataset;
pub(crate) mod fit;
pub(crate) mod metrics;

use serde::Serialize;
use serde_json::Value;

use crate::autodelivery::evaluator::{self, Weights};
use crate::autodelivery::features::{FEATURES, Feature, Group};
use dataset::Dataset;
use fit::FitError;

/// The fewest labelled rows `train` fits on, unless told otherwise.
pub const DEFAULT_MIN_ROWS: usize = 200;
/// The fewest rows of each label, unless told otherwise.
pub const DEFAULT_MIN_PER_LABEL: usize = 20;
/// The L2 penalty λ on every weight but the intercept (scikit-learn's `C = 1`). Features
/// are 0/1 flags, shares and small counts, so one λ suits them all unscaled.
pub(crate) const LAMBDA: f64 = 1.0;
/// The share of the latest rows held out.
const HOLDOUT_SHARE: f64 = 0.2;
/// A category seen in fewer training rows than this gets no weight.
const MIN_CATEGORY_ROWS: usize = 10;

/// What `train` needs besides the rows.
#[derive(Debug, Clone)]
pub struct Limits {
    pub min_rows: usize,
    pub min_per_label: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(
        "not enough outcomes to train on: {rows} labelled transactions with stored features \
         ({good} good, {bad} bad); at least {min_rows} are needed, with at least \
         {min_per_label} of each label (wait for more buyer outcomes, or widen --since)"
    )]
    NotEnoughData {
        rows: usize,
        good: usize,
        bad: usize,
        min_rows: usize,
        min_per_label: usize,
    },
    #[error(
        "the {part} rows ({rows}) are all {label}, so the models cannot be compared on them \
         (wait for more buyer outcomes, or widen --since)"
    )]
    OneLabel {
        part: &'static str,
        rows: usize,
        label: &'static str,
    },
    #[error("training failed: {0}")]
    Fit(#[from] FitError),
    #[error("training failed: a trained weight is out of range ({0})")]
    OutOfRange(String),
}

/// How one set of weights does on the holdout.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub auc: f64,
    pub log_loss: f64,
    /// Share of good holdout leads whose score reaches their container's threshold.
    pub good_passing: f64,
    /// Share of bad holdout leads whose score reaches it.
    pub bad_passing: f64,
}

impl Comparison {
    pub(crate) fn view(&self) -> ComparisonView {
        ComparisonView {
            auc: self.auc,
            log_loss: self.log_loss,
            good_above_threshold: self.good_passing,
            bad_above_threshold: self.bad_passing,
        }
    }
}

/// A model's figures on the holdout.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonView {
    auc: f64,
    log_loss: f64,
    good_above_threshold: f64,
    bad_above_threshold: f64,
}

/// What a training run found.
#[derive(Debug, Clone)]
pub struct Report {
    pub rows: usize,
    pub training: usize,
    pub holdout: usize,
    pub good: usize,
    pub bad: usize,
    pub without_features: usize,
    pub unreadable: usize,
    /// Categories left out for having fewer than `MIN_CATEGORY_ROWS` training rows.
    pub rare_categories: usize,
    pub current: Comparison,
    pub trained: Comparison,
    pub weights: Weights,
    pub iterations: usize,
}

impl Report {
    /// The figures kept with an applied version and printed by `--json` (without
    /// `applied`, which the caller adds).
    pub fn view(&self) -> ReportView {
        ReportView {
            rows: self.rows,
            training: self.training,
            holdout: self.holdout,
            labels: Labels {
                good: self.good,
                bad: self.bad,
            },
            without_features: self.without_features,
            unreadable_features: self.unreadable,
            rare_categories: self.rare_categories,
            lambda: LAMBDA,
            iterations: self.iterations,
            current: self.current.view(),
            trained: self.trained.view(),
            weights: self.weights.to_json(),
        }
    }

    /// [`Report::view`] as a JSON value, for callers that keep or extend one.
    pub fn to_json(&self) -> Value {
        crate::to_value(self.view())
    }
}

/// A training run's figures (see [`Report::view`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportView {
    rows: usize,
    training: usize,
    holdout: usize,
    labels: Labels,
    without_features: usize,
    unreadable_features: usize,
    rare_categories: usize,
    lambda: f64,
    iterations: usize,
    current: ComparisonView,
    trained: ComparisonView,
    /// The evaluator's weights, as the evaluator's version shows them.
    weights: Value,
}

/// How many rows of each label the run read.
#[derive(Debug, Serialize)]
pub struct Labels {
    good: usize,
    bad: usize,
}

/// Fits and compares on `data` (rows in time order, from [`dataset::load`]).
pub fn train(mut data: Dataset, limits: &Limits) -> Result<Report, TrainError> {
    let rows = data.rows.len();
    let good = data.good();
    let bad = rows - good;
    if rows < limits.min_rows || good < limits.min_per_label || bad < limits.min_per_label {
        return Err(TrainError::NotEnoughData {
            rows,
            good,
            bad,
            min_rows: limits.min_rows,
            min_per_label: limits.min_per_label,
        });
    }
    let holdout = ((rows as f64 * HOLDOUT_SHARE).ceil() as usize).clamp(1, rows - 1);
    let training = rows - holdout;
    for (part, range) in [("training", 0..training), ("holdout", training..rows)] {
        let good = range.clone().filter(|&i| data.rows.label(i)).count();
        if good == 0 || good == range.len() {
            return Err(TrainError::OneLabel {
                part,
                rows: range.len(),
                label: if good == 0 { "bad" } else { "good" },
            });
        }
    }
    let rare_categories = data.drop_rare(0..training, MIN_CATEGORY_ROWS);
    let fitted = fit::fit(&data.rows, 0..training, LAMBDA)?;
    // Six decimals: what is stored, shown and compared. It loses nothing a score could
    // show, and a feature that carries no information (a column equal to the intercept)
    // gets 0 rather than a rounding residue like 1e-20.
    let rounded: Vec<f64> = fitted
        .weights
        .iter()
        .map(|w| (w * 1e6).round() / 1e6 + 0.0)
        .collect();
    let weights = to_weights(&data.names, &rounded)?;

    let current: Vec<f64> = data.current_z[training..].to_vec();
    let trained: Vec<f64> = (training..rows)
        .map(|i| data.rows.linear(i, &rounded))
        .collect();
    Ok(Report {
        rows,
        training,
        holdout,
        good,
        bad,
        without_features: data.without_features,
        unreadable: data.unreadable,
        rare_categories,
        current: compare(&data, training, &current),
        trained: compare(&data, training, &trained),
        weights,
        iterations: fitted.iterations,
    })
}

/// The trained weights as the evaluator's: the intercept, every feature (0 for those not
/// trained), the categories with a weight other than 0.
fn to_weights(names: &[String], fitted: &[f64]) -> Result<Weights, TrainError> {
    let mut weights = Weights {
        intercept: 0.0,
        features: [0.0; FEATURES.len()],
        categories: Default::default(),
    };
    weights
        .set(evaluator::INTERCEPT, fitted[0])
        .map_err(TrainError::OutOfRange)?;
    for (name, &value) in names.iter().zip(&fitted[1..]) {
        debug_assert!(Feature::from_name(name).is_some() || Group::of_name(name).is_some());
        weights.set(name, value).map_err(TrainError::OutOfRange)?;
    }
    Ok(weights)
}

/// The holdout figures of the `z` values `holdout_z` (one per holdout row).
fn compare(data: &Dataset, training: usize, holdout_z: &[f64]) -> Comparison {
    let scored: Vec<(f64, bool)> = holdout_z
        .iter()
        .enumerate()
        .map(|(k, &z)| (fit::sigmoid(z), data.rows.label(training + k)))
        .collect();
    let passing: Vec<(bool, bool)> = holdout_z
        .iter()
        .enumerate()
        .map(|(k, &z)| {
            let row = training + k;
            (
                data.rows.label(row),
                evaluator::score(z) >= data.thresholds[row],
            )
        })
        .collect();
    // `train` checked that the holdout has rows of both labels.
    Comparison {
        auc: metrics::auc(&scored).expect("the holdout has both labels"),
        log_loss: metrics::log_loss(&scored).expect("the holdout has rows"),
        good_passing: metrics::share_passing(&passing, true).expect("the holdout has good rows"),
        bad_passing: metrics::share_passing(&passing, false).expect("the holdout has bad rows"),
    }
}
