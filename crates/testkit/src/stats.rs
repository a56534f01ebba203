//! The statistics of every benchmark (`cargo xtask bench` and the proxy's own harness), in one
//! place so every table is computed the same way:
//!
//! - a failed attempt is counted and shown, never folded into a median as NaN;
//! - the median of an even count is the mean of the middle two;
//! - the first [`WARMUP_ROUNDS`] rounds are run but not recorded;
//! - in round `r`, contenders run in the order [`rotation`] gives, so none always goes first.
//!
//! ```
//! use airlock_testkit::stats::{Samples, rotation};
//!
//! let mut samples = Samples::default();
//! for value in [Some(4.0), Some(1.0), None, Some(3.0), Some(2.0)] {
//!     samples.record(value);
//! }
//! let summary = samples.summary().unwrap();
//! assert_eq!((summary.median, summary.count, samples.failed()), (2.5, 4, 1));
//! assert_eq!(rotation(1, 3).collect::<Vec<_>>(), [1, 2, 0]);
//! ```

/// Rounds run first in every section and not recorded (the first launch, cold caches).
pub const WARMUP_ROUNDS: usize = 1;

/// How many rounds to run for `measured` recorded ones: the warm-up comes first.
pub fn total_rounds(measured: usize) -> usize {
    WARMUP_ROUNDS + measured
}

/// Whether `round` (counting from 0) is a warm-up round.
pub fn is_warmup(round: usize) -> bool {
    round < WARMUP_ROUNDS
}

/// The order in which `contenders` run in `round`: each round starts one later.
pub fn rotation(round: usize, contenders: usize) -> impl Iterator<Item = usize> {
    (0..contenders).map(move |offset| (round + offset) % contenders.max(1))
}

/// One contender's measurements: the values that succeeded, and how many attempts failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    values: Vec<f64>,
    failed: usize,
}

/// Median, p90, min and max of the successful samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many samples succeeded.
    pub count: usize,
    /// The middle value (the mean of the middle two for an even count).
    pub median: f64,
    /// The 90th percentile (nearest rank).
    pub p90: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Samples {
    /// Record one attempt: a value, or `None` (or a value that is not finite) for a failure.
    pub fn record(&mut self, value: Option<f64>) {
        match value {
            Some(value) if value.is_finite() => self.values.push(value),
            _ => self.failed += 1,
        }
    }

    /// The successful values, in the order recorded.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// How many attempts failed.
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// The summary of the successful values; `None` when there are none.
    pub fn summary(&self) -> Option<Summary> {
        let mut sorted = self.values.clone();
        sorted.sort_by(f64::total_cmp);
        let median = median_of_sorted(&sorted)?;
        Some(Summary {
            count: sorted.len(),
            median,
            p90: nearest_rank(&sorted, 0.9)?,
            min: *sorted.first()?,
            max: *sorted.last()?,
        })
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    median_of_sorted(&sorted)
}

fn median_of_sorted(sorted: &[f64]) -> Option<f64> {
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[middle]),
        _ => Some(f64::midpoint(sorted[middle - 1], sorted[middle])),
    }
}

/// The `q` quantile by nearest rank (the smallest value with at least `q` of the samples at or
/// below it); `None` when empty.
pub fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

#[cfg(test)]
// The values compared are built exactly; equality is the point.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_even_counts_are_the_mean_of_the_middle_two() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn failures_are_counted_not_folded_in() {
        let mut samples = Samples::default();
        for value in [
            Some(10.0),
            None,
            Some(f64::NAN),
            Some(20.0),
            Some(f64::INFINITY),
        ] {
            samples.record(value);
        }
        assert_eq!(samples.failed(), 3);
        let summary = samples.summary().unwrap();
        assert_eq!(summary.count, 2);
        assert_eq!(summary.median, 15.0);
        assert!(Samples::default().summary().is_none());
    }

    #[test]
    fn p90_is_the_nearest_rank() {
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank(&values, 0.9), Some(9.0));
        assert_eq!(nearest_rank(&values, 1.0), Some(10.0));
        assert_eq!(nearest_rank(&values, 0.0), Some(1.0));
        assert_eq!(nearest_rank(&[3.0], 0.9), Some(3.0));
    }

    #[test]
    fn every_contender_goes_first_in_turn_and_warm_up_is_round_zero() {
        let firsts: Vec<usize> = (0..4)
            .map(|round| rotation(round, 3).next().unwrap())
            .collect();
        assert_eq!(firsts, [0, 1, 2, 0]);
        for round in 0..5 {
            let mut order: Vec<usize> = rotation(round, 4).collect();
            order.sort_unstable();
            assert_eq!(order, [0, 1, 2, 3]);
        }
        assert!(is_warmup(0) && !is_warmup(1));
    }
}
