//! Concurrency: sessions started at once until one fails or the slowest takes 3× a single one;
//! and where each level's CPU went. The bench example holds every level once all its sessions are
//! up; then every process in their containers is read here, as root, by role, with each
//! container's cgroup total (which also counts processes that have exited), Docker's daemons and
//! shims, and the example itself (Airlock's driver and proxy on the host).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;

use airlock_testkit::docker::task_container_pids;

use super::container::{cgroup_dir, cpu_ticks, processes_in, role_of};
use super::stats::Samples;

/// Docker's own processes on the host, by command name (a shim per container).
const DOCKER_PROCESSES: [&str; 4] = ["dockerd", "containerd", "containerd-shim", "docker-proxy"];

/// Clock ticks to milliseconds (Linux reports 100 ticks a second).
const MS_PER_TICK: f64 = 10.0;

/// One level: each session's time and memory, and the CPU its sessions used by where it went.
#[derive(Default)]
struct Level {
    tasks: u64,
    failures: u64,
    times: Samples,
    memory_per_task: Option<f64>,
    /// CPU ms, all of the level's sessions together, by role.
    cpu: BTreeMap<String, f64>,
}

pub(super) fn concurrency(
    root: &Path,
    site: u16,
    max: usize,
    report: &mut String,
) -> anyhow::Result<()> {
    eprintln!("== concurrency (up to {max} sessions)");
    let url = format!("http://127.0.0.1:{site}/page-0.html");
    let mut example = Command::new("runuser")
        .args(["-u", crate::integration::TEST_USER, "--"])
        .arg(root.join("target/release/examples/bench"))
        .args(["concurrency", &max.to_string(), &url])
        .env("AIRLOCK_BENCH_HOLD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the bench example")?;
    let mut answer = example.stdin.take().context("the example's stdin")?;
    let lines = BufReader::new(example.stdout.take().context("the example's stdout")?);
    let mut levels = Vec::new();
    let mut docker_before = BTreeMap::new();
    let mut held = BTreeMap::new();
    for line in lines.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&line?) else {
            continue;
        };
        if value.get("starting").is_some() {
            docker_before = docker_ticks();
        } else if value.get("holding").is_some() {
            held = containers_cpu();
            #[allow(clippy::cast_precision_loss)]
            let docker = docker_ticks_since(&docker_before) as f64 * MS_PER_TICK;
            held.insert(DOCKER_ROLE.to_owned(), docker);
            writeln!(answer, "go on")?;
        } else if value.get("times_ms").is_some() {
            let mut level = parse_level(&value);
            level.cpu = std::mem::take(&mut held);
            if let Some(own) = value["own_cpu_ms"].as_f64() {
                level.cpu.insert(AIRLOCK_ROLE.to_owned(), own);
            }
            levels.push(level);
        }
    }
    drop(answer);
    let status = example.wait()?;
    if !status.success() {
        anyhow::bail!("the bench example failed ({status})");
    }
    write_levels(report, &levels);
    write_cpu(report, &levels);
    Ok(())
}

const DOCKER_ROLE: &str = "host: Docker (dockerd, containerd, shims)";
const AIRLOCK_ROLE: &str = "host: Airlock (driver, proxy)";
const EXITED_ROLE: &str = "container: processes already exited";

fn parse_level(value: &serde_json::Value) -> Level {
    let mut times = Samples::default();
    for time in value["times_ms"].as_array().into_iter().flatten() {
        times.record(time.as_f64());
    }
    let memory: Vec<f64> = value["memory_mib"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    #[allow(clippy::cast_precision_loss)]
    let memory_per_task =
        (!memory.is_empty()).then(|| memory.iter().sum::<f64>() / memory.len() as f64);
    Level {
        tasks: value["tasks"].as_u64().unwrap_or(0),
        failures: value["failures"].as_u64().unwrap_or(0),
        times,
        memory_per_task,
        cpu: BTreeMap::new(),
    }
}

/// CPU ms used so far in every task container: each live process by role, and what the
/// containers' cgroups count beyond them (processes that have exited).
fn containers_cpu() -> BTreeMap<String, f64> {
    let mut cpu = BTreeMap::new();
    let mut exited = 0.0;
    for pid in task_container_pids() {
        let Ok(dir) = cgroup_dir(&pid, "cpuacct") else {
            continue;
        };
        let mut live = 0.0;
        for process in processes_in(&dir) {
            let Some(ticks) = cpu_ticks(&process) else {
                continue;
            };
            #[allow(clippy::cast_precision_loss)]
            let ms = ticks as f64 * MS_PER_TICK;
            live += ms;
            *cpu.entry(role_of(&process)).or_insert(0.0) += ms;
        }
        if let Some(total) = cgroup_cpu_ms(&dir) {
            exited += (total - live).max(0.0);
        }
    }
    cpu.insert(EXITED_ROLE.to_owned(), exited);
    cpu
}

/// A cgroup's CPU time in ms: v1's `cpuacct.usage` (ns) or v2's `usage_usec`.
fn cgroup_cpu_ms(dir: &Path) -> Option<f64> {
    if let Ok(text) = std::fs::read_to_string(dir.join("cpuacct.usage")) {
        return text.trim().parse::<f64>().ok().map(|ns| ns / 1e6);
    }
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    stat.lines()
        .find_map(|line| line.strip_prefix("usage_usec "))
        .and_then(|us| us.trim().parse::<f64>().ok())
        .map(|us| us / 1e3)
}

/// Docker's processes' CPU ticks so far, by process id.
fn docker_ticks() -> BTreeMap<String, u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().into_string().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let docker = DOCKER_PROCESSES
                .iter()
                .any(|name| comm.trim().starts_with(name));
            docker.then(|| Some((pid.clone(), cpu_ticks(&pid)?)))?
        })
        .collect()
}

/// Docker's CPU ticks since `before`, by the processes alive now (a shim that has gone since
/// is not taken away from them; one started since counts from zero).
fn docker_ticks_since(before: &BTreeMap<String, u64>) -> u64 {
    docker_ticks()
        .into_iter()
        .map(|(pid, now)| now.saturating_sub(before.get(&pid).copied().unwrap_or(0)))
        .sum()
}

fn write_levels(report: &mut String, levels: &[Level]) {
    let _ = writeln!(
        report,
        "## Concurrency: sessions started at once, each to its first snapshot\n\n\
         | sessions | failures | median ms | max ms | max / single | memory per task (MiB) |\n|---|---|---|---|---|---|"
    );
    let mut single = None;
    for level in levels {
        let Some(summary) = level.times.summary() else {
            let _ = writeln!(
                report,
                "| {} | {} | – | – | – | – |",
                level.tasks, level.failures
            );
            continue;
        };
        let base = *single.get_or_insert(summary.max);
        let memory = level
            .memory_per_task
            .map_or_else(|| "n/a".to_owned(), |mib| format!("{mib:.0}"));
        let _ = writeln!(
            report,
            "| {} | {} | {:.0} | {:.0} | {:.2}x | {memory} |",
            level.tasks,
            level.failures,
            summary.median,
            summary.max,
            summary.max / base
        );
    }
    let _ = writeln!(
        report,
        "\nThe run stops at the first level where a session fails or the slowest takes more than 3× a single session.\n"
    );
}

/// Where each level's CPU went, per session, and what that leaves room for on this machine.
// Counts of sessions and cores are small: they convert to f64 exactly.
#[allow(clippy::cast_precision_loss)]
fn write_cpu(report: &mut String, levels: &[Level]) {
    let levels: Vec<&Level> = levels.iter().filter(|l| !l.cpu.is_empty()).collect();
    let Some(first) = levels.first() else {
        return;
    };
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let _ = write!(
        report,
        "### Where a session's CPU goes\n\n\
         CPU ms per session at each level, read when all of its sessions had their first snapshot: \
         every process in their containers by role (from its start), what the containers' cgroups \
         count beyond them, Docker's daemons and shims during the level, and Airlock on the host.\n\n\
         | where | {} |\n|---|{}\n",
        levels
            .iter()
            .map(|l| format!("{} at once", l.tasks))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(levels.len())
    );
    let mut roles: Vec<(&String, &f64)> = first.cpu.iter().collect();
    roles.sort_by(|a, b| b.1.total_cmp(a.1));
    let mut names: Vec<&String> = roles.into_iter().map(|(role, _)| role).collect();
    for level in &levels {
        for role in level.cpu.keys() {
            if !names.contains(&role) {
                names.push(role);
            }
        }
    }
    let per_session = |level: &Level, role: &str| {
        level.cpu.get(role).copied().unwrap_or(0.0) / level.tasks.max(1) as f64
    };
    for role in names {
        let cells: Vec<String> = levels
            .iter()
            .map(|level| format!("{:.0}", per_session(level, role)))
            .collect();
        let _ = writeln!(report, "| {role} | {} |", cells.join(" | "));
    }
    let total = |level: &Level| level.cpu.values().sum::<f64>() / level.tasks.max(1) as f64;
    let busy = |level: &Level| {
        let slowest = level.times.summary().map_or(0.0, |s| s.max);
        let available = cores as f64 * slowest;
        if available > 0.0 {
            format!(
                "{:.0}%",
                100.0 * total(level) * level.tasks as f64 / available
            )
        } else {
            "n/a".to_owned()
        }
    };
    let cells: Vec<String> = levels
        .iter()
        .map(|l| format!("**{:.0}**", total(l)))
        .collect();
    let _ = writeln!(report, "| **all** | {} |", cells.join(" | "));
    let cells: Vec<String> = levels.iter().map(|l| busy(l)).collect();
    let _ = writeln!(
        report,
        "| the level's CPU over {cores} cores × its slowest session | {} |",
        cells.join(" | ")
    );
    if let Some(single) = first.times.summary().map(|s| s.max) {
        let need = total(first);
        let room = cores as f64 * 3.0 * single / need;
        let _ = writeln!(
            report,
            "\nOne session alone needs {need:.0} CPU ms in {single:.0} ms. If nothing else limited \
             them, {cores} cores could run about {room:.1} such sessions at once before the slowest \
             took 3× a single one ({cores} × 3 × {single:.0} / {need:.0}). A warm pool still starts \
             a browser for every task it serves, so back to back it can raise tasks per minute by \
             about {:.2}× at most ({cores} × {single:.0} / {need:.0}: the cores kept busy instead of one \
             session's share of them), and only while no task waits for its first answer: the \
             warm pool's back-to-back table shows how much of each run its refills were held for \
             that.\n",
            cores as f64 * single / need
        );
    }
}
