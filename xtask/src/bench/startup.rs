//! Start-up: task requested → first snapshot, Airlock against bare agent-browser, cold and warm.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::processes::{agent_browser_command, timed};
use super::stats::{Samples, is_warmup, median, rotation, table_header, table_row, total_rounds};
use crate::util::output;

pub(super) fn startup(
    root: &Path,
    agent_browser: &Path,
    site: u16,
    rounds: usize,
    report: &mut String,
) {
    eprintln!("== start-up ({rounds} rounds after a warm-up, alternating)");
    let url = format!("http://127.0.0.1:{site}/page-0.html");
    let example = root.join("target/release/examples/bench");
    let (mut airlock_cold, mut airlock_warm, mut bare_cold, mut bare_warm) = (
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    );
    let mut phases: Vec<serde_json::Value> = Vec::new();
    let (mut pooled, mut idle_mib) = (Samples::default(), Vec::new());
    let mut warm_phases: Vec<serde_json::Value> = Vec::new();
    let mut bare_fresh = Samples::default();
    for round in 0..total_rounds(rounds) {
        let record = !is_warmup(round);
        for contender in rotation(round, 3) {
            if contender == 2 {
                // Airlock with a browser from the warm pool (made before the task, not timed).
                let value = example_line(&example, &["warmpool", "1", &url]);
                if record {
                    let field = |key: &str| value.as_ref().and_then(|v| v[key].as_f64());
                    pooled.record(field("warm_pool_ms"));
                    idle_mib.extend(field("warm_idle_mib"));
                    warm_phases.extend(value);
                }
                continue;
            }
            if contender == 0 {
                // Airlock: the bench example prints one JSON line per session.
                let value = example_line(&example, &["startup", "1", &url]);
                if record {
                    let field = |key: &str| value.as_ref().and_then(|v| v[key].as_f64());
                    airlock_cold.record(field("cold_ms"));
                    airlock_warm.record(field("warm_ms"));
                    phases.extend(value);
                }
                continue;
            }
            let session = format!("bench-{round}");
            let load = |url: &str| -> Option<f64> {
                let open =
                    timed(agent_browser_command(agent_browser, &session, None).args(["open", url]))
                        .ok()?;
                let snapshot =
                    timed(agent_browser_command(agent_browser, &session, None).arg("snapshot"))
                        .ok()?;
                Some(open + snapshot)
            };
            let (cold, warm) = (load(&url), load(&url));
            // The running browser on a page of the same kind it has not loaded (nothing cached):
            // what a fresh profile from the warm pool must do too.
            let fresh = load(&format!("http://127.0.0.1:{site}/page-{}.html", round + 1));
            let _ = agent_browser_command(agent_browser, &session, None)
                .arg("close")
                .status();
            if record {
                bare_cold.record(cold);
                bare_warm.record(warm);
                bare_fresh.record(fresh);
            }
        }
    }
    let _ = writeln!(report, "## Start-up: task requested → first snapshot\n");
    table_header(report);
    table_row(report, "bare agent-browser, cold", &bare_cold, None);
    table_row(report, "Airlock, cold", &airlock_cold, Some(&bare_cold));
    table_row(
        report,
        "Airlock, a browser from the warm pool (vs bare cold)",
        &pooled,
        Some(&bare_cold),
    );
    table_row(report, "bare agent-browser, warm", &bare_warm, None);
    table_row(report, "Airlock, warm", &airlock_warm, Some(&bare_warm));
    table_row(
        report,
        "Airlock, a browser from the warm pool (vs bare warm)",
        &pooled,
        Some(&bare_warm),
    );
    table_row(
        report,
        "bare agent-browser, warm, a page it has not loaded",
        &bare_fresh,
        None,
    );
    table_row(
        report,
        "Airlock, a browser from the warm pool (vs bare warm, a new page)",
        &pooled,
        Some(&bare_fresh),
    );
    if let Some(mib) = median(&idle_mib) {
        let _ = writeln!(
            report,
            "\nA warm browser waiting in the pool (container, runner, relay, agent-browser, Chromium on about:blank) holds {mib:.0} MiB (median, `docker stats`)."
        );
    }
    phase_tables(report, &phases, &warm_phases);
    let _ = writeln!(report);
}

/// Where a cold start and a start from the warm pool go.
fn phase_tables(
    report: &mut String,
    phases: &[serde_json::Value],
    warm_phases: &[serde_json::Value],
) {
    phases_table(
        report,
        "Where Airlock's cold start goes",
        phases,
        &[
            (
                "session_start_ms",
                "session start: proxy, container create + start, runner, relay ready, guide",
            ),
            (
                "first_open_ms",
                "first open: agent-browser daemon, Chromium launch, navigation",
            ),
            ("first_snapshot_ms", "first snapshot"),
            ("dispose_ms", "dispose (after the measurement)"),
        ],
    );
    phases_table(
        report,
        "Where a start from the warm pool goes",
        warm_phases,
        &[
            (
                "take_ms",
                "take: a ready session, its container checked (one inspect)",
            ),
            ("open_ms", "first open: the navigation"),
            (
                "load_ms",
                "of which Chromium's own load time (navigation start → load event)",
            ),
            ("snapshot_ms", "first snapshot"),
        ],
    );
}

/// The bench example's one JSON line, run as the test user.
fn example_line(example: &Path, args: &[&str]) -> Option<serde_json::Value> {
    output(
        Command::new("runuser")
            .args(["-u", crate::integration::TEST_USER, "--"])
            .arg(example)
            .args(args),
    )
    .ok()
    .and_then(|line| serde_json::from_str(line.trim()).ok())
}

/// The median of each phase, one row each.
fn phases_table(
    report: &mut String,
    title: &str,
    phases: &[serde_json::Value],
    rows: &[(&str, &str)],
) {
    let _ = writeln!(report, "\n{title} (medians):\n");
    let _ = writeln!(report, "| phase | ms |\n|---|---|");
    for (key, label) in rows {
        let values: Vec<f64> = phases.iter().filter_map(|p| p[*key].as_f64()).collect();
        match median(&values) {
            Some(ms) => {
                let _ = writeln!(report, "| {label} | {ms:.0} |");
            }
            None => {
                let _ = writeln!(report, "| {label} | n/a: no successful session |");
            }
        }
    }
}
