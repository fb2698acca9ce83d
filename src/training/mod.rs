//! Training the evaluator on buyers' outcomes (DESIGN.md section 17).

pub(crate) mod fit;
pub(crate) mod metrics;
