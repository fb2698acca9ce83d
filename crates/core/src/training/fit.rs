//! L2-regularised logistic regression, fitted exactly by Newton's method (IRLS) on sparse
//! rows.
//!
//! Minimises `Σᵢ [ln(1 + e^zᵢ) − yᵢ·zᵢ] + λ/2 · Σⱼ wⱼ²` with `zᵢ = b + Σⱼ wⱼ·xᵢⱼ`; the
//! intercept `b` is not penalised (as in scikit-learn's `LogisticRegression`, where
//! `C = 1/λ`). The objective is strictly convex, so Newton's method with a backtracking
//! line search reaches its one minimum; it stops when a step moves no weight by more than
//! 1e-10, which for a handful to a few hundred weights takes some ten passes over the rows.
//!
//! Written here rather than taken from `linfa-logistic`: that crate fits dense `ndarray`
//! matrices (a million rows × one column per category would not fit in memory), stops
//! L-BFGS at a tolerance rather than at the optimum, and brings 17 crates (ndarray, sprs,
//! argmin, a second `rand`). Newton on sparse rows is the textbook method and is short.
//!
//! Identical rows are summed once, weighted by their count (`Grouped`): the same objective
//! at a fraction of the cost when, as here, features take few distinct values.
//!
//! Deterministic: every sum runs over the distinct rows in the order first given, on one
//! thread, so the same rows give bit-identical weights. Owns the arithmetic only; which rows and features
//! go in is `training::dataset`.

use std::collections::HashMap;
use std::ops::Range;

/// Rows of a design matrix in compressed sparse row form, with their labels. Column 0 is
/// the intercept, implicit in every row; feature columns are `1..=dims`.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    /// The highest feature column (at least the one given to [`Rows::new`]).
    dims: usize,
    offsets: Vec<usize>,
    columns: Vec<u32>,
    values: Vec<f64>,
    labels: Vec<bool>,
}

impl Rows {
    pub(crate) fn new(dims: usize) -> Rows {
        Rows {
            dims,
            offsets: vec![0],
            ..Rows::default()
        }
    }

    /// Appends a row: its (feature column, value) entries, columns from 1, strictly
    /// increasing; zero values may be left out. A column beyond `dims` raises it.
    pub(crate) fn push(&mut self, entries: impl IntoIterator<Item = (u32, f64)>, label: bool) {
        for (column, value) in entries {
            debug_assert!(column >= 1);
            self.dims = self.dims.max(column as usize);
            debug_assert!(
                self.columns.len() == *self.offsets.last().expect("offsets start with 0")
                    || *self.columns.last().expect("not empty") < column,
                "columns strictly increasing within a row"
            );
            self.columns.push(column);
            self.values.push(value);
        }
        self.offsets.push(self.columns.len());
        self.labels.push(label);
    }

    pub(crate) fn len(&self) -> usize {
        self.labels.len()
    }

    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    pub(crate) fn label(&self, row: usize) -> bool {
        self.labels[row]
    }

    /// The (column, value) entries of `row`.
    pub(crate) fn entries(&self, row: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let span = self.offsets[row]..self.offsets[row + 1];
        self.columns[span.clone()]
            .iter()
            .zip(&self.values[span])
            .map(|(&c, &v)| (c as usize, v))
    }

    /// `b + Σ wⱼ·xⱼ` of `row` for the weights `w` (`w[0]` the intercept).
    pub(crate) fn linear(&self, row: usize, w: &[f64]) -> f64 {
        self.entries(row).fold(w[0], |z, (c, v)| z + w[c] * v)
    }
}

/// A fitted model: `weights[0]` is the intercept, `weights[j]` the weight of column `j`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fit {
    pub weights: Vec<f64>,
    pub iterations: usize,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FitError {
    #[error("nothing to fit: no rows")]
    NoRows,
    #[error("the fit did not converge in {0} iterations")]
    NoConvergence(usize),
    #[error("the fit broke down numerically (a weight or the loss is not finite)")]
    NotFinite,
}

const MAX_ITERATIONS: usize = 100;
/// Converged when no weight moves by more than this in a step.
const STEP_TOLERANCE: f64 = 1e-10;

/// Identical rows of a range, each kept once with how many of them are good and how many
/// there are: the objective is the same sum, computed once per distinct row. Features are
/// flags, shares of a few parts, small counts and categories, so a million transactions
/// hold far fewer distinct rows, and each Newton step costs that much less.
struct Grouped<'a> {
    rows: &'a Rows,
    /// A representative row of each group, in the order first seen.
    first: Vec<usize>,
    good: Vec<f64>,
    total: Vec<f64>,
}

impl<'a> Grouped<'a> {
    fn new(rows: &'a Rows, range: Range<usize>) -> Grouped<'a> {
        let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut grouped = Grouped {
            rows,
            first: Vec::new(),
            good: Vec::new(),
            total: Vec::new(),
        };
        let mut key = Vec::new();
        for row in range {
            key.clear();
            for (column, value) in rows.entries(row) {
                key.push(column as u64);
                key.push(value.to_bits());
            }
            let group = match index.get(&key) {
                Some(&group) => group,
                None => {
                    index.insert(key.clone(), grouped.first.len());
                    grouped.first.push(row);
                    grouped.good.push(0.0);
                    grouped.total.push(0.0);
                    grouped.first.len() - 1
                }
            };
            grouped.total[group] += 1.0;
            if rows.label(row) {
                grouped.good[group] += 1.0;
            }
        }
        grouped
    }
}

/// Fits the rows `range` of `rows` with penalty `lambda` (≥ 0; 0 is plain maximum
/// likelihood, which has no finite optimum when a feature separates the labels).
pub(crate) fn fit(rows: &Rows, range: Range<usize>, lambda: f64) -> Result<Fit, FitError> {
    if range.is_empty() {
        return Err(FitError::NoRows);
    }
    let data = Grouped::new(rows, range);
    let n = rows.dims() + 1;
    let mut w = vec![0.0; n];
    let mut objective = loss(&data, &w, lambda);
    for iteration in 1..=MAX_ITERATIONS {
        let (gradient, mut hessian) = derivatives(&data, &w, lambda);
        let Some(step) = solve(&mut hessian, &gradient, n) else {
            return Err(FitError::NotFinite);
        };
        // Backtracking (Armijo): a full Newton step is taken whenever it lowers the loss
        // enough, which near the optimum is always; far from it a shorter one is.
        let slope: f64 = gradient.iter().zip(&step).map(|(g, s)| g * s).sum();
        let mut t = 1.0;
        let (candidate, value) = loop {
            let candidate: Vec<f64> = w.iter().zip(&step).map(|(w, s)| w - t * s).collect();
            let value = loss(&data, &candidate, lambda);
            if value <= objective - 1e-4 * t * slope || t < 1e-12 {
                break (candidate, value);
            }
            t /= 2.0;
        };
        if !value.is_finite() || candidate.iter().any(|x| !x.is_finite()) {
            return Err(FitError::NotFinite);
        }
        let moved = step.iter().fold(0.0_f64, |m, s| m.max((t * s).abs()));
        w = candidate;
        objective = value;
        if moved <= STEP_TOLERANCE {
            return Ok(Fit {
                weights: w,
                iterations: iteration,
            });
        }
    }
    Err(FitError::NoConvergence(MAX_ITERATIONS))
}

/// `ln(1 + e^z)` without overflow.
fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// The logistic function without overflow.
pub(crate) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// The objective at `w`.
fn loss(data: &Grouped, w: &[f64], lambda: f64) -> f64 {
    let mut total = 0.0;
    for (k, &row) in data.first.iter().enumerate() {
        let z = data.rows.linear(row, w);
        total += data.total[k] * softplus(z) - data.good[k] * z;
    }
    total + lambda / 2.0 * w[1..].iter().map(|x| x * x).sum::<f64>()
}

/// The gradient and the Hessian (upper triangle, row-major `n × n`) of the objective at `w`.
fn derivatives(data: &Grouped, w: &[f64], lambda: f64) -> (Vec<f64>, Vec<f64>) {
    let n = w.len();
    let mut gradient = vec![0.0; n];
    let mut hessian = vec![0.0; n * n];
    let mut entries: Vec<(usize, f64)> = Vec::new();
    for (k, &row) in data.first.iter().enumerate() {
        entries.clear();
        entries.push((0, 1.0));
        entries.extend(data.rows.entries(row));
        let z = entries.iter().map(|&(c, v)| w[c] * v).sum::<f64>();
        let p = sigmoid(z);
        let residual = data.total[k] * p - data.good[k];
        let curvature = data.total[k] * p * (1.0 - p);
        for (a, &(ca, va)) in entries.iter().enumerate() {
            gradient[ca] += residual * va;
            let scaled = curvature * va;
            let line = &mut hessian[ca * n..(ca + 1) * n];
            for &(cb, vb) in &entries[a..] {
                line[cb] += scaled * vb;
            }
        }
    }
    for j in 1..n {
        gradient[j] += lambda * w[j];
        hessian[j * n + j] += lambda;
    }
    (gradient, hessian)
}

/// Solves `H x = g` for the symmetric positive definite `H` given by its upper triangle
/// (overwritten with its Cholesky factor); `None` when `H` is not positive definite.
fn solve(h: &mut [f64], g: &[f64], n: usize) -> Option<Vec<f64>> {
    // H = Rᵀ R with R upper triangular, stored in place of H's upper triangle.
    for i in 0..n {
        let mut d = h[i * n + i];
        for k in 0..i {
            d -= h[k * n + i] * h[k * n + i];
        }
        if d.is_nan() || d <= 0.0 {
            return None;
        }
        let d = d.sqrt();
        h[i * n + i] = d;
        for j in i + 1..n {
            let mut s = h[i * n + j];
            for k in 0..i {
                s -= h[k * n + i] * h[k * n + j];
            }
            h[i * n + j] = s / d;
        }
    }
    // Rᵀ y = g, then R x = y.
    let mut y = vec![0.0; n];
    for i in 0..n {
        let s = (0..i).fold(g[i], |s, k| s - h[k * n + i] * y[k]);
        y[i] = s / h[i * n + i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s = (i + 1..n).fold(y[i], |s, k| s - h[i * n + k] * x[k]);
        x[i] = s / h[i * n + i];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic dataset: three features (a 0/1 flag, a share in [0, 1], a
    /// count), labels that depend on them with noise. The same rows are written out in
    /// `reference_rows` for the scikit-learn script below.
    fn reference_rows() -> Rows {
        let mut rows = Rows::new(3);
        for (x, y) in REFERENCE {
            let entries = x
                .iter()
                .enumerate()
                .filter(|(_, v)| **v != 0.0)
                .map(|(j, v)| (j as u32 + 1, *v));
            rows.push(entries, y == 1);
        }
        rows
    }

    /// Rows i = 0..40: flag = (i*7 % 5 < 3), share = (i*13 % 10)/10, count = i % 4;
    /// label = ((i*7 % 5 < 3) as int + (i*13 % 10 >= 6) as int + (i*11 % 7 == 0) as int
    /// - (i % 4 == 3) as int) >= 1.
    const REFERENCE: [([f64; 3], u8); 40] = {
        let mut out = [([0.0; 3], 0u8); 40];
        let mut i = 0;
        while i < 40 {
            let flag = (i * 7 % 5 < 3) as i32;
            let share = (i * 13 % 10) as f64 / 10.0;
            let count = (i % 4) as f64;
            let score =
                flag + (i * 13 % 10 >= 6) as i32 + (i * 11 % 7 == 0) as i32 - (i % 4 == 3) as i32;
            out[i] = ([flag as f64, share, count], (score >= 1) as u8);
            i += 1;
        }
        out
    };

    // scikit-learn 1.9.1, computed offline with this script (pip install scikit-learn):
    //
    //   import numpy as np
    //   from sklearn.linear_model import LogisticRegression
    //   X, y = [], []
    //   for i in range(40):
    //       flag = int(i*7 % 5 < 3); share = (i*13 % 10)/10; count = i % 4
    //       s = flag + int(i*13 % 10 >= 6) + int(i*11 % 7 == 0) - int(i % 4 == 3)
    //       X.append([flag, share, count]); y.append(int(s >= 1))
    //   for C in (1.0, 0.1):
    //       m = LogisticRegression(C=C, solver="newton-cholesky", tol=1e-14,
    //                              max_iter=1000).fit(np.array(X), np.array(y))
    //       print(C, float(m.intercept_[0]), [float(w) for w in m.coef_[0]])
    //
    // C = 1/λ: sklearn minimises C·Σ loss + ½‖w‖², the same optimum as Σ loss + λ/2·‖w‖².
    const SKLEARN_C1: [f64; 4] = [
        0.7962160202204552,
        1.4673346564666085,
        1.1760444376606296,
        -0.7530000991566262,
    ];
    const SKLEARN_C01: [f64; 4] = [
        1.1159438752691948,
        0.3481807412501852,
        0.1791475280129939,
        -0.34822484903304857,
    ];

    fn assert_close(found: &[f64], expected: &[f64], tolerance: f64) {
        for (f, e) in found.iter().zip(expected) {
            assert!(
                (f - e).abs() <= tolerance,
                "{found:?} differs from {expected:?}"
            );
        }
    }

    #[test]
    fn matches_scikit_learn() {
        let rows = reference_rows();
        let fitted = fit(&rows, 0..rows.len(), 1.0).unwrap();
        assert_close(&fitted.weights, &SKLEARN_C1, 1e-8);
        let fitted = fit(&rows, 0..rows.len(), 10.0).unwrap();
        assert_close(&fitted.weights, &SKLEARN_C01, 1e-8);
    }

    /// Ten copies of every row with ten times the penalty is the same objective, ten times
    /// over: the same optimum as scikit-learn's on the rows once, found through the groups.
    #[test]
    fn repeated_rows_count_as_often_as_they_occur() {
        let once = reference_rows();
        let mut repeated = Rows::new(3);
        for _ in 0..10 {
            for row in 0..once.len() {
                repeated.push(
                    once.entries(row).map(|(c, v)| (c as u32, v)),
                    once.label(row),
                );
            }
        }
        let grouped = Grouped::new(&repeated, 0..repeated.len());
        assert!(grouped.first.len() <= once.len());
        assert_eq!(grouped.total.iter().sum::<f64>(), 400.0);
        let fitted = fit(&repeated, 0..repeated.len(), 10.0).unwrap();
        assert_close(&fitted.weights, &SKLEARN_C1, 1e-8);
    }

    /// Without a penalty and with one 0/1 feature the optimum is known in closed form: the
    /// intercept is the log-odds of the label where the feature is 0, the weight the
    /// difference of the log-odds where it is 1.
    #[test]
    fn matches_the_closed_form_of_one_flag() {
        let mut rows = Rows::new(1);
        // Feature 0: 3 good of 10. Feature 1: 12 good of 15.
        for i in 0..10 {
            rows.push([], i < 3);
        }
        for i in 0..15 {
            rows.push([(1, 1.0)], i < 12);
        }
        let logit = |p: f64| (p / (1.0 - p)).ln();
        let fitted = fit(&rows, 0..rows.len(), 0.0).unwrap();
        let expected = [logit(0.3), logit(0.8) - logit(0.3)];
        assert_close(&fitted.weights, &expected, 1e-12);
    }

    /// Independent of any reference: at the optimum the gradient of the objective is zero.
    #[test]
    fn the_gradient_vanishes_at_the_optimum() {
        let rows = noisy_rows(2000, 7);
        let fitted = fit(&rows, 0..rows.len(), 1.0).unwrap();
        let (gradient, _) = derivatives(&Grouped::new(&rows, 0..rows.len()), &fitted.weights, 1.0);
        assert!(
            gradient.iter().all(|g| g.abs() < 1e-8),
            "gradient {gradient:?}"
        );
        assert!(fitted.iterations < 20, "{} iterations", fitted.iterations);
    }

    #[test]
    fn the_same_rows_give_bit_identical_weights() {
        let rows = noisy_rows(3000, 5);
        let first = fit(&rows, 0..2400, 1.0).unwrap();
        for _ in 0..3 {
            let again = fit(&rows, 0..2400, 1.0).unwrap();
            let bits = |f: &Fit| f.weights.iter().map(|w| w.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&again), bits(&first));
        }
    }

    /// The penalty keeps a separating feature finite, and a stronger one shrinks it.
    #[test]
    fn a_separating_feature_stays_finite_under_the_penalty() {
        let mut rows = Rows::new(2);
        for i in 0..200 {
            let phone = i % 2 == 0;
            let noise = (i * 37 % 11) as f64 / 10.0;
            let mut entries = Vec::new();
            if phone {
                entries.push((1, 1.0));
            }
            entries.push((2, noise));
            rows.push(entries, phone);
        }
        assert!(
            fit(&rows, 0..200, 0.0).is_err(),
            "no finite optimum without a penalty"
        );
        let weak = fit(&rows, 0..200, 1.0).unwrap();
        let strong = fit(&rows, 0..200, 10.0).unwrap();
        assert!(weak.weights[1] > strong.weights[1] && strong.weights[1] > 1.0);
        assert!(weak.weights[1] < 20.0);
    }

    #[test]
    fn no_rows_no_fit() {
        assert_eq!(fit(&Rows::new(2), 0..0, 1.0), Err(FitError::NoRows));
    }

    /// Rows with `dims` features (some 0/1, some shares, sparse), labels drawn from a known
    /// model with a fixed pseudo-random sequence.
    fn noisy_rows(n: usize, dims: usize) -> Rows {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut rows = Rows::new(dims);
        for _ in 0..n {
            let mut entries = Vec::new();
            let mut z = -0.5;
            for j in 1..=dims {
                let value = if j % 2 == 0 {
                    (next() < 0.5) as u8 as f64
                } else {
                    next()
                };
                if value != 0.0 {
                    entries.push((j as u32, value));
                }
                z += value * (j as f64 - dims as f64 / 2.0) * 0.4;
            }
            rows.push(entries, next() < sigmoid(z));
        }
        rows
    }
}
