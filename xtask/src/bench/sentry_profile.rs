//! Where gVisor's Sentry spends its CPU on this machine: runsc's own Go CPU profile
//! (`--profile-cpu`, taken over the whole life of one sandbox) while the bench's sealed session
//! loads the 100-subresource pages, summed by what the Sentry was doing. runsc profiles only when
//! registered with `--profile`, which loosens the Sentry's own seccomp filter, so the bench
//! registers a runtime of its own with dockerd for this one session (`bench_runtimes.rs`).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;

use super::bench_runtimes::{BenchRuntimes, Variant, settled};
use super::pprof::{Sample, cpu_samples};

/// The runtime registered for the profile: gVisor's registration plus `--profile`.
const RUNTIME: &str = "airlock-bench-runsc-profile";
/// How long runsc may take to write the profile once the driver has removed the container.
const WRITTEN_LIMIT: Duration = Duration::from_secs(30);

/// What the Sentry was doing, known by a function on the sampled stack: the first that matches.
const ACTIVITIES: [(&str, &str); 6] = [
    (
        "platform/ptrace.(*context).Switch",
        "switching into the browser's processes and back (ptrace: PTRACE_SYSEMU, wait4, their registers)",
    ),
    (
        "platform/systrap.(*context).Switch",
        "switching into the browser's processes and back (systrap: its stub threads, their shared memory)",
    ),
    (
        "(*MemoryManager).HandleUserFault",
        "the browser's page faults (its memory mapped on first touch)",
    ),
    (
        "(*Task).doSyscall",
        "the browser's system calls, carried out by the Sentry",
    ),
    (
        "/pkg/tcpip/",
        "the Sentry's network stack (the container's loopback: agent-browser, Chromium, the relay)",
    ),
    ("runtime.gcBgMarkWorker", "Go's garbage collector"),
];
const OTHER: &str = "the rest (Go's scheduler and timers, the Sentry's other work)";
/// The Sentry's handlers of the browser's system calls are named after them.
const SYSCALL_HANDLERS: &str = "gvisor.dev/gvisor/pkg/sentry/syscalls/linux.";

pub(super) fn sentry_profile(root: &Path, pages: &str, loads: usize, report: &mut String) {
    eprintln!("== where gVisor's Sentry spends its CPU (runsc's own profile)");
    let _ = writeln!(report, "### Where the Sentry's CPU goes\n");
    match profile_one_session(root, pages, loads) {
        Ok((samples, container_ms)) => write_profile(report, &samples, loads, container_ms),
        Err(error) => {
            let _ = writeln!(report, "Not measured: {error:#}.\n");
        }
    }
}

/// One `bench pageload` session under the profiling runtime: the Sentry's samples, and the
/// container's CPU over the loads as its cgroup counted it.
fn profile_one_session(
    root: &Path,
    pages: &str,
    loads: usize,
) -> anyhow::Result<(Vec<Sample>, Option<f64>)> {
    let dir = tempfile::tempdir().context("a directory for the profile")?;
    let file = dir.path().join("sentry-cpu.pprof");
    let registered = BenchRuntimes::register(&[Variant::with_args(
        RUNTIME,
        vec![
            "--profile".to_owned(),
            format!("--profile-cpu={}", file.display()),
        ],
    )])?;
    let loaded = super::gvisor::example(
        root,
        &[("AIRLOCK_RUNTIME", RUNTIME)],
        &["pageload", &loads.to_string(), pages],
    );
    anyhow::ensure!(
        loaded.first().is_some_and(|v| v["loads_ms"].is_array()),
        "the session under {RUNTIME} loaded no page"
    );
    // runsc writes the profile as the sandbox exits, which the session's dispose starts.
    let samples = settled(WRITTEN_LIMIT, || {
        std::fs::read(&file).ok().and_then(|b| cpu_samples(&b).ok())
    })
    .with_context(|| format!("runsc wrote no CPU profile to {}", file.display()))?;
    drop(registered);
    let container_ms = loaded
        .first()
        .and_then(|v| v["cpu_user_system_ms"].as_array())
        .map(|pair| pair.iter().filter_map(serde_json::Value::as_f64).sum());
    Ok((samples, container_ms))
}

#[allow(clippy::cast_precision_loss)] // milliseconds of a bench run
fn write_profile(report: &mut String, samples: &[Sample], loads: usize, container_ms: Option<f64>) {
    let ms = |nanos: i64| nanos as f64 / 1e6;
    let total: i64 = samples.iter().map(|s| s.nanos).sum();
    let share = |nanos: i64| 100.0 * nanos as f64 / total.max(1) as f64;
    let _ = write!(
        report,
        "runsc's own CPU profile (Go's profiler in the Sentry, `--profile-cpu`) over one sealed \
         session under gVisor: its start and {loads} loads of the 100-subresource page, as in the \
         table above. The Sentry's threads used {:.0} ms for all of it",
        ms(total),
    );
    match container_ms {
        Some(all) => {
            let _ = writeln!(
                report,
                "; over the loads alone, the container's cgroup counted {all:.0} ms (the Sentry, \
                 its gofer, and the browser's processes it traces).\n"
            );
        }
        None => {
            let _ = writeln!(report, ".\n");
        }
    }
    let _ = writeln!(
        report,
        "| what the Sentry was doing | ms | share |\n|---|---|---|"
    );
    let mut by_activity = vec![0_i64; ACTIVITIES.len() + 1];
    for sample in samples {
        let index = ACTIVITIES
            .iter()
            .position(|(marker, _)| sample.stack.iter().any(|f| f.contains(marker)))
            .unwrap_or(ACTIVITIES.len());
        by_activity[index] += sample.nanos;
    }
    let names = ACTIVITIES.iter().map(|(_, name)| *name).chain([OTHER]);
    for (name, nanos) in names.zip(&by_activity) {
        let _ = writeln!(
            report,
            "| {name} | {:.0} | {:.0} % |",
            ms(*nanos),
            share(*nanos)
        );
    }
    let in_host_calls: i64 = samples
        .iter()
        .filter(|s| s.stack.last().is_some_and(|leaf| is_host_call(leaf)))
        .map(|s| s.nanos)
        .sum();
    let _ = writeln!(
        report,
        "\nOf all of it, {:.0} % was spent inside system calls the Sentry made to the host's kernel \
         (`ptrace`, `wait4`, `futex` and the like): on ptrace the browser's every system \
         call and fault costs several of them. Switching is the platform's price, the \
         part gVisor's KVM platform avoids (it cannot run on this machine: above); carrying out \
         the calls themselves is a small part.\n",
        share(in_host_calls)
    );
    write_handlers(report, samples);
}

/// A leaf function that is a system call into the host's kernel.
fn is_host_call(leaf: &str) -> bool {
    leaf.starts_with("runtime/internal/syscall.")
        || leaf.starts_with("syscall.")
        || leaf.starts_with("golang.org/x/sys/unix.")
        || leaf == "runtime.futex"
        || leaf == "runtime.epollwait"
}

/// The browser's system calls that cost the Sentry most, by their handlers.
#[allow(clippy::cast_precision_loss)] // milliseconds of a bench run
fn write_handlers(report: &mut String, samples: &[Sample]) {
    let mut by_call: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    for sample in samples {
        let handler = sample
            .stack
            .iter()
            .find_map(|f| f.strip_prefix(SYSCALL_HANDLERS));
        if let Some(handler) = handler {
            *by_call.entry(handler).or_default() += sample.nanos;
        }
    }
    let mut ranked: Vec<_> = by_call.into_iter().collect();
    ranked.sort_by_key(|(_, nanos)| std::cmp::Reverse(*nanos));
    let all: i64 = ranked.iter().map(|(_, nanos)| nanos).sum();
    let _ = writeln!(
        report,
        "The browser's system calls that cost the Sentry most (the time under each handler):\n\n\
         | system call (the Sentry's handler) | ms | share of system calls |\n|---|---|---|"
    );
    for (handler, nanos) in ranked.iter().take(8) {
        let _ = writeln!(
            report,
            "| `{handler}` | {:.0} | {:.0} % |",
            *nanos as f64 / 1e6,
            100.0 * *nanos as f64 / all.max(1) as f64
        );
    }
    let _ = writeln!(report);
}
