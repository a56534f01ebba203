//! gVisor: the same sealed session under `runsc` (gVisor's user-space kernel) against `runc`, in
//! alternation: start-up to the first snapshot, and the 100-subresource page loaded inside the
//! container through the proxy. Each runsc `gvisor_releases.rs` finds is measured: Airlock's, and
//! beside a newer one, the same on ptrace and Debian bookworm's own release.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::gvisor_releases::Runtime;
use super::stats::{Samples, is_warmup, rotation, table_header, table_row, total_rounds};
use crate::util::output;

/// Run the bench example as the test user with `envs` set; its JSON lines.
pub(super) fn example(root: &Path, envs: &[(&str, &str)], args: &[&str]) -> Vec<serde_json::Value> {
    output(
        Command::new("runuser")
            .args(["-u", crate::integration::TEST_USER, "--"])
            .arg(root.join("target/release/examples/bench"))
            .args(args)
            .envs(envs.iter().copied()),
    )
    .map(|text| {
        text.lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    })
    .unwrap_or_default()
}

/// Record each page-load time of a `bench pageload` run; a run with none counts as one failure.
pub(super) fn record_loads(samples: &mut Samples, loaded: &[serde_json::Value]) {
    match loaded.first().and_then(|v| v["loads_ms"].as_array()) {
        Some(times) => {
            for time in times {
                samples.record(time.as_f64());
            }
        }
        None => samples.record(None),
    }
}

pub(super) fn gvisor(root: &Path, site: u16, rounds: usize, loads: usize, report: &mut String) {
    let runtimes = super::gvisor_releases::runtimes(root);
    let names: Vec<&str> = runtimes.list.iter().map(|r| r.name).collect();
    eprintln!(
        "== gVisor against runc ({}; {rounds} rounds after a warm-up, alternating)",
        names.join(", ")
    );
    let first_page = format!("http://127.0.0.1:{site}/page-0.html");
    let pages = format!("http://127.0.0.1:{site}/page-{{n}}.html");
    let fresh = || -> Vec<Samples> { names.iter().map(|_| Samples::default()).collect() };
    let (mut cold, mut snapshot, mut page) = (fresh(), fresh(), fresh());
    // Each runtime's container CPU per page load: user, system.
    let mut cpu: Vec<[Samples; 2]> = names.iter().map(|_| Default::default()).collect();
    for round in 0..total_rounds(rounds) {
        for index in rotation(round, names.len()) {
            let envs = [("AIRLOCK_RUNTIME", names[index])];
            let start = example(root, &envs, &["startup", "1", &first_page]);
            let loaded = example(root, &envs, &["pageload", &loads.to_string(), &pages]);
            if is_warmup(round) {
                continue;
            }
            let field = |key: &str| start.first().and_then(|v| v[key].as_f64());
            cold[index].record(field("cold_ms"));
            snapshot[index].record(field("first_snapshot_ms"));
            record_loads(&mut page[index], &loaded);
            record_cpu(&mut cpu[index], &loaded, loads);
        }
    }
    let _ = writeln!(
        report,
        "## gVisor (runsc: release, platform) against runc: the same sealed session\n"
    );
    table_header(report);
    for (what, samples) in [
        ("task requested → first snapshot", &cold),
        ("first snapshot", &snapshot),
        (
            "100-subresource page load (in the container, through the proxy)",
            &page,
        ),
    ] {
        for (index, runtime) in runtimes.list.iter().enumerate() {
            let baseline = (index > 0).then(|| &samples[0]);
            table_row(
                report,
                &format!("{}: {what}", runtime.label),
                &samples[index],
                baseline,
            );
        }
    }
    if let Some(missing) = &runtimes.missing {
        let _ = writeln!(report, "\nNot measured: {missing}.");
    }
    write_cpu(report, &runtimes.list, &cpu);
    super::gvisor_cause::gvisor_cause(&runtimes.list, report);
}

/// A run's container CPU over its loads, per load; a run without it counts as failed.
#[allow(clippy::cast_precision_loss)] // a handful of loads
fn record_cpu(cpu: &mut [Samples; 2], loaded: &[serde_json::Value], loads: usize) {
    let split = loaded
        .first()
        .and_then(|v| v["cpu_user_system_ms"].as_array())
        .map(|pair| {
            pair.iter()
                .filter_map(serde_json::Value::as_f64)
                .collect::<Vec<_>>()
        });
    for (kind, samples) in cpu.iter_mut().enumerate() {
        samples.record(
            split
                .as_ref()
                .and_then(|pair| pair.get(kind))
                .map(|ms| ms / loads.max(1) as f64),
        );
    }
}

fn write_cpu(report: &mut String, runtimes: &[Runtime], cpu: &[[Samples; 2]]) {
    let _ = writeln!(
        report,
        "\nThe container's CPU per page load, with the commands that open the page and read its load \
         time (its cgroup: under runsc, the Sentry and the processes it traces), median ms: in the \
         processes' own code (user) and in the host's kernel (system).\n\n\
         | runtime | user | system | all |\n|---|---|---|---|"
    );
    for (index, runtime) in runtimes.iter().map(|r| &r.label).enumerate() {
        let median = |kind: usize| cpu[index][kind].summary().map(|s| s.median);
        match (median(0), median(1)) {
            (Some(user), Some(system)) => {
                let _ = writeln!(
                    report,
                    "| {runtime} | {user:.0} | {system:.0} | {:.0} |",
                    user + system
                );
            }
            _ => {
                let _ = writeln!(report, "| {runtime} | – | – | – |");
            }
        }
    }
    let _ = writeln!(report);
}
