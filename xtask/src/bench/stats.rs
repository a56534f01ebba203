//! The statistics every benchmark table uses: a summary of samples, and the Markdown rows that
//! print them with their ratio to a baseline measured in the same run.

use std::fmt::Write as _;

/// Median, p90, min and max of a sample, in milliseconds.
pub(super) struct Summary {
    pub(super) median: f64,
    pub(super) p90: f64,
    pub(super) min: f64,
    pub(super) max: f64,
}

/// The summary of `samples` (nearest-rank quantiles).
pub(super) fn summarize(samples: &[f64]) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| {
        // Index of the q-quantile; samples are few, so the nearest rank is exact enough.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted.get(index).copied().unwrap_or(f64::NAN)
    };
    Summary {
        median: at(0.5),
        p90: at(0.9),
        min: at(0.0),
        max: at(1.0),
    }
}

pub(super) fn table_header(report: &mut String) {
    let _ = writeln!(
        report,
        "| run | median | p90 | min | max | ratio (median) |\n|---|---|---|---|---|---|"
    );
}

pub(super) fn table_row(
    report: &mut String,
    label: &str,
    samples: &[f64],
    baseline: Option<&[f64]>,
) {
    let s = summarize(samples);
    let ratio = baseline.map_or_else(
        || "baseline".to_owned(),
        |b| format!("{:.2}x", s.median / summarize(b).median),
    );
    let _ = writeln!(
        report,
        "| {label} | {:.0} | {:.0} | {:.0} | {:.0} | {ratio} |",
        s.median, s.p90, s.min, s.max
    );
}
