//! How well a model's probabilities fit labelled rows: AUC, log loss, and the share of good
//! and bad leads a threshold lets through.
//!
//! Owns the arithmetic of the comparison `evaluator train` prints; the rows and models are
//! the caller's.

/// The area under the ROC curve: the chance that a good row, drawn at random, gets a
/// higher probability than a bad one (ties count half). `None` without rows of both labels.
/// Computed from ranks (the Mann–Whitney statistic) after one sort.
pub(crate) fn auc(scored: &[(f64, bool)]) -> Option<f64> {
    let good = scored.iter().filter(|(_, label)| *label).count();
    let bad = scored.len() - good;
    if good == 0 || bad == 0 {
        return None;
    }
    let mut sorted: Vec<(f64, bool)> = scored.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Sum of the good rows' ranks (1-based), tied values sharing their average rank.
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < sorted.len() {
        let mut end = start;
        while end < sorted.len() && sorted[end].0 == sorted[start].0 {
            end += 1;
        }
        let average_rank = (start + 1 + end) as f64 / 2.0;
        let good_in_tie = sorted[start..end].iter().filter(|(_, l)| *l).count();
        rank_sum += average_rank * good_in_tie as f64;
        start = end;
    }
    let good = good as f64;
    Some((rank_sum - good * (good + 1.0) / 2.0) / (good * bad as f64))
}

/// The mean negative log-likelihood of the labels, probabilities clipped to [1e-15, 1 −
/// 1e-15] so a confident miss costs a lot but not infinity. `None` without rows.
pub(crate) fn log_loss(scored: &[(f64, bool)]) -> Option<f64> {
    if scored.is_empty() {
        return None;
    }
    let total: f64 = scored
        .iter()
        .map(|&(p, label)| {
            let p = p.clamp(1e-15, 1.0 - 1e-15);
            -if label { p.ln() } else { (1.0 - p).ln() }
        })
        .sum();
    Some(total / scored.len() as f64)
}

/// The share of rows with `label` that pass: `passed` says per row whether its score reaches
/// its container's threshold. `None` without rows of that label.
pub(crate) fn share_passing(rows: &[(bool, bool)], label: bool) -> Option<f64> {
    let with_label = rows.iter().filter(|(l, _)| *l == label).count();
    if with_label == 0 {
        return None;
    }
    let passing = rows.iter().filter(|(l, p)| *l == label && *p).count();
    Some(passing as f64 / with_label as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ordered_pairs_and_half_ties() {
        // Good: 0.9, 0.6, 0.4; bad: 0.6, 0.3. Pairs (good > bad): 0.9 beats both (2),
        // 0.6 ties 0.6 (0.5) and beats 0.3 (1), 0.4 beats 0.3 (1): 4.5 of 6.
        let scored = [
            (0.9, true),
            (0.6, true),
            (0.4, true),
            (0.6, false),
            (0.3, false),
        ];
        assert_eq!(auc(&scored), Some(4.5 / 6.0));
        let perfect = [(0.2, false), (0.8, true)];
        assert_eq!(auc(&perfect), Some(1.0));
        let reversed = [(0.8, false), (0.2, true)];
        assert_eq!(auc(&reversed), Some(0.0));
        let all_tied = [(0.5, false), (0.5, true), (0.5, true)];
        assert_eq!(auc(&all_tied), Some(0.5));
        assert_eq!(auc(&[(0.5, true)]), None, "one label only");
    }

    #[test]
    fn auc_agrees_with_counting_every_pair() {
        let scored: Vec<(f64, bool)> = (0..200)
            .map(|i| (((i * 37) % 17) as f64 / 17.0, (i * 11) % 3 != 0))
            .collect();
        let (mut wins, mut pairs) = (0.0, 0.0);
        for &(pg, _) in scored.iter().filter(|(_, l)| *l) {
            for &(pb, _) in scored.iter().filter(|(_, l)| !*l) {
                pairs += 1.0;
                wins += if pg > pb {
                    1.0
                } else if pg == pb {
                    0.5
                } else {
                    0.0
                };
            }
        }
        let found = auc(&scored).unwrap();
        assert!((found - wins / pairs).abs() < 1e-12);
    }

    #[test]
    fn log_loss_is_the_mean_negative_log_likelihood() {
        let scored = [(0.8, true), (0.25, false)];
        let expected = -(0.8f64.ln() + 0.75f64.ln()) / 2.0;
        assert!((log_loss(&scored).unwrap() - expected).abs() < 1e-15);
        let confident_miss = log_loss(&[(0.0, true)]).unwrap();
        assert!((confident_miss - 1e15f64.ln()).abs() < 1e-6, "clipped");
        assert_eq!(log_loss(&[]), None);
    }

    #[test]
    fn shares_per_label() {
        let rows = [(true, true), (true, false), (true, true), (false, true)];
        assert_eq!(share_passing(&rows, true), Some(2.0 / 3.0));
        assert_eq!(share_passing(&rows, false), Some(1.0));
        assert_eq!(share_passing(&rows[..3], false), None);
    }
}
