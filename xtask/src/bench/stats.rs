//! The Markdown tables every benchmark section prints. The statistics themselves (failures
//! counted, even medians, warm-up, rotation) are the test kit's, shared with the proxy's harness.

use std::fmt::Write as _;

pub(super) use airlock_testkit::stats::{Samples, is_warmup, median, rotation, total_rounds};

pub(super) fn table_header(report: &mut String) {
    let _ = writeln!(
        report,
        "| run | median | p90 | min | max | failed | ratio (median) |\n|---|---|---|---|---|---|---|"
    );
}

/// One row: the contender's summary, its failed attempts, and its median over the baseline's.
pub(super) fn table_row(
    report: &mut String,
    label: &str,
    samples: &Samples,
    baseline: Option<&Samples>,
) {
    let failed = samples.failed();
    let Some(s) = samples.summary() else {
        let _ = writeln!(
            report,
            "| {label} | – | – | – | – | {failed} | n/a: no attempt succeeded |"
        );
        return;
    };
    let ratio = match baseline.map(Samples::summary) {
        None => "baseline".to_owned(),
        Some(Some(b)) => format!("{:.2}x", s.median / b.median),
        Some(None) => "n/a: the baseline has no successful attempt".to_owned(),
    };
    let _ = writeln!(
        report,
        "| {label} | {:.0} | {:.0} | {:.0} | {:.0} | {failed} | {ratio} |",
        s.median, s.p90, s.min, s.max
    );
}
