//! Start-up: task requested → first snapshot, Airlock against bare agent-browser, cold and warm.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::Context;

use super::processes::{agent_browser_command, timed};
use super::stats::{summarize, table_header, table_row};
use crate::util::output;

pub(super) fn startup(
    root: &Path,
    agent_browser: &Path,
    site: u16,
    rounds: usize,
    report: &mut String,
) -> anyhow::Result<()> {
    eprintln!("== start-up ({rounds} rounds, alternating)");
    let url = format!("http://127.0.0.1:{site}/page-0.html");
    let example = root.join("target/release/examples/bench");
    let (mut airlock_cold, mut airlock_warm, mut bare_cold, mut bare_warm) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut phases: Vec<serde_json::Value> = Vec::new();
    for round in 0..rounds {
        let line = output(
            Command::new("runuser")
                .args(["-u", crate::integration::TEST_USER, "--"])
                .arg(&example)
                .args(["startup", "1", &url]),
        )?;
        let value: serde_json::Value =
            serde_json::from_str(line.trim()).context("the startup example printed no JSON")?;
        airlock_cold.push(value["cold_ms"].as_f64().unwrap_or(f64::NAN));
        airlock_warm.push(value["warm_ms"].as_f64().unwrap_or(f64::NAN));
        phases.push(value);

        let session = format!("bench-{round}");
        let cold =
            timed(agent_browser_command(agent_browser, &session, None).args(["open", &url]))?
                + timed(agent_browser_command(agent_browser, &session, None).arg("snapshot"))?;
        let warm =
            timed(agent_browser_command(agent_browser, &session, None).args(["open", &url]))?
                + timed(agent_browser_command(agent_browser, &session, None).arg("snapshot"))?;
        let _ = agent_browser_command(agent_browser, &session, None)
            .arg("close")
            .status();
        bare_cold.push(cold);
        bare_warm.push(warm);
    }
    let _ = writeln!(report, "## Start-up: task requested → first snapshot\n");
    table_header(report);
    table_row(report, "bare agent-browser, cold", &bare_cold, None);
    table_row(report, "Airlock, cold", &airlock_cold, Some(&bare_cold));
    table_row(report, "bare agent-browser, warm", &bare_warm, None);
    table_row(report, "Airlock, warm", &airlock_warm, Some(&bare_warm));
    let _ = writeln!(report, "\nWhere Airlock's cold start goes (medians):\n");
    let _ = writeln!(report, "| phase | ms |\n|---|---|");
    for (key, label) in [
        (
            "session_start_ms",
            "session start: proxy, container create + start, relay ready, guide",
        ),
        (
            "first_open_ms",
            "first open: agent-browser daemon, Chromium launch, navigation",
        ),
        ("first_snapshot_ms", "first snapshot"),
        ("dispose_ms", "dispose (after the measurement)"),
    ] {
        let values: Vec<f64> = phases.iter().filter_map(|p| p[key].as_f64()).collect();
        let _ = writeln!(report, "| {label} | {:.0} |", summarize(&values).median);
    }
    let _ = writeln!(report);
    Ok(())
}
