//! Concurrency: sessions started at once until one fails or the slowest takes 3× a single one.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::stats::Samples;
use crate::util::output;

pub(super) fn concurrency(
    root: &Path,
    site: u16,
    max: usize,
    report: &mut String,
) -> anyhow::Result<()> {
    eprintln!("== concurrency (up to {max} sessions)");
    let url = format!("http://127.0.0.1:{site}/page-0.html");
    let lines = output(
        Command::new("runuser")
            .args(["-u", crate::integration::TEST_USER, "--"])
            .arg(root.join("target/release/examples/bench"))
            .args(["concurrency", &max.to_string(), &url]),
    )?;
    let _ = writeln!(
        report,
        "## Concurrency: sessions started at once, each to its first snapshot\n"
    );
    let _ = writeln!(
        report,
        "| sessions | failures | median ms | max ms | max / single | memory per task (MiB) |\n|---|---|---|---|---|---|"
    );
    let mut single = None;
    for line in lines.lines() {
        let Ok(level) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let times: Vec<f64> = level["times_ms"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default();
        let memory: Vec<f64> = level["memory_mib"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default();
        let mut samples = Samples::default();
        for time in times {
            samples.record(Some(time));
        }
        let Some(summary) = samples.summary() else {
            let _ = writeln!(
                report,
                "| {} | {} | – | – | – | – |",
                level["tasks"], level["failures"]
            );
            continue;
        };
        let base = *single.get_or_insert(summary.max);
        #[allow(clippy::cast_precision_loss)]
        let per_task = if memory.is_empty() {
            "n/a".to_owned()
        } else {
            format!("{:.0}", memory.iter().sum::<f64>() / memory.len() as f64)
        };
        let _ = writeln!(
            report,
            "| {} | {} | {:.0} | {:.0} | {:.2}x | {per_task} |",
            level["tasks"],
            level["failures"],
            summary.median,
            summary.max,
            summary.max / base
        );
    }
    let _ = writeln!(
        report,
        "\nThe run stops at the first level where a session fails or the slowest takes more than 3× a single session.\n"
    );
    Ok(())
}
