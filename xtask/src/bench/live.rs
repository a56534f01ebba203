//! `--only live`: a task's page load with a live viewer attached against without, and the
//! frames per second the viewer received (`live_load`, one process, alternating).

use std::fmt::Write as _;
use std::path::Path;

use super::stats::{Samples, median, table_header, table_row};

pub(super) fn live(root: &Path, site: u16, rounds: usize, report: &mut String) {
    eprintln!("== live view: page load with a viewer against without ({rounds} rounds)");
    let pages = format!("http://127.0.0.1:{site}/page-{{n}}.html");
    let run = crate::util::output(
        std::process::Command::new("runuser")
            .args(["-u", crate::integration::TEST_USER, "--"])
            .arg(root.join("target/release/examples/live_load"))
            .args([&rounds.to_string(), &pages]),
    )
    .ok()
    .and_then(|text| serde_json::from_str::<serde_json::Value>(text.trim()).ok());
    let (mut without, mut with) = (Samples::default(), Samples::default());
    let mut rates = Vec::new();
    if let Some(run) = &run {
        for time in run["without_ms"].as_array().into_iter().flatten() {
            without.record(time.as_f64());
        }
        for time in run["with_ms"].as_array().into_iter().flatten() {
            with.record(time.as_f64());
        }
        rates.extend(
            run["frames_per_second"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_f64),
        );
    } else {
        without.record(None);
        with.record(None);
    }
    let _ = writeln!(
        report,
        "## Live view\n\n\
         A fresh session opening a fresh 100-subresource page, {rounds} rounds after a warm-up, \
         alternating which goes first (`live_load`): with a viewer watching from the load's start \
         (agent-browser's screencast through `airlock-relay --stdio-to`, at most 5 frames a \
         second), against without. Goal: at most 1.10x with a viewer.\n"
    );
    table_header(report);
    table_row(report, "load, no viewer", &without, None);
    table_row(report, "load, a viewer", &with, Some(&without));
    let _ = writeln!(
        report,
        "\nFrames per second the viewer received, from the load's start to 2 s after it (the \
         screencast sends a frame when the page changes): median {}.\n",
        median(&rates).map_or_else(|| "–".to_owned(), |rate| format!("{rate:.1}"))
    );
}
